package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Loop is one phase of offered load. Open loop (Rate > 0): request i is
// due at start + i/Rate whatever is still in flight, and its latency runs
// from that intended time, so a stall of the system shows as latency
// instead of hiding as a slower sender. Closed loop (Rate 0): exactly
// Conns requests in flight, the most the system takes — for throughput.
type Loop struct {
	Name     string
	Rate     float64 // requests per second; 0 = closed loop
	Conns    int     // closed: in flight; open: most in flight before sends queue (latency still counts from the intended time)
	Duration time.Duration
	Warmup   time.Duration // run first, not measured
	// Do sends request i (numbered from 1 over warm-up and run).
	Do func(ctx context.Context, i int64) error
	// Progress, when set, is called about 4 times a second.
	Progress func(p Progress)
}

// Progress is a running loop's state.
type Progress struct {
	Name           string
	Elapsed, Total time.Duration
	Done, Errors   int64
	InFlight       int64
	Offered        float64
	RecentPerSec   float64
}

// Result is what a loop measured after its warm-up.
type Result struct {
	Name     string         `json:"name"`
	Offered  float64        `json:"offered_per_s,omitempty"` // open loop only
	Achieved float64        `json:"achieved_per_s"`
	Conns    int            `json:"connections"`
	N        int64          `json:"requests"`
	Errors   map[string]int `json:"errors,omitempty"`
	Latency  Quantiles      `json:"latency"`
	Elapsed  time.Duration  `json:"elapsed_ns"`
	// Series is the run second by second: completions and latency.
	Series []Second `json:"series,omitempty"`
	// CPUPerOp is the system's CPU per request (its processes and, when
	// private, Redis), set by the scenario.
	CPUPerOp time.Duration `json:"cpu_per_op_ns,omitempty"`
	// CPUByProcess splits the CPU per request between the processes of
	// the machine: gateway, worker, baseline, redis (when private), and
	// the load generator itself (bench), which the ratios leave out.
	CPUByProcess map[string]time.Duration `json:"cpu_per_op_by_process_ns,omitempty"`
}

// Second is one second of a run.
type Second struct {
	At   int           `json:"t"`
	Done int           `json:"done"`
	P50  time.Duration `json:"p50_ns"`
	P99  time.Duration `json:"p99_ns"`
}

