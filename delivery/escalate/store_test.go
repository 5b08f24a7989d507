package escalate_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/escalate"
	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/providers/event"
)

const ws = "acme"

func sessionEvent(id, typ, kid string, p event.Priority) *event.Event {
	return &event.Event{SpecVersion: event.SpecVersion, ID: id, Source: event.AgentSource(ws, "session:"+kid), Type: typ,
		Subject: event.SessionSubject(kid), Time: t0, Workspace: ws, SessionID: kid, Lineage: []string{"mid"}, Priority: p,
		Summary: typ}
}

// TestStore: on real Redis (and on miniredis, which the embedded serve
// runs), entries the inbox armed come due in order; a claim is recorded
// once and replayed; a claim or a done for a due that moved (a raise)
// leaves the newer due alone; dead letters come due at once, marked; every
// key shares the recipient's hash tag.
func TestStore(t *testing.T) { redistest.Backends(t, testStore) }

func testStore(t *testing.T, rdb redis.UniversalClient, prefix string) {
	ctx := context.Background()
	box := inbox.New(rdb, inbox.Config{Prefix: prefix})
	s := escalate.New(rdb, prefix)
	const mid = "session:mid"
	deliver := func(e *event.Event, due time.Time) inbox.Result {
		t.Helper()
		r, err := box.Deliver(ctx, inbox.Delivery{Workspace: ws, Party: mid, Event: e, Via: inbox.ViaController, EscalateAt: due}, t0)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	dueA, dueB := t0.Add(2*time.Minute), t0.Add(3*time.Minute)
	deliver(sessionEvent("b1", "session.awaiting_input", "kb", event.Attention), dueB)
	deliver(sessionEvent("a1", "session.awaiting_input", "ka", event.Attention), dueA)

	if next, ok, err := s.Next(ctx, ws, mid); err != nil || !ok || !next.Equal(dueA) {
		t.Fatalf("Next = %s %v %v, want %s", next, ok, err, dueA)
	}
	if got, err := s.Due(ctx, ws, mid, dueA.Add(-time.Millisecond), 10); err != nil || len(got) != 0 {
		t.Fatalf("due before anything: %+v %v", got, err)
	}
	got, err := s.Due(ctx, ws, mid, dueB, 10)
	if err != nil || len(got) != 2 || got[0].CK != "session:ka" || got[0].Due != dueA.UnixMilli() || got[1].CK != "session:kb" ||
		got[0].Claim != nil || got[0].DeadLettered {
		t.Fatalf("due by %s: %+v %v", dueB, got, err)
	}
	if got, _ := s.Due(ctx, ws, mid, dueB, 1); len(got) != 1 {
		t.Fatalf("limit 1: %+v", got)
	}

	// A claim is recorded once: the second decision gets the first back.
	c1 := escalate.Claim{Due: dueA.UnixMilli(), Reason: escalate.ReasonUnreached, To: "session:gp", Rung: "controller:mid",
		Level: 1, Path: []string{mid}, Seq: 2, Event: json.RawMessage(`{"id":"a1"}`)}
	if c, ok, err := s.Claim(ctx, ws, mid, "session:ka", c1); err != nil || !ok || c.To != "session:gp" {
		t.Fatalf("claim: %+v %v %v", c, ok, err)
	}
	c2 := c1
	c2.To = "session:boss"
	if c, ok, err := s.Claim(ctx, ws, mid, "session:ka", c2); err != nil || !ok || c.To != "session:gp" {
		t.Fatalf("second claim: %+v %v %v, want the first one", c, ok, err)
	}
	if got, _ := s.Due(ctx, ws, mid, dueA, 10); len(got) != 1 || got[0].Claim == nil || got[0].Claim.To != "session:gp" ||
		string(got[0].Claim.Event) != `{"id":"a1"}` {
		t.Fatalf("due with its claim: %+v", got)
	}
	if err := s.Done(ctx, ws, mid, "session:ka", dueA.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Due(ctx, ws, mid, dueB, 10); len(got) != 1 || got[0].CK != "session:kb" {
		t.Fatalf("after done: %+v", got)
	}

	// A raise re-arms kb at a later due: a claim or a done for the old
	// due leaves it alone.
	if r := deliver(sessionEvent("b2", "session.crashed", "kb", event.Critical), dueB.Add(time.Minute)); !r.Armed {
		t.Fatalf("raise: %+v", r)
	}
	if _, ok, err := s.Claim(ctx, ws, mid, "session:kb", escalate.Claim{Due: dueB.UnixMilli()}); err != nil || ok {
		t.Fatalf("claim for a moved due: ok %v %v", ok, err)
	}
	if err := s.Done(ctx, ws, mid, "session:kb", dueB.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if next, ok, _ := s.Next(ctx, ws, mid); !ok || !next.Equal(dueB.Add(time.Minute)) {
		t.Fatalf("after a done for the old due: next %s %v, want the raise's", next, ok)
	}

	// Dead letters come due at once, marked, until done.
	now := t0.Add(time.Second)
	if err := s.DeadLettered(ctx, ws, mid, []string{"session:kb", "session:ka"}, now); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Due(ctx, ws, mid, now, 10)
	if len(got) != 2 || !got[0].DeadLettered || !got[1].DeadLettered || got[0].Due != now.UnixMilli() {
		t.Fatalf("dead letters due: %+v", got)
	}
	for _, p := range got {
		if err := s.Done(ctx, ws, mid, p.CK, p.Due); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, _ := s.Next(ctx, ws, mid); ok {
		t.Fatal("something still armed after every check is done")
	}

	// Every key of the recipient carries its inbox hash tag.
	tag := inbox.Tag(prefix, ws, mid)
	keys, err := rdb.Keys(ctx, prefix+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if strings.Contains(k, mid) && !strings.Contains(k, tag) {
			t.Errorf("key %s is outside %s", k, tag)
		}
	}
	// Bad recipients are refused.
	if _, err := s.Due(ctx, ws, "nobody", now, 1); err == nil {
		t.Error("a bad party was accepted")
	}
}
