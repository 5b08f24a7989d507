package route

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/event"
)

// A batch prefetches the subscriptions of the events that need no session
// labels, each used once; an event after a terminal event of its own
// subject (which closes subscriptions) is matched afresh, and an event
// about a session is matched with the batch's first reads.
func TestBatchPrefetch(t *testing.T) {
	rdb, prefix := redistest.New(t)
	subs := subscriptions.New(rdb, prefix)
	ctx := context.Background()
	sub, err := subscriptions.Parse([]byte(`{"subjects": ["github:o/r#1"], "until": "subject_terminal"}`))
	if err != nil {
		t.Fatal(err)
	}
	sub.Workspace, sub.Owner = "ws", "human:ops"
	if _, err := subs.Create(ctx, sub, time.Now()); err != nil {
		t.Fatal(err)
	}
	mk := func(typ, subject, session string, terminal bool) *event.Event {
		return &event.Event{SpecVersion: "1.0", ID: typ, Source: "//t", Type: typ, Subject: subject, Workspace: "ws",
			SessionID: session, Terminal: terminal, Priority: event.Attention, Time: time.Now()}
	}
	closed := mk("github.pull_request.closed", "github:o/r#1", "", true)
	after := mk("github.pull_request.labeled", "github:o/r#1", "", false)
	other := mk("github.pull_request.opened", "github:o/r#2", "", false)
	session := mk("session.awaiting_input", "session:a", "a", false)
	b := batchFrom(withBatch(ctx, []*event.Event{closed, after, other, session}))

	c, ok := b.prefetched(ctx, closed, subs)
	if !ok || len(subs.MatchFrom(ctx, closed, c)) != 1 {
		t.Fatalf("terminal event: prefetched %v, %d candidates; want its subscription", ok, len(c))
	}
	if _, ok := b.prefetched(ctx, closed, subs); ok {
		t.Error("a prefetched result was handed out twice (a retry must read again)")
	}
	if _, ok := b.prefetched(ctx, after, subs); ok {
		t.Error("an event after its subject's terminal event used the prefetched subscriptions")
	}
	if c, ok := b.prefetched(ctx, other, subs); !ok || len(c) != 0 {
		t.Errorf("other subject: prefetched %v, %d candidates; want true, 0", ok, len(c))
	}
	if _, ok := b.prefetched(ctx, session, subs); ok {
		t.Error("an event about a session used the batch's match call (it is matched with the batch's first reads)")
	}
	var none *batch
	if _, ok := none.prefetched(ctx, other, subs); ok {
		t.Error("no batch, yet prefetched")
	}
}

// A batch reads the settings of a workspace with several routed events
// once, before they are routed concurrently; a workspace with one routed
// event reads its own in its gather pipeline.
func TestBatchPrefetchSettings(t *testing.T) {
	w := newWorld(t)
	w.settings(`{"default_controller":"human:boss"}`)
	mk := func(id, workspace string) *event.Event {
		return &event.Event{SpecVersion: "1.0", ID: id, Source: "//t", Type: "github.pull_request.opened",
			Subject: "github:o/r#" + id, Workspace: workspace, Priority: event.Attention, Time: time.Now()}
	}
	internal := mk("9", "quiet")
	internal.Priority = event.Internal
	b := batchFrom(withBatch(w.ctx, []*event.Event{mk("1", ws), mk("2", "solo"), mk("3", ws), internal, mk("8", "quiet")}))
	b.prefetchSettings(w.ctx, w.rdb, w.sup)
	st, ok := b.settingsFor(ws)
	if !ok || st.DefaultController != "human:boss" {
		t.Errorf("settings of a workspace with two routed events: %+v, %v; want its stored settings", st, ok)
	}
	for _, other := range []string{"solo", "quiet"} {
		if _, ok := b.settingsFor(other); ok {
			t.Errorf("settings of %s (one routed event) were prefetched", other)
		}
	}
}

