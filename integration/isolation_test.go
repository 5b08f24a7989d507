package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestIsolationIngestFlood: a gateway with small ingest limits
// (workspace=100/s, token=100/s per process). Workspace "quiet" pushes
// one event every 12.5 ms (80/s, under its limit) and measures each
// answer; workspace "flood" pushes from 8 clients at ten times its limit.
// The quiet workspace's latency is measured idle and under the flood in
// alternating windows (idle, flood, idle, flood, …), so that whatever else
// loads the machine weighs on both alike. The flood must get 429s with
// Retry-After and no more 2xx than its bucket allows; the quiet workspace
// must get only 202s, and its p99 under the flood must stay within 2× its
// idle p99 (docs/design.md §13: bad input never costs another tenant anything; a
// flood is answered from memory, before Redis). The ratio is always
// measured and logged; it is held to its budget with WAKEGATE_PERF=1,
// on a machine to itself:
//
//	WAKEGATE_PERF=1 go test -count=1 -run TestIsolationIngestFlood -v ./integration/
func TestIsolationIngestFlood(t *testing.T) {
	// Not parallel: a latency comparison wants the machine to itself, as
	// far as this package goes.
	const (
		limit       = 100.0 // events/s per workspace and per token
		quietEvery  = 12500 * time.Microsecond
		floodRate   = 10 * limit
		floodConns  = 8
		window      = 500 * time.Millisecond
		rounds      = 12
		warmup      = time.Second
		ratioBudget = 2.0
	)
	s := newStack(t, map[string]string{"WAKEGATE_INGEST_LIMITS": fmt.Sprintf("workspace=%g/s,token=%g/s", limit, limit)})
	g := s.start("gateway", "gateway", nil)
	quiet := s.token(t, "session:quiet", "quiet", "events:push")
	var floodTokens []string
	for i := range floodConns {
		floodTokens = append(floodTokens, s.token(t, fmt.Sprintf("session:flood-%d", i), "flood", "events:push"))
	}

	// The quiet workspace's client is a bare keep-alive connection too:
	// what it measures is the gateway and Redis, not the test's own HTTP
	// client (whose cost -race multiplies).
	qc := dialFlood(t, g.Addr)
	defer qc.close()
	var n atomic.Int64
	quietPush := func() (time.Duration, error) {
		id := fmt.Sprintf("quiet-%06d", n.Add(1))
		body := ce(id, "session.turn_started", nil)
		start := time.Now()
		status, _, err := qc.push(quiet, body)
		took := time.Since(start)
		if err != nil {
			return took, err
		}
		if status != http.StatusAccepted {
			return took, fmt.Errorf("quiet push %s: %d, want 202", id, status)
		}
		return took, nil
	}
	// measure runs the quiet workspace's paced pushes for d.
	measure := func(d time.Duration) (durations, error) {
		var out durations
		next := time.Now()
		end := next.Add(d)
		for time.Now().Before(end) {
			took, err := quietPush()
			if err != nil {
				return out, err
			}
			out = append(out, took)
			next = next.Add(quietEvery)
			if wait := time.Until(next); wait > 0 {
				time.Sleep(wait)
			} else {
				next = time.Now()
			}
		}
		return out, nil
	}
	if _, err := measure(warmup); err != nil { // warm connections and caches up
		t.Fatal(err)
	}

	// The flood: floodConns clients, paced to floodRate in all.
	var (
		flooding   atomic.Bool
		floodStats sync.Map // status → *atomic.Int64
		retryAfter atomic.Int64
		floodErrs  atomic.Int64
		stop       = make(chan struct{})
		wg         sync.WaitGroup
	)
	count := func(status int) {
		v, _ := floodStats.LoadOrStore(status, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	var floodSeq atomic.Int64
	for i := range floodConns {
		fc := dialFlood(t, g.Addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer fc.close()
			every := time.Duration(float64(time.Second) * floodConns / floodRate)
			next := time.Now()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if !flooding.Load() {
					time.Sleep(5 * time.Millisecond)
					next = time.Now()
					continue
				}
				status, hasRetryAfter, err := fc.push(floodTokens[i], floodBody(floodSeq.Add(1)))
				switch {
				case err != nil:
					floodErrs.Add(1)
					fc.close()
					fc = dialFlood(t, g.Addr)
				default:
					count(status)
					if status == http.StatusTooManyRequests && hasRetryAfter {
						retryAfter.Add(1)
					}
				}
				next = next.Add(every)
				if wait := time.Until(next); wait > 0 {
					time.Sleep(wait)
				} else {
					next = time.Now()
				}
			}
		}()
	}
	halted := false
	halt := func() {
		if !halted {
			halted = true
			close(stop)
			wg.Wait()
		}
	}
	defer halt()

	var idle, flooded durations
	var floodTime time.Duration
	for range rounds {
		d, err := measure(window)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, d...)
		flooding.Store(true)
		started := time.Now()
		d, err = measure(window)
		flooding.Store(false)
		floodTime += time.Since(started)
		if err != nil {
			t.Fatal(err)
		}
		flooded = append(flooded, d...)
	}

	halt() // every flood request has been answered and counted
	got := map[int]int64{}
	floodStats.Range(func(k, v any) bool { got[k.(int)] = v.(*atomic.Int64).Load(); return true })
	total := floodErrs.Load()
	for _, v := range got {
		total += v
	}
	t.Logf("flood: %d requests in %s (%.0f/s against a limit of %g/s): %v, %d transport errors",
		total, floodTime.Round(time.Millisecond), float64(total)/floodTime.Seconds(), limit, got, floodErrs.Load())
	t.Logf("quiet workspace: idle %s; under the flood %s", idle, flooded)
	if got[http.StatusTooManyRequests] == 0 {
		t.Errorf("the flood got no 429")
	}
	if retryAfter.Load() != got[http.StatusTooManyRequests] {
		t.Errorf("%d of %d 429s carried Retry-After", retryAfter.Load(), got[http.StatusTooManyRequests])
	}
	// The bucket admits its rate, plus in each flood window at most a full
	// burst (twice the rate, refilled while the flood paused), plus a
	// little slack for the windows' edges.
	if max := int64(limit*floodTime.Seconds() + rounds*(2*limit+1) + limit/10); got[http.StatusAccepted] > max {
		t.Errorf("the flood got %d 202s in %s, more than its bucket admits (%d)", got[http.StatusAccepted], floodTime, max)
	}
	for status := range got {
		if status != http.StatusAccepted && status != http.StatusTooManyRequests {
			t.Errorf("the flood got %d answers %d, want only 202 and 429", got[status], status)
		}
	}
	if floodErrs.Load() > 0 {
		t.Errorf("the flood got %d transport errors", floodErrs.Load())
	}
	if float64(total) < floodTime.Seconds()*floodRate/2 {
		t.Errorf("the flood ran at %.0f/s, not a flood", float64(total)/floodTime.Seconds())
	}
	ip, fp := idle.pct(0.99), flooded.pct(0.99)
	ratio := float64(fp) / float64(ip)
	t.Logf("quiet workspace p99: idle %s, under the flood %s (%.2f×, budget %g×)", ip.Round(10*time.Microsecond), fp.Round(10*time.Microsecond), ratio, ratioBudget)
	// A latency ratio is a measurement, not a unit-test assertion: in CI
	// the other packages' tests share the 2 cores and move the p99s on
	// their own. WAKEGATE_PERF=1 (a machine to itself) holds it to budget.
	if ratio > ratioBudget && os.Getenv("WAKEGATE_PERF") == "1" {
		t.Errorf("the quiet workspace's p99 under the flood is %s, %.2f× its idle p99 %s (budget %g×)", fp, ratio, ip, ratioBudget)
	}
}

