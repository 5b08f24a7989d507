package perf

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/gateway"
)

// TestOpenLoopLatency offers signed 28 KB deliveries at a fixed rate (1,000/s)
// on a fixed arrival schedule, open loop, to the baseline handler and then
// to serve's assembly (gateway, deriver, router, settler), both on a redis-server
// it starts with AOF everysec. Latency runs from each request's intended
// send time to its answer, so a stall delays every request scheduled
// behind it instead of hiding them. Target: gateway p99 < 20 ms.
//
// By default it runs 2 s per side, as a proof that it works (at 50/s under
// -race, whose figures mean nothing). The measurement:
//
//	WAKEGATE_PERF=1 go test ./integration/perf -run OpenLoopLatency -v -count=1
//
// WAKEGATE_PERF_DURATION (default 60s with WAKEGATE_PERF=1) and
// WAKEGATE_PERF_RATE (default 1000) override; WAKEGATE_PERF_WORKERS=0
// leaves the workers out (a diagnostic: the gateway alone).
func TestOpenLoopLatency(t *testing.T) {
	rate, dur, warm := 1000, 2*time.Second, 200*time.Millisecond
	if os.Getenv("WAKEGATE_PERF") == "1" {
		dur, warm = 60*time.Second, 2*time.Second
	} else if raceEnabled {
		rate = 50 // what the race detector sustains on a small machine
	}
	if v := os.Getenv("WAKEGATE_PERF_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("WAKEGATE_PERF_DURATION: %v", err)
		}
		dur = d
	}
	if v := os.Getenv("WAKEGATE_PERF_RATE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("WAKEGATE_PERF_RATE: %q", v)
		}
		rate = n
	}
	p := loadPayload(t)
	url := startRedis(t)
	t.Logf("load average at start %s", loadAvg())
	defer func() { t.Logf("load average at end %s", loadAvg()) }()

	bl := newBaseline(t, url)
	bsrv := httptest.NewServer(bl)
	defer bsrv.Close()
	base := openLoop(t, rate, warm, dur, func(i int64) *http.Request { return webhookRequest(bsrv.URL, p.body(i)) })

	s := newStack(t, url, gateway.Limits{})
	if os.Getenv("WAKEGATE_PERF_WORKERS") != "0" { // 0: the gateway alone, a diagnostic
		s.startWorkers(t)
	}
	gurl := s.serve(t)
	gw := openLoop(t, rate, warm, dur, func(i int64) *http.Request { return webhookRequest(gurl, p.body(i)) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := deriveLag(ctx, s.rdb, s.store, time.Now())
	if err != nil {
		t.Fatalf("derive lag: %v", err)
	}
	rl, err := routeLag(ctx, s, time.Now())
	if err != nil {
		t.Fatalf("route lag: %v", err)
	}

	t.Logf("open loop, %d req/s offered for %s (after %s warm-up), redis-server AOF everysec, signed 28 KB pull_request/opened", rate, dur, warm)
	t.Logf("%-9s %9s %9s %9s %9s %9s %7s", "", "p50", "p90", "p99", "max", "req/s", "errors")
	for _, r := range []struct {
		name string
		res  latencyResult
	}{{"baseline", base}, {"gateway", gw}} {
		t.Logf("%-9s %9s %9s %9s %9s %9.0f %7d", r.name, ms(r.res.p50), ms(r.res.p90), ms(r.res.p99), ms(r.res.max), r.res.rate, r.res.errors)
	}
	verdict := "PASS"
	if gw.p99 >= 20*time.Millisecond {
		verdict = "FAIL"
	}
	t.Logf("gateway p99 %s vs target < 20 ms: %s (baseline p99 %s, ratio %.2f); at the end derive lag %s (backlog %d), route lag %s",
		ms(gw.p99), verdict, ms(base.p99), float64(gw.p99)/float64(max(base.p99, 1)), ms(l.Age), l.Backlog, ms(rl))
	for _, r := range []latencyResult{base, gw} {
		if r.errors > 0 {
			t.Errorf("%d requests failed; first: %v", r.errors, r.firstErr)
		}
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

type latencyResult struct {
	p50, p90, p99, max time.Duration
	rate               float64 // answered per second over the measured window
	errors             int64
	firstErr           error
}

// openLoop sends rate requests per second for warm+dur on a fixed schedule,
// each on its own goroutine whatever is still in flight, and returns the
// latency distribution of those scheduled after warm, measured from each
// one's intended send time.
func openLoop(t *testing.T, rate int, warm, dur time.Duration, mk func(i int64) *http.Request) latencyResult {
	t.Helper()
	c := httpClient(1024)
	defer c.CloseIdleConnections()
	interval := time.Second / time.Duration(rate)
	skip := int(warm / interval)
	total := skip + int(dur/interval)
	lat := make([]time.Duration, total)
	var failed atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	start := time.Now().Add(20 * time.Millisecond)
	for i := range total {
		intended := start.Add(time.Duration(i) * interval)
		if d := time.Until(intended); d > 0 {
			time.Sleep(d)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := send(c, mk(int64(i+1)))
			lat[i] = time.Since(intended)
			if err != nil {
				failed.Add(1)
				first.CompareAndSwap(nil, err)
			}
		}()
	}
	wg.Wait()
	window := time.Since(start.Add(warm))
	m := slices.Clone(lat[skip:])
	slices.Sort(m)
	q := func(f float64) time.Duration {
		i := int(f*float64(len(m))+0.999999) - 1
		return m[max(0, min(i, len(m)-1))]
	}
	r := latencyResult{p50: q(0.50), p90: q(0.90), p99: q(0.99), max: m[len(m)-1],
		rate: float64(len(m)) / window.Seconds(), errors: failed.Load()}
	if e, ok := first.Load().(error); ok {
		r.firstErr = e
	}
	return r
}

// startRedis runs a private redis-server on a free loopback port with AOF
// everysec (as production runs it) in a temporary directory, and kills it
// when the test ends. It returns its URL.
func startRedis(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("the latency measurement starts its own redis-server (AOF everysec): %v", err)
	}
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close()
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--dir", dir,
		"--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
		"--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	url := "redis://127.0.0.1:" + port + "/0"
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		v, err := rdb.ConfigGet(ctx, "appendfsync").Result()
		cancel()
		if err == nil {
			if v["appendfsync"] != "everysec" {
				t.Fatalf("redis-server appendfsync = %q", v["appendfsync"])
			}
			return url
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server on port %s did not answer: %v\n%s", port, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
