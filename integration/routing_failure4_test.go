package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"testing"

	"github.com/wakegate/wakegate/delivery/inbox"
)

// TestRoutingFailure4RestartKeepsInboxes is field failure 4 (docs/design.md, "Why"): entries
// in several inboxes, some acked; every wakegate process (a gateway and a
// worker) is SIGKILLed and restarted; GET /v1/brief and GET /v1/inbox
// return the same unacked entries at the same seqs, and nothing acked
// comes back.
func TestRoutingFailure4RestartKeepsInboxes(t *testing.T) {
	t.Parallel()
	const ws = "default"
	s := newStack(t, nil)
	w := s.start("worker", "worker", nil)
	g := s.start("gateway", "gateway", nil)
	c := s.client(g)
	admin := s.token(t, "human:admin", ws, "admin")
	c.putSettings(t, admin, map[string]any{"default_controller": "session:brain4"})

	brain := s.token(t, "session:brain4", ws, "inbox")
	par := s.token(t, "session:par4", ws, "inbox")
	watch := s.token(t, "session:watch4", ws, "inbox subscribe")
	if r := c.send(t, http.MethodPost, "/v1/subscriptions", watch, map[string]any{"types": []string{"session.*"}}); r.Status != 201 {
		t.Fatalf("subscribe: %s", r)
	}
	for i := 1; i <= 4; i++ {
		tok := s.token(t, fmt.Sprintf("session:root4-%d", i), ws, "events:push")
		c.accept(t, tok, idleTurn(fmt.Sprintf("root4-%d-turn", i), nil))
		c.accept(t, tok, ce(fmt.Sprintf("root4-%d-start", i), "session.turn_started", nil))
	}
	kid := s.token(t, "session:kid4", ws, "events:push")
	c.accept(t, kid, ce("kid4-spawned", "session.spawned", map[string]any{"data": map[string]any{"parent": "par4"}}))
	c.accept(t, kid, ce("kid4-ask", "session.awaiting_input", map[string]any{"summary": "which database?"}))
	s.routed(t, false)

	parties := map[string]string{"session:brain4": brain, "session:par4": par, "session:watch4": watch}
	for party, tok := range parties {
		if pg := c.inbox(t, tok, ""); len(pg.Entries) == 0 {
			t.Fatalf("%s has no entries before the kill", party)
		}
	}
	// Acks: two of brain's entries by seq, watch's through its third.
	bp := c.inbox(t, brain, "")
	if len(bp.Entries) != 4 {
		t.Fatalf("brain4 has %s, want 4 entries (one per root)", describeEntries(bp.Entries))
	}
	ackedSeqs := map[string][]int64{"session:brain4": {bp.Entries[0].Seq, bp.Entries[2].Seq}}
	ack := func(tok string, body any, want int) {
		r := c.send(t, http.MethodPost, "/v1/inbox/ack", tok, body)
		var a struct {
			Acked int `json:"acked"`
		}
		if r.Status != 200 || json.Unmarshal(r.Body, &a) != nil || a.Acked != want {
			t.Fatalf("POST /v1/inbox/ack %v: %s, want 200 acked %d", body, r, want)
		}
	}
	ack(brain, map[string]any{"seqs": ackedSeqs["session:brain4"]}, 2)
	wp := c.inbox(t, watch, "")
	if len(wp.Entries) < 4 {
		t.Fatalf("watch4 has %s, want at least 4 entries", describeEntries(wp.Entries))
	}
	ack(watch, map[string]any{"through_seq": wp.Entries[2].Seq}, 3)
	ackedSeqs["session:watch4"] = seqsOf(wp.Entries[:3])

	before := map[string]snapshot{}
	for party, tok := range parties {
		before[party] = takeSnapshot(t, c, tok)
		for _, a := range ackedSeqs[party] {
			if slices.Contains(before[party].Seqs, a) {
				t.Fatalf("%s: acked seq %d still listed before the kill", party, a)
			}
		}
	}
	if len(before["session:par4"].Decisions) != 1 {
		t.Errorf("par4's brief lists open decisions %v, want kid4's awaiting_input", before["session:par4"].Decisions)
	}

	g.kill()
	w.kill()
	w.restart()
	g.restart()
	s.routed(t, false)

	for party, tok := range parties {
		after := takeSnapshot(t, c, tok)
		if !reflect.DeepEqual(before[party], after) {
			t.Errorf("%s after every process was killed and restarted:\n got  %+v\n want %+v", party, after, before[party])
		}
		for _, a := range ackedSeqs[party] {
			if slices.Contains(after.Seqs, a) {
				t.Errorf("%s: acked seq %d came back after the restart", party, a)
			}
		}
	}
}

// snapshot is what a reader sees of its inbox and brief.
type snapshot struct {
	Seqs      []int64
	Inbox     []string // one line per entry of GET /v1/inbox, ascending seq
	Brief     []string // one line per unacked entry of GET /v1/brief, in its order
	Count     int
	Decisions []string
}

func entryLine(e inbox.Entry) string {
	return fmt.Sprintf("seq=%d ck=%s type=%s count=%d prio=%s kind=%s wake=%v wake_seq=%d folded=%v", e.Seq, e.CoalesceKey, e.Type,
		e.Count, e.Priority, e.Kind, e.Wake, e.WakeSeq, e.FoldedIDs)
}

func takeSnapshot(t testing.TB, c *client, tok string) snapshot {
	t.Helper()
	var sn snapshot
	pg := c.inbox(t, tok, "")
	for _, e := range pg.Entries {
		sn.Seqs = append(sn.Seqs, e.Seq)
		sn.Inbox = append(sn.Inbox, entryLine(e))
	}
	r := c.get(t, "/v1/brief", tok)
	if r.Status != 200 {
		t.Fatalf("GET /v1/brief: %s", r)
	}
	var b struct {
		Unacked   []inbox.Entry `json:"unacked"`
		Count     int           `json:"unacked_count"`
		Decisions []struct {
			Session string `json:"session"`
			Type    string `json:"type"`
		} `json:"open_decisions"`
	}
	r.decode(t, &b)
	for _, e := range b.Unacked {
		sn.Brief = append(sn.Brief, entryLine(e))
	}
	sn.Count = b.Count
	for _, d := range b.Decisions {
		sn.Decisions = append(sn.Decisions, d.Session+" "+d.Type)
	}
	if len(sn.Brief) != len(sn.Inbox) || sn.Count != len(sn.Inbox) {
		t.Errorf("brief lists %d unacked (count %d), the inbox %d", len(sn.Brief), sn.Count, len(sn.Inbox))
	}
	return sn
}