// floodConn is a bare keep-alive HTTP/1.1 connection: the flood writes
// requests and parses answers itself, so that the flooding client costs
// little CPU (under -race above all) and the comparison measures the
// gateway, not the test's own HTTP client.
type floodConn struct {
	conn net.Conn
	br   *bufio.Reader
	host string
}

func dialFlood(t testing.TB, addr string) *floodConn {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Errorf("flood: dial %s: %v", addr, err)
		return &floodConn{}
	}
	return &floodConn{conn: conn, br: bufio.NewReaderSize(conn, 8192), host: addr}
}

func (f *floodConn) close() {
	if f.conn != nil {
		_ = f.conn.Close()
	}
}

// push POSTs one CloudEvent and returns the answer's status and whether
// it carried Retry-After.
func (f *floodConn) push(token string, body []byte) (int, bool, error) {
	if f.conn == nil {
		return 0, false, fmt.Errorf("not connected")
	}
	_ = f.conn.SetDeadline(time.Now().Add(10 * time.Second))
	req := fmt.Sprintf("POST /v1/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		f.host, token, ctEvent, len(body))
	if _, err := f.conn.Write(append([]byte(req), body...)); err != nil {
		return 0, false, err
	}
	resp, err := http.ReadResponse(f.br, nil)
	if err != nil {
		return 0, false, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After") != "", err
}

// floodBody is a flood event: a template with its id filled in.
func floodBody(n int64) []byte {
	b := make([]byte, 0, 128)
	b = append(b, `{"specversion":"1.0","id":"flood-`...)
	b = strconv.AppendInt(b, n, 10)
	return append(b, `","source":"harness","type":"session.turn_started"}`...)
}
