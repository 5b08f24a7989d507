package bench

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/workers/route"
)

// Lag is how far the workers are behind the gateway.
type Lag struct {
	Derive  time.Duration // age of the oldest committed delivery not yet derived
	Backlog int64         // deliveries committed and not yet derived
	Route   time.Duration // age of the oldest journal entry not yet routed
}

func (s *System) journal() *journal.Journal {
	return journal.New(s.Redis, journal.Config{Prefix: s.Prefix, Shards: shards})
}

// Lag reads the deriver's consumer groups and the router's cursors.
func (s *System) Lag(ctx context.Context) (Lag, error) {
	now := time.Now()
	var out Lag
	j := s.journal()
	lags, err := route.ShardLags(ctx, s.Redis, j, now)
	if err != nil {
		return out, err
	}
	for _, l := range lags {
		out.Route = max(out.Route, l)
	}
	out.Derive, out.Backlog, err = DeriveLag(ctx, s.Redis, ingest.New(s.Redis, j), now)
	return out, err
}

// DeriveLag reads the deriver's consumer group on every ingest shard: the
// age at now of the oldest committed delivery not yet derived (0 when
// none) and how many are committed and not yet derived.
func DeriveLag(ctx context.Context, rdb redis.UniversalClient, store *ingest.Store, now time.Time) (age time.Duration, backlog int64, err error) {
	oldest := int64(0)
	older := func(id string) {
		if ms := idMillis(id); ms > 0 && (oldest == 0 || ms < oldest) {
			oldest = ms
		}
	}
	for shard := range store.Shards() {
		key := store.StreamKey(shard)
		groups, err := rdb.XInfoGroups(ctx, key).Result()
		if err != nil {
			if redis.HasErrorPrefix(err, "no such key") {
				continue
			}
			return 0, 0, err
		}
		found := false
		for _, g := range groups {
			if g.Name != "derive" {
				continue
			}
			found = true
			if g.Pending > 0 {
				p, err := rdb.XPending(ctx, key, g.Name).Result()
				if err != nil {
					return 0, 0, err
				}
				backlog += p.Count
				older(p.Lower)
			}
			backlog += max(g.Lag, 0)
			next, err := rdb.XRangeN(ctx, key, "("+g.LastDeliveredID, "+", 1).Result()
			if err != nil {
				return 0, 0, err
			}
			if len(next) > 0 {
				older(next[0].ID)
			}
		}
		if !found { // no deriver has read this shard yet: all of it is behind
			n, err := rdb.XLen(ctx, key).Result()
			if err != nil {
				return 0, 0, err
			}
			backlog += n
			if first, err := rdb.XRangeN(ctx, key, "-", "+", 1).Result(); err == nil && len(first) > 0 {
				older(first[0].ID)
			}
		}
	}
	if oldest != 0 {
		age = max(0, now.Sub(time.UnixMilli(oldest)))
	}
	return age, backlog, nil
}

// WaitCaughtUp polls until nothing is left to derive or route, or within
// passes; it returns the last lag read.
func (s *System) WaitCaughtUp(ctx context.Context, within time.Duration) (Lag, error) {
	deadline := time.Now().Add(within)
	for {
		l, err := s.Lag(ctx)
		if err != nil || (l.Backlog == 0 && l.Route == 0) || time.Now().After(deadline) {
			return l, err
		}
		select {
		case <-ctx.Done():
			return l, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitDerived polls until nothing is left to derive, settle or route, or
// within passes; it reports whether everything was done.
func (s *System) WaitDerived(ctx context.Context, within time.Duration) (bool, error) {
	tr := tracker.New(s.Redis, s.journal(), tracker.Config{})
	deadline := time.Now().Add(within)
	for {
		l, err := s.Lag(ctx)
		if err != nil {
			return false, err
		}
		settling, err := tr.Settling(ctx)
		if err != nil {
			return false, err
		}
		if l.Backlog == 0 && l.Route == 0 && settling == 0 {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Journaled counts the entries of every journal shard.
func (s *System) Journaled(ctx context.Context) (int64, error) {
	j := s.journal()
	pipe := s.Redis.Pipeline()
	cmds := make([]*redis.IntCmd, shards)
	for shard := range shards {
		cmds[shard] = pipe.XLen(ctx, j.StreamKey(shard))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
}

// UsedMemory is Redis's used_memory.
func (s *System) UsedMemory(ctx context.Context) (int64, error) {
	info, err := s.Redis.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, nil
}

// idMillis is the time part of a stream id.
func idMillis(id string) int64 {
	ms, _, _ := strings.Cut(id, "-")
	n, _ := strconv.ParseInt(ms, 10, 64)
	return n
}
