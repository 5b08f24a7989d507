package supervision

import (
	"context"
	"sync"
	"time"
)

// SettingsCache serves workspace settings to the router without a Redis
// round trip per event: each workspace's settings are re-read at most once
// per TTL, so a PUT applies to routing within the TTL.
type SettingsCache struct {
	s   *Store
	ttl time.Duration
	now func() time.Time

	mu sync.Mutex
	m  map[string]cachedSettings
}

type cachedSettings struct {
	settings Settings
	at       time.Time
}

// Cached returns a cache of this store's settings.
func (s *Store) Cached(ttl time.Duration) *SettingsCache {
	return &SettingsCache{s: s, ttl: ttl, now: time.Now, m: map[string]cachedSettings{}}
}

// Settings returns a workspace's settings, at most TTL old.
func (c *SettingsCache) Settings(ctx context.Context, workspace string) (Settings, error) {
	now := c.now()
	c.mu.Lock()
	hit, ok := c.m[workspace]
	c.mu.Unlock()
	if ok && now.Sub(hit.at) < c.ttl {
		return hit.settings, nil
	}
	st, err := c.s.Settings(ctx, workspace)
	if err != nil {
		return Settings{}, err
	}
	c.mu.Lock()
	if len(c.m) > 10_000 {
		clear(c.m)
	}
	c.m[workspace] = cachedSettings{st, now}
	c.mu.Unlock()
	return st, nil
}
