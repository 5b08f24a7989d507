package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wakegate/wakegate/delivery/outbound"
	"github.com/wakegate/wakegate/providers/event"
)

// The fleet's push side: a few people (human: parties) with push
// endpoints on a receiver in this process, each subscribed to the
// attention-or-higher events of some worker sessions' subjects. During
// the load, those sessions also end turns in bursts (two idle turn ends
// 20 ms apart), so a second event folds into an entry whose push was
// already decided: the push's 2xx must leave the party caught up with
// what it was sent, and the fold be pushed again (docs/design.md §7).
// After the drain, nothing may be left unacked in their inboxes.
const (
	fleetWatchers       = 3                      // people with push endpoints
	fleetWatchedPer     = 4                      // worker sessions each of them watches
	fleetBurstEvery     = 200 * time.Millisecond // one burst on one watched session
	fleetBurstGap       = 20 * time.Millisecond  // between a burst's two turn ends
	fleetPushDrainLimit = time.Minute            // how long the drain may take
)

// watcher is one person of the push side.
type watcher struct {
	party, tok string
	subjects   []string // the session subjects it subscribes to
	sessions   []member
}

// pushSide is the fleet's people and the receiver of their pushes.
type pushSide struct {
	watchers []*watcher
	srv      *http.Server
	url      string

	mu       sync.Mutex
	secrets  map[string]string // party → its endpoint's secret
	received int               // pushes that passed the checks
	ids      map[string]bool   // webhook-ids received
	bursts   int               // burst turn ends accepted
	bad      int
	badEx    string
}

// newPushSide picks the watchers and their sessions: watcher k watches
// sessions k, k+W, k+2W, … among the first W×fleetWatchedPer.
func newPushSide(members []member, valid time.Duration) *pushSide {
	ps := &pushSide{secrets: map[string]string{}, ids: map[string]bool{}}
	n := min(len(members), fleetWatchers*fleetWatchedPer)
	for k := range min(fleetWatchers, n) {
		w := &watcher{party: fmt.Sprintf("human:bench-watch-%d", k)}
		w.tok = token(w.party, "inbox subscribe", valid)
		for j := k; j < n; j += fleetWatchers {
			w.sessions = append(w.sessions, members[j])
			w.subjects = append(w.subjects, members[j].party)
		}
		ps.watchers = append(ps.watchers, w)
	}
	return ps
}

// start runs the receiver and gives each watcher its endpoint and its
// subscription, through the API as a harness would.
func (ps *pushSide) start(ctx context.Context, c *http.Client, gw string) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("push receiver: %w", err)
	}
	ps.srv = &http.Server{Handler: ps, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = ps.srv.Serve(l) }()
	ps.url = "http://" + l.Addr().String()
	for _, w := range ps.watchers {
		var ep struct {
			Secret string `json:"secret"`
		}
		if err := api(ctx, c, http.MethodPut, gw+"/v1/endpoints/"+w.party, w.tok,
			map[string]string{"url": ps.url + "/" + w.party}, http.StatusCreated, &ep); err != nil {
			return fmt.Errorf("endpoint of %s: %w", w.party, err)
		}
		ps.mu.Lock()
		ps.secrets[w.party] = ep.Secret
		ps.mu.Unlock()
		if err := api(ctx, c, http.MethodPost, gw+"/v1/subscriptions", w.tok,
			map[string]any{"subjects": w.subjects, "min_priority": "attention"}, http.StatusCreated, nil); err != nil {
			return fmt.Errorf("subscription of %s: %w", w.party, err)
		}
	}
	return nil
}

func (ps *pushSide) stop() {
	if ps.srv != nil {
		_ = ps.srv.Close()
	}
}

// ServeHTTP is every watcher's endpoint, /<party>: it checks the
// delivery's Standard Webhooks signature under that party's secret and
// that the push names that party, and answers 204.
func (ps *pushSide) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	party := strings.TrimPrefix(r.URL.Path, "/")
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var msg struct {
		Party string `json:"party"`
	}
	if err == nil {
		err = json.Unmarshal(body, &msg)
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	secret := ps.secrets[party]
	switch {
	case err != nil:
		ps.fail("%s: unreadable body: %v", party, err)
	case secret == "":
		ps.fail("%s: no such watcher", party)
	case msg.Party != party:
		ps.fail("%s: a push for %s", party, msg.Party)
	default:
		if verr := outbound.Verify(secret, r.Header, body, at, 5*time.Minute); verr != nil {
			ps.fail("%s: %v", party, verr)
			break
		}
		ps.received++
		ps.ids[r.Header.Get("webhook-id")] = true
	}
	w.WriteHeader(http.StatusNoContent)
}

func (ps *pushSide) fail(format string, args ...any) {
	ps.bad++
	if ps.badEx == "" {
		ps.badEx = fmt.Sprintf(format, args...)
	}
}

// hears lists the watchers that the routing rules (docs/design.md §5) make hear
// e through their subscriptions: e's subject is one they watch and its
// priority attention or more.
func (ps *pushSide) hears(e *event.Event) []string {
	p := e.Priority
	if p == "" {
		p = event.DefaultPriority(e.Type, e.Data)
	}
	if p.Rank() < event.Attention.Rank() {
		return nil
	}
	var out []string
	for _, w := range ps.watchers {
		if slices.Contains(w.subjects, e.Subject) && w.party != causer(e) {
			out = append(out, w.party)
		}
	}
	return out
}

