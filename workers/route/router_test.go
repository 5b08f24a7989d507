package route

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/event"
)

// world is a workspace on real Redis with every store the router reads.
type world struct {
	t     testing.TB
	ctx   context.Context
	rdb   *redis.Client
	j     *journal.Journal
	reg   *sessions.Registry
	store *ingest.Store
	subs  *subscriptions.Store
	sup   *supervision.Store
	box   *inbox.Inbox
	r     *Router
	n     int
}

const ws = "acme"

func newWorld(t testing.TB) *world {
	rdb, prefix := redistest.New(t)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 4})
	reg := sessions.New(rdb, j, time.Minute)
	dead := func(ctx context.Context, workspace, party string) (bool, error) {
		s, err := reg.Get(ctx, workspace, party, time.Now())
		return err == nil && s.Liveness == sessions.Dead, err
	}
	w := &world{t: t, ctx: context.Background(), rdb: rdb, j: j, reg: reg, store: ingest.New(rdb, j),
		subs: subscriptions.New(rdb, prefix), sup: supervision.New(rdb, prefix, dead), box: inbox.New(rdb, inbox.Config{Prefix: prefix})}
	w.r = NewRouter(rdb, j, reg, w.subs, w.sup, w.box, prometheus.NewRegistry())
	return w
}

// push commits an agent event as the gateway would and routes it.
func (w *world) push(pusher, session, typ string, data string, mods ...func(*ingest.Item)) *event.Event {
	w.t.Helper()
	w.n++
	e := &event.Event{SpecVersion: "1.0", ID: fmt.Sprint(w.n), Source: event.AgentSource(ws, pusher), Type: typ,
		Subject: event.SessionSubject(session), Workspace: ws, SessionID: session, Time: time.Now().UTC(),
		CoalesceKey: event.SessionSubject(session)}
	if data != "" {
		e.Data = json.RawMessage(data)
	}
	e.Priority = event.DefaultPriority(typ, e.Data)
	e.Terminal = event.Lookup(typ).Terminal
	it := ingest.Item{Event: e, Journal: true}
	for _, m := range mods {
		m(&it)
	}
	res, err := w.store.CommitEvents(w.ctx, ws, pusher, []ingest.Item{it}, time.Now())
	if err != nil {
		w.t.Fatal(err)
	}
	return w.route(res[0].Seq)
}

func (w *world) route(seq string) *event.Event {
	w.t.Helper()
	e, err := w.j.Get(w.ctx, seq)
	if err != nil || e == nil {
		w.t.Fatalf("get %s: %v %v", seq, e, err)
	}
	shard, _, _ := journal.ParseSeq(seq)
	if err := w.r.Handle(w.ctx, shard, e); err != nil {
		w.t.Fatalf("route %s: %v", e.ID, err)
	}
	return e
}

func (w *world) spawn(child, parent string) {
	w.t.Helper()
	lineage, err := w.reg.LineageFor(w.ctx, ws, child, parent, time.Now())
	if err != nil {
		w.t.Fatal(err)
	}
	w.push("session:"+parent, child, "session.spawned", "", func(it *ingest.Item) { it.Parent, it.Lineage = parent, lineage })
}

func (w *world) settings(patch string) {
	w.t.Helper()
	if _, err := w.sup.MergeSettings(w.ctx, ws, []byte(patch)); err != nil {
		w.t.Fatal(err)
	}
}

// inbox returns a party's unacked entries as "type×count kind" strings.
func (w *world) inbox(party string) []string {
	w.t.Helper()
	entries, _, err := w.box.List(w.ctx, ws, party, 0, false, 100)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, fmt.Sprintf("%s×%d %s", e.Type, e.Count, e.Kind))
	}
	sort.Strings(out)
	return out
}

func (w *world) want(party string, entries ...string) {
	w.t.Helper()
	sort.Strings(entries)
	if got := w.inbox(party); strings.Join(got, "; ") != strings.Join(entries, "; ") {
		w.t.Errorf("inbox of %s = %q, want %q", party, got, entries)
	}
}

