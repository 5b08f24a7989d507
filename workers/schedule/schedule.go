// Package schedule runs wakegate's periodic jobs (sweeps, trims) so that
// any number of worker processes on one Redis run each job once per tick,
// not once per process (docs/design.md §11 "one scheduler lease").
//
// Each tick of a job is a slot: the time floored to the job's period.
// Every process wakes at start and then once per period and tries to
// claim the slot with
// SET NX; the one that claims it runs the job, the others skip it. A
// process that dies mid-run does not hand its slot to another (the next
// slot comes one period later): jobs are idempotent passes, so skipping
// one tick costs only its delay. Clocks need only agree to well within a
// period.
package schedule

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/keyspace"
)

// Func is one pass of a job.
type Func func(ctx context.Context, now time.Time) error

type job struct {
	name   string
	period time.Duration
	f      Func
}

// Scheduler runs jobs once per tick across processes.
type Scheduler struct {
	rdb    redis.UniversalClient
	prefix string
	owner  string
	log    *slog.Logger
	jobs   []job
	now    func() time.Time
	runs   *prometheus.CounterVec
}

// New returns a scheduler whose slots are keys under prefix; owner names
// this process in the slot keys (for a person reading Redis).
func New(rdb redis.UniversalClient, prefix, owner string, log *slog.Logger, reg prometheus.Registerer) *Scheduler {
	if prefix == "" {
		prefix = keyspace.DefaultPrefix
	}
	return &Scheduler{rdb: rdb, prefix: prefix, owner: owner, log: log.With("component", "schedule"), now: time.Now,
		runs: promauto.With(reg).NewCounterVec(prometheus.CounterOpts{Name: "wakegate_schedule_runs_total",
			Help: "Periodic job passes by task (the job's name) and outcome (ok, failed; skipped when another process had the tick)."},
			[]string{"task", "outcome"})}
}

// Every adds a job run every period (at least a second). Call before Run.
func (s *Scheduler) Every(name string, period time.Duration, f Func) {
	s.jobs = append(s.jobs, job{name: name, period: max(period, time.Second), f: f})
}

// Run runs every job until ctx is cancelled; it returns nil then.
func (s *Scheduler) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, j := range s.jobs {
		wg.Add(1)
		go func() { defer wg.Done(); s.loop(ctx, j) }()
	}
	wg.Wait()
	return nil
}

func (s *Scheduler) loop(ctx context.Context, j job) {
	s.tick(ctx, j, s.now()) // at start too: a fresh deployment need not wait a period
	t := time.NewTicker(j.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.tick(ctx, j, s.now())
		}
	}
}

// tick claims the slot of now and, when this process got it, runs
// one pass.
func (s *Scheduler) tick(ctx context.Context, j job, now time.Time) {
	ok, err := s.claim(ctx, j, now)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			s.log.Warn("claim a tick", "job", j.name, "err", err)
		}
		return
	case !ok:
		s.runs.WithLabelValues(j.name, "skipped").Inc()
		return
	}
	if err := j.f(ctx, now); err != nil {
		if ctx.Err() == nil {
			s.runs.WithLabelValues(j.name, "failed").Inc()
			s.log.Warn(j.name+" failed", "err", err)
		}
		return
	}
	s.runs.WithLabelValues(j.name, "ok").Inc()
}

// claim takes the slot of now: true for exactly one process per slot. The
// slot key lives two periods, past any process's tick in that slot.
func (s *Scheduler) claim(ctx context.Context, j job, now time.Time) (bool, error) {
	slot := now.Truncate(j.period).UnixMilli()
	key := keyspace.ScheduleClaim(s.prefix, j.name, slot)
	ok, err := s.rdb.SetNX(ctx, key, s.owner, 2*j.period).Result()
	if err != nil {
		return false, fmt.Errorf("claim %s: %w", key, err)
	}
	return ok, nil
}
