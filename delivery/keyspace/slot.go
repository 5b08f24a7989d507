package keyspace

import "strings"

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// Slot is the cluster hash slot of key, as Redis computes it (CLUSTER
// KEYSLOT): CRC16/XMODEM of the key's hash tag — the part between the
// first '{' and the first '}' after it, when that part is not empty —
// or of the whole key, modulo 16384.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % Slots)
}

// crc16 is CRC16/XMODEM (polynomial 0x1021, initial value 0), the CRC
// of Redis Cluster's key distribution.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// SameSlot reports whether every key hashes to one cluster slot; it
// answers the first key that does not (and true for no keys).
func SameSlot(keys []string) (string, bool) {
	for _, k := range keys[min(1, len(keys)):] {
		if Slot(k) != Slot(keys[0]) {
			return k, false
		}
	}
	return "", true
}
