package ghapp

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/providers/kind"
)

// Keys, all under WAKEGATE_REDIS_PREFIX. No script or transaction spans
// two of them, so they need no shared hash tag.
type keys struct{ p string }

func (k keys) sweepWatermark() string { return keyspace.GitHubApp(k.p) + ":sweep:watermark" } // string: unix ms
func (k keys) sweepLock() string      { return keyspace.GitHubApp(k.p) + ":sweep:lock" }      // lease: one sweep at a time
func (k keys) redelivered(guid string) string {
	return keyspace.GitHubApp(k.p) + ":redelivered:" + guid // string: when wakegate asked GitHub to redeliver guid
}
func (k keys) watch() string          { return keyspace.GitHubApp(k.p) + ":watch" }           // zset: "<ws>\t<repo>\t<n|*>" → ms first watched
func (k keys) reconcileSince() string { return keyspace.GitHubApp(k.p) + ":reconcile:since" } // hash: repo → ms of the last tick that covered it
func (k keys) baseline(repo string, n int) string {
	return fmt.Sprintf("%s:baseline:%s#%d", keyspace.GitHubApp(k.p), repo, n) // string: the PR was fetched as a baseline
}

// ErrBusy is returned when another sweep holds the lease.
var ErrBusy = kind.New(kind.Conflict, "github app: a sweep is already running")

// lease is a Redis lease taken with SET NX PX under a random token.
type lease struct {
	rdb   redis.UniversalClient
	key   string
	token string
}

// acquire takes key for ttl; ok is false when someone else holds it.
func acquire(ctx context.Context, rdb redis.UniversalClient, key string, ttl time.Duration) (*lease, bool, error) {
	var b [12]byte
	_, _ = rand.Read(b[:])
	l := &lease{rdb: rdb, key: key, token: hex.EncodeToString(b[:])}
	ok, err := rdb.SetNX(ctx, key, l.token, ttl).Result()
	if err != nil {
		return nil, false, fmt.Errorf("lease %s: %w", key, err)
	}
	return l, ok, nil
}

// releaseScript deletes a lease only while it still holds the caller's
// token, so a lease that expired and was taken over is left alone.
// Its KEYS, ARGV and reply are in release.lua.
//
//go:embed release.lua
var releaseLua string

var releaseScript = keyspace.NewScript("workers/ghapp/release.lua", releaseLua)

func (l *lease) release(ctx context.Context) error {
	return releaseScript.Run(ctx, l.rdb, []string{l.key}, l.token).Err()
}
