package route

import (
	"context"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/subscriptions"
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