// Quantiles of a latency distribution.
type Quantiles struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P90 time.Duration `json:"p90_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

// QuantilesOf sorts d and reads its quantiles.
func QuantilesOf(d []time.Duration) Quantiles {
	if len(d) == 0 {
		return Quantiles{}
	}
	slices.Sort(d)
	q := func(f float64) time.Duration {
		i := int(f*float64(len(d))+0.999999) - 1
		return d[max(0, min(i, len(d)-1))]
	}
	return Quantiles{N: len(d), P50: q(0.50), P90: q(0.90), P99: q(0.99), Max: d[len(d)-1]}
}

type intendedKey struct{}

// Intended is when the request Do was called for was due (its latency
// runs from then); zero outside a Loop's Do.
func Intended(ctx context.Context) time.Time {
	t, _ := ctx.Value(intendedKey{}).(time.Time)
	return t
}

type sample struct {
	at  time.Duration // intended time, from the start of the measured window
	lat time.Duration
}

// Run runs the loop until its duration ends or ctx does.
func (l Loop) Run(ctx context.Context) Result {
	if l.Conns <= 0 {
		l.Conns = 64
	}
	var (
		done, failed, inflight atomic.Int64
		mu                     sync.Mutex
		samples                []sample
		kinds                  = map[string]int{}
		wg                     sync.WaitGroup
	)
	start := time.Now().Add(10 * time.Millisecond)
	measured := start.Add(l.Warmup)
	end := measured.Add(l.Duration)
	flush := func(local []sample) []sample {
		mu.Lock()
		samples = append(samples, local...)
		mu.Unlock()
		return local[:0]
	}
	// one sends request i and records it unless it was due in the warm-up.
	one := func(local []sample, i int64, intended time.Time) []sample {
		inflight.Add(1)
		err := l.Do(context.WithValue(ctx, intendedKey{}, intended), i)
		lat := time.Since(intended)
		inflight.Add(-1)
		done.Add(1)
		switch {
		case intended.Before(measured):
		case err != nil:
			failed.Add(1)
			mu.Lock()
			kinds[errorKind(err)]++
			mu.Unlock()
		default:
			if local = append(local, sample{at: intended.Sub(measured), lat: lat}); len(local) == cap(local) && len(local) >= 4096 {
				local = flush(local)
			}
		}
		return local
	}

	stopProgress := l.progress(ctx, start, end, &done, &failed, &inflight)
	var next atomic.Int64
	if l.Rate <= 0 { // closed loop
		time.Sleep(time.Until(start))
		for range l.Conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var local []sample
				for ctx.Err() == nil && time.Now().Before(end) {
					local = one(local, next.Add(1), time.Now())
				}
				flush(local)
			}()
		}
	} else { // open loop
		interval := time.Duration(float64(time.Second) / l.Rate)
		due := make(chan int64, 1<<16)
		for range l.Conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var local []sample
				for i := range due {
					local = one(local, i, start.Add(time.Duration(i-1)*interval))
				}
				flush(local)
			}()
		}
		for i := int64(1); ctx.Err() == nil; i++ {
			at := start.Add(time.Duration(i-1) * interval)
			if !at.Before(end) {
				break
			}
			if d := time.Until(at); d > 0 {
				time.Sleep(d)
			}
			due <- i
		}
		close(due)
	}
	wg.Wait()
	stopProgress()

	window := min(time.Since(measured), max(l.Duration, time.Millisecond))
	if l.Rate > 0 {
		window = l.Duration
	}
	r := Result{Name: l.Name, Offered: l.Rate, Conns: l.Conns, N: int64(len(samples)), Elapsed: window}
	if len(kinds) > 0 {
		r.Errors = kinds
	}
	lat := make([]time.Duration, len(samples))
	bySecond := map[int][]time.Duration{}
	for i, s := range samples {
		lat[i] = s.lat
		sec := int(s.at / time.Second)
		bySecond[sec] = append(bySecond[sec], s.lat)
	}
	r.Latency = QuantilesOf(lat)
	if l.Rate <= 0 { // closed: what completed in the window
		r.Achieved = float64(len(samples)) / window.Seconds()
	} else { // open: completions of the requests due in the window
		r.Achieved = float64(len(samples)) / l.Duration.Seconds()
	}
	for sec := range int(l.Duration/time.Second) + 1 {
		d := bySecond[sec]
		if len(d) == 0 {
			continue
		}
		q := QuantilesOf(d)
		r.Series = append(r.Series, Second{At: sec, Done: len(d), P50: q.P50, P99: q.P99})
	}
	return r
}

// progress reports the loop's state until the returned stop is called.
func (l Loop) progress(ctx context.Context, start, end time.Time, done, failed, inflight *atomic.Int64) (stop func()) {
	if l.Progress == nil {
		return func() {}
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		var lastN int64
		last := time.Now()
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case now := <-t.C:
				n := done.Load()
				l.Progress(Progress{Name: l.Name, Elapsed: now.Sub(start), Total: end.Sub(start), Done: n, Errors: failed.Load(),
					InFlight: inflight.Load(), Offered: l.Rate, RecentPerSec: float64(n-lastN) / now.Sub(last).Seconds()})
				lastN, last = n, now
			}
		}
	}()
	return func() { close(quit); wg.Wait() }
}

// StatusError is an answer with an unexpected status.
type StatusError struct {
	Method, Path string
	Status       int
	Body         string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, e.Body)
}

// errorKind groups errors for the summary: "http 503", "timeout", …
func errorKind(err error) string {
	var se *StatusError
	var ne net.Error
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("http %d", se.Status)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection reset"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	s := err.Error()
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}

// newHTTPClient keeps up to conns connections alive per host.
func newHTTPClient(conns int) *http.Client {
	return &http.Client{Timeout: 70 * time.Second, Transport: &http.Transport{
		MaxIdleConns: conns * 4, MaxIdleConnsPerHost: conns, IdleConnTimeout: 90 * time.Second, DisableCompression: true,
	}}
}

// send does req and drains the answer so the connection is reused; a
// status other than ok (default 200 or 202) is a *StatusError. It
// returns the answer's body.
func send(c *http.Client, req *http.Request, ok ...int) ([]byte, error) {
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	want := ok
	if len(want) == 0 {
		want = []int{http.StatusOK, http.StatusAccepted}
	}
	if !slices.Contains(want, resp.StatusCode) {
		body := string(bytes.TrimSpace(b))
		if len(body) > 200 {
			body = body[:200] + "…"
		}
		return b, &StatusError{Method: req.Method, Path: strings.SplitN(req.URL.RequestURI(), "?", 2)[0], Status: resp.StatusCode, Body: body}
	}
	return b, nil
}
