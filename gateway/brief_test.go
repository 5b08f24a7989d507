package gateway

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/providers/event"
)

// TestBrief: from state alone, what a supervisor reads after a restart —
// its leases with epochs, subscriptions, unacked entries by priority, the
// open decisions of the sessions it controls, the open subjects with their
// latest entry, and a journal cursor at the current end.
func TestBrief(t *testing.T) {
	e := newEnv(t)
	const boss = "session:boss"
	for _, kid := range []string{"kid1", "kid2", "kid3"} {
		e.do("POST", "/v1/sessions/"+kid+"/supervise", boss, supScope, `{"role":"controller"}`).want(t, 200)
	}
	e.do("POST", "/v1/sessions/other/supervise", "session:rival", supScope, `{"role":"controller"}`).want(t, 200)
	e.do("POST", "/v1/subscriptions", boss, subScope, `{"subjects":["github:org/repo#*"]}`).want(t, 201)

	e.push("session:kid1", "kid1", "session.awaiting_input", "")       // an open decision
	e.push("session:kid2", "kid2", "session.permission_requested", "") // answered by a turn:
	e.push("session:kid2", "kid2", "session.turn_started", "")
	e.push("session:kid3", "kid3", "session.awaiting_input", "") // then exited: not open
	e.push("session:kid3", "kid3", "session.exited", "")

	deliver := func(id, typ, subject string, p event.Priority, terminal bool) {
		t.Helper()
		ev := &event.Event{SpecVersion: "1.0", ID: id, Source: event.GitHubSource("org/repo"), Type: typ, Subject: subject,
			Time: time.Now().UTC(), Workspace: tws, Priority: p, Terminal: terminal, Summary: id}
		if terminal {
			if _, _, err := e.j.Append(e.ctx, ev); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.box.Deliver(e.ctx, inbox.Delivery{Workspace: tws, Party: boss, Event: ev, Via: inbox.ViaSubscription}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	deliver("a", "github.pull_request.synchronize", "github:org/repo#1", event.Info, false)
	deliver("b", "github.pull_request.closed", "github:org/repo#2", event.Attention, true) // ended
	deliver("c", "github.pull_request.checks_failed", "github:org/repo#1", event.Critical, false)
	deliver("d", "github.pull_request.opened", "github:org/repo#3", event.Attention, false)

	a := e.do("GET", "/v1/brief", boss, "inbox", "").want(t, 200)
	var b struct {
		Party  string
		Leases []struct {
			SessionID string `json:"session_id"`
			Epoch     int64
		}
		Subscriptions []map[string]any
		Unacked       []inbox.Entry
		UnackedCount  int `json:"unacked_count"`
		OpenDecisions []struct {
			Session, Type string
			Since         time.Time
		} `json:"open_decisions"`
		OpenSubjects []struct {
			Subject, State, Liveness string
			Latest                   *struct {
				Seq           int64
				Type, Summary string
			}
		} `json:"open_subjects"`
		InboxNext int64 `json:"inbox_next"`
		Cursor    string
	}
	if err := json.Unmarshal(a.raw, &b); err != nil {
		t.Fatal(err)
	}
	if b.Party != boss || fmt.Sprint(b.Leases) != "[{kid1 1} {kid2 1} {kid3 1}]" || len(b.Subscriptions) != 1 {
		t.Fatalf("party, leases, subscriptions: %s", a.raw)
	}
	// Priority first, then seq: c (critical; folded into #1's entry), b and
	// d (attention, by seq).
	var order []string
	for _, en := range b.Unacked {
		order = append(order, fmt.Sprintf("%s:%s", en.Subject, en.Priority))
	}
	if fmt.Sprint(order) != "[github:org/repo#1:critical github:org/repo#2:attention github:org/repo#3:attention]" || b.UnackedCount != 3 {
		t.Fatalf("unacked: %v (%d)", order, b.UnackedCount)
	}
	if len(b.OpenDecisions) != 1 || b.OpenDecisions[0].Session != "kid1" || b.OpenDecisions[0].Type != "session.awaiting_input" ||
		time.Since(b.OpenDecisions[0].Since) > time.Minute {
		t.Fatalf("open decisions: %+v", b.OpenDecisions)
	}
	var subjects []string
	for _, s := range b.OpenSubjects {
		d := s.Subject + " " + s.State
		if s.Latest != nil {
			d += " " + s.Latest.Summary
		}
		subjects = append(subjects, d)
	}
	want := "[github:org/repo#1  c github:org/repo#3  d session:kid1 session.awaiting_input session:kid2 session.turn_started]"
	if fmt.Sprint(subjects) != want {
		t.Fatalf("open subjects\n got %v\nwant %s", subjects, want)
	}
	if b.InboxNext != 4 {
		t.Fatalf("inbox_next %d", b.InboxNext)
	}

	// The cursor is at the end of the journal: reading on from it returns
	// only what is journaled after the brief.
	cur, err := journal.ParseCursor(b.Cursor, 4)
	if err != nil {
		t.Fatalf("cursor %q: %v", b.Cursor, err)
	}
	f := journal.Filter{Workspace: tws}
	if evs, _, _ := e.j.Read(e.ctx, cur, f, 100); len(evs) != 0 {
		t.Fatalf("%d events before anything new", len(evs))
	}
	e.push("session:kid1", "kid1", "session.turn_started", "")
	if evs, _, _ := e.j.Read(e.ctx, cur, f, 100); len(evs) != 1 || evs[0].Type != "session.turn_started" {
		t.Fatalf("after the cursor: %v", evs)
	}
	// A turn closes the decision; acked entries leave the brief.
	if _, err := e.box.Ack(e.ctx, tws, boss, 0, []int64{b.Unacked[0].Seq}); err != nil {
		t.Fatal(err)
	}
	a = e.do("GET", "/v1/brief?limit=1", boss, "inbox", "").want(t, 200)
	if err := json.Unmarshal(a.raw, &b); err != nil {
		t.Fatal(err)
	}
	if len(b.OpenDecisions) != 0 || len(b.Unacked) != 1 || b.UnackedCount != 2 || b.Unacked[0].Subject != "github:org/repo#2" {
		t.Fatalf("after a turn and an ack: %s", a.raw)
	}

	// Someone else's brief needs the operator scope; limit is checked.
	e.do("GET", "/v1/brief?party=session:boss", "session:rival", "inbox", "").want(t, 403)
	e.do("GET", "/v1/brief?limit=0", boss, "inbox", "").want(t, 400)
	e.do("GET", "/v1/brief", boss, "subscribe", "").want(t, 403)
	a = e.do("GET", "/v1/brief?party=session:rival", "human:op", "inbox operator", "").want(t, 200)
	if a.str("party") != "session:rival" || len(a.body["leases"].([]any)) != 1 || len(a.body["unacked"].([]any)) != 0 {
		t.Fatalf("operator's view of rival: %s", a.raw)
	}
}
