package schedule

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/delivery/redistest"
)

// TestOncePerTick: three schedulers on one Redis, on real tickers, run a
// job once per slot between them (that no slot is lost is
// TestEverySlotRunsOnce's, on a clock a loaded machine cannot starve).
func TestOncePerTick(t *testing.T) {
	rdb, prefix := redistest.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	const period = time.Second
	var mu sync.Mutex
	slots := map[int64]int{} // slot → passes
	var passes atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 3 {
		s := New(rdb, prefix, "p"+string(rune('a'+i)), log, prometheus.NewRegistry())
		s.Every("sweep", period, func(_ context.Context, now time.Time) error {
			mu.Lock()
			slots[now.Truncate(period).UnixMilli()]++
			mu.Unlock()
			passes.Add(1)
			return nil
		})
		wg.Add(1)
		go func() { defer wg.Done(); _ = s.Run(ctx) }()
	}
	deadline := time.Now().Add(20 * time.Second)
	for passes.Load() < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("%d passes after 20 s, want 4", passes.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for slot, n := range slots {
		if n != 1 {
			t.Errorf("slot %s ran %d times, want once", time.UnixMilli(slot).Format(time.TimeOnly), n)
		}
	}
	if int64(len(slots)) != passes.Load() {
		t.Fatalf("%d passes over %d slots", passes.Load(), len(slots))
	}
}

// TestEverySlotRunsOnce: three schedulers tick concurrently at scattered
// instants of each of 50 slots (a clock of their own, so a loaded machine
// cannot starve a slot): each slot runs exactly once, none is lost.
func TestEverySlotRunsOnce(t *testing.T) {
	rdb, prefix := redistest.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	const period = time.Second
	var mu sync.Mutex
	slots := map[int64]int{}
	var scheds []*Scheduler
	for i := range 3 {
		s := New(rdb, prefix, "p"+string(rune('a'+i)), log, prometheus.NewRegistry())
		s.Every("sweep", period, func(_ context.Context, now time.Time) error {
			mu.Lock()
			slots[now.Truncate(period).UnixMilli()]++
			mu.Unlock()
			return nil
		})
		scheds = append(scheds, s)
	}
	base := time.Now().Truncate(period).Add(time.Hour)
	const n = 50
	var wg sync.WaitGroup
	for slot := range n {
		for i, s := range scheds {
			at := base.Add(time.Duration(slot)*period + time.Duration(i*300+slot%7*10)*time.Millisecond)
			wg.Add(1)
			go func() { defer wg.Done(); s.tick(context.Background(), s.jobs[0], at) }()
		}
	}
	wg.Wait()
	if len(slots) != n {
		t.Fatalf("%d of %d slots ran", len(slots), n)
	}
	for slot, c := range slots {
		if c != 1 {
			t.Errorf("slot %s ran %d times, want once", time.UnixMilli(slot).Format(time.TimeOnly), c)
		}
	}
}
