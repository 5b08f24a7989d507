package route

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/providers/event"
)

// TestConsumerHealthy: a consumer is unhealthy before it runs, healthy
// once its heartbeat reaches Redis, and unhealthy again a lease TTL after
// it stopped (a worker's /readyz).
func TestConsumerHealthy(t *testing.T) {
	rdb, prefix := redistest.New(t)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 2})
	c := NewConsumer(rdb, j, func(context.Context, int, *event.Event) error { return nil },
		slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry(), ConsumerConfig{LeaseTTL: 400 * time.Millisecond})
	if c.Healthy() == nil {
		t.Fatal("healthy before it ran")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	poll(t, "healthy while running", func() bool { return c.Healthy() == nil })
	cancel()
	<-done
	poll(t, "unhealthy a lease TTL after it stopped", func() bool { return c.Healthy() != nil })
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
