package bench

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// supervisorSet is the fleet's supervisors: each long-polls its inbox
// (GET /v1/inbox?wait=30s&after=<seq>) and acks what it was given, as a
// supervising agent's harness does.
type supervisorSet struct {
	tracker *wakeTracker
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	c       *http.Client
}

func startSupervisors(ctx context.Context, f *fleet) *supervisorSet {
	ctx, cancel := context.WithCancel(ctx)
	s := &supervisorSet{tracker: f.wakes, cancel: cancel, c: newHTTPClient(len(f.sups))}
	for k, m := range f.sups {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.poll(ctx, f.gateway(int64(k)), m)
		}()
	}
	return s
}

// inboxPage is the part of GET /v1/inbox's answer a supervisor reads.
type inboxPage struct {
	Entries []struct {
		Seq         int64    `json:"seq"`
		CoalesceKey string   `json:"coalesce_key"`
		Priority    string   `json:"priority"`
		Wake        bool     `json:"wake"`
		FoldedIDs   []string `json:"folded_ids"`
		Latest      struct {
			ID string `json:"id"`
		} `json:"latest"`
	} `json:"entries"`
	Next int64 `json:"next"`
}

// poll long-polls m's inbox from gateway until ctx ends, acking through
// every answer's next.
func (s *supervisorSet) poll(ctx context.Context, gateway string, m member) {
	var after int64
	for ctx.Err() == nil {
		var page inboxPage
		url := gateway + "/v1/inbox?limit=1000&wait=30s&after=" + strconv.FormatInt(after, 10)
		err := api(ctx, s.c, http.MethodGet, url, m.tok, nil, http.StatusOK, &page)
		at := time.Now()
		if err == nil {
			s.tracker.saw(m.party, &page, at)
			if page.Next > after {
				err = api(ctx, s.c, http.MethodPost, gateway+"/v1/inbox/ack", m.tok, map[string]int64{"through_seq": page.Next}, http.StatusOK, nil)
				after = page.Next
			}
		}
		if err != nil && ctx.Err() == nil {
			s.tracker.failed(err)
			select { // a pause before asking again, not a wait for an outcome
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// waitSeen polls until every expected wake was seen, or within.
func (s *supervisorSet) waitSeen(ctx context.Context, within time.Duration) {
	deadline := time.Now().Add(within)
	for s.tracker.missing() > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *supervisorSet) stop() {
	s.cancel()
	s.wg.Wait()
	s.c.CloseIdleConnections()
}

// wakeTracker joins the facts that must wake a supervisor (each with its
// intended send time) with the long-poll answers that carried them.
type wakeTracker struct {
	mu    sync.Mutex
	want  map[string]wantWake  // fact id → who must hear it, and when it was due
	seen  map[string]time.Time // fact id → first answer carrying it
	wakes map[string]int       // supervisor → long-poll answers with entries
	bad   map[string]int       // answers breaking invariant I5 (docs/design.md §9), by kind
	errs  map[string]int       // failed long-polls and acks, by kind
	ex    map[string]string    // an example of each bad kind
}

type wantWake struct {
	sup, kind string
	at        time.Time
}

func newWakeTracker() *wakeTracker {
	return &wakeTracker{want: map[string]wantWake{}, seen: map[string]time.Time{}, wakes: map[string]int{},
		bad: map[string]int{}, errs: map[string]int{}, ex: map[string]string{}}
}

// expect records that fact id of a kind, due at at, must wake sup.
func (t *wakeTracker) expect(id, sup, kind string, at time.Time) {
	t.mu.Lock()
	t.want[id] = wantWake{sup: sup, kind: kind, at: at}
	t.mu.Unlock()
}

// forget drops an expected wake the check found was not due.
func (t *wakeTracker) forget(id string) {
	t.mu.Lock()
	delete(t.want, id)
	t.mu.Unlock()
}

// saw records an answer of sup's long-poll, received at at: every id its
// entries carry, and what invariant I5 (docs/design.md §9) forbids — an info entry that woke,
// two unacked entries of one coalesce key.
func (t *wakeTracker) saw(sup string, p *inboxPage, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(p.Entries) > 0 {
		t.wakes[sup]++
	}
	keys := map[string]bool{}
	for _, e := range p.Entries {
		for _, id := range append(e.FoldedIDs, e.Latest.ID) {
			if _, ok := t.seen[id]; !ok && id != "" {
				t.seen[id] = at
			}
		}
		if e.Priority == "info" && e.Wake {
			t.violation("info entry woke its reader", fmt.Sprintf("%s seq %d (%s)", sup, e.Seq, e.CoalesceKey))
		}
		if keys[e.CoalesceKey] {
			t.violation("two unacked entries of one coalesce key", fmt.Sprintf("%s: %s", sup, e.CoalesceKey))
		}
		keys[e.CoalesceKey] = true
	}
}

func (t *wakeTracker) violation(kind, example string) {
	t.bad[kind]++
	if t.ex[kind] == "" {
		t.ex[kind] = example
	}
}

func (t *wakeTracker) failed(err error) {
	t.mu.Lock()
	t.errs[errorKind(err)]++
	t.mu.Unlock()
}

// missing is how many expected wakes no answer carried yet.
func (t *wakeTracker) missing() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for id := range t.want {
		if _, ok := t.seen[id]; !ok {
			n++
		}
	}
	return n
}

// stats is fact → wake latency of the facts due in [from, from+dur).
func (t *wakeTracker) stats(from time.Time, dur time.Duration, sups []string) *WakeStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	ws := &WakeStats{}
	var all []time.Duration
	bySecond := map[int][]time.Duration{}
	for id, w := range t.want {
		if w.at.Before(from) || !w.at.Before(from.Add(dur)) {
			continue
		}
		ws.Expected++
		at, ok := t.seen[id]
		if !ok {
			continue
		}
		ws.Seen++
		lat := max(0, at.Sub(w.at))
		all = append(all, lat)
		sec := int(w.at.Sub(from) / time.Second)
		bySecond[sec] = append(bySecond[sec], lat)
	}
	ws.Latency = QuantilesOf(all)
	for sec := range int(dur/time.Second) + 1 {
		if d := bySecond[sec]; len(d) > 0 {
			q := QuantilesOf(d)
			ws.Series = append(ws.Series, Second{At: sec, Done: len(d), P50: q.P50, P99: q.P99})
		}
	}
	if len(sups) > 0 {
		lo, hi, sum := t.wakes[sups[0]], 0, 0
		for _, s := range sups {
			n := t.wakes[s]
			lo, hi, sum = min(lo, n), max(hi, n), sum+n
		}
		ws.PerSupervisor = [3]float64{float64(lo), float64(sum) / float64(len(sups)), float64(hi)}
	}
	return ws
}

// byKind is fact → wake latency per kind of fact, for a note on where
// the time goes.
func (t *wakeTracker) byKind(from time.Time, dur time.Duration) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lat := map[string][]time.Duration{}
	for id, w := range t.want {
		if at, ok := t.seen[id]; ok && !w.at.Before(from) && w.at.Before(from.Add(dur)) {
			lat[w.kind] = append(lat[w.kind], max(0, at.Sub(w.at)))
		}
	}
	kinds := make([]string, 0, len(lat))
	for k := range lat {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var parts []string
	for _, k := range kinds {
		q := QuantilesOf(lat[k])
		parts = append(parts, fmt.Sprintf("%s p50 %s p99 %s (%d)", k, ms(q.P50), ms(q.P99), q.N))
	}
	return strings.Join(parts, "; ")
}

// split is fact → wake latency of the facts due within [at, at+after]
// of one of the times given (each the second a sampler saw something,
// such as an AOF rewrite) and of the others.
func (t *wakeTracker) split(from time.Time, dur time.Duration, times []time.Time, after time.Duration) (in, out Quantiles) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var li, lo []time.Duration
	for id, w := range t.want {
		at, ok := t.seen[id]
		if !ok || w.at.Before(from) || !w.at.Before(from.Add(dur)) {
			continue
		}
		near := false
		for _, s := range times {
			if !w.at.Before(s.Add(-time.Second)) && !w.at.After(s.Add(after)) {
				near = true
				break
			}
		}
		if near {
			li = append(li, max(0, at.Sub(w.at)))
		} else {
			lo = append(lo, max(0, at.Sub(w.at)))
		}
	}
	return QuantilesOf(li), QuantilesOf(lo)
}

// unseen names a few expected wakes no answer carried.
func (t *wakeTracker) unseen(n int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for id, w := range t.want {
		if _, ok := t.seen[id]; !ok && len(out) < n {
			out = append(out, fmt.Sprintf("%s (to %s, due %s)", id, w.sup, w.at.Format("15:04:05.000")))
		}
	}
	return out
}
