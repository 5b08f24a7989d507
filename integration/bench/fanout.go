package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wakegate/wakegate/delivery/outbound"
	"github.com/wakegate/wakegate/providers/event"
)

func init() {
	scenarios["fanout"] = &scenario{
		about:    "session.awaiting_input events, one every 1/--rate s (default 2.5 s), to --recipients (default 1,000) recipients with push endpoints on a receiver in this process that checks every Standard Webhooks signature: intended send → last signed delivery (≤ 2 s); then CPU per delivery against 10 recipients at the same deliveries/s",
		defaults: Options{Duration: 20 * time.Second, Warmup: 3 * time.Second, Rate: 0.4, Conns: 32, Recipients: 1000},
		run:      runFanout,
	}
}

// fanoutWithin is how long one fan-out may take before it counts as
// failed (the target is 2 s; this only bounds a stuck run).
const fanoutWithin = 30 * time.Second

var errFanoutIncomplete = fmt.Errorf("fan-out incomplete after %s", fanoutWithin)

// fanParty is recipient i of a fan-out.
func fanParty(i int) string { return fmt.Sprintf("session:bench-fan-r%05d", i) }

// fanReceiver is the push endpoint of every recipient, /r/<i>: it checks
// each delivery's Standard Webhooks signature against recipient i's
// secret and that it names recipient i, and records when the last
// recipient of each event got it.
type fanReceiver struct {
	mu      sync.Mutex
	secrets []string             // by recipient; "" until its endpoint exists
	rounds  map[string]*fanRound // event id → its fan-out
	good    atomic.Int64         // verified first deliveries
	dups    int                  // a recipient's second delivery of one event (a retried push)
	bad     int
	badEx   []string // the first few failures
}

// fanRound is one event's fan-out.
type fanRound struct {
	want int
	got  map[int]bool // recipients reached
	last time.Time
	done chan struct{} // closed when every recipient has it
}

func newFanReceiver(n int) *fanReceiver {
	return &fanReceiver{secrets: make([]string, n), rounds: map[string]*fanRound{}}
}

func (fr *fanReceiver) setSecret(i int, secret string) {
	fr.mu.Lock()
	fr.secrets[i] = secret
	fr.mu.Unlock()
}

// expect registers event id, due to reach want recipients.
func (fr *fanReceiver) expect(id string, want int) *fanRound {
	rd := &fanRound{want: want, got: map[int]bool{}, done: make(chan struct{})}
	fr.mu.Lock()
	fr.rounds[id] = rd
	fr.mu.Unlock()
	return rd
}

// reached is how many recipients rd has reached.
func (fr *fanReceiver) reached(rd *fanRound) int {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	return len(rd.got)
}

func (fr *fanReceiver) fail(format string, args ...any) {
	fr.bad++
	if len(fr.badEx) < 5 {
		fr.badEx = append(fr.badEx, fmt.Sprintf(format, args...))
	}
}