// bursts ends turns on the watched sessions in bursts until ctx ends:
// every fleetBurstEvery one watched session (in turn) ends two idle
// turns fleetBurstGap apart.
func (f *fleet) bursts(ctx context.Context) {
	var watched []member
	for _, w := range f.people.watchers {
		watched = append(watched, w.sessions...)
	}
	if len(watched) == 0 {
		return
	}
	t := time.NewTicker(fleetBurstEvery)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m := watched[n%len(watched)]
		for k, gap := range []time.Duration{0, fleetBurstGap} {
			select {
			case <-ctx.Done():
				return
			case <-time.After(gap): // the gap the burst is about, not a wait for an outcome
			}
			id := fmt.Sprintf("burst-%d-%d", n, k)
			if err := f.push(ctx, int64(n), m, id, event.TypeSessionTurnEnded, "turn ended", map[string]any{"idle": true}); err == nil {
				f.people.mu.Lock()
				f.people.bursts++
				f.people.mu.Unlock()
			}
		}
	}
}

// pushDrain waits (polling, at most fleetPushDrainLimit) until the
// watchers' inboxes are empty, then reads what is left unacked in them:
// each left entry is a subject whose pushes went silent.
func (f *fleet) pushDrain(ctx context.Context) (Invariant, error) {
	inv := Invariant{Name: "push side: entries left unacked in the inboxes of the parties with push endpoints, after the drain"}
	deadline := time.Now().Add(fleetPushDrainLimit)
	for {
		inv.Count, inv.Example = 0, ""
		for _, w := range f.people.watchers {
			var page inboxPage
			if err := api(ctx, f.c, http.MethodGet, f.sys.Gateways[0]+"/v1/inbox?limit=1000", w.tok, nil, http.StatusOK, &page); err != nil {
				return inv, fmt.Errorf("inbox of %s: %w", w.party, err)
			}
			for _, e := range page.Entries {
				inv.add(fmt.Sprintf("%s: %s at seq %d (%s, %d folded, latest %s)", w.party, e.CoalesceKey, e.Seq, e.Priority, len(e.FoldedIDs), e.Latest.ID))
			}
		}
		if err := ctx.Err(); err != nil {
			return inv, err
		}
		if inv.Count == 0 || time.Now().After(deadline) {
			return inv, nil
		}
		select { // a pause before reading again, not a wait for an outcome
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// pushFigures is what the push side measured.
type pushFigures struct {
	received, distinct int     // pushes that passed the receiver's checks; distinct webhook-ids
	decided, rewakes   float64 // wakes decided for a party with an endpoint (pushes enqueued), of which at a push's 2xx
	metricsErr         error
	bad                int
	badEx              string
}

func (f *fleet) pushFigures(ctx context.Context) pushFigures {
	ps := f.people
	ps.mu.Lock()
	pf := pushFigures{received: ps.received, distinct: len(ps.ids), bad: ps.bad, badEx: ps.badEx}
	ps.mu.Unlock()
	pf.decided, pf.metricsErr = f.sys.WorkerMetric(ctx, "wakegate_push_enqueued_total")
	if pf.metricsErr == nil {
		pf.rewakes, pf.metricsErr = f.sys.WorkerMetric(ctx, "wakegate_push_rewakes_total")
	}
	return pf
}

// WorkerMetric is the sum of an unlabelled counter over the running
// workers' /metrics (a killed worker's count is lost).
func (s *System) WorkerMetric(ctx context.Context, name string) (float64, error) {
	s.mu.Lock()
	var addrs []string
	for _, p := range s.procs {
		if p.role == "worker" && !exited(p) {
			addrs = append(addrs, p.addr)
		}
	}
	s.mu.Unlock()
	var sum float64
	for _, a := range addrs {
		v, err := scrapeCounter(ctx, "http://"+a+"/metrics", name)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// scrapeCounter reads one unlabelled sample from a Prometheus text page.
func scrapeCounter(ctx context.Context, url, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("scrape %s: %w", url, err)
	}
	return 0, fmt.Errorf("scrape %s: no %s", url, name)
}

// pushRows adds the push side's figures: pushes received per decided
// wake (its verdicts are the invariants: nothing left unacked, every
// push passing the receiver's checks).
func (f *fleet) pushRows(r *runner, pf pushFigures) {
	ps := f.people
	watched := 0
	for _, w := range ps.watchers {
		watched += len(w.sessions)
	}
	ps.mu.Lock()
	bursts := ps.bursts
	ps.mu.Unlock()
	if pf.metricsErr != nil {
		r.note("push side: the workers' push counters could not be read: %v", pf.metricsErr)
		return
	}
	perWake := 0.0
	if pf.decided > 0 {
		perWake = float64(pf.received) / pf.decided
	}
	r.rep.row(fmt.Sprintf("%s push side (%d people with push endpoints watching %d sessions, %d burst turn ends %s apart): pushes received per decided wake (%d received, %.0f decided of which %.0f re-decided at a push's 2xx)",
		f.o.Scenario, len(ps.watchers), watched, bursts, fleetBurstGap, pf.received, pf.decided, pf.rewakes),
		perWake, "pushes/wake", 0, 0, nil)
	if pf.distinct != pf.received {
		r.note("push side: %d pushes received under %d webhook-ids (a push retried after an attempt the receiver had answered)", pf.received, pf.distinct)
	}
	r.note("push side: %d pushes received for %.0f decided wakes (%.3g per wake), %.0f of them re-decided at a push's 2xx for an entry that folded past its push; decided wakes are the workers' wakegate_push_enqueued_total (a killed worker's count is lost), re-decided ones wakegate_push_rewakes_total; after the drain every entry in the people's inboxes must be acked by a push's 2xx",
		pf.received, pf.decided, perWake, pf.rewakes)
}
