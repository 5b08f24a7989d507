package route

import (
	"context"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/event"
)

// A batch prefetches the subscriptions of the events that need no session
// labels, each used once; an event after a terminal event of its own
// subject (which closes subscriptions) is matched afresh, and so is an
// event about a session.
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
		t.Error("an event about a session (labels needed) used a prefetched match")
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
