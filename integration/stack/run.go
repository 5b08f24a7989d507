package stack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Stage orders a process's stop (docs/design.md §11): the front stops
// first (the gateway drains its HTTP requests), then the consumers
// (derive, route, the settler, the periodic sweeps), then the queue (the
// Asynq server, which lets the pushes in flight finish), then what only
// reports on the others (a worker's admin listener).
type Stage int

// The stages, in stop order.
const (
	StageFront Stage = iota
	StageConsumers
	StageQueue
	StageAdmin
)

// Component is one long-running part of a process.
type Component struct {
	Name  string // named in the error a failing component returns
	Stage Stage
	Run   func(context.Context) error
}

// Run runs the components until ctx ends or one of them returns, then
// stops them stage by stage: each stage's context is cancelled once every
// component of the stages before it has returned. It returns the
// components' errors joined, each wrapped with its component's name.
func Run(ctx context.Context, components []Component) error {
	stop, stopAll := context.WithCancel(ctx)
	defer stopAll()
	last := StageFront
	for _, c := range components {
		last = max(last, c.Stage)
	}
	type stage struct {
		ctx    context.Context
		cancel context.CancelFunc
		wg     sync.WaitGroup
	}
	stages := make([]*stage, last+1)
	for i := range stages {
		sctx, cancel := context.WithCancel(context.Background())
		stages[i] = &stage{ctx: sctx, cancel: cancel}
	}
	errs := make([]error, len(components))
	for i, c := range components {
		st := stages[c.Stage]
		st.wg.Add(1)
		go func() {
			defer st.wg.Done()
			if err := c.Run(st.ctx); err != nil {
				errs[i] = fmt.Errorf("%s: %w", c.Name, err)
			}
			stopAll() // one component ending stops the process
		}()
	}
	<-stop.Done()
	for _, st := range stages {
		st.cancel()
		st.wg.Wait()
	}
	return errors.Join(errs...)
}

// WaitRedis returns once rdb answers PING, or with ctx's error when ctx
// ends first: a worker started while Redis is down waits for it, unready,
// instead of exiting (docs/design.md §11). Attempts back off from 100 ms
// to every 2 s; one line is logged per attempt at most every 5 s.
func WaitRedis(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) error {
	const (
		first   = 100 * time.Millisecond
		ceiling = 2 * time.Second
		logGap  = 5 * time.Second
	)
	delay := first
	start := time.Now()
	var logged time.Time
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := rdb.Ping(pctx).Err()
		cancel()
		if err == nil {
			if attempt > 1 {
				log.Info("redis answers; starting", "attempts", attempt, "waited", time.Since(start).Round(time.Millisecond).String())
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Since(logged) >= logGap {
			log.Warn("redis does not answer; waiting for it (unready meanwhile)", "attempt", attempt, "next_in", delay.String(), "err", err)
			logged = time.Now()
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, ceiling)
	}
}

// AfterRedis wraps components so that each starts once rdb answers
// (WaitRedis, one wait shared by all); a component whose context ends
// before that returns nil.
func AfterRedis(rdb redis.UniversalClient, log *slog.Logger, components []Component) []Component {
	var once sync.Once
	up := make(chan struct{})
	wait := func(ctx context.Context) bool {
		once.Do(func() {
			go func() {
				// Ended by the first stage's stop at the latest: every
				// caller's context is cancelled once the process stops.
				if WaitRedis(ctx, rdb, log) == nil {
					close(up)
				}
			}()
		})
		select {
		case <-up:
			return true
		case <-ctx.Done():
			return false
		}
	}
	out := make([]Component, len(components))
	for i, c := range components {
		out[i] = Component{Name: c.Name, Stage: c.Stage, Run: func(ctx context.Context) error {
			if !wait(ctx) {
				return nil
			}
			return c.Run(ctx)
		}}
	}
	return out
}
