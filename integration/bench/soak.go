package bench

import (
	"context"
	"math/rand/v2"
	"time"
)

func init() {
	scenarios["soak"] = &scenario{
		about: "fleet's load for a long run (default 30m) on 2 workers, SIGKILLing a random worker every --kill-every (default never); the same ledger and invariant check at the end",
		defaults: Options{Duration: 30 * time.Minute, Warmup: 10 * time.Second, Rate: 600, Conns: 64,
			Sessions: 1000, PRs: 200, Supervisors: 50},
		run: runSoak,
	}
}

// runSoak is fleet with 2 workers unless told otherwise, so that work
// goes on while one is killed and restarted.
func runSoak(ctx context.Context, r *runner) error {
	if r.o.Workers < 2 && !r.o.Scale {
		r.o.Workers = 2
	}
	if r.o.KillEvery <= 0 {
		return runFleet(ctx, r, nil)
	}
	r.note("a random worker was SIGKILLed and restarted every %s; a killed worker's journal shards move to the other within the lease TTL (≤ 10 s) and its unacknowledged derivations are re-run after 15 s idle, so wakes due then are late: fact → wake p99 includes them. Asynq tasks it held (pushes, escalation timers; none are checked here) are recovered by Asynq after minutes", r.o.KillEvery)
	return runFleet(ctx, r, func(ctx context.Context, sys *System) { killWorkers(ctx, r, sys) })
}

// killWorkers SIGKILLs a random running worker every r.o.KillEvery until
// ctx ends, and restarts it.
func killWorkers(ctx context.Context, r *runner, sys *System) {
	t := time.NewTicker(r.o.KillEvery)
	defer t.Stop()
	kills := 0
	for {
		select {
		case <-ctx.Done():
			r.note("%d worker kills", kills)
			return
		case <-t.C:
		}
		running := sys.Workers()
		if len(running) == 0 {
			continue
		}
		name := running[rand.IntN(len(running))]
		if err := sys.KillWorker(ctx, name); err != nil && ctx.Err() == nil {
			r.note("kill %s: %v", name, err)
			continue
		}
		kills++
	}
}
