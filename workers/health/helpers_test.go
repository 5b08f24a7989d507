package health_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/outbound"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/github"
	"github.com/wakegate/wakegate/workers/health"
	"github.com/wakegate/wakegate/workers/route"
)

// The tests run on real Redis (redistest), each under its own prefix,
// with every store the sweep reads and the real router, routed by hand
// (routeAll) on a clock the test sets, so time-based conditions are
// checked at chosen instants. Journal positions are real time (XADD *):
// the test clock starts at the real now.

const ws = "acme"

// ttl is the session TTL of the world: long, so liveness horizons stay
// out of the way unless a test wants them.
const ttl = 24 * time.Hour

type world struct {
	t      *testing.T
	ctx    context.Context
	rdb    *redis.Client
	prefix string
	j      *journal.Journal
	reg    *sessions.Registry
	ing    *ingest.Store
	subs   *subscriptions.Store
	sup    *supervision.Store
	box    *inbox.Inbox
	eps    *outbound.Endpoints
	tr     *tracker.Tracker
	esc    *fakeEscalator
	router *route.Router
	cfg    health.Config
	sw     *health.Sweeper
	t0     time.Time
	now    time.Time // the clock of commits and routing

	mu     sync.Mutex
	cursor journal.Cursor
	n      int
}

// fakeEscalator records the timers the sweep (and the router) schedule.
type fakeEscalator struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeEscalator) Schedule(_ context.Context, workspace, party string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, workspace+"/"+party)
	return nil
}

func (f *fakeEscalator) Armed(ctx context.Context, workspace, party string, _ time.Time) error {
	return f.Schedule(ctx, workspace, party)
}

func (f *fakeEscalator) count(party string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == ws+"/"+party {
			n++
		}
	}
	return n
}

func newWorld(t *testing.T, cfg health.Config) *world {
	t.Helper()
	rdb, prefix := redistest.New(t)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 4})
	w := &world{t: t, ctx: context.Background(), rdb: rdb, prefix: prefix, j: j,
		reg: sessions.New(rdb, j, ttl), ing: ingest.New(rdb, j), subs: subscriptions.New(rdb, prefix),
		box: inbox.New(rdb, inbox.Config{Prefix: prefix}), eps: outbound.NewEndpoints(rdb, prefix, &outbound.Guard{AllowPrivate: true}),
		tr: tracker.New(rdb, j, tracker.Config{}), esc: &fakeEscalator{},
		t0: time.Now().Truncate(time.Millisecond), cursor: make(journal.Cursor, 4)}
	w.now = w.t0
	w.sup = supervision.New(rdb, prefix, func(ctx context.Context, workspace, party string) (bool, error) {
		s, err := w.reg.Get(ctx, workspace, party, w.now)
		return err == nil && s.Liveness == sessions.Dead, err
	})
	w.router = route.NewRouter(rdb, j, w.reg, w.subs, w.sup, w.box, prometheus.NewRegistry()).
		WithEscalation(w.esc).WithClock(func() time.Time { return w.now })
	cfg.Prefix, cfg.SessionTTL = prefix, ttl
	w.cfg = cfg
	w.sw = w.sweeper()
	return w
}

// sweeper is another sweeper on the world's Redis: another process.
func (w *world) sweeper() *health.Sweeper {
	return health.New(health.Deps{Redis: w.rdb, Journal: w.j, Sessions: w.reg, Subs: w.subs, Sup: w.sup, Inbox: w.box,
		Endpoints: w.eps, Tracker: w.tr, Escalator: w.esc, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registerer: prometheus.NewRegistry()}, w.cfg)
}

// at is the test clock's start plus d.
func (w *world) at(d time.Duration) time.Time { return w.t0.Add(d) }

// push commits an agent event about session as pusher would, at w.now.
func (w *world) push(pusher, session, typ, data string, mods ...func(*ingest.Item)) {
	w.t.Helper()
	w.n++
	e := &event.Event{SpecVersion: "1.0", ID: fmt.Sprintf("%s-%d", typ, w.n), Source: event.AgentSource(ws, pusher), Type: typ,
		Subject: event.SessionSubject(session), Workspace: ws, SessionID: session, Time: w.now.UTC()}
	if data != "" {
		e.Data = json.RawMessage(data)
	}
	e.Priority = event.DefaultPriority(typ, e.Data)
	e.Terminal = event.Lookup(typ).Terminal
	it := ingest.Item{Event: e, Journal: typ != "session.heartbeat"}
	for _, m := range mods {
		m(&it)
	}
	if _, err := w.ing.CommitEvents(w.ctx, ws, pusher, []ingest.Item{it}, w.now); err != nil {
		w.t.Fatal(err)
	}
}

// spawn records child under parent (parent "" for a root) as the gateway
// does: the child pushes its own spawn.
func (w *world) spawn(child, parent string) {
	w.t.Helper()
	w.push("session:"+child, child, "session.spawned", "", func(it *ingest.Item) {
		if parent == "" {
			return
		}
		lineage, err := w.reg.LineageFor(w.ctx, ws, child, parent, w.now)
		if err != nil {
			w.t.Fatal(err)
		}
		it.Parent, it.Lineage = parent, lineage
	})
}

