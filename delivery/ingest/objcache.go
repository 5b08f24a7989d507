package ingest

import "sync"

// keySet is the set of shared objects' keys this process has seen stored,
// so that a commit sends only their keys (the script refreshes their TTL,
// and answers when one is gone). Bounded: past maxKnown it starts afresh,
// which costs one commit per object its value again.
type keySet struct {
	mu sync.RWMutex
	m  map[string]struct{}
}

const maxKnown = 1 << 16

func (k *keySet) has(key string) bool {
	k.mu.RLock()
	_, ok := k.m[key]
	k.mu.RUnlock()
	return ok
}

func (k *keySet) add(keys ...string) {
	if len(keys) == 0 {
		return
	}
	k.mu.Lock()
	if k.m == nil || len(k.m)+len(keys) > maxKnown {
		k.m = make(map[string]struct{}, 1024)
	}
	for _, key := range keys {
		k.m[key] = struct{}{}
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
