package tracker

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// settleBatch bounds how many due members one pass reads per shard at a
// time.
const settleBatch = 100

// settleTick is how often RunSettler looks for due members.
const settleTick = 500 * time.Millisecond

// RunSettler re-evaluates, until ctx is cancelled, the PRs whose settle
// time has come: a head with no required checks and nothing reported when
// it appeared is ready once Config.Settle has passed. Any number of
// processes may run it at once: each due member is claimed atomically, so
// the work is done once. It returns nil when ctx is cancelled.
func (t *Tracker) RunSettler(ctx context.Context) error {
	tick := time.NewTicker(settleTick)
	defer tick.Stop()
	for {
		if _, err := t.SettleDue(ctx, time.Now()); err != nil && ctx.Err() == nil {
			t.cfg.Logger.Error("settle pass failed", "component", "tracker", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// SettleDue makes one pass over every shard: it claims each settle member
// due at now and re-evaluates its PR at that sha (which must still be the
// head). It returns how many members it claimed.
func (t *Tracker) SettleDue(ctx context.Context, now time.Time) (int, error) {
	total := 0
	for shard := range t.j.Config().Shards {
		n, err := t.settleShard(ctx, shard, now)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func (t *Tracker) settleShard(ctx context.Context, shard int, now time.Time) (int, error) {
	key := settleKey(t.j.Tag(shard))
	claimed := 0
	for {
		members, err := t.rdb.ZRangeByScore(ctx, key, &redis.ZRangeBy{
			Min: "-inf", Max: strconv.FormatInt(now.UnixMilli(), 10), Count: settleBatch,
		}).Result()
		if err != nil {
			return claimed, fmt.Errorf("settle shard %d: %w", shard, err)
		}
		for _, m := range members {
			ok, err := t.settleOne(ctx, shard, m, now)
			if err != nil {
				return claimed, err
			}
			if ok {
				claimed++
			}
		}
		if len(members) < settleBatch {
			return claimed, nil
		}
	}
}

// settleOne runs settle.lua for one member; it reports whether this call
// claimed it.
func (t *Tracker) settleOne(ctx context.Context, shard int, member string, now time.Time) (bool, error) {
	parts := strings.Split(member, "\n")
	repo := ""
	if len(parts) == 4 {
		repo = parts[1]
	}
	sc := t.scriptCtx(now)
	res, err := t.run(ctx, settleScript, shard, repo, nil, func(req map[string][]string) ([]any, error) {
		sc.Req = req
		b, err := json.Marshal(sc)
		if err != nil {
			return nil, fmt.Errorf("encode input: %w", err)
		}
		return []any{member, string(b)}, nil
	})
	if err != nil {
		return false, fmt.Errorf("settle %q: %w", member, err)
	}
	status, _ := res[0].(string)
	return status == "ok", nil
}
