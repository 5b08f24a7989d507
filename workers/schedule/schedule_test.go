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

// TestOncePerTick: three schedulers on one Redis run a job once per slot
// between them, and every slot that passed ran (none lost to a race).
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
	lo, hi := int64(1<<62), int64(0)
	for slot := range slots {
		lo, hi = min(lo, slot), max(hi, slot)
	}
	if n := (hi-lo)/period.Milliseconds() + 1; n != int64(len(slots)) {
		t.Fatalf("%d slots ran between the first and the last of %d: a tick was lost", len(slots), n)
	}
}
