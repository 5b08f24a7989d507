package perf

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/gateway"
)

// ingestConns is the fixed concurrency of the ingest benchmark: keep-alive
// connections, one request in flight on each.
const ingestConns = 32

// BenchmarkIngest drives signed 28 KB pull_request/opened deliveries, each
// a different PR under a fresh GUID, at ingestConns connections:
//
//	baseline  read body, HMAC-SHA256, one XADD of the raw body
//	gateway   the real gateway.Handler committing through package ingest,
//	          run as serve runs it, with serve's workers (startWorkers)
//
// It reports ops/s for each, gateway/baseline as "ratio" (target ≥ 0.60),
// and for the gateway the derive lag when the load stops: "lag_s", the age
// of the oldest committed delivery not yet derived (target < 1 s after a
// 60 s run), "backlog" and "derived/s"; and "route_lag_s", the age of the
// oldest journal entry the router has not routed yet, and "routed/s".
//
//	go test ./integration/perf -run '^$' -bench Ingest -benchtime=60s
func BenchmarkIngest(b *testing.B) {
	p := loadPayload(b)
	url := redistest.URL()
	b.Run("baseline", func(b *testing.B) {
		setBaseline(runBaseline(b, p, url))
	})
	b.Run("gateway", func(b *testing.B) {
		s := newStack(b, url, gateway.Limits{})
		s.startWorkers(b)
		base := s.serve(b)
		c := httpClient(ingestConns)
		defer c.CloseIdleConnections()
		perSec := closedLoop(b, ingestConns, func(i int64) error {
			return send(c, webhookRequest(base, p.body(i)))
		})
		b.ReportMetric(perSec, "ops/s")
		reportRatios(b, perSec)
		reportLag(b, s, true)
	})
}

// runBaseline measures the bare handler at ingestConns and reports ops/s.
func runBaseline(b *testing.B, p *payload, url string) float64 {
	h := newBaseline(b, url)
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := httpClient(ingestConns)
	defer c.CloseIdleConnections()
	perSec := closedLoop(b, ingestConns, func(i int64) error {
		return send(c, webhookRequest(srv.URL, p.body(i)))
	})
	b.ReportMetric(perSec, "ops/s")
	return perSec
}

// reportLag reports how far the deriver is behind when the load stops.
// With rate, it also reports the deriver's throughput over the run.
func reportLag(b *testing.B, s *stack, rate bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := deriveLag(ctx, s.rdb, s.store, time.Now())
	if err != nil {
		b.Fatalf("derive lag: %v", err)
	}
	b.ReportMetric(l.Age.Seconds(), "lag_s")
	b.ReportMetric(float64(l.Backlog), "backlog")
	rl, err := routeLag(ctx, s, time.Now())
	if err != nil {
		b.Fatalf("route lag: %v", err)
	}
	b.ReportMetric(rl.Seconds(), "route_lag_s")
	b.ReportMetric(s.counter("wakegate_route_events_total", "outcome", "routed")/b.Elapsed().Seconds(), "routed/s")
	if rate {
		b.ReportMetric(float64(int64(b.N)-l.Backlog)/b.Elapsed().Seconds(), "derived/s")
	}
}
