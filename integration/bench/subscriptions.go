package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wakegate/wakegate/providers/event"
)

func init() {
	scenarios["subscriptions"] = &scenario{
		about: "routing with --subscriptions (default 10,000) subscriptions that match nothing and --sessions (default 100,000) registered sessions against 10 such subscriptions: worker CPU per routed event (≤ 2×) and fact → wake latency of session.awaiting_input pushes at --rate reaching --supervisors long-polling supervisors",
		defaults: Options{Duration: 20 * time.Second, Warmup: 3 * time.Second, Rate: 200, Conns: 64,
			Sessions: 100_000, Subscriptions: 10_000, Supervisors: 10},
		run: runSubscriptions,
	}
}

// subSession is registered session k; it carries the label of the
// supervisor whose subscription matches what it pushes.
func subSession(k int) string { return fmt.Sprintf("bench-s%06d", k) }

func subSupervisor(j int) string { return fmt.Sprintf("session:bench-sup%03d", j) }

// wakeWatch records when the supervisors' long-polls first returned each
// event the bench sent.
type wakeWatch struct {
	mu   sync.Mutex
	sent map[string]sentEvent
	seen map[string]time.Duration // event id → intended send → long-poll answer
	// by is who saw an event (the supervisor's index).
	by map[string]int
}

type sentEvent struct {
	phase    string
	at       time.Time // intended send time
	measured bool      // due after the warm-up
}

func newWakeWatch() *wakeWatch {
	return &wakeWatch{sent: map[string]sentEvent{}, seen: map[string]time.Duration{}, by: map[string]int{}}
}

func (w *wakeWatch) send(id string, e sentEvent) {
	w.mu.Lock()
	w.sent[id] = e
	w.mu.Unlock()
}

// saw records ids returned to supervisor j at at.
func (w *wakeWatch) saw(j int, ids []string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		s, ok := w.sent[id]
		if _, dup := w.seen[id]; ok && !dup {
			w.seen[id] = at.Sub(s.at)
			w.by[id] = j
		}
	}
}

// stats are the measured events of phase: expected, seen, their latency
// and wakes per supervisor.
func (w *wakeWatch) stats(phase string, supervisors int) *WakeStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := &WakeStats{}
	per := make([]int, supervisors)
	var lat []time.Duration
	for id, s := range w.sent {
		if s.phase != phase || !s.measured {
			continue
		}
		st.Expected++
		if d, ok := w.seen[id]; ok {
			lat = append(lat, d)
			if j := w.by[id]; j < supervisors {
				per[j]++
			}
		}
	}
	st.Seen = len(lat)
	st.Latency = QuantilesOf(lat)
	if supervisors > 0 {
		lo, hi, sum := per[0], per[0], 0
		for _, n := range per {
			lo, hi, sum = min(lo, n), max(hi, n), sum+n
		}
		st.PerSupervisor = [3]float64{float64(lo), float64(sum) / float64(supervisors), float64(hi)}
	}
	return st
}

// missing is how many measured events of phase no supervisor has seen.
func (w *wakeWatch) missing(phase string) int {
	st := w.stats(phase, 0)
	return st.Expected - st.Seen
}