func (w *world) faults() int {
	w.t.Helper()
	evs, _, err := w.j.Read(w.ctx, make(journal.Cursor, 4), journal.Filter{Workspace: ws, Types: []string{"wakegate.fault.undeliverable"}}, 1000)
	if err != nil {
		w.t.Fatal(err)
	}
	return len(evs)
}

// Field failure 1 (docs/design.md, "Why"): attention points of root sessions reached nobody.
func TestRootSessionsReachTheDefaultController(t *testing.T) {
	w := newWorld(t)
	w.settings(`{"default_controller":"session:boss"}`)
	// A root with no parent, and a root started by another supervisor.
	w.push("session:root1", "root1", "session.turn_ended", `{"idle":true}`)
	w.push("human:alice", "root2", "session.turn_ended", `{"idle":true}`)
	// boss has never made a request: unknown is a valid recipient.
	w.want("session:boss", "session.turn_ended×1 wake", "session.turn_ended×1 wake")
	// Not idle: info, a digest only.
	w.push("session:root1", "root1", "session.turn_ended", `{"idle":false}`)
	entries, _, _ := w.box.List(w.ctx, ws, "session:boss", 0, false, 100)
	if len(entries) != 2 {
		t.Fatalf("%d entries, want the info turn end folded into root1's", len(entries))
	}
}

func TestChildReachesItsParentWithoutWiring(t *testing.T) {
	w := newWorld(t)
	w.spawn("kid", "boss")
	w.push("session:kid", "kid", "session.turn_ended", `{"idle":true}`)
	w.want("session:boss", "session.turn_ended×1 wake")
	w.want("session:kid") // the subject session hears nothing of itself
	// A grandchild's crash climbs to its own parent (kid), not boss.
	w.spawn("grandkid", "kid")
	w.push("session:grandkid", "grandkid", "session.crashed", "")
	w.want("session:kid", "session.crashed×1 wake")
}

func TestDeadControllerRoutesUpTheLineage(t *testing.T) {
	w := newWorld(t)
	w.spawn("mid", "top")
	w.spawn("leaf", "mid")
	w.push("session:mid", "mid", "session.exited", "") // mid is dead now
	w.push("session:leaf", "leaf", "session.awaiting_input", "")
	w.want("session:top", "session.awaiting_input×1 wake", "session.exited×1 digest")
}

func TestNobodyToTellIsOneUndeliverableFault(t *testing.T) {
	w := newWorld(t)
	e := w.push("session:lonely", "lonely", "session.permission_requested", "")
	shard, _, _ := journal.ParseSeq(e.Seq)
	if err := w.r.Handle(w.ctx, shard, e); err != nil { // routed again after a crash
		t.Fatal(err)
	}
	if n := w.faults(); n != 1 {
		t.Fatalf("%d undeliverable faults, want exactly 1", n)
	}
	// Info reaching nobody is not a fault; with a fallback, attention is delivered.
	w.push("session:lonely", "lonely", "session.turn_started", "")
	w.settings(`{"fallback":{"party":"human:ops"}}`)
	w.push("session:lonely", "lonely", "session.awaiting_input", "")
	if n := w.faults(); n != 1 {
		t.Fatalf("%d faults after the fallback was set", n)
	}
	w.want("human:ops", "session.awaiting_input×1 wake")
}

