package integration

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/providers/event"
)

// TestRoutingFailure1RootsAndChildren is field failure 1 (docs/design.md, "Why"): a root session
// with no parent, and a root another supervisor started (pushed by a human
// bridge with events:push:any), both reach the workspace default
// controller on an idle turn end — a controller that has never made a
// request (unknown is a valid recipient); a child spawned with data.parent,
// or given its token by its parent, reaches that parent on its idle turn
// end without doing anything else.
func TestRoutingFailure1RootsAndChildren(t *testing.T) {
	t.Parallel()
	const ws = "default"
	s := newStack(t, nil)
	p := s.start("serve", "serve", nil)
	c := s.client(p)
	admin := s.token(t, "human:admin", ws, "admin")
	op := s.token(t, "human:operator", ws, "inbox operator supervise")
	c.putSettings(t, admin, map[string]any{"default_controller": "session:brain"})
	reg := sessions.New(s.rdb, s.journalLayout(), 0)

	// The operator looks at the brain's inbox: empty, and the brain has
	// still never been seen.
	brainQ := "party=" + q("session:brain")
	if got := c.inbox(t, op, brainQ); len(got.Entries) != 0 {
		t.Fatalf("brain's inbox before anything happened: %s", describeEntries(got.Entries))
	}

	root1 := s.token(t, "session:root1", ws, "events:push")
	c.accept(t, root1, idleTurn("r1-turn-1", nil))
	bridge := s.token(t, "human:bridge", ws, "events:push events:push:any")
	c.accept(t, bridge, idleTurn("r2-turn-1", map[string]any{"subject": "session:root2"}))

	got := c.waitInbox(t, op, brainQ, "both roots' idle turn ends in the default controller's inbox", func(p inboxPage) bool {
		return hasEntry("session:root1", "session.turn_ended")(p) && hasEntry("session:root2", "session.turn_ended")(p)
	})
	for _, want := range []struct{ ck, id, source string }{
		{"session:root1", "r1-turn-1", agentSource(ws, "session:root1")},
		{"session:root2", "r2-turn-1", agentSource(ws, "human:bridge")},
	} {
		e := entry(got.Entries, want.ck)
		ev := decodeEvent(t, e.Event)
		if ev.ID != want.id || ev.Source != want.source || ev.SessionID != want.ck[len("session:"):] {
			t.Errorf("%s entry's event: id %q source %q sessionid %q, want %q %q", want.ck, ev.ID, ev.Source, ev.SessionID, want.id, want.source)
		}
		if e.Via != inbox.ViaController || e.Priority != event.Attention || e.Count != 1 || !e.Wake || e.Kind != inbox.KindWake || e.WakeSeq != e.Seq {
			t.Errorf("%s entry %s: want via controller, attention, count 1, a wake at its own seq", want.ck, describeEntries([]inbox.Entry{*e}))
		}
	}
	rec, err := reg.Get(bg(), ws, "session:brain", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Liveness != sessions.Unknown {
		t.Errorf("the default controller is %s after only an operator read its inbox, want unknown (never seen)", rec.Liveness)
	}
	// How the roots resolved, as the API explains it.
	for _, root := range []string{"root1", "root2"} {
		r := c.get(t, "/v1/sessions/"+root+"/supervision", op)
		var sv struct {
			Effective struct {
				Party    string `json:"party"`
				Resolved string `json:"resolved"`
			} `json:"effective_controller"`
		}
		r.decode(t, &sv)
		if r.Status != 200 || sv.Effective.Party != "session:brain" || sv.Effective.Resolved != "workspace_default" {
			t.Errorf("GET /v1/sessions/%s/supervision: %s, want effective controller session:brain (workspace_default)", root, r)
		}
	}

	// The brain's first own request: the same entries at the same seqs,
	// and a long-poll returns at once (unacked wakes are waiting).
	brain := s.token(t, "session:brain", ws, "inbox")
	own, took := c.timedInbox(t, brain, "wait=20s")
	if !slices.Equal(seqsOf(own.Entries), seqsOf(got.Entries)) {
		t.Errorf("brain reads seqs %v itself, the operator read %v", seqsOf(own.Entries), seqsOf(got.Entries))
	}
	if took > 10*time.Second {
		t.Errorf("brain's long-poll with two unacked wakes took %s, want at once", took)
	}

	// A child spawned with data.parent: its idle turn end reaches the
	// parent, the child pushing nothing but its spawn and its turn end.
	kid1 := s.token(t, "session:kid1", ws, "events:push")
	c.accept(t, kid1, ce("k1-spawned", "session.spawned", map[string]any{"data": map[string]any{"parent": "par1"}}))
	c.accept(t, kid1, idleTurn("k1-turn-1", nil))
	par1 := s.token(t, "session:par1", ws, "inbox")
	pg := c.waitInbox(t, par1, "", "kid1's idle turn end in its parent's inbox", hasEntry("session:kid1", "session.turn_ended"))
	if e := entry(pg.Entries, "session:kid1"); e.Via != inbox.ViaController || !e.Wake || e.WakeSeq != e.Seq ||
		!slices.Contains(e.FoldedIDs, "k1-turn-1") {
		t.Errorf("par1's entry about kid1 %s: want via controller, a wake, folding k1-turn-1", describeEntries([]inbox.Entry{*e}))
	} else if ev := decodeEvent(t, e.Event); !slices.Equal(ev.Lineage, []string{"par1"}) {
		t.Errorf("kid1's turn end has lineage %v, want [par1]", ev.Lineage)
	}

	// A child whose parent minted its token (POST /v1/sessions/kid2/token):
	// its only push is its idle turn end, and it reaches the parent.
	par2 := s.token(t, "session:par2", ws, "events:push inbox spawn")
	r := c.send(t, http.MethodPost, "/v1/sessions/kid2/token", par2, map[string]any{"scope": "events:push"})
	var minted struct {
		Token  string `json:"token"`
		Parent string `json:"parent"`
	}
	if r.Status != 200 || json.Unmarshal(r.Body, &minted) != nil || minted.Token == "" || minted.Parent != "par2" {
		t.Fatalf("POST /v1/sessions/kid2/token by par2: %s, want 200 with a token and parent par2", r)
	}
	c.accept(t, minted.Token, idleTurn("k2-turn-1", nil))
	s.routed(t, false)
	pg = c.inbox(t, par2, "")
	if e := entry(pg.Entries, "session:kid2"); e == nil || e.Type != "session.turn_ended" || e.Via != inbox.ViaController || !e.Wake {
		t.Errorf("kid2 (token minted by par2) ended an idle turn: par2's inbox has %s, want a waking session.turn_ended entry about session:kid2 via controller",
			describeEntries(pg.Entries))
	}

	// The children's turn ends went to their parents, not to the default
	// controller: each event reaches its one effective controller.
	own = c.inbox(t, brain, "")
	for _, kid := range []string{"session:kid1", "session:kid2"} {
		if e := entry(own.Entries, kid); e != nil {
			t.Errorf("the workspace default controller got %s's events (%s) although its parent controls it", kid, describeEntries([]inbox.Entry{*e}))
		}
	}
}
