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
// time, and settles in one script call (a few milliseconds of Redis).
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

// Settling counts the heads scheduled to settle, due or not, on every
// shard: PRs whose ready still waits for the settle time.
func (t *Tracker) Settling(ctx context.Context) (int64, error) {
	pipe := t.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, t.j.Config().Shards)
	for shard := range cmds {
		cmds[shard] = pipe.ZCard(ctx, settleKey(t.j.Tag(shard)))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("count settling heads: %w", err)
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
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
		n, err := t.settle(ctx, shard, members, now)
		claimed += n
		if err != nil {
			return claimed, fmt.Errorf("settle shard %d: %w", shard, err)
		}
		if len(members) < settleBatch {
			return claimed, nil
		}
	}
}

// settle runs settle.lua over members of one shard, in order, in one call
// (again from a member that needed a base's required checks, with them);
// it returns how many members this call claimed.
func (t *Tracker) settle(ctx context.Context, shard int, members []string, now time.Time) (int, error) {
	repos := make([]string, len(members))
	for i, m := range members {
		if parts := strings.Split(m, "\n"); len(parts) == 4 {
			repos[i] = parts[1]
		}
	}
	claimed, needs := 0, 0
	for len(members) > 0 {
		argv := append(t.j.AppendArgs(), t.j.Tag(shard), len(members))
		inputs := map[string]string{} // per repository, once per call
		for i, m := range members {
			in, ok := inputs[repos[i]]
			if !ok {
				sc := t.scriptCtx(now)
				sc.Req = t.required(repos[i])
				b, err := json.Marshal(sc)
				if err != nil {
					return claimed, fmt.Errorf("encode input: %w", err)
				}
				in = string(b)
				inputs[repos[i]] = in
			}
			argv = append(argv, m, in)
		}
		res, err := settleScript.Run(ctx, t.rdb, []string{t.j.StreamKey(shard)}, argv...).Slice()
		if err != nil {
			return claimed, err
		}
		done := 0
		for _, r := range res {
			reply, _ := r.([]any)
			if len(reply) == 0 {
				break
			}
			status, _ := reply[0].(string)
			if status == "need" {
				t.rememberNeed(repos[done], reply)
				break
			}
			if status == "ok" {
				claimed++
			}
			done++
		}
		if done == 0 {
			if needs++; needs >= maxNeed {
				return claimed, fmt.Errorf("settle %q: required checks still missing after retries", members[0])
			}
		} else {
			needs = 0
		}
		members, repos = members[done:], repos[done:]
	}
	return claimed, nil
}
