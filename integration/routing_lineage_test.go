package integration

import (
	"encoding/json"
	"testing"

	"github.com/wakegate/wakegate/delivery/inbox"
)

// TestRoutingDeadControllerAndUndeliverable: a session whose controller
// exited is routed up its lineage to the next ancestor's subtree
// controller; in a workspace with no default controller and no fallback, a
// session event of attention that reaches nobody journals exactly one
// wakegate.fault.undeliverable (and an info one none).
func TestRoutingDeadControllerAndUndeliverable(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	p := s.start("serve", "serve", nil)
	c := s.client(p)

	t.Run("dead_controller_routes_up", func(t *testing.T) {
		const ws = "lineage"
		// gp spawned mid, mid spawned kid: kid's controller is mid, mid's gp
		// (scope subtree).
		mid := s.token(t, "session:mid", ws, "events:push inbox")
		kid := s.token(t, "session:kid", ws, "events:push")
		gp := s.token(t, "session:gp", ws, "inbox supervise")
		c.accept(t, mid, ce("mid-spawned", "session.spawned", map[string]any{"data": map[string]any{"parent": "gp"}}))
		c.accept(t, kid, ce("kid-spawned", "session.spawned", map[string]any{"data": map[string]any{"parent": "mid"}}))
		c.accept(t, kid, idleTurn("kid-turn-1", nil))
		pg := c.waitInbox(t, mid, "", "kid's first turn end at mid (its live controller)", func(p inboxPage) bool {
			e := entry(p.Entries, "session:kid")
			return e != nil && e.Type == "session.turn_ended"
		})
		if e := entry(pg.Entries, "session:kid"); e.Via != inbox.ViaController {
			t.Errorf("mid's entry about kid %s: want via controller", describeEntries([]inbox.Entry{*e}))
		}
		// mid exits: dead. kid's next idle turn end climbs to gp.
		c.accept(t, mid, ce("mid-exited", "session.exited", nil))
		c.accept(t, kid, idleTurn("kid-turn-2", nil))
		pg = c.waitInbox(t, gp, "", "kid's second turn end at gp", func(p inboxPage) bool {
			e := entry(p.Entries, "session:kid")
			return e != nil && contains(e.FoldedIDs, "kid-turn-2")
		})
		e := entry(pg.Entries, "session:kid")
		if e.Via != inbox.ViaController || e.Type != "session.turn_ended" || !e.Wake || contains(e.FoldedIDs, "kid-turn-1") {
			t.Errorf("gp's entry about kid %s folded %v: want via controller, a waking turn end, only kid-turn-2 (mid got the first)",
				describeEntries([]inbox.Entry{*e}), e.FoldedIDs)
		}
		s.routed(t, false)
		pg = c.inbox(t, mid, "")
		if e := entry(pg.Entries, "session:kid"); e != nil && contains(e.FoldedIDs, "kid-turn-2") {
			t.Errorf("kid's turn end after mid exited reached mid: %v", e.FoldedIDs)
		}
		r := c.get(t, "/v1/sessions/kid/supervision", gp)
		var sv struct {
			Effective struct{ Party, Resolved string } `json:"effective_controller"`
		}
		_ = json.Unmarshal(r.Body, &sv)
		if r.Status != 200 || sv.Effective.Party != "session:gp" || sv.Effective.Resolved != "ancestor:mid" {
			t.Errorf("GET /v1/sessions/kid/supervision: %s; want effective controller session:gp resolved ancestor:mid", r)
		}
	})

	t.Run("undeliverable_fault", func(t *testing.T) {
		const ws = "lonely"
		reader := s.token(t, "human:auditor", ws, "events:read events:read:any")
		orphan := s.token(t, "session:orphan", ws, "events:push inbox")
		ans := c.accept(t, orphan, idleTurn("orphan-turn-1", nil))
		// An info event reaching nobody is no fault; a duplicate of the
		// attention one changes nothing.
		c.accept(t, orphan, ce("orphan-busy", "session.turn_ended", map[string]any{"data": map[string]any{"idle": false}}))
		if r := c.mustPush(t, orphan, ctEvent, idleTurn("orphan-turn-1", nil)); r.Status != 200 {
			t.Errorf("the same event again: %s, want 200 duplicate", r)
		}
		waitFor(t, routeTimeout, "an undeliverable fault in the journal", func() (bool, string) {
			evs := c.journalOf(t, reader, "wakegate.*")
			return len(evs) > 0, summarize(evs)
		})
		s.routed(t, false)
		faults := c.journalOf(t, reader, "wakegate.fault.undeliverable")
		if len(faults) != 1 {
			t.Fatalf("%d wakegate.fault.undeliverable in the journal, want exactly 1: %s", len(faults), summarize(faults))
		}
		f := faults[0]
		var d struct {
			ID, Source, Type, Seq string
		}
		_ = json.Unmarshal(f.Data, &d)
		if f.Subject != "session:orphan" || d.ID != "orphan-turn-1" || d.Source != agentSource(ws, "session:orphan") ||
			d.Type != "session.turn_ended" || d.Seq != ans.Accepted[0].Seq {
			t.Errorf("fault %+v data %s: want about session:orphan naming orphan-turn-1 (seq %s)", f, f.Data, ans.Accepted[0].Seq)
		}
		if n, ok := metric(t, p.Addr, "wakegate_route_undeliverable_total"); !ok || n != 1 {
			t.Errorf("wakegate_route_undeliverable_total = %v (found %v), want 1", n, ok)
		}
		if pg := c.inbox(t, orphan, ""); len(pg.Entries) != 0 {
			t.Errorf("the orphan got its own event: %s", describeEntries(pg.Entries))
		}

		// With a human fallback the next one reaches it, and is no fault.
		admin := s.token(t, "human:admin", ws, "admin")
		c.putSettings(t, admin, map[string]any{"fallback": map[string]any{"party": "human:ops"}})
		c.accept(t, orphan, idleTurn("orphan-turn-2", nil))
		op := s.token(t, "human:operator", ws, "inbox operator")
		pg := c.waitInbox(t, op, "party="+q("human:ops"), "orphan's second turn end at the fallback", hasEntry("session:orphan", ""))
		if e := entry(pg.Entries, "session:orphan"); e.Via != inbox.ViaFallback || !contains(e.FoldedIDs, "orphan-turn-2") || contains(e.FoldedIDs, "orphan-turn-1") {
			t.Errorf("fallback's entry %s folding %v: want via fallback, orphan-turn-2 only", describeEntries([]inbox.Entry{*e}), e.FoldedIDs)
		}
		s.routed(t, false)
		if faults := c.journalOf(t, reader, "wakegate.fault.undeliverable"); len(faults) != 1 {
			t.Errorf("%d undeliverable faults after the fallback took one, want still 1", len(faults))
		}
	})
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
