package perf

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
// The baseline runs again after the gateway ("baseline-after"), which
// reports "bracketed_ratio": the gateway's ops/s ÷ the mean of both
// baselines, so a neighbour's load that comes or goes during the run
// biases the ratio less.
//
//	go test ./integration/perf -run '^$' -bench Ingest -benchtime=60s
func BenchmarkIngest(b *testing.B) {
	p := loadPayload(b)
	url := redistest.URL()
	var before, gw float64
	b.Run("baseline", func(b *testing.B) {
		before = runBaseline(b, p, url)
		setBaseline(before)
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
		gw = perSec
	})
	b.Run("baseline-after", func(b *testing.B) {
		after := runBaseline(b, p, url)
		if before > 0 && gw > 0 {
			b.ReportMetric(gw/((before+after)/2), "bracketed_ratio")
		}
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

// BenchmarkDeliveryCPU is a diagnostic for the ingest ratio: what one
// delivery costs in CPU, all of it, on a machine whose neighbours make
// throughput unreliable. It runs the baseline and the gateway as
// BenchmarkIngest does (32 connections, serve's workers beside the
// gateway), then waits until every delivery has been derived and routed,
// and reports per delivery the process's CPU ("proc_us/op"), Redis's
// ("redis_us/op", from INFO cpu) and their sum ("total_us/op"); for the
// gateway also "total_ratio", the baseline's total ÷ the gateway's: the
// throughput ratio of a quiet machine where both are CPU-bound.
//
// Redis's figure is only meaningful on a Redis nothing else uses:
//
//	redis-server --port 6390 --save '' &
//	WAKEGATE_TEST_REDIS_URL=redis://127.0.0.1:6390/0 go test ./integration/perf -run '^$' -bench DeliveryCPU -benchtime=20000x
func BenchmarkDeliveryCPU(b *testing.B) {
	p := loadPayload(b)
	url := redistest.URL()
	var baseTotal float64
	b.Run("baseline", func(b *testing.B) {
		srv := httptest.NewServer(newBaseline(b, url))
		defer srv.Close()
		c := httpClient(ingestConns)
		defer c.CloseIdleConnections()
		rdb := newClient(b, url)
		defer rdb.Close()
		r0, c0 := serverCPU(b, rdb), cpuTime()
		closedLoop(b, ingestConns, func(i int64) error { return send(c, webhookRequest(srv.URL, p.body(i))) })
		baseTotal = reportCPU(b, r0, c0, rdb)
	})
	b.Run("gateway", func(b *testing.B) {
		s := newStack(b, url, gateway.Limits{})
		s.startWorkers(b)
		base := s.serve(b)
		c := httpClient(ingestConns)
		defer c.CloseIdleConnections()
		r0, c0 := serverCPU(b, s.rdb), cpuTime()
		closedLoop(b, ingestConns, func(i int64) error { return send(c, webhookRequest(base, p.body(i))) })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		for {
			l, err := deriveLag(ctx, s.rdb, s.store, time.Now())
			if err != nil {
				b.Fatalf("derive lag: %v", err)
			}
			rl, err := routeLag(ctx, s, time.Now())
			if err != nil {
				b.Fatalf("route lag: %v", err)
			}
			if l.Backlog == 0 && rl == 0 && s.counter("wakegate_route_events_total", "outcome", "routed") >= float64(b.N) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if total := reportCPU(b, r0, c0, s.rdb); baseTotal > 0 {
			b.ReportMetric(baseTotal/total, "total_ratio")
		}
	})
}

// reportCPU reports the process's and Redis's CPU per op since cpu0 and
// redis0, and returns their sum (µs).
func reportCPU(b *testing.B, redis0 float64, cpu0 time.Duration, rdb redis.UniversalClient) float64 {
	proc := float64((cpuTime()-cpu0)/time.Microsecond) / float64(b.N)
	red := (serverCPU(b, rdb) - redis0) * 1e6 / float64(b.N)
	b.ReportMetric(proc, "proc_us/op")
	b.ReportMetric(red, "redis_us/op")
	b.ReportMetric(proc+red, "total_us/op")
	return proc + red
}

// serverCPU is the CPU time (s) the Redis server has used (INFO cpu).
func serverCPU(b *testing.B, rdb redis.UniversalClient) float64 {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatalf("INFO cpu: %v", err)
	}
	var t float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			t += f
		}
	}
	return t
}
