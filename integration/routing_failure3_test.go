package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/providers/event"
)

// TestRoutingFailure3Leases is field failure 3 (docs/design.md, "Why"): one driver per session.
// A second supervisor asking for a held controller lease gets 409 naming
// holder and epoch; an unrelated session's takeover is refused; an
// ancestor's takeover moves the lease and tells the first holder; control
// messages from a non-holder are refused under enforce and delivered and
// flagged under warn.
func TestRoutingFailure3Leases(t *testing.T) {
	t.Parallel()
	const ws = "default"
	s := newStack(t, nil)
	p := s.start("serve", "serve", nil)
	c := s.client(p)
	admin := s.token(t, "human:admin", ws, "admin")
	anc := s.token(t, "session:anc", ws, "supervise inbox events:push")
	sup1 := s.token(t, "session:sup1", ws, "supervise inbox events:push")
	sup2 := s.token(t, "session:sup2", ws, "supervise inbox events:push")
	worker := s.token(t, "session:work", ws, "events:push inbox")

	type edge struct {
		Session string `json:"session_id"`
		Role    string `json:"role"`
		Holder  string `json:"holder"`
		Scope   string `json:"scope"`
		Epoch   int64  `json:"epoch"`
	}
	supervise := func(tok string, body map[string]any) (*response, edge) {
		r := c.send(t, http.MethodPost, "/v1/sessions/work/supervise", tok, body)
		var e edge
		_ = json.Unmarshal(r.Body, &e)
		return r, e
	}

	// anc spawned work: anc is its ancestor and, by the spawn, its
	// controller; anc lets the lease go.
	c.accept(t, worker, ce("work-spawned", "session.spawned", map[string]any{"data": map[string]any{"parent": "anc"}}))
	waitFor(t, routeTimeout, "anc holds work's lease (the spawner)", func() (bool, string) {
		r := c.get(t, "/v1/sessions/work/supervision", anc)
		var sv struct {
			Edges []edge `json:"edges"`
		}
		_ = json.Unmarshal(r.Body, &sv)
		return len(sv.Edges) > 0 && sv.Edges[0].Role == "controller" && sv.Edges[0].Holder == "session:anc", r.String()
	})
	if r := c.send(t, http.MethodDelete, "/v1/sessions/work/supervise", anc, nil); r.Status != 204 {
		t.Fatalf("anc releases work: %s", r)
	}

	// sup1 takes the free lease.
	r, e1 := supervise(sup1, map[string]any{"role": "controller", "scope": "self"})
	if r.Status != 200 || e1.Holder != "session:sup1" || e1.Role != "controller" || e1.Session != "work" || e1.Epoch < 2 {
		t.Fatalf("sup1 asks for the free lease: %s; want 200 holder session:sup1 with an epoch above the spawner's", r)
	}
	// A second supervisor: 409 naming holder and epoch.
	r, _ = supervise(sup2, map[string]any{"role": "controller", "scope": "self"})
	pr := checkProblem(t, r, 409)
	if pr["holder"] != "session:sup1" || pr["epoch"] != float64(e1.Epoch) {
		t.Errorf("409 names holder %v epoch %v, want session:sup1 epoch %d", pr["holder"], pr["epoch"], e1.Epoch)
	}
	// An unrelated session may not take it over.
	r, _ = supervise(sup2, map[string]any{"role": "controller", "scope": "self", "takeover": true})
	checkProblem(t, r, 403)
	// Nothing moved.
	if r, e := supervise(sup1, map[string]any{"role": "controller", "scope": "self"}); r.Status != 200 || e.Epoch != e1.Epoch {
		t.Errorf("after the refused takeover sup1 asks again: %s, want 200 at epoch %d (still its lease)", r, e1.Epoch)
	}
	// The ancestor takes over: the lease moves, the epoch rises, and the
	// first holder is told.
	r, e2 := supervise(anc, map[string]any{"role": "controller", "scope": "subtree", "takeover": true})
	if r.Status != 200 || e2.Holder != "session:anc" || e2.Epoch <= e1.Epoch {
		t.Fatalf("the ancestor's takeover: %s; want 200 holder session:anc with epoch above %d", r, e1.Epoch)
	}
	pg := c.inbox(t, sup1, "")
	told := false
	for _, e := range pg.Entries {
		if e.Subject == "session:work" && strings.Contains(e.Summary, "no longer driving work") {
			told = true
			if e.Priority != event.Attention || !e.Wake || e.Via != inbox.ViaTakeover {
				t.Errorf("sup1's lease-lost entry %s: want attention, waking, via takeover", describeEntries([]inbox.Entry{e}))
			}
		}
	}
	if !told {
		t.Errorf("sup1 lost work's lease to anc; its inbox: %s; want an entry \"you are no longer driving work\"", describeEntries(pg.Entries))
	}
	r, _ = supervise(sup1, map[string]any{"role": "controller", "scope": "self"})
	if pr := checkProblem(t, r, 409); pr["holder"] != "session:anc" || pr["epoch"] != float64(e2.Epoch) {
		t.Errorf("after the takeover sup1's request names %v epoch %v, want session:anc epoch %d", pr["holder"], pr["epoch"], e2.Epoch)
	}

	// Lease mode enforce: a control message from a non-holder is refused
	// and nothing is delivered; the holder's goes through.
	c.putSettings(t, admin, map[string]any{"lease_mode": "enforce"})
	msg := func(tok, text string) *response {
		return c.send(t, http.MethodPost, "/v1/sessions/work/messages", tok, map[string]any{"text": text, "intent": "control"})
	}
	r = msg(sup2, "enforce: from sup2")
	if pr := checkProblem(t, r, 403); pr["holder"] != "session:anc" || !strings.HasSuffix(pr["type"].(string), "not_controller") {
		t.Errorf("enforce, control from a non-holder: %s; want 403 not_controller with holder session:anc", r)
	}
	if r = msg(anc, "enforce: from anc"); r.Status != 202 {
		t.Errorf("enforce, control from the holder: %s, want 202", r)
	}
	// Lease mode warn: delivered, flagged, the answer names the holder.
	c.putSettings(t, admin, map[string]any{"lease_mode": "warn"})
	r = msg(sup2, "warn: from sup2")
	var ans struct {
		ID      string `json:"id"`
		Warning string `json:"warning"`
		Holder  string `json:"holder"`
	}
	if r.Status != 202 || json.Unmarshal(r.Body, &ans) != nil || ans.Warning != "not_controller" || ans.Holder != "session:anc" {
		t.Errorf("warn, control from a non-holder: %s; want 202 flagged not_controller naming holder session:anc", r)
	}
	s.routed(t, false)
	texts := map[string]*inbox.Entry{}
	pg = c.inbox(t, worker, "")
	for i, e := range pg.Entries {
		if e.Type != "message.sent" {
			continue
		}
		var d struct {
			Text, Source, Flag, Holder string
		}
		_ = json.Unmarshal(decodeEvent(t, e.Event).Data, &d)
		texts[d.Text] = &pg.Entries[i]
		if d.Text == "warn: from sup2" && (d.Source != "session:sup2" || d.Flag != "not_controller" || d.Holder != "session:anc") {
			t.Errorf("the warned message in work's inbox has data %s; want source session:sup2, flag not_controller, holder session:anc", decodeEvent(t, e.Event).Data)
		}
	}
	if texts["warn: from sup2"] == nil || texts["enforce: from anc"] == nil {
		t.Errorf("work's inbox: %s; want the holder's message and the warned one", describeEntries(pg.Entries))
	}
	if texts["enforce: from sup2"] != nil {
		t.Errorf("the message refused under enforce reached work anyway")
	}
	if e := texts["warn: from sup2"]; e != nil && decodeEvent(t, e.Event).ID != ans.ID {
		t.Errorf("the warned message's id in the inbox %q, in the answer %q", decodeEvent(t, e.Event).ID, ans.ID)
	}
}
