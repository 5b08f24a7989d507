package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/inbox"
)

// escReceiver is a push endpoint on loopback that answers 204 and keeps
// every body it got.
type escReceiver struct {
	mu     sync.Mutex
	bodies []escPush
}

type escPush struct {
	Party string       `json:"party"`
	Kind  string       `json:"kind"`
	Entry *inbox.Entry `json:"entry"`
	Event struct {
		ID string `json:"id"`
	} `json:"event"`
	raw string
}

func (r *escReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var p escPush
	_ = json.Unmarshal(body, &p)
	p.raw = string(body)
	r.mu.Lock()
	r.bodies = append(r.bodies, p)
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// of lists the pushes to party about the event id.
func (r *escReceiver) of(party, id string) []escPush {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []escPush
	for _, p := range r.bodies {
		if p.Party == party && p.Event.ID == id {
			out = append(out, p)
		}
	}
	return out
}

// escIDs is the sorted ids of journaled events.
func escIDs(c *client, t *testing.T, token, typ string) []string {
	t.Helper()
	var ids []string
	for _, e := range c.journalOf(t, token, typ) {
		ids = append(ids, e.ID)
	}
	sort.Strings(ids)
	return ids
}

func escID(level int, from, ws, kid, id string) string {
	return fmt.Sprintf("escalated/%d/%s/%s/%s", level, from, agentSource(ws, "session:"+kid), id)
}

// wantEscalated checks an entry's escalation mark.
func wantEscalated(t *testing.T, what string, e *inbox.Entry, level int, from, rung, reason string) {
	t.Helper()
	if e == nil {
		t.Fatalf("%s: no entry", what)
	}
	x := e.Escalated
	if x == nil || x.Level != level || x.From != from || x.Rung != rung || x.Reason != reason {
		t.Fatalf("%s: %s escalated %+v; want level %d from %s rung %s reason %s",
			what, describeEntries([]inbox.Entry{*e}), x, level, from, rung, reason)
	}
}

// escStep checks one level's delay: escalate_after after the level below,
// within the timers' ±2 s (and a margin for a loaded machine).
func escStep(t *testing.T, what string, prev, next time.Time, after time.Duration) {
	t.Helper()
	d := next.Sub(prev)
	t.Logf("%s after %v (escalate_after %v)", what, d, after)
	if d < after-time.Second || d > after+2500*time.Millisecond {
		t.Errorf("%s after %v, want %v ±2 s", what, d, after)
	}
}

// TestEscalation: on a real serve process and
// Redis, an entry for a recipient that never reads and has no endpoint
// climbs parent's controller → workspace default → human fallback, once
// per level, the fallback's push marked escalated; a live recipient's
// unacked entry does not escalate, a critical one does with
// escalate_unacked ["critical"], and an ack in between stops it; a dead
// recipient is passed at once and never re-escalated.
func TestEscalation(t *testing.T) {
	t.Parallel()
	s := newStack(t, map[string]string{"WAKEGATE_ALLOW_PRIVATE_ENDPOINTS": "true"})
	t.Cleanup(func() { dropPushQueues(s.rdb, s.prefix) }) // after the process has stopped
	recv := &escReceiver{}
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	p := s.start("serve", "serve", nil)
	c := s.client(p)

	// party reads another party's inbox entry about a session, as an operator.
	entryAt := func(t *testing.T, op, party, subject string) *inbox.Entry {
		t.Helper()
		return entry(c.inbox(t, op, "party="+q(party)).Entries, subject)
	}
	endpoint := func(t *testing.T, admin, party string) {
		t.Helper()
		if r := c.send(t, http.MethodPut, "/v1/endpoints/"+party, admin, map[string]any{"url": srv.URL + "/hook"}); r.Status != 201 {
			t.Fatalf("PUT endpoint of %s: %s", party, r)
		}
	}
	spawn := func(t *testing.T, ws, id, parent string) string {
		t.Helper()
		tok := s.token(t, "session:"+id, ws, "events:push inbox")
		extra := map[string]any{}
		if parent != "" {
			extra["data"] = map[string]any{"parent": parent}
		}
		c.accept(t, tok, ce(id+"-spawned", "session.spawned", extra))
		return tok
	}

	t.Run("climbs_once_per_level", func(t *testing.T) {
		const ws = "esc-climb"
		admin := s.token(t, "human:admin", ws, "admin")
		op := s.token(t, "human:operator", ws, "inbox operator events:read events:read:any")
		c.putSettings(t, admin, map[string]any{"escalate_after": "1s", "default_controller": "session:boss",
			"fallback": map[string]any{"party": "human:ops"}})
		endpoint(t, admin, "human:ops")
		// gp → mid → kid. mid speaks once (its spawn) and never again; gp
		// and boss never speak; none has an endpoint.
		spawn(t, ws, "mid", "gp")
		kid := spawn(t, ws, "kid", "mid")
		s.routed(t, false)
		c.accept(t, kid, idleTurn("kid-turn-1", nil))

		var ops []escPush
		waitFor(t, 20*time.Second, "the fallback's push", func() (bool, string) {
			ops = recv.of("human:ops", "kid-turn-1")
			return len(ops) > 0, fmt.Sprintf("%d pushes; mid %s; gp %s; boss %s", len(ops),
				describeEntries(c.inbox(t, op, "party="+q("session:mid")).Entries), describeEntries(c.inbox(t, op, "party="+q("session:gp")).Entries),
				describeEntries(c.inbox(t, op, "party="+q("session:boss")).Entries))
		})
		mid := entryAt(t, op, "session:mid", "session:kid")
		if mid == nil || !slices.Contains(mid.FoldedIDs, "kid-turn-1") || mid.Escalated != nil {
			t.Fatalf("mid's entry %v: want the turn end, not escalated", mid)
		}
		gp := entryAt(t, op, "session:gp", "session:kid")
		wantEscalated(t, "gp", gp, 1, "session:mid", "controller:mid", "unreached")
		boss := entryAt(t, op, "session:boss", "session:kid")
		wantEscalated(t, "boss", boss, 2, "session:gp", "default", "unreached")
		wantEscalated(t, "the fallback's pushed entry", ops[0].Entry, 3, "session:boss", "fallback", "unreached")
		if gp.Via != inbox.ViaEscalation || !gp.Wake || gp.Type != "session.turn_ended" || !slices.Equal(gp.Escalated.Path, []string{"session:mid"}) {
			t.Errorf("gp's copy %s path %v: want a waking copy of the turn end via escalation", describeEntries([]inbox.Entry{*gp}), gp.Escalated.Path)
		}
		if !strings.Contains(ops[0].raw, `"escalated":{"level":3,"from":"session:boss","path":["session:mid","session:gp","session:boss"],"rung":"fallback","reason":"unreached"}`) {
			t.Errorf("the fallback's push does not mark its entry escalated: %s", ops[0].raw)
		}
		escStep(t, "gp's copy", mid.LastAt, gp.FirstAt, time.Second)
		escStep(t, "boss's copy", gp.FirstAt, boss.FirstAt, time.Second)
		escStep(t, "the fallback's copy", boss.FirstAt, ops[0].Entry.FirstAt, time.Second)

		// The human's 2xx acked its copy: nothing climbs above it, and
		// nothing climbs twice.
		waitFor(t, 10*time.Second, "the fallback's copy acked by its endpoint", func() (bool, string) {
			e := entryAt(t, op, "human:ops", "session:kid")
			return e == nil, fmt.Sprint(e)
		})
		waitFor(t, 10*time.Second, "every check done", func() (bool, string) {
			n := 0
			for _, party := range []string{"session:mid", "session:gp", "session:boss", "human:ops"} {
				n += int(s.rdb.ZCard(bg(), inbox.EscalationKey(s.prefix, ws, party)).Val())
			}
			return n == 0, fmt.Sprintf("%d armed", n)
		})
		want := []string{escID(1, "session:mid", ws, "kid", "kid-turn-1"), escID(2, "session:gp", ws, "kid", "kid-turn-1"),
			escID(3, "session:boss", ws, "kid", "kid-turn-1")}
		sort.Strings(want)
		if got := escIDs(c, t, op, "wakegate.escalated"); !slices.Equal(got, want) {
			t.Errorf("journaled escalations %v, want %v", got, want)
		}
		if got := escIDs(c, t, op, "wakegate.fault.undeliverable"); len(got) != 0 {
			t.Errorf("undeliverable faults %v", got)
		}
		if n := len(recv.of("human:ops", "kid-turn-1")); n != 1 {
			t.Errorf("%d pushes to the fallback, want 1", n)
		}
	})

	t.Run("live_recipient_unacked_and_ack", func(t *testing.T) {
		const ws = "esc-live"
		admin := s.token(t, "human:admin", ws, "admin")
		op := s.token(t, "human:operator", ws, "inbox operator events:read events:read:any")
		// 3 s: a check may run up to 1 s early, and the gateway records a
		// party's sightings at most once a second, so mid2's reads are
		// surely recorded after its entries by the time they are checked.
		c.putSettings(t, admin, map[string]any{"escalate_after": "3s", "escalate_unacked": []string{"critical"}})
		mid2 := spawn(t, ws, "mid2", "gp2")
		k1, k2, k3 := spawn(t, ws, "k1", "mid2"), spawn(t, ws, "k2", "mid2"), spawn(t, ws, "k3", "mid2")
		s.routed(t, false)
		c.accept(t, k1, idleTurn("k1-turn", nil))               // attention
		c.accept(t, k2, ce("k2-crash", "session.crashed", nil)) // critical, acked below
		c.accept(t, k3, ce("k3-crash", "session.crashed", nil)) // critical, left unacked
		acked := false
		// mid2 is live: it keeps reading its inbox (and acks k2's crash)
		// while its entries wait.
		waitFor(t, 20*time.Second, "k3's unacked critical entry escalated to gp2", func() (bool, string) {
			pg := c.inbox(t, mid2, "")
			if e := entry(pg.Entries, "session:k2"); e != nil && !acked && e.Type == "session.crashed" {
				if r := c.send(t, http.MethodPost, "/v1/inbox/ack", mid2, map[string]any{"seqs": []int64{e.Seq}}); r.Status != 200 {
					t.Fatalf("ack: %s", r)
				}
				acked = true
			}
			e := entryAt(t, op, "session:gp2", "session:k3")
			return e != nil, describeEntries(pg.Entries)
		})
		if !acked {
			t.Fatal("k2's entry was never seen to be acked")
		}
		wantEscalated(t, "gp2's copy of the critical entry", entryAt(t, op, "session:gp2", "session:k3"), 1, "session:mid2", "controller:mid2", "unacked")
		waitFor(t, 10*time.Second, "every check of mid2's entries done", func() (bool, string) {
			n := s.rdb.ZCard(bg(), inbox.EscalationKey(s.prefix, ws, "session:mid2")).Val()
			return n == 0, fmt.Sprintf("%d armed", n)
		})
		for _, k := range []string{"session:k1", "session:k2"} {
			if e := entryAt(t, op, "session:gp2", k); e != nil {
				t.Errorf("%s's entry escalated to gp2: %s", k, describeEntries([]inbox.Entry{*e}))
			}
		}
		if e := entry(c.inbox(t, mid2, "").Entries, "session:k1"); e == nil {
			t.Error("the live recipient's unacked attention entry is gone")
		}
		if got, want := escIDs(c, t, op, "wakegate.escalated"), []string{escID(1, "session:mid2", ws, "k3", "k3-crash")}; !slices.Equal(got, want) {
			t.Errorf("journaled escalations %v, want only %v", got, want)
		}
	})

	t.Run("dead_recipient_passed_at_once", func(t *testing.T) {
		const ws = "esc-dead"
		admin := s.token(t, "human:admin", ws, "admin")
		op := s.token(t, "human:operator", ws, "inbox operator events:read events:read:any")
		c.putSettings(t, admin, map[string]any{"escalate_after": "2s", "default_controller": "session:boss3",
			"fallback": map[string]any{"party": "human:ops3"}})
		endpoint(t, admin, "human:ops3")
		gp3 := spawn(t, ws, "gp3", "")
		c.accept(t, gp3, ce("gp3-exited", "session.exited", nil)) // gp3 is dead
		mid3 := spawn(t, ws, "mid3", "gp3")
		kid3 := spawn(t, ws, "kid3", "mid3")
		s.routed(t, false)
		c.accept(t, kid3, idleTurn("kid3-turn-1", nil))
		var mid *inbox.Entry
		waitFor(t, routeTimeout, "kid3's turn end at mid3", func() (bool, string) {
			mid = entryAt(t, op, "session:mid3", "session:kid3")
			return mid != nil && slices.Contains(mid.FoldedIDs, "kid3-turn-1"), fmt.Sprint(mid)
		})
		c.accept(t, mid3, ce("mid3-exited", "session.exited", nil)) // mid3 dies with it unread

		var ops []escPush
		waitFor(t, 20*time.Second, "the fallback's push", func() (bool, string) {
			ops = recv.of("human:ops3", "kid3-turn-1")
			return len(ops) > 0, fmt.Sprintf("%d pushes", len(ops))
		})
		boss := entryAt(t, op, "session:boss3", "session:kid3")
		wantEscalated(t, "boss3", boss, 1, "session:mid3", "default", "dead")
		escStep(t, "boss3's copy (dead gp3 passed)", mid.LastAt, boss.FirstAt, 2*time.Second)
		if e := entryAt(t, op, "session:gp3", "session:kid3"); e != nil {
			t.Errorf("dead gp3 got %s", describeEntries([]inbox.Entry{*e}))
		}
		wantEscalated(t, "the fallback's pushed entry", ops[0].Entry, 2, "session:boss3", "fallback", "unreached")

		// Later events about kid3 reach boss3 directly (mid3 and gp3 are
		// dead): a turn end of the same priority folds in and re-arms
		// nothing; a crash raises the entry and climbs again, as a new
		// fact. mid3's entry never escalates again.
		c.accept(t, kid3, idleTurn("kid3-turn-2", nil))
		c.accept(t, kid3, ce("kid3-crash", "session.crashed", nil))
		waitFor(t, 20*time.Second, "the crash pushed to the fallback", func() (bool, string) {
			n := len(recv.of("human:ops3", "kid3-crash"))
			return n > 0, fmt.Sprintf("%d pushes", n)
		})
		waitFor(t, 10*time.Second, "every check done", func() (bool, string) {
			n := 0
			for _, party := range []string{"session:mid3", "session:boss3", "human:ops3"} {
				n += int(s.rdb.ZCard(bg(), inbox.EscalationKey(s.prefix, ws, party)).Val())
			}
			return n == 0, fmt.Sprintf("%d armed", n)
		})
		want := []string{escID(1, "session:mid3", ws, "kid3", "kid3-turn-1"), escID(2, "session:boss3", ws, "kid3", "kid3-turn-1"),
			escID(2, "session:boss3", ws, "kid3", "kid3-crash")}
		sort.Strings(want)
		if got := escIDs(c, t, op, "wakegate.escalated"); !slices.Equal(got, want) {
			t.Errorf("journaled escalations %v, want %v", got, want)
		}
		if e := entryAt(t, op, "session:mid3", "session:kid3"); e == nil || e.Escalated != nil {
			t.Errorf("mid3's entry %v: want it still there, unacked", e)
		}
	})
}
