package perf

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/workers/route"
)

// BenchmarkDerive is a diagnostic for the ingest target's lag: the
// deriver's own capacity with the machine to itself. It commits b.N
// signed pull_request/opened deliveries (each a different PR of one
// repository) through the gateway handler with the timer stopped, then
// times the deriver until every one is derived, and reports "derived/s"
// and the process's CPU time per record, "cpu_us/op".
//
//	go test ./integration/perf -run '^$' -bench Derive -benchtime=20000x
func BenchmarkDerive(b *testing.B) {
	p := loadPayload(b)
	s := newStack(b, redistest.URL(), gateway.Limits{})
	h := s.gw.Handler()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, webhookRequest("http://wakegate.test", p.body(i)))
				if rec.Code != http.StatusAccepted {
					b.Errorf("delivery %d: %d %s", i, rec.Code, rec.Body)
					return
				}
			}
		}()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cpu0 := cpuTime()
	b.ResetTimer()
	s.startWorkers(b)
	for {
		l, err := deriveLag(ctx, s.rdb, s.store, time.Now())
		if err != nil {
			b.Fatalf("derive lag: %v", err)
		}
		if l.Backlog == 0 && l.Age == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "derived/s")
	b.ReportMetric(float64((cpuTime()-cpu0)/time.Microsecond)/float64(b.N), "cpu_us/op")
}

// BenchmarkRouteDrain is a diagnostic for the push target's journal lag:
// the router's own capacity with the machine to itself. It pushes b.N
// single agent events (as BenchmarkPush does) with the timer stopped, then
// times the router alone until every one is routed, and reports
// "routed/s", "cpu_us/op" and the Redis round trips per event.
//
//	go test ./integration/perf -run '^$' -bench RouteDrain -benchtime=20000x
func BenchmarkRouteDrain(b *testing.B) {
	s := newStack(b, redistest.URL(), gateway.Limits{Workspace: 1e6, Token: 1e6})
	h := s.gw.Handler()
	tokens := sessionTokens(b, pushSessions)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				body := fmt.Sprintf(`{"specversion":"1.0","id":"drain-%d","source":"perf","type":"session.turn_ended","summary":"turn %d ended","data":{"idle":false}}`, i, i)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptestRequest(body, tokens[i%int64(len(tokens))]))
				if rec.Code != http.StatusAccepted {
					b.Errorf("push %d: %d %s", i, rec.Code, rec.Body)
					return
				}
			}
		}()
	}
	wg.Wait()
	var calls atomic.Int64
	s.rdb.AddHook(countHook{&calls})
	// the stack's own router (its metrics are registered once), alone
	consumer := route.NewConsumer(s.rdb, s.j, s.st.Router.Handle, slog.New(slog.DiscardHandler), s.reg, route.ConsumerConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	cpu0 := cpuTime()
	b.ResetTimer()
	go func() { defer close(done); _ = consumer.Run(ctx) }()
	for {
		rl, err := routeLag(context.Background(), s, time.Now())
		if err != nil {
			b.Fatalf("route lag: %v", err)
		}
		if rl == 0 && s.counter("wakegate_route_events_total", "outcome", "routed") >= float64(b.N) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.StopTimer()
	n := calls.Load()
	cancel()
	<-done
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "routed/s")
	b.ReportMetric(float64((cpuTime()-cpu0)/time.Microsecond)/float64(b.N), "cpu_us/op")
	b.ReportMetric(float64(n)/float64(b.N), "redis_calls/op")
}

// countHook counts Redis round trips (a pipeline is one).
type countHook struct{ n *atomic.Int64 }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}

func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}