// longPoll is supervisor j reading its inbox as a harness does until ctx
// ends: GET /v1/inbox?after=…&wait=30s, note the events, ack through the
// last seq. Errors are counted; the loop goes on.
func longPoll(ctx context.Context, c *http.Client, gw string, j int, tok string, w *wakeWatch, errs *atomic.Int64) {
	var after int64
	for ctx.Err() == nil {
		var page struct {
			Entries []struct {
				Latest    json.RawMessage `json:"latest"`
				FoldedIDs []string        `json:"folded_ids"`
			} `json:"entries"`
			Next int64 `json:"next"`
		}
		err := api(ctx, c, http.MethodGet, gw+"/v1/inbox?limit=1000&wait=30s&after="+strconv.FormatInt(after, 10), tok, nil, http.StatusOK, &page)
		at := time.Now()
		if err == nil && len(page.Entries) > 0 {
			var ids []string
			for _, e := range page.Entries {
				var latest struct {
					ID string `json:"id"`
				}
				_ = json.Unmarshal(e.Latest, &latest)
				ids = append(append(ids, latest.ID), e.FoldedIDs...)
			}
			w.saw(j, ids, at)
			after = page.Next
			err = api(ctx, c, http.MethodPost, gw+"/v1/inbox/ack", tok, map[string]int64{"through_seq": after}, http.StatusOK, nil)
		}
		if err != nil && ctx.Err() == nil {
			errs.Add(1)
			select { // a failing gateway is not hammered
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// subPhase is what one subscription-set size measured.
type subPhase struct {
	res            Result
	wake           *WakeStats
	routed         int64
	worker, plusRd time.Duration // CPU per routed event, idle subtracted: the worker; the worker and Redis
}

func runSubscriptions(ctx context.Context, r *runner) error {
	o := r.o
	if o.Subscriptions < 10 || o.Supervisors < 1 || o.Sessions < 1 {
		return fmt.Errorf("need --subscriptions ≥ 10, --supervisors ≥ 1 and --sessions ≥ 1")
	}
	// The health sweep passes over every session changed since its last
	// pass once a minute, on the minute: after the registration that is
	// all of them, and it would land in one phase and not the other. It
	// is not routing; it runs at start and then not within the run.
	sys, err := r.start(ctx, "WAKEGATE_HEALTH_EVERY=24h")
	if err != nil {
		return err
	}
	defer sys.Stop()
	bl, err := r.baseline(ctx, sys, Loop{})
	if err != nil {
		return err
	}
	c := newHTTPClient(max(o.Conns, 64) + o.Supervisors)
	defer c.CloseIdleConnections()
	gw := func(i int) string { return sys.Gateways[i%len(sys.Gateways)] }

	valid := 2*(o.Duration+o.Warmup) + time.Hour
	if err := raiseRateCap(ctx, c, gw(0), valid); err != nil {
		return err
	}
	// Supervisor j hears session.awaiting_input from the sessions
	// labelled sup-j (its share of the load), through one subscription.
	supTokens := make([]string, o.Supervisors)
	err = forEach(ctx, 0, o.Supervisors, 16, func(j int) error {
		supTokens[j] = token(subSupervisor(j), "inbox subscribe", valid)
		return api(ctx, c, http.MethodPost, gw(j)+"/v1/subscriptions", supTokens[j],
			map[string]any{"types": []string{event.TypeSessionAwaitingInput}, "labels": []string{fmt.Sprintf("sup-%d", j)}}, http.StatusCreated, nil)
	})
	if err != nil {
		return fmt.Errorf("supervisors' subscriptions: %w", err)
	}

	// Register the sessions: session.spawned with their labels, 100 to a
	// batch, as a harness starting a fleet would.
	began := time.Now()
	registrar := token("session:bench-registrar", "events:push events:push:any", valid)
	const batch = 100
	err = forEach(ctx, 0, (o.Sessions+batch-1)/batch, 8, func(b int) error {
		var body bytes.Buffer
		body.WriteByte('[')
		for k := b * batch; k < min((b+1)*batch, o.Sessions); k++ {
			if k > b*batch {
				body.WriteByte(',')
			}
			s := subSession(k)
			fmt.Fprintf(&body, `{"specversion":"1.0","id":"spawn-%s","source":"bench","type":"session.spawned","subject":"session:%s","data":{"labels":["sup-%d"]}}`,
				s, s, k%o.Supervisors)
		}
		body.WriteByte(']')
		_, err := send(c, pushRequest(ctx, gw(b), registrar, body.Bytes()), http.StatusAccepted)
		return err
	})
	if err != nil {
		return fmt.Errorf("register %d sessions: %w", o.Sessions, err)
	}
	if lag, err := sys.WaitCaughtUp(ctx, 10*time.Minute); err != nil || lag.Backlog > 0 || lag.Route > 0 {
		return fmt.Errorf("registering %d sessions: still behind after 10 min (%+v): %v", o.Sessions, lag, err) //nolint:errorlint // err may be nil (a lag without an error)
	}
	r.note("registered %d sessions (session.spawned, batches of %d) in %s, derived and routed", o.Sessions, batch, time.Since(began).Round(100*time.Millisecond))

	// Subscriptions that match nothing the load sends: exact and prefix
	// types, repository globs and labels, as workers/route BenchmarkRoute
	// seeds them, owned by 500 parties.
	owners := make([]string, 500)
	for k := range owners {
		owners[k] = token(fmt.Sprintf("session:bench-n%03d", k), "subscribe", valid)
	}
	subscribe := func(from, to int) error {
		return forEach(ctx, from, to, 32, func(i int) error {
			var body map[string]any
			switch i % 4 {
			case 0:
				body = map[string]any{"types": []string{fmt.Sprintf("app%d.event", i)}}
			case 1:
				body = map[string]any{"types": []string{fmt.Sprintf("app%d.*", i)}}
			case 2:
				body = map[string]any{"subjects": []string{fmt.Sprintf("github:org%d/repo#*", i)}}
			default:
				body = map[string]any{"labels": []string{fmt.Sprintf("team-%d", i)}}
			}
			return api(ctx, c, http.MethodPost, gw(i)+"/v1/subscriptions", owners[i%len(owners)], body, http.StatusCreated, nil)
		})
	}

	watch := newWakeWatch()
	pctx, stopPolls := context.WithCancel(ctx)
	var polls sync.WaitGroup
	var pollErrs atomic.Int64
	for j := range o.Supervisors {
		polls.Add(1)
		go func() {
			defer polls.Done()
			longPoll(pctx, c, gw(j), j, supTokens[j], watch, &pollErrs)
		}()
	}
	defer func() { stopPolls(); polls.Wait() }()

	run := randomHex(3)
	next := 0 // the next session to push as: every event is about a session of its own
	interval := time.Duration(float64(time.Second) / o.Rate)
	phase := func(name string) (subPhase, error) {
		if _, err := sys.WaitCaughtUp(ctx, time.Minute); err != nil {
			return subPhase{}, err
		}
		cpu := func() (worker, both time.Duration) {
			w := sys.RoleCPU("worker")
			if sys.Private {
				return w, w + RedisCPU(ctx, sys.Redis)
			}
			return w, w
		}
		idleW, err := idleRate(ctx, func() time.Duration { w, _ := cpu(); return w }, 2*time.Second)
		if err != nil {
			return subPhase{}, err
		}
		idleB, err := idleRate(ctx, func() time.Duration { _, b := cpu(); return b }, 2*time.Second)
		if err != nil {
			return subPhase{}, err
		}
		first := next
		var calls, accepted atomic.Int64
		l := Loop{Name: name, Rate: o.Rate, Conns: max(o.Conns, 256), Duration: o.Duration, Warmup: o.Warmup}
		l.Do = func(ctx context.Context, i int64) error {
			calls.Add(1)
			s := subSession((first + int(i)) % o.Sessions)
			id := fmt.Sprintf("ask-%s-%s-%d", run, name, i)
			watch.send(id, sentEvent{phase: name, at: Intended(ctx), measured: time.Duration(i-1)*interval >= o.Warmup})
			body := []byte(`{"specversion":"1.0","id":"` + id + `","source":"bench","type":"session.awaiting_input","summary":"` + s + ` waits for input"}`)
			_, err := send(c, pushRequest(ctx, gw(int(i)), token("session:"+s, "events:push", valid), body), http.StatusAccepted)
			if err == nil {
				accepted.Add(1)
			}
			return err
		}
		w0, b0 := cpu()
		t0 := time.Now()
		res := r.loop(ctx, l)
		next = first + int(calls.Load()) + 1
		lag, err := sys.WaitCaughtUp(ctx, 2*time.Minute)
		if err != nil {
			return subPhase{}, err
		}
		if lag.Backlog > 0 || lag.Route > 0 {
			r.note("%s: the workers were still behind 2 min after the load (backlog %d, route lag %s)", name, lag.Backlog, lag.Route)
		}
		w1, b1 := cpu()
		elapsed := time.Since(t0)
		p := subPhase{routed: accepted.Load()}
		if p.routed > 0 {
			p.worker = (w1 - w0 - time.Duration(idleW*float64(elapsed))) / time.Duration(p.routed)
			p.plusRd = (b1 - b0 - time.Duration(idleB*float64(elapsed))) / time.Duration(p.routed)
		}
		res.CPUPerOp = p.plusRd
		// Every wake of the phase is seen by its supervisor before the
		// next phase starts (or the deadline passes).
		deadline := time.Now().Add(30 * time.Second)
		for watch.missing(name) > 0 && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return subPhase{}, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
		p.wake = watch.stats(name, o.Supervisors)
		r.rep.Phases = append(r.rep.Phases, res)
		p.res = res
		return p, nil
	}

	if err := subscribe(0, 10); err != nil {
		return fmt.Errorf("10 subscriptions: %w", err)
	}
	small, err := phase("route with 10 subscriptions")
	if err != nil {
		return err
	}
	began = time.Now()
	if err := subscribe(10, o.Subscriptions); err != nil {
		return fmt.Errorf("%d subscriptions: %w", o.Subscriptions, err)
	}
	r.note("created %d more subscriptions through the API in %s", o.Subscriptions-10, time.Since(began).Round(100*time.Millisecond))
	large, err := phase(fmt.Sprintf("route with %d subscriptions", o.Subscriptions))
	if err != nil {
		return err
	}
	r.rep.Wake = large.wake

	rep, n := r.rep, o.Subscriptions
	world := fmt.Sprintf("%d subscriptions that match nothing + %d sessions", n, o.Sessions)
	ratio := float64(large.worker) / float64(max(small.worker, 1))
	rep.row(fmt.Sprintf("routing one event with %s ≤ 2× with 10 (worker CPU per routed event, idle subtracted; %.0f events/s)", world, o.Rate),
		float64(large.worker)/1e3, "µs", float64(small.worker)/1e3, ratio, verdict(large.worker > 0 && small.worker > 0 && ratio <= 2))
	rep.row(fmt.Sprintf("(the same with Redis's CPU: worker + Redis per routed event with %d subscriptions, ratio to 10)", n),
		float64(large.plusRd)/1e3, "µs", float64(small.plusRd)/1e3, float64(large.plusRd)/float64(max(small.plusRd, 1)), nil)
	lw, sw := large.wake, small.wake
	rep.row(fmt.Sprintf("fact → wake p99 with %d subscriptions (intended send → long-poll answer; p50 %.1f ms; baseline: with 10), every wake seen (%d of %d)", n, msf(lw.Latency.P50), lw.Seen, lw.Expected),
		msf(lw.Latency.P99), "ms", msf(sw.Latency.P99), float64(lw.Latency.P99)/float64(max(sw.Latency.P99, 1)),
		verdict(lw.Expected > 0 && lw.Seen == lw.Expected && sw.Seen == sw.Expected))
	rep.row(fmt.Sprintf("pushes accepted at %.0f/s open loop with %d subscriptions, against the bare handler's closed-loop throughput", o.Rate, n),
		large.res.Achieved, "events/s", bl.Achieved, large.res.Achieved/bl.Achieved, verdict(errorCount(large.res) == 0 && errorCount(small.res) == 0))
	if k := pollErrs.Load(); k > 0 {
		r.note("%d long-poll or ack requests failed", k)
	}
	r.note("each event is a session.awaiting_input about a session of its own, which supervisor (k mod %d) hears through a subscription {types, labels}; the subscriptions that match nothing are exact and prefix types, repository globs and labels (as workers/route BenchmarkRoute seeds them); CPU per routed event counts derivation too and subtracts what the processes burn idle, measured for 2 s before each phase; the health sweep (not routing) runs only at start (WAKEGATE_HEALTH_EVERY=24h), so that its pass over the registered sessions lands in neither phase", o.Supervisors)
	return nil
}
