package holds

import (
	"context"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/event"
)

// TestLookup: one read gives each recipient its presence and whether a
// live quiet record (its own or "all") covers it; an expired record does
// not; Decide honours the quiet it is given without reading it again.
func TestLookup(t *testing.T) {
	rdb, prefix := redistest.New(t)
	s := New(rdb, prefix)
	ctx := context.Background()
	now := time.Now()
	const ws = "acme"
	if err := s.SetPresence(ctx, ws, "session:a", Presence{AttendedUntil: now.Add(time.Hour)}, now); err != nil {
		t.Fatal(err)
	}
	if err := s.SetQuiet(ctx, ws, Quiet{Scope: "human:b", By: "human:b", At: now}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetQuiet(ctx, ws, Quiet{Scope: "session:c", Until: now.Add(-time.Minute), By: "human:b", At: now}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Lookup(ctx, ws, []string{"session:a", "human:b", "session:c"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !got["session:a"].Presence.Attended(now) || got["session:a"].Quiet {
		t.Fatalf("session:a: %+v, want attended, not quiet", got["session:a"])
	}
	if !got["human:b"].Quiet || got["human:b"].Presence.Attended(now) {
		t.Fatalf("human:b: %+v, want quiet, not attended", got["human:b"])
	}
	if got["session:c"].Quiet {
		t.Fatalf("session:c: an expired quiet record counted")
	}
	if err := s.SetQuiet(ctx, ws, Quiet{Scope: ScopeAll, By: "human:b", At: now}); err != nil {
		t.Fatal(err)
	}
	got, err = s.Lookup(ctx, ws, []string{"session:a", "session:c"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !got["session:a"].Quiet || !got["session:c"].Quiet {
		t.Fatalf("quiet all: %+v", got)
	}
	// Decide takes the quiet it is given (the router's Lookup) as read.
	no := false
	d, err := s.Decide(ctx, Request{Workspace: ws, Party: "human:b", Result: inbox.Result{Seq: 1, Wake: true, Kind: inbox.KindWake},
		Event:    &event.Event{ID: "e1", Type: "session.crashed", Subject: "session:z", Priority: event.Critical, Workspace: ws},
		Settings: supervision.Defaults(), Quiet: &no, Now: now})
	if err != nil || !d.Push {
		t.Fatalf("Decide with Quiet false for a quiet party: %+v, %v; want a push", d, err)
	}
	if _, err := s.Lookup(ctx, ws, []string{"not a party"}, now); err == nil {
		t.Fatal("Lookup took a malformed party")
	}
}
