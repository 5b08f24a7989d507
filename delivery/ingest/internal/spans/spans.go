// Package spans finds the shared objects of a GitHub delivery's raw body
// that the raw store keeps once (docs/design.md §14).
package spans

import (
	"encoding/binary"
	"math/bits"
)

// A Span is the byte range [Start, End) of one JSON object inside a raw
// body that the raw record does not keep itself: it is stored once, under
// its hash, in the ingest shard's object store (docs/design.md §14).
type Span struct{ Start, End int }

// sharedMembers are the members whose object values a GitHub delivery
// repeats: the repository (a pull_request payload carries it three times,
// as repository, pull_request.base.repo and pull_request.head.repo), the
// sender and other users, the organization, the installation. Every
// delivery about the same repository carries them again, byte for byte.
var sharedMembers = map[string]bool{
	"repository": true, "repo": true, "sender": true, "organization": true,
	"installation": true, "enterprise": true, "user": true, "owner": true,
}

// sharedArrays are the members whose arrays hold users (each one as
// its user object): their object elements are shared as the members above.
var sharedArrays = map[string]bool{"assignees": true, "requested_reviewers": true}

const (
	// MinSpan is the smallest object worth a reference (16 bytes of hash,
	// a position, and a key of its own in Redis).
	MinSpan = 192
	// maxSpanDepth is how deep objects are looked into for shared members
	// (pull_request.base.repo is at depth 3); deeper values are skipped.
	maxSpanDepth = 4
)

// Find returns, in order and without overlap, the spans of the shared
// members' object values in a JSON body. It only reads the bytes: a body
// that is not a JSON object (a form-encoded one) or that it cannot follow
// gives no spans, and the record then keeps the whole body. Whatever it
// returns, cutting the spans out and putting them back yields the body
// byte for byte.
func Find(b []byte) []Span {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil
	}
	out := make([]Span, 0, 16) // a pull_request delivery has about 10
	if _, ok := scanObject(b, i, 1, &out); !ok || len(out) == 0 {
		return nil
	}
	return out
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// stringEnd returns the index after the closing quote of the string whose
// opening quote is at i, or -1. A backslash escapes the byte after it,
// so a quote ends the string when an even number of backslashes runs
// before it (what the scan counted backwards before: the same ends).
func stringEnd(b []byte, i int) int {
	j := i + 1
	for {
		j = nextQuoteOrEscape(b, j)
		if j >= len(b) {
			return -1
		}
		if b[j] == '"' {
			return j + 1
		}
		j += 2
	}
}

// The fast loops below read 8 bytes at a time (SWAR): eqMask's lowest set
// bit is the high bit of the first byte of v equal to c's (c broadcast
// to 8 bytes); bits above it may be set spuriously (the subtraction's
// borrow), so only the lowest one is read.
const (
	lo8 = 0x0101010101010101
	hi8 = 0x8080808080808080
)

func eqMask(v, c uint64) uint64 {
	x := v ^ c
	return (x - lo8) &^ x & hi8
}

// nextQuoteOrEscape returns the index of the first '"' or '\\' in b at or
// after j, or len(b) (also when j > len(b)).
func nextQuoteOrEscape(b []byte, j int) int {
	for ; j+8 <= len(b); j += 8 {
		v := binary.LittleEndian.Uint64(b[j:])
		if m := eqMask(v, '"'*lo8) | eqMask(v, '\\'*lo8); m != 0 {
			return j + bits.TrailingZeros64(m)>>3
		}
	}
	for ; j < len(b); j++ {
		if c := b[j]; c == '"' || c == '\\' {
			return j
		}
	}
	return len(b)
}

// nextStructural returns the index of the first '"', '{', '}', '[' or ']'
// in b at or after j, or len(b). '{' and '[' (0x7b, 0x5b), and '}' and
// ']' (0x7d, 0x5d), differ only in the bit 0x20: with it cleared, one
// comparison finds either.
func nextStructural(b []byte, j int) int {
	for ; j+8 <= len(b); j += 8 {
		v := binary.LittleEndian.Uint64(b[j:])
		t := v & (0xdf * lo8)
		if m := eqMask(v, '"'*lo8) | eqMask(t, '['*lo8) | eqMask(t, ']'*lo8); m != 0 {
			return j + bits.TrailingZeros64(m)>>3
		}
	}
	for ; j < len(b); j++ {
		switch b[j] {
		case '"', '{', '}', '[', ']':
			return j
		}
	}
	return len(b)
}

// skipValue returns the index after the JSON value starting at i (no
// whitespace before it), without looking for members, or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; ; j++ {
			if j = nextStructural(b, j); j >= len(b) {
				return -1
			}
			switch b[j] {
			case '"':
				e := stringEnd(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			default: // '}', ']'
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
	default: // number, true, false, null
		j := i
		for j < len(b) {
			c := b[j]
			if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\r' || c == '\t' {
				break
			}
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// scanObject reads the object at b[i] == '{' at depth, appending the spans
// of shared members' object values, and returns the index after it.
func scanObject(b []byte, i, depth int, out *[]Span) (int, bool) {
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for i < len(b) {
		if b[i] != '"' {
			return 0, false
		}
		ke := stringEnd(b, i)
		if ke < 0 {
			return 0, false
		}
		key := b[i+1 : ke-1]
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		i = skipWS(b, i+1)
		if i >= len(b) {
			return 0, false
		}
		var end int
		switch {
		case b[i] == '{' && sharedMembers[string(key)]:
			end = skipShared(b, i)
			if end < 0 {
				return 0, false
			}
			if end-i >= MinSpan {
				*out = append(*out, Span{i, end})
			}
		case b[i] == '[' && sharedArrays[string(key)]:
			var ok bool
			if end, ok = sharedElements(b, i, out); !ok {
				return 0, false
			}
		case (b[i] == '{' || b[i] == '[') && depth < maxSpanDepth:
			var ok bool
			if b[i] == '{' {
				end, ok = scanObject(b, i, depth+1, out)
			} else {
				end, ok = scanArray(b, i, depth+1, out)
			}
			if !ok {
				return 0, false
			}
		default:
			end = skipValue(b, i)
			if end < 0 {
				return 0, false
			}
		}
		i = skipWS(b, end)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
	return 0, false
}

// scanArray reads the array at b[i] == '['; its elements' members are
// looked into as an object's are.
func scanArray(b []byte, i, depth int, out *[]Span) (int, bool) {
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for i < len(b) {
		var end int
		switch {
		case b[i] == '{' && depth < maxSpanDepth:
			var ok bool
			if end, ok = scanObject(b, i, depth+1, out); !ok {
				return 0, false
			}
		default:
			if end = skipValue(b, i); end < 0 {
				return 0, false
			}
		}
		i = skipWS(b, end)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case ']':
			return i + 1, true
		default:
			return 0, false
		}
	}
	return 0, false
}

// sharedElements reads the array at b[i] == '[' whose object elements are
// each a span (when large enough).
func sharedElements(b []byte, i int, out *[]Span) (int, bool) {
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for i < len(b) {
		var end int
		if b[i] == '{' {
			end = skipShared(b, i)
		} else {
			end = skipValue(b, i)
		}
		if end < 0 {
			return 0, false
		}
		if b[i] == '{' && end-i >= MinSpan {
			*out = append(*out, Span{i, end})
		}
		i = skipWS(b, end)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case ']':
			return i + 1, true
		default:
			return 0, false
		}
	}
	return 0, false
}
