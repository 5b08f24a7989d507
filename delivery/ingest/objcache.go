package ingest

import (
	"sync"
	"time"
)

// keySet is the shared objects' keys this process has seen stored, each
// with when it last gave the object its TTL (docs/design.md §14): a
// commit sends only the key of an object it refreshed lately (the script
// checks it is there), the key and "+" when it is due for a refresh, and
// the value of one it has not seen (the script stores it, or refreshes
// it). Bounded: past maxKnown it starts afresh, which costs one commit
// per object its value again.
type keySet struct {
	mu sync.RWMutex
	m  map[string]time.Duration // key → since keySetEpoch, monotonic
}

const maxKnown = 1 << 16

// keySetEpoch is the origin of keySet's times (monotonic clock).
var keySetEpoch = time.Now()

func sinceEpoch() time.Duration { return time.Since(keySetEpoch) }

// refreshed returns when this process last refreshed key's TTL, if it has.
func (k *keySet) refreshed(key string) (time.Duration, bool) {
	k.mu.RLock()
	t, ok := k.m[key]
	k.mu.RUnlock()
	return t, ok
}

// add records that the keys' TTLs were given at t.
func (k *keySet) add(t time.Duration, keys ...string) {
	if len(keys) == 0 {
		return
	}
	k.mu.Lock()
	if k.m == nil || len(k.m)+len(keys) > maxKnown {
		k.m = make(map[string]time.Duration, 1024)
	}
	for _, key := range keys {
		k.m[key] = t
	}
	k.mu.Unlock()
}

func (k *keySet) forget(key string) {
	k.mu.Lock()
	delete(k.m, key)
	k.mu.Unlock()
}

// objectCache keeps shared objects read back from the store, by hash: they
// are immutable (content-addressed), so a copy never goes stale. Bounded
// by bytes: past maxLoaded it starts afresh.
type objectCache struct {
	mu    sync.Mutex
	m     map[[objHashLen]byte][]byte
	bytes int
}

const maxLoaded = 16 << 20

func (c *objectCache) get(sum [objHashLen]byte) ([]byte, bool) {
	c.mu.Lock()
	d, ok := c.m[sum]
	c.mu.Unlock()
	return d, ok
}

func (c *objectCache) put(sum [objHashLen]byte, data []byte) {
	c.mu.Lock()
	if c.m == nil || c.bytes+len(data) > maxLoaded {
		c.m, c.bytes = map[[objHashLen]byte][]byte{}, 0
	}
	c.m[sum] = data
	c.bytes += len(data)
	c.mu.Unlock()
}