// message journals message.sent from sender to target, as the gateway does.
func (w *world) message(sender, target, intent string) {
	w.t.Helper()
	w.n++
	data, _ := json.Marshal(map[string]any{"text": "do it", "intent": intent, "source": sender})
	e := &event.Event{SpecVersion: "1.0", ID: fmt.Sprintf("msg-%d", w.n), Source: event.AgentSource(ws, sender), Type: "message.sent",
		Subject: event.SessionSubject(target), Time: w.now.UTC(), Workspace: ws, SessionID: target,
		Priority: event.DefaultPriority("message.sent", data), CoalesceKey: fmt.Sprintf("message:%s:%d", sender, w.n), Data: data}
	if _, err := w.ing.CommitEvents(w.ctx, ws, sender, []ingest.Item{{Event: e, Journal: true}}, w.now); err != nil {
		w.t.Fatal(err)
	}
}

// settings patches the workspace settings.
func (w *world) settings(patch string) {
	w.t.Helper()
	if _, err := w.sup.MergeSettings(w.ctx, ws, []byte(patch)); err != nil {
		w.t.Fatal(err)
	}
}

// routeAll routes every journal entry of the workspace not routed yet,
// as the router's consumers would.
func (w *world) routeAll() {
	w.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		evs, next, err := w.j.Read(w.ctx, w.cursor, journal.Filter{Workspace: ws}, 1000)
		if err != nil {
			w.t.Fatal(err)
		}
		for _, e := range evs {
			shard, _, _ := journal.ParseSeq(e.Seq)
			if err := w.router.Handle(w.ctx, shard, e); err != nil {
				w.t.Fatalf("route %s %s: %v", e.Type, e.ID, err)
			}
		}
		if next.String() == w.cursor.String() {
			return
		}
		w.cursor = next
	}
}

// sweep runs one periodic pass of sw at now.
func (w *world) sweep(sw *health.Sweeper, now time.Time) health.Stats {
	w.t.Helper()
	st, err := sw.Sweep(w.ctx, now)
	if err != nil {
		w.t.Fatalf("sweep at +%s: %v", now.Sub(w.t0), err)
	}
	return st
}

// report answers the report at now.
func (w *world) report(now time.Time) *health.Report {
	w.t.Helper()
	r, err := w.sw.Report(w.ctx, ws, now)
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

// ofType lists the journaled events of a type.
func (w *world) ofType(typ string) []*event.Event {
	w.t.Helper()
	var out []*event.Event
	cur := make(journal.Cursor, 4)
	for {
		evs, next, err := w.j.Read(w.ctx, cur, journal.Filter{Workspace: ws, Types: []string{typ}}, 1000)
		if err != nil {
			w.t.Fatal(err)
		}
		out = append(out, evs...)
		if next.String() == cur.String() {
			return out
		}
		cur = next
	}
}

func ids(evs []*event.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	slices.Sort(out)
	return out
}

// inv returns a report's row of an invariant.
func inv(t *testing.T, r *health.Report, id string) health.Invariant {
	t.Helper()
	for _, row := range r.Invariants {
		if row.ID == id {
			return row
		}
	}
	t.Fatalf("report has no %s: %+v", id, r)
	return health.Invariant{}
}

// examples renders a row's examples as one string, for matching.
func examples(row health.Invariant) string {
	var b strings.Builder
	for _, e := range row.Examples {
		b.Write(e)
		b.WriteByte('\n')
	}
	return b.String()
}

// pr builds a pull_request fact for repo#n at head.
func pr(repo, action string, n int, head string, updated time.Time, mods ...func(*github.PRFact)) *github.Fact {
	p := &github.PRFact{Number: n, Action: action, State: "open", Head: head, Base: "main", Author: "octocat",
		Title: "Add feature", UpdatedAt: updated}
	for _, m := range mods {
		m(p)
	}
	data, _ := json.Marshal(map[string]any{"repo": repo, "number": n, "action": action, "head": head, "draft": p.Draft})
	f := &github.Fact{Event: "pull_request", Action: action, Repo: repo, Type: "github.pull_request." + action,
		Subject: event.PRSubject(repo, n), Time: updated, Summary: fmt.Sprintf("PR #%d %s", n, action), Data: data, PR: p}
	if action == "closed" {
		p.State, p.ClosedAt, p.Merged = "closed", updated, true
		f.ID = fmt.Sprintf("pr/%d/closed/%s", n, updated.Format(time.RFC3339))
		f.Terminal = true
	}
	f.Priority = event.DefaultPriority(f.Type, f.Data)
	return f
}

// checkRun builds a completed check run at sha for PR n.
func checkRun(repo, sha, name, result string, when time.Time, n int) *github.Fact {
	data, _ := json.Marshal(map[string]any{"repo": repo, "sha": sha, "name": name, "result": result})
	f := &github.Fact{Event: "check_run", Action: "completed", Repo: repo, Type: "github.check_run.completed", Time: when,
		Check:   &github.CheckFact{SHA: sha, Name: name, Result: result, At: when, PRs: []int{n}},
		Summary: "check " + name + " " + result, Data: data}
	f.Priority = event.DefaultPriority(f.Type, f.Data)
	return f
}

// apply folds a GitHub fact into the tracker at w.now.
func (w *world) apply(f *github.Fact) {
	w.t.Helper()
	w.n++
	if _, err := w.tr.Apply(w.ctx, ws, fmt.Sprintf("guid-%d", w.n), f, w.now); err != nil {
		w.t.Fatal(err)
	}
}
