package spans

import "sync"

// The shared objects are shared because they come again: every delivery
// about a repository carries its repository (three times in a
// pull_request), its sender, its organization, byte for byte. Skipping
// one is reading it byte by byte to find where it ends; comparing it
// with one seen before is a memory compare, an order of magnitude
// faster. skipValue's end depends only on the bytes from the object's
// start to its end, so an object of a recent body that is a prefix of
// the body here ends where that one ended: skipShared returns what
// skipValue would, span for span (FuzzFindReference holds it to the scan
// as it was, with the cache warm and cold).

// seenKeyLen is how much of an object's start picks its candidates.
const seenKeyLen = 64

// maxSeen bounds the bytes of objects remembered; past it the cache
// starts afresh (as the raw store's hash cache does).
const maxSeen = 1 << 20

// maxSeenPerKey bounds the objects compared at one start: versions of
// one repository (pushed_at, open_issues_count changing) share theirs.
const maxSeenPerKey = 4

type seenCache struct {
	mu    sync.Mutex
	m     map[string][]string // by the first seenKeyLen bytes; copies, never the body's bytes
	bytes int
}

var seen seenCache

// match returns the length of a remembered object that b starts with,
// or 0.
func (c *seenCache) match(b []byte) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range c.m[string(b[:seenKeyLen])] {
		if len(o) <= len(b) && string(b[:len(o)]) == o {
			return len(o)
		}
	}
	return 0
}

// add remembers obj, a whole value skipValue found (copied: bodies live
// in reused buffers).
func (c *seenCache) add(obj []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || c.bytes+len(obj) > maxSeen {
		c.m, c.bytes = map[string][]string{}, 0
	}
	k := string(obj[:seenKeyLen])
	l := c.m[k]
	if len(l) == maxSeenPerKey {
		c.bytes -= len(l[0])
		l = append(l[:0:0], l[1:]...)
	}
	c.m[k] = append(l, string(obj))
	c.bytes += len(obj)
}

// skipShared is skipValue for a shared member's object value at b[i] ==
// '{', served from the objects seen lately when it is one of them.
func skipShared(b []byte, i int) int {
	if len(b)-i < MinSpan {
		return skipValue(b, i)
	}
	if n := seen.match(b[i:]); n > 0 {
		return i + n
	}
	end := skipValue(b, i)
	if end-i >= MinSpan && end-i <= maxSeen/8 {
		seen.add(b[i:end])
	}
	return end
}
