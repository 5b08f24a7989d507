// Package ratelimit keeps the ingest rate limits (docs/design.md §4) in Redis: a
// GCRA per workspace and per token, in one script on Redis's clock, so one
// limit holds for the whole deployment however many gateways serve it.
package ratelimit

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/keyspace"
)

//go:embed gcra.lua
var gcraLua string

var gcraScript = keyspace.NewScript("delivery/ratelimit/gcra.lua", gcraLua)

// Limits are events per second per workspace and per token; bursts are
// twice the rate plus one. Zero means unlimited.
type Limits struct {
	Workspace float64
	Token     float64
}

// Limiter takes requests against the limits. It is safe for concurrent
// use.
type Limiter struct {
	rdb    redis.UniversalClient
	prefix string
	limits Limits
}

// New returns the limiter of a deployment (prefix: WAKEGATE_REDIS_PREFIX).
func New(rdb redis.UniversalClient, prefix string, l Limits) *Limiter {
	if prefix == "" {
		prefix = keyspace.DefaultPrefix
	}
	return &Limiter{rdb: rdb, prefix: prefix, limits: l}
}

// interval is a rate's emission interval in µs, and its burst.
func interval(r float64) (int64, int64) {
	if r <= 0 {
		return 0, 0
	}
	return int64(math.Max(1, math.Round(1e6/r))), int64(2*r) + 1
}

// Allow takes n events from the workspace's and the token's limits, both
// or neither. When refused, wait is how long until they would be admitted
// (at least a second; a minute when n exceeds a burst).
func (l *Limiter) Allow(ctx context.Context, workspace, token string, n int) (wait time.Duration, ok bool, err error) {
	wi, wb := interval(l.limits.Workspace)
	ti, tb := interval(l.limits.Token)
	if wi == 0 && ti == 0 {
		return 0, true, nil
	}
	sum := sha1.Sum([]byte(token))
	base := keyspace.RateLimit(l.prefix, workspace)
	res, err := gcraScript.Run(ctx, l.rdb, []string{base + ":w", base + ":t:" + hex.EncodeToString(sum[:])},
		n, wi, wb, ti, tb).Int64Slice()
	if err != nil {
		return 0, false, fmt.Errorf("ingest rate limit of %s: %w", workspace, err)
	}
	if len(res) != 2 {
		return 0, false, fmt.Errorf("ingest rate limit of %s: script answered %v", workspace, res)
	}
	if res[0] == 1 {
		return 0, true, nil
	}
	if res[1] < 0 {
		return time.Minute, false, nil
	}
	return max(time.Duration(res[1])*time.Microsecond, time.Second), false, nil
}