// The fallback is read (holds, endpoint) only for an event decide may
// give it: an event about a session of attention or more.
func TestMayHearFallback(t *testing.T) {
	s := &snapshot{settings: supervision.Settings{Fallback: &supervision.Fallback{Party: "human:oncall"}}}
	pr := &event.Event{Type: "github.pull_request.opened", Subject: "github:o/r#1", Priority: event.Attention}
	if got := mayHear(s, pr); len(got) != 0 {
		t.Errorf("mayHear(PR event) = %v; want nobody", got)
	}
	sess := &event.Event{Type: "session.awaiting_input", Subject: "session:a", SessionID: "a", Priority: event.Attention}
	s.chain = chainOf(sess)
	if got := mayHear(s, sess); len(got) != 1 || got[0] != "human:oncall" {
		t.Errorf("mayHear(session event) = %v; want the fallback", got)
	}
}

// An event about a session routed in a batch uses the batch's prefetched
// match (no session labels) and still reaches a subscriber of its
// session's labels, and a derived event without lineage still reaches a
// subtree subscriber of its author's ancestor: gather matches both again
// after reading the session's record.
func TestBatchedSessionEventsMatchLabelsAndLineage(t *testing.T) {
	w := newWorld(t)
	w.spawn("kid", "root")
	for owner, spec := range map[string]string{"human:labels": `{"labels":["team-a"]}`,
		"human:tree": `{"session":{"id":"root","scope":"subtree"}}`} {
		sub, err := subscriptions.Parse([]byte(spec))
		if err != nil {
			t.Fatal(err)
		}
		sub.Workspace, sub.Owner = ws, owner
		if _, err := w.subs.Create(w.ctx, sub, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	res, err := w.store.CommitEvents(w.ctx, ws, "session:lab", []ingest.Item{{Journal: true, Labels: []string{"team-a"},
		Event: &event.Event{SpecVersion: "1.0", ID: "l1", Source: event.AgentSource(ws, "session:lab"), Type: "session.awaiting_input",
			Subject: "session:lab", Workspace: ws, SessionID: "lab", Time: time.Now().UTC(), Priority: event.Attention,
			CoalesceKey: "session:lab"}}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	labeled, err := w.j.Get(w.ctx, res[0].Seq)
	if err != nil || labeled == nil {
		t.Fatalf("get %s: %v %v", res[0].Seq, labeled, err)
	}
	pr := &event.Event{SpecVersion: "1.0", ID: "pr/7/ready/abc", Source: event.GitHubSource("org/repo"),
		Type: "github.pull_request.ready", Subject: "github:org/repo#7", Workspace: ws, SessionID: "kid",
		Time: time.Now().UTC(), Priority: event.Attention, CoalesceKey: "github:org/repo#7"}
	seq, _, err := w.j.Append(w.ctx, pr)
	if err != nil {
		t.Fatal(err)
	}
	if pr, err = w.j.Get(w.ctx, seq); err != nil || pr == nil {
		t.Fatalf("get %s: %v %v", seq, pr, err)
	}
	ctx := withBatch(w.ctx, []*event.Event{labeled, pr})
	for _, e := range []*event.Event{labeled, pr} {
		shard, _, _ := journal.ParseSeq(e.Seq)
		if err := w.r.Handle(ctx, shard, e); err != nil {
			t.Fatalf("route %s: %v", e.ID, err)
		}
	}
	if c, ok := batchFrom(ctx).cands[labeled]; ok {
		t.Errorf("the labeled session's prefetched candidates were not used (%d left)", len(c))
	}
	w.want("human:labels", "session.awaiting_input×1 wake")
	w.want("human:tree", "github.pull_request.ready×1 wake")
}

// A batch reads the first round trip of its events in one pipeline before
// any is routed (batch.first), each used once, except where routing an
// event of the batch could change what it reads: an event after another
// of its subject, a message, and a session.spawned with a lineage (its
// routing writes the default controller's edge, then reads the edges):
// the parent that controls the child still hears of the spawn.
func TestBatchFirstReads(t *testing.T) {
	w := newWorld(t)
	commit := func(pusher, session, typ string, mods ...func(*ingest.Item)) *event.Event {
		t.Helper()
		w.n++
		e := &event.Event{SpecVersion: "1.0", ID: fmt.Sprint("b", w.n), Source: event.AgentSource(ws, pusher), Type: typ,
			Subject: event.SessionSubject(session), Workspace: ws, SessionID: session, Time: time.Now().UTC(),
			CoalesceKey: event.SessionSubject(session) + "/" + typ}
		e.Priority = event.DefaultPriority(typ, nil)
		it := ingest.Item{Event: e, Journal: true}
		for _, m := range mods {
			m(&it)
		}
		res, err := w.store.CommitEvents(w.ctx, ws, pusher, []ingest.Item{it}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		got, err := w.j.Get(w.ctx, res[0].Seq)
		if err != nil || got == nil {
			t.Fatalf("get %s: %v %v", res[0].Seq, got, err)
		}
		return got
	}
	lineage, err := w.reg.LineageFor(w.ctx, ws, "kid", "boss", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	spawned := commit("human:alice", "kid", "session.spawned", func(it *ingest.Item) { it.Parent, it.Lineage = "boss", lineage })
	other := commit("session:solo", "solo", "session.awaiting_input")
	again := commit("session:solo", "solo", "session.crashed")
	message := commit("session:solo", "kid", "message.sent", func(it *ingest.Item) {
		it.Event.Data = json.RawMessage(`{"text":"hi","source":"session:solo"}`)
	})
	ctx := withBatch(w.ctx, []*event.Event{spawned, other, again, message})
	b := batchFrom(ctx)
	now := time.Now()
	if fr, ok := b.first(ctx, other, w.r, now); !ok || fr.session == nil || fr.edges == nil || fr.pause == nil {
		t.Fatalf("first event of its subject: %+v, %v; want its reads", fr, ok)
	}
	if _, ok := b.first(ctx, other, w.r, now); ok {
		t.Error("first reads handed out twice (a retry must read again)")
	}
	for name, e := range map[string]*event.Event{"the second event of a subject": again, "a message": message,
		"a session.spawned with a lineage": spawned} {
		if _, ok := b.first(ctx, e, w.r, now); ok {
			t.Errorf("%s used the batch's first reads", name)
		}
	}
	// Routed in the batch, the spawn reaches the parent that now controls the child.
	shard, _, _ := journal.ParseSeq(spawned.Seq)
	if err := w.r.Handle(withBatch(w.ctx, []*event.Event{spawned}), shard, spawned); err != nil {
		t.Fatal(err)
	}
	if got := w.inbox("session:boss"); len(got) != 1 {
		t.Errorf("inbox of the parent after a batched spawn = %q; want the spawn", got)
	}
}

// Routing a batch of session events of different sessions reads their
// first round trip with the batch's: one round trip for the whole batch,
// then two per event (who may hear it, the delivery), where each event
// made three of its own.
func TestBatchRoutingRoundTrips(t *testing.T) {
	w := newWorld(t)
	const n = 10
	var evs []*event.Event
	for i := range n {
		kid := fmt.Sprint("kid", i)
		w.spawn(kid, "boss")
		e := w.push("session:"+kid, kid, "session.awaiting_input", "") // routed: loads the scripts
		res, err := w.store.CommitEvents(w.ctx, ws, "session:"+kid, []ingest.Item{{Journal: true, Event: &event.Event{
			SpecVersion: "1.0", ID: "again-" + kid, Source: e.Source, Type: e.Type, Subject: e.Subject, Workspace: ws,
			SessionID: kid, Time: time.Now().UTC(), Priority: e.Priority, CoalesceKey: "again-" + kid}}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		got, err := w.j.Get(w.ctx, res[0].Seq)
		if err != nil || got == nil {
			t.Fatalf("get %s: %v %v", res[0].Seq, got, err)
		}
		evs = append(evs, got)
	}
	count := &redistest.RoundTrips{}
	w.rdb.AddHook(count)
	ctx := withBatch(w.ctx, evs)
	for _, e := range evs {
		shard, _, _ := journal.ParseSeq(e.Seq)
		if err := w.r.Handle(ctx, shard, e); err != nil {
			t.Fatalf("route %s: %v", e.ID, err)
		}
	}
	if got := count.Count(); got != 1+2*n {
		t.Errorf("%d round trips to route a batch of %d session events, want %d", got, n, 1+2*n)
	}
	if got := w.inbox("session:boss"); len(got) != 2*n {
		t.Errorf("the controller holds %d entries, want %d", len(got), 2*n)
	}
}