func (fr *fanReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, err := io.ReadAll(r.Body)
	i, perr := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/r/"))
	var msg struct {
		Party string `json:"party"`
		Event struct {
			ID string `json:"id"`
		} `json:"event"`
	}
	if err == nil {
		err = json.Unmarshal(body, &msg)
	}
	fr.mu.Lock()
	secret := ""
	if perr == nil && i >= 0 && i < len(fr.secrets) {
		secret = fr.secrets[i]
	}
	fr.mu.Unlock()
	var verr error
	if secret != "" {
		verr = outbound.Verify(secret, r.Header, body, at, 5*time.Minute)
	}

	fr.mu.Lock()
	defer fr.mu.Unlock()
	switch rd := fr.rounds[msg.Event.ID]; {
	case err != nil:
		fr.fail("%s: unreadable body: %v", r.URL.Path, err)
	case secret == "":
		fr.fail("%s: no such recipient", r.URL.Path)
	case verr != nil:
		fr.fail("%s: %v", r.URL.Path, verr)
	case msg.Party != fanParty(i):
		fr.fail("%s: a push for %s", r.URL.Path, msg.Party)
	case rd == nil:
		fr.fail("%s: a push of an event the bench did not send: %q", r.URL.Path, msg.Event.ID)
	case rd.got[i]:
		fr.dups++
	default:
		rd.got[i] = true
		rd.last = at
		fr.good.Add(1)
		if len(rd.got) == rd.want {
			close(rd.done)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// fanPhase is what one fan-out size measured.
type fanPhase struct {
	res         Result
	cpuPerDeliv time.Duration // wakegate processes + Redis, idle subtracted
}

func runFanout(ctx context.Context, r *runner) error {
	o := r.o
	if o.Recipients < 10 {
		return fmt.Errorf("--recipients %d: at least 10 (the comparison is 10 against --recipients)", o.Recipients)
	}
	// The health sweep's pass costs per session changed (40 a second at
	// 10 recipients, 0.4 at 1,000), not per delivery, and lands on the
	// minute in one phase or the other: it runs at start only.
	sys, err := r.start(ctx, "WAKEGATE_HEALTH_EVERY=24h")
	if err != nil {
		return err
	}
	defer sys.Stop()
	bl, err := r.baseline(ctx, sys, Loop{})
	if err != nil {
		return err
	}
	c := newHTTPClient(max(o.Conns, 64))
	defer c.CloseIdleConnections()

	valid := 2*(o.Duration+o.Warmup) + 10*time.Minute
	if err := raiseRateCap(ctx, c, sys.Gateways[0], valid); err != nil {
		return err
	}
	recv := newFanReceiver(o.Recipients)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("receiver: %w", err)
	}
	srv := &http.Server{Handler: recv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	recvURL := "http://" + l.Addr().String()

	// subscribe gives recipients from..to-1 a push endpoint on the
	// receiver and a subscription to session.awaiting_input, through the
	// API as a harness would.
	subscribe := func(from, to int) error {
		return forEach(ctx, from, to, 32, func(i int) error {
			tok := token(fanParty(i), "inbox subscribe", valid)
			var ep struct {
				Secret string `json:"secret"`
			}
			gw := sys.Gateways[i%len(sys.Gateways)]
			if err := api(ctx, c, http.MethodPut, gw+"/v1/endpoints/"+fanParty(i), tok,
				map[string]string{"url": fmt.Sprintf("%s/r/%d", recvURL, i)}, http.StatusCreated, &ep); err != nil {
				return fmt.Errorf("endpoint of %s: %w", fanParty(i), err)
			}
			recv.setSecret(i, ep.Secret)
			if err := api(ctx, c, http.MethodPost, gw+"/v1/subscriptions", tok,
				map[string]any{"types": []string{event.TypeSessionAwaitingInput}}, http.StatusCreated, nil); err != nil {
				return fmt.Errorf("subscription of %s: %w", fanParty(i), err)
			}
			return nil
		})
	}

	run := randomHex(3)
	// phase fans events out to the first n recipients, rate a second.
	phase := func(n int, rate float64) (fanPhase, error) {
		if _, err := sys.WaitCaughtUp(ctx, time.Minute); err != nil {
			return fanPhase{}, err
		}
		cpu := func() time.Duration { g, rd := sys.CPU(ctx); return g + rd }
		idle, err := idleRate(ctx, cpu, 2*time.Second)
		if err != nil {
			return fanPhase{}, err
		}
		var mu sync.Mutex
		var stuck []string // fan-outs that did not complete
		loop := Loop{Name: fmt.Sprintf("fanout to %d, %.3g events/s", n, rate),
			Rate: rate, Conns: 64, Duration: o.Duration, Warmup: o.Warmup}
		loop.Do = func(ctx context.Context, i int64) error {
			src := fmt.Sprintf("bench-fan-%s-%d-%d", run, n, i)
			rd := recv.expect(src, n)
			body := []byte(`{"specversion":"1.0","id":"` + src + `","source":"bench","type":"session.awaiting_input","summary":"` + src + ` waits for input"}`)
			req := pushRequest(ctx, sys.Gateways[int(i)%len(sys.Gateways)], token("session:"+src, "events:push", valid), body)
			if _, err := send(c, req, http.StatusAccepted); err != nil {
				return err
			}
			timer := time.NewTimer(fanoutWithin)
			defer timer.Stop()
			select {
			case <-rd.done:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			case <-timer.C:
				mu.Lock()
				stuck = append(stuck, fmt.Sprintf("%s: %d of %d", src, recv.reached(rd), n))
				mu.Unlock()
				return errFanoutIncomplete
			}
		}
		nodes0, nodesErr := RedisNodes(ctx, sys.Redis)
		c0, d0, t0 := cpu(), recv.good.Load(), time.Now()
		res := r.loop(ctx, loop)
		if sys.Cluster {
			nodeRows(ctx, r, sys, fmt.Sprintf("fanout to %d", n), nodes0, nodesErr)
		}
		spent := cpu() - c0 - time.Duration(idle*float64(time.Since(t0)))
		p := fanPhase{}
		if d := recv.good.Load() - d0; d > 0 {
			p.cpuPerDeliv = spent / time.Duration(d)
		}
		res.CPUPerOp = p.cpuPerDeliv * time.Duration(n) // per fan-out
		if len(stuck) > 0 {
			r.note("fan-outs to %d not complete after %s (signed deliveries received): %s", n, fanoutWithin, strings.Join(stuck, ", "))
		}
		r.rep.Phases = append(r.rep.Phases, res)
		p.res = res
		return p, nil
	}

	if err := subscribe(0, 10); err != nil {
		return err
	}
	// Both sizes make the same deliveries a second, so that CPU per
	// delivery compares work with work: at 10 recipients, events come
	// --recipients/10 times as often.
	small, err := phase(10, o.Rate*float64(o.Recipients)/10)
	if err != nil {
		return err
	}
	if err := subscribe(10, o.Recipients); err != nil {
		return err
	}
	large, err := phase(o.Recipients, o.Rate)
	if err != nil {
		return err
	}

	rep, n := r.rep, o.Recipients
	lg, sm := large.res, small.res
	rep.row(fmt.Sprintf("every signed delivery of one event to %d push endpoints within 2 s (intended send → last signed delivery, max of %d fan-outs; baseline: to 10)", n, lg.Latency.N),
		msf(lg.Latency.Max), "ms", msf(sm.Latency.Max), float64(lg.Latency.Max)/float64(max(sm.Latency.Max, 1)),
		verdict(lg.Latency.N > 0 && lg.Latency.Max <= 2*time.Second && errorCount(lg) == 0 && errorCount(sm) == 0))
	ratio := float64(large.cpuPerDeliv) / float64(max(small.cpuPerDeliv, 1))
	rep.row(fmt.Sprintf("cost per recipient the same at 10 and at %d: CPU per delivery (wakegate processes + Redis, idle subtracted), ratio %d ÷ 10 ≤ 1.2", n, n),
		float64(large.cpuPerDeliv)/1e3, "µs", float64(small.cpuPerDeliv)/1e3, ratio, verdict(large.cpuPerDeliv > 0 && small.cpuPerDeliv > 0 && ratio <= 1.2))
	if lg.Latency.P50 > 0 {
		perSec := float64(n) / lg.Latency.P50.Seconds()
		rep.row(fmt.Sprintf("fan-out delivery rate to %d endpoints (recipients ÷ p50 time to the last delivery) against the bare handler's closed-loop throughput", n),
			perSec, "deliveries/s", bl.Achieved, perSec/bl.Achieved, nil)
	}
	if bl.CPUPerOp > 0 && large.cpuPerDeliv > 0 {
		rep.row(fmt.Sprintf("CPU per push delivery at %d against the bare handler's CPU per request (ratio = baseline ÷ delivery)", n),
			float64(large.cpuPerDeliv)/1e3, "µs", float64(bl.CPUPerOp)/1e3, float64(bl.CPUPerOp)/float64(large.cpuPerDeliv), nil)
	}
	recv.mu.Lock()
	bad, dups, ex := recv.bad, recv.dups, recv.badEx
	recv.mu.Unlock()
	rep.row("push deliveries that failed the receiver's checks (Standard Webhooks signature under the recipient's secret, its party, an event the bench sent) = 0",
		float64(bad), "deliveries", float64(recv.good.Load()), 0, verdict(bad == 0))
	if bad > 0 {
		r.note("failed deliveries, first: %s", strings.Join(ex, "; "))
	}
	if dups > 0 {
		r.note("%d deliveries reached a recipient a second time (a push retried after an attempt the receiver had answered)", dups)
	}
	r.note("fan-out: each event is a session.awaiting_input about a fresh session; every recipient subscribes to that type and has a push endpoint; 10 recipients first, then %d (the first 10 among them), at the same deliveries a second (%.3g events/s to 10, %.3g/s to %d); CPU per delivery subtracts what the processes burn idle, measured for 2 s before each size; the health sweep runs only at start (WAKEGATE_HEALTH_EVERY=24h)", n, o.Rate*float64(n)/10, o.Rate, n)
	return nil
}

// raiseRateCap lifts the workspace's per-recipient rate cap (3 per 30 s
// by default) out of the way, as benchmarks do, so every wake is pushed.
func raiseRateCap(ctx context.Context, c *http.Client, gw string, valid time.Duration) error {
	err := api(ctx, c, http.MethodPut, gw+"/v1/workspace/supervision", token("human:bench-admin", "admin", valid),
		map[string]any{"rate": map[string]any{"per": "1s", "burst": 10000}}, http.StatusOK, nil)
	if err != nil {
		return fmt.Errorf("raise the rate cap: %w", err)
	}
	return nil
}

// forEach runs do(i) for i in [from, to), conns at a time, and returns
// the first error.
func forEach(ctx context.Context, from, to, conns int, do func(i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := atomic.Int64{}
	next.Store(int64(from))
	var wg sync.WaitGroup
	for range min(conns, max(to-from, 0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				if err := do(i); err != nil {
					cancel(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// idleRate is the CPU that cpu counts per second of wall time while
// nothing is sent, read over one window: what the processes burn idle
// (consumers' and Asynq's polling, heartbeats).
func idleRate(ctx context.Context, cpu func() time.Duration, window time.Duration) (float64, error) {
	c0, t0 := cpu(), time.Now()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(window):
	}
	return float64(cpu()-c0) / float64(time.Since(t0)), nil
}
