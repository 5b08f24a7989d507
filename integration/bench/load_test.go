package bench

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// An open loop measures from the intended send time: one stalled request
// on the only connection delays those queued behind it, and their
// latency shows the stall instead of hiding it (coordinated omission).
func TestOpenLoopCountsQueueingBehindAStall(t *testing.T) {
	const stall = 300 * time.Millisecond
	l := Loop{Name: "stall", Rate: 100, Conns: 1, Duration: time.Second, Do: func(_ context.Context, i int64) error {
		if i == 10 {
			time.Sleep(stall)
		}
		return nil
	}}
	r := l.Run(context.Background())
	if r.N < 95 || r.N > 101 {
		t.Fatalf("measured %d requests at 100/s for 1 s", r.N)
	}
	// Request 10 took 300 ms; request 11 was due 10 ms after it started,
	// so it waited about 290 ms, 12 about 280 ms, and so on: some 29
	// requests of 100 were at least 10 ms late, so the p90 is well above
	// any request's own service time (0).
	if r.Latency.Max < stall {
		t.Errorf("max %s, want ≥ %s (the stalled request)", r.Latency.Max, stall)
	}
	if r.Latency.P90 < 50*time.Millisecond {
		t.Errorf("p90 %s: the requests queued behind the stall were not counted from their intended time", r.Latency.P90)
	}
}

// A closed loop keeps exactly Conns requests in flight and counts errors
// by kind without measuring them.
func TestClosedLoopInFlightAndErrors(t *testing.T) {
	var inflight, most atomic.Int64
	l := Loop{Name: "closed", Conns: 4, Duration: 300 * time.Millisecond, Do: func(_ context.Context, i int64) error {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		if i%10 == 0 {
			return &StatusError{Method: "POST", Path: "/x", Status: 503}
		}
		if i%10 == 5 {
			return errors.New("boom")
		}
		return nil
	}}
	r := l.Run(context.Background())
	if most.Load() != 4 {
		t.Errorf("at most %d in flight, want 4", most.Load())
	}
	if r.Errors["http 503"] == 0 || r.Errors["boom"] == 0 {
		t.Errorf("errors by kind %v, want http 503 and boom", r.Errors)
	}
	total := r.N + int64(errorCount(r))
	if r.N == 0 || float64(r.N)/float64(total) < 0.7 || float64(r.N)/float64(total) > 0.9 {
		t.Errorf("%d measured of %d: want the 80 %% that succeeded", r.N, total)
	}
}

func TestQuantiles(t *testing.T) {
	d := make([]time.Duration, 100)
	for i := range d {
		d[i] = time.Duration(100-i) * time.Millisecond
	}
	q := QuantilesOf(d)
	if q.P50 != 50*time.Millisecond || q.P90 != 90*time.Millisecond || q.P99 != 99*time.Millisecond || q.Max != 100*time.Millisecond || q.N != 100 {
		t.Errorf("quantiles %+v", q)
	}
	if (QuantilesOf(nil) != Quantiles{}) {
		t.Error("quantiles of nothing")
	}
}
