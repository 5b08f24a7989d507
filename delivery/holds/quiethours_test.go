package holds

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/event"
)

// TestDecideQuietHours: quiet hours hold a human's attention wakes until
// the period's end (the Decision's Due), never a critical one, never a
// session's; an explicit quiet comes first, PAUSED after; a re-run answers
// the original decision; a release before the latest due of what is held
// takes nothing.
func TestDecideQuietHours(t *testing.T) {
	rdb, prefix := redistest.New(t)
	s := New(rdb, prefix)
	ctx := context.Background()
	const ws = "acme"
	settings := supervision.Defaults()
	settings.Rate = supervision.Rate{Per: supervision.Duration(time.Second), Burst: 100}
	settings.QuietHours = &supervision.QuietHours{Start: "22:00", End: "06:00", TZ: "Asia/Kolkata"} // 16:30–00:30 UTC
	night := time.Date(2026, 7, 1, 23, 0, 0, 0, time.UTC)                                           // 04:30 IST
	end := time.Date(2026, 7, 2, 0, 30, 0, 0, time.UTC)
	seq := int64(0)
	decide := func(party, typ string, p event.Priority, now time.Time, st supervision.Settings, pres Presence) (Decision, int64) {
		t.Helper()
		seq++
		e := &event.Event{ID: fmt.Sprint("e", seq), Type: typ, Subject: "github:org/repo#1", Priority: p, Workspace: ws}
		d, err := s.Decide(ctx, Request{Workspace: ws, Party: party, Result: inbox.Result{Seq: seq, Wake: true, Kind: inbox.KindWake},
			Event: e, Settings: st, Presence: pres, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return d, seq
	}

	d, heldSeq := decide("human:gera", "github.pull_request.ready", event.Attention, night, settings, Presence{})
	if d.Push || d.Reason != ReasonQuietHours || !d.Due.Equal(end) {
		t.Fatalf("attention at night: %+v, want held for quiet hours until %s", d, end)
	}
	// A re-run of the routing answers the same decision, holds nothing more.
	again, err := s.Decide(ctx, Request{Workspace: ws, Party: "human:gera", Result: inbox.Result{Seq: heldSeq, Wake: true},
		Event: &event.Event{ID: "e1", Type: "github.pull_request.ready", Priority: event.Attention}, Settings: settings, Now: night.Add(time.Hour)})
	if err != nil || again != d {
		t.Fatalf("re-run: %+v %v, want %+v", again, err, d)
	}
	if d, _ := decide("human:gera", "github.pull_request.checks_failed", event.Critical, night, settings, Presence{}); !d.Push {
		t.Fatalf("critical at night: %+v, want pushed", d)
	}
	if d, _ := decide("session:boss", "session.awaiting_input", event.Attention, night, settings, Presence{}); !d.Push {
		t.Fatalf("a session at night: %+v, want pushed (quiet hours are for humans)", d)
	}
	if d, _ := decide("human:gera", "github.pull_request.ready", event.Attention, end, settings, Presence{}); !d.Push {
		t.Fatalf("at the period's end: %+v, want pushed", d)
	}
	paused := Presence{PausedUntil: night.Add(3 * time.Hour)}
	if d, _ := decide("human:gera", "github.pull_request.ready", event.Attention, night, settings, paused); d.Reason != ReasonQuietHours {
		t.Fatalf("quiet hours and PAUSED: %+v, want quiet hours first", d)
	}
	if err := s.SetQuiet(ctx, ws, Quiet{Scope: "human:gera", By: "human:gera", At: night}); err != nil {
		t.Fatal(err)
	}
	if d, _ := decide("human:gera", "github.pull_request.ready", event.Attention, night, settings, Presence{}); d.Reason != ReasonQuiet {
		t.Fatalf("quiet and quiet hours: %+v, want the explicit quiet first", d)
	}
	if _, err := s.DeleteQuiet(ctx, ws, "human:gera"); err != nil {
		t.Fatal(err)
	}
	held, err := s.Held(ctx, ws, "human:gera", ReasonQuietHours)
	if err != nil || len(held) != 2 {
		t.Fatalf("held for quiet hours: %d %v, want 2", len(held), err)
	}

	// The window made longer meanwhile: a wake held until the new end
	// keeps the first end's release from taking anything.
	longer := settings
	longer.QuietHours = &supervision.QuietHours{Start: "22:00", End: "07:00", TZ: "Asia/Kolkata"}
	d, _ = decide("human:gera", "github.pull_request.ready", event.Attention, end.Add(-time.Minute), longer, Presence{})
	if d.Reason != ReasonQuietHours || !d.Due.Equal(end.Add(time.Hour)) {
		t.Fatalf("longer window: %+v", d)
	}
	_, err = s.Take(ctx, ws, "human:gera", ReasonQuietHours, "slot1", settings.Rate, end)
	var nd *NotDueError
	if !errors.As(err, &nd) || !nd.Due.Equal(end.Add(time.Hour)) {
		t.Fatalf("take at the first end: %v, want not due until the second", err)
	}
	b, err := s.Take(ctx, ws, "human:gera", ReasonQuietHours, "slot2", settings.Rate, end.Add(time.Hour))
	if err != nil || b == nil || len(b.Items) != 3 || b.ID != "slot2" {
		t.Fatalf("take at the second end: %+v %v, want all three", b, err)
	}
	if err := s.Done(ctx, ws, "human:gera", ReasonQuietHours); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Take(ctx, ws, "human:gera", ReasonQuietHours, "slot3", settings.Rate, end.Add(time.Hour)); err != nil || b != nil {
		t.Fatalf("take again: %+v %v, want nothing", b, err)
	}
	if txt := Text(ReasonQuietHours, held, end); txt[:24] != "[quiet hours ended 00:30" {
		t.Fatalf("digest text %q", txt)
	}
}
