package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/redistest"
)

// A flood takes the burst (twice the rate, plus one) and then 429s with a
// wait of at least a second; another workspace is untouched; a request
// refused by one limit costs the other nothing; more than a burst at once
// is refused for a minute.
func TestLimiterBurstIsolationAndBoth(t *testing.T) {
	redistest.Backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		l := New(rdb, prefix, Limits{Workspace: 5, Token: 1000})
		admitted := 0
		for range 50 {
			_, ok, err := l.Allow(ctx, "flood", "t1", 1)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				admitted++
			}
		}
		// Redis's clock moves while the loop runs: allow the refill of the
		// time it took (miniredis's clock is the wall clock here).
		if admitted < 11 || admitted > 12 {
			t.Fatalf("the flooding workspace admitted %d of 50 at once, want 11 (a burst of twice the rate, plus one)", admitted)
		}
		wait, ok, err := l.Allow(ctx, "flood", "t1", 1)
		if err != nil || ok || wait < time.Second {
			t.Fatalf("flood not refused with a wait: ok=%v wait=%v err=%v", ok, wait, err)
		}
		if _, ok, _ := l.Allow(ctx, "quiet", "t2", 1); !ok {
			t.Fatal("another workspace was refused because of the flood")
		}

		// Both or neither: the token's limit refuses, the workspace's
		// limit keeps what it had.
		both := New(rdb, prefix, Limits{Workspace: 100, Token: 1})
		for i := range 3 {
			if _, ok, _ := both.Allow(ctx, "ws-b", "tight", 1); !ok {
				t.Fatalf("request %d within the token's burst of 3 refused", i)
			}
		}
		for range 20 {
			if _, ok, _ := both.Allow(ctx, "ws-b", "tight", 1); ok {
				t.Fatal("the token's limit admitted past its burst")
			}
		}
		roomy := New(rdb, prefix, Limits{Workspace: 100, Token: 1000}) // the same workspace limit, a looser token one
		for i := range 150 {
			if _, ok, _ := roomy.Allow(ctx, "ws-b", "other", 1); !ok {
				t.Fatalf("the workspace refused event %d of 150 (burst 201): refused requests took from it", i)
			}
		}
		if wait, ok, _ := both.Allow(ctx, "ws-c", "t", 500); ok || wait != time.Minute {
			t.Fatalf("500 events against a burst of 201: ok=%v wait=%v, want refused for a minute", ok, wait)
		}
	})
}

// Two limiters on one Redis — two gateways — share one limit.
func TestLimiterHoldsAcrossInstances(t *testing.T) {
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	a := New(rdb, prefix, Limits{Workspace: 5, Token: 1000})
	b := New(redis.NewClient(rdb.Options()), prefix, Limits{Workspace: 5, Token: 1000})
	admitted := 0
	for i := range 60 {
		l := a
		if i%2 == 1 {
			l = b
		}
		if _, ok, err := l.Allow(ctx, "shared", "t", 1); err != nil {
			t.Fatal(err)
		} else if ok {
			admitted++
		}
	}
	if admitted > 12 {
		t.Fatalf("two instances admitted %d at once, want one burst (11) between them", admitted)
	}
}

// BenchmarkAllow is the cost of the limit per request: one script call.
func BenchmarkAllow(b *testing.B) {
	rdb, prefix := redistest.New(b)
	l := New(rdb, prefix, Limits{Workspace: 1e9, Token: 1e9})
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, ok, err := l.Allow(ctx, "bench", "t", 1); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkAllowParallel is the same from many goroutines (a gateway under
// load).
func BenchmarkAllowParallel(b *testing.B) {
	rdb, prefix := redistest.New(b)
	l := New(rdb, prefix, Limits{Workspace: 1e9, Token: 1e9})
	ctx := context.Background()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok, err := l.Allow(ctx, "bench", "t", 1); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	})
}