func TestSubscriptionsObserversAndTheSender(t *testing.T) {
	w := newWorld(t)
	w.spawn("kid", "boss")
	if _, _, err := w.sup.Supervise(w.ctx, ws, "boss", "human:carol", supervision.Observer, supervision.ScopeSubtree, false, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	sub, err := subscriptions.Parse([]byte(`{"types":["message.*"]}`))
	if err != nil {
		t.Fatal(err)
	}
	sub.Workspace, sub.Owner = ws, "human:dave"
	if _, err := w.subs.Create(w.ctx, sub, time.Now()); err != nil {
		t.Fatal(err)
	}
	// boss messages its own child: boss (the sender) does not hear it,
	// the target and the subtree observer do; a message goes to the target
	// and its observers only, so the subscriber does not (docs/design.md §7).
	w.push("session:boss", "kid", "message.sent", `{"text":"stop","source":"session:boss"}`,
		func(it *ingest.Item) { it.Event.CoalesceKey = "message:1" })
	w.want("session:boss")
	w.want("session:kid", "message.sent×1 wake")
	w.want("human:carol", "message.sent×1 wake")
	w.want("human:dave")
	// The subscriber still hears other events of its types.
	w.push("session:kid", "kid", "message.other", "")
	w.want("human:dave", "message.other×1 digest")
}

// TestMessageGoesToTargetAndObserversOnly: message.sent reaches its
// target (directly, though it is the subject session) and the observers of
// the target and of its ancestors' subtrees — not the controller, not a
// subscriber, not the fallback, never the sender; each message is its own
// entry.
func TestMessageGoesToTargetAndObserversOnly(t *testing.T) {
	w := newWorld(t)
	w.settings(`{"default_controller":"session:chief","fallback":{"party":"human:ops"}}`)
	w.spawn("kid", "boss")
	observe := func(session, party, scope string) {
		t.Helper()
		if _, _, err := w.sup.Supervise(w.ctx, ws, session, party, supervision.Observer, scope, false, false, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	observe("kid", "human:erin", supervision.ScopeSelf)
	observe("boss", "human:carol", supervision.ScopeSubtree)
	observe("boss", "human:frank", supervision.ScopeSelf) // boss's own events only
	observe("kid", "session:peer", supervision.ScopeSelf) // the sender below
	sub, err := subscriptions.Parse([]byte(`{"types":["message.sent"]}`))
	if err != nil {
		t.Fatal(err)
	}
	sub.Workspace, sub.Owner = ws, "human:dave"
	if _, err := w.subs.Create(w.ctx, sub, time.Now()); err != nil {
		t.Fatal(err)
	}
	for i, text := range []string{"first", "second"} {
		w.push("session:peer", "kid", "message.sent", `{"text":"`+text+`","source":"session:peer"}`,
			func(it *ingest.Item) { it.Event.CoalesceKey = fmt.Sprint("message:session:peer:", i) })
	}
	w.want("session:kid", "message.sent×1 wake", "message.sent×1 wake")
	w.want("human:erin", "message.sent×1 wake", "message.sent×1 wake")
	w.want("human:carol", "message.sent×1 wake", "message.sent×1 wake")
	for _, p := range []string{"session:peer", "session:boss", "session:chief", "human:frank", "human:dave", "human:ops"} {
		w.want(p)
	}
	entries, _, err := w.box.List(w.ctx, ws, "session:kid", 0, false, 10)
	if err != nil || len(entries) != 2 || entries[0].Via != inbox.ViaDirect {
		t.Fatalf("target's entries %+v %v, want two via direct", entries, err)
	}
	// A message to oneself reaches only the observers; with none, it is one
	// undeliverable fault, never the fallback.
	w.push("session:lonely", "lonely", "message.sent", `{"text":"me","source":"session:lonely"}`)
	w.want("human:ops")
	if n := w.faults(); n != 1 {
		t.Fatalf("%d faults, want 1", n)
	}
}

func TestLedgerRecordsEveryDeliveryOnce(t *testing.T) {
	w := newWorld(t)
	w.settings(`{"default_controller":"session:boss"}`)
	e := w.push("session:a", "a", "session.crashed", "")
	shard, _, _ := journal.ParseSeq(e.Seq)
	for range 3 { // re-runs after crashes
		if err := w.r.Handle(w.ctx, shard, e); err != nil {
			t.Fatal(err)
		}
	}
	ledger, err := Ledger(w.ctx, w.rdb, w.j, shard)
	if err != nil {
		t.Fatal(err)
	}
	got := ledger[e.Source+" "+e.ID]
	if len(got) != 1 || got["session:boss"] == "" {
		t.Fatalf("ledger %v, want one delivery to session:boss", ledger)
	}
	w.want("session:boss", "session.crashed×1 wake")
}

// TestRoutingReadsInTwoRoundTrips: before it delivers, the router reads
// what routing an event needs — settings, the session's record, the
// subscriptions, the supervision edges up the lineage, the controller's
// liveness — in two round trips; then one per recipient (the inbox
// delivery) and one for the ledger.
func TestRoutingReadsInTwoRoundTrips(t *testing.T) {
	w := newWorld(t)
	w.spawn("mid", "boss")
	w.spawn("kid", "mid")
	if _, _, err := w.sup.Supervise(w.ctx, ws, "boss", "human:carol", supervision.Observer, supervision.ScopeSubtree, false, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	sub, err := subscriptions.Parse([]byte(`{"types":["session.awaiting_input"]}`))
	if err != nil {
		t.Fatal(err)
	}
	sub.Workspace, sub.Owner = ws, "human:dave"
	if _, err := w.subs.Create(w.ctx, sub, time.Now()); err != nil {
		t.Fatal(err)
	}
	w.push("session:kid", "kid", "session.awaiting_input", "") // the scripts are loaded from here on
	count := &redistest.RoundTrips{}
	w.rdb.AddHook(count)
	before := count.Count()
	w.push("session:kid", "kid", "session.awaiting_input", "", func(it *ingest.Item) { it.Event.CoalesceKey = "q2" })
	// The commit (one script) and the journal read of the test's push, then
	// routing to session:mid (controller), human:carol (observer) and
	// human:dave (subscriber).
	if n := count.Count() - before; n != 2+2+3+1 {
		t.Errorf("%d round trips to commit, read back and route an event to 3 recipients, want 8 (2 to read, 3 to deliver, 1 ledger)", n)
	}
	w.want("session:mid", "session.awaiting_input×1 wake", "session.awaiting_input×1 wake")
	w.want("human:carol", "session.awaiting_input×1 wake", "session.awaiting_input×1 wake")
	w.want("human:dave", "session.awaiting_input×1 wake", "session.awaiting_input×1 wake")
}

// What the tracker derives about a linked PR carries the author's
// sessionid but no lineage: it reaches the author's whole chain as the
// author's own events do — the nearest live ancestor's controller after
// the parent exited, a subtree observer and a subtree subscriber of the
// root.
func TestDerivedEventsReachTheAuthorsChain(t *testing.T) {
	w := newWorld(t)
	w.spawn("mid", "root")
	w.spawn("kid", "mid")
	if _, _, err := w.sup.Supervise(w.ctx, ws, "root", "human:carol", supervision.Observer, supervision.ScopeSubtree, false, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	sub, err := subscriptions.Parse([]byte(`{"session":{"id":"root","scope":"subtree"}}`))
	if err != nil {
		t.Fatal(err)
	}
	sub.Workspace, sub.Owner = ws, "human:dave"
	if _, err := w.subs.Create(w.ctx, sub, time.Now()); err != nil {
		t.Fatal(err)
	}
	w.settings(`{"default_controller":"human:default"}`)
	w.push("session:mid", "mid", "session.exited", "")
	pr := &event.Event{SpecVersion: "1.0", ID: "pr/7/ready/abc", Source: event.GitHubSource("org/repo"),
		Type: "github.pull_request.ready", Subject: "github:org/repo#7", Workspace: ws, SessionID: "kid",
		Time: time.Now().UTC(), Priority: event.Attention, CoalesceKey: "github:org/repo#7"}
	seq, _, err := w.j.Append(w.ctx, pr)
	if err != nil {
		t.Fatal(err)
	}
	routed := w.route(seq)
	if len(routed.Lineage) != 0 {
		t.Fatalf("the journaled event carries lineage %v: the test needs one without", routed.Lineage)
	}
	w.want("session:root", "github.pull_request.ready×1 wake", "session.exited×1 digest")
	w.want("human:carol", "github.pull_request.ready×1 wake", "session.exited×1 digest")
	w.want("human:dave", "github.pull_request.ready×1 wake", "session.exited×1 digest")
	w.want("human:default")
	entries, _, err := w.box.List(w.ctx, ws, "session:root", 0, false, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		var got event.Event
		if en.Type == pr.Type && (json.Unmarshal(en.Event, &got) != nil || strings.Join(got.Lineage, " ") != "mid root") {
			t.Errorf("root's entry carries lineage %v, want [mid root] (escalation climbs it)", got.Lineage)
		}
	}
}
