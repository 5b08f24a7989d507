package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/providers/event"
)

// healthReport is the answer of GET /v1/health/supervision.
type healthReport struct {
	Workspace  string    `json:"workspace"`
	At         time.Time `json:"at"`
	OK         bool      `json:"ok"`
	LastSweep  time.Time `json:"last_sweep"`
	Invariants []struct {
		ID       string            `json:"id"`
		Name     string            `json:"name"`
		OK       bool              `json:"ok"`
		Count    int64             `json:"count"`
		Examples []json.RawMessage `json:"examples"`
		Repaired int64             `json:"repaired"`
	} `json:"invariants"`
}

// row is one invariant's count, repairs and examples joined in one string.
func (h healthReport) row(id string) (count, repaired int64, examples string) {
	for _, r := range h.Invariants {
		if r.ID == id {
			var b strings.Builder
			for _, e := range r.Examples {
				b.Write(e)
				b.WriteByte('\n')
			}
			return r.Count, r.Repaired, b.String()
		}
	}
	return -1, -1, ""
}

func (c *client) health(t testing.TB, token string) healthReport {
	t.Helper()
	r := c.get(t, "/v1/health/supervision", token)
	if r.Status != http.StatusOK {
		t.Fatalf("GET /v1/health/supervision: %s", r)
	}
	var h healthReport
	r.decode(t, &h)
	return h
}

// TestSupervisionHealth (Health): on real
// processes and Redis, each invariant is violated on purpose — a root
// session with no supervisor (I1), an event nobody could hear and an
// unreached entry whose escalation timer was lost (I2), a session driven
// by a person and another session within the hour (I4), a recipient woken
// past the workspace rate (I5), a watch on a PR that then merged (I6), a
// party with unacked entries that never reads (I7) — and GET
// /v1/health/supervision names each with a count and an example, while
// repairing and synthesizing nothing (the serve's own sweep is an hour
// away). Then two workers sweeping every second repair what can be
// repaired — the watch closed, the lost timer scheduled again (it runs,
// and tops out as an undeliverable fault) — once between them, and
// synthesize session.stalled (busy past WAKEGATE_MAX_TURN) and
// github.pull_request.stuck (no new result past WAKEGATE_PR_STUCK_AFTER)
// once each, delivered by the router.
func TestSupervisionHealth(t *testing.T) {
	t.Parallel()
	const ws = "hw"
	s := newStack(t, map[string]string{"WAKEGATE_WORKSPACES": "*=" + ws, "WAKEGATE_MAX_TURN": "3s",
		"WAKEGATE_PR_STUCK_AFTER": "4s", "WAKEGATE_HEALTH_EVERY": "1h"})
	insp := asynq.NewInspectorFromRedisClient(s.rdb)
	t.Cleanup(func() { dropPushQueues(s.rdb, s.prefix) }) // after the processes have stopped
	p := s.start("serve", "serve", nil)
	c := s.client(p)
	admin := s.token(t, "human:admin", ws, "admin")
	op := s.token(t, "human:operator", ws, "inbox operator events:read events:read:any subscribe")
	c.putSettings(t, admin, map[string]any{"escalate_after": "5s", "rate": map[string]any{"per": "1h", "burst": 1}})
	spawn := func(id, parent string) string {
		t.Helper()
		tok := s.token(t, "session:"+id, ws, "events:push inbox subscribe")
		extra := map[string]any{}
		if parent != "" {
			extra["data"] = map[string]any{"parent": parent}
		}
		c.accept(t, tok, ce(id+"-spawned", "session.spawned", extra))
		return tok
	}

	// I1, and an I2 fault: a root session nobody supervises ends a turn.
	orphan := spawn("orphan", "")
	c.accept(t, orphan, idleTurn("orphan-idle", nil))
	// I2 and I7: ghost never makes a request and has no endpoint; it
	// controls kid (its spawner), whose turn end reaches it.
	kid := spawn("kid", "ghost")
	c.accept(t, kid, idleTurn("kid-idle", nil))
	// I4: a person prompts driven, and another session sends it control.
	driven := spawn("driven", "ghost")
	c.accept(t, driven, ce("driven-prompt", "session.prompted", map[string]any{"data": map[string]any{"source": "human:alice"}}))
	boss2 := s.token(t, "session:boss2", ws, "events:push")
	if r := c.send(t, http.MethodPost, "/v1/sessions/driven/messages", boss2, map[string]any{"text": "rebase now", "intent": "control"}); r.Status != 202 {
		t.Fatalf("control message: %s", r)
	}
	// I5: loud is woken three times within the hour; the rate lets two.
	for _, k := range []string{"k1", "k2", "k3"} {
		c.accept(t, spawn(k, "loud"), idleTurn(k+"-idle", nil))
	}
	loud := s.token(t, "session:loud", ws, "inbox")
	// Stalled later: busy starts a turn and never beats. Its controller
	// is warden, not ghost: the stall armed in ghost's inbox would have
	// the router schedule ghost's timer again and race the sweep's repair.
	c.accept(t, spawn("busy", "warden"), ce("busy-turn", "session.turn_started", nil))
	// I6: a watch "until never" on #9, which then merges; stuck later:
	// #2 opens and nothing more happens to it.
	watcher := s.token(t, "session:watcher", ws, "subscribe inbox")
	const repo = "Codertocat/Hello-World"
	pr9 := event.PRSubject(repo, 9)
	if r := c.send(t, http.MethodPost, "/v1/subscriptions", watcher, map[string]any{"subjects": []string{pr9}, "until": "never"}); r.Status != 201 {
		t.Fatalf("subscribe: %s", r)
	}
	merged := editJSON(t, fixture(t, "derived/pull_request.closed.merged.json"), func(m map[string]any) {
		m["number"] = 9
		obj(m, "pull_request")["number"] = 9
	})
	if r := c.mustWebhook(t, "pull_request", newGUID(), merged); r.Status != 202 {
		t.Fatalf("merged #9: %s", r)
	}
	opened := fixture(t, "octokit/pull_request/opened.payload.json")
	if r := c.mustWebhook(t, "pull_request", newGUID(), opened); r.Status != 202 {
		t.Fatalf("opened #2: %s", r)
	}
	s.routed(t, true)
	// loud reads its inbox: reached (its entries are no I2, no I7).
	if n := len(c.inbox(t, loud, "").Entries); n != 3 {
		t.Fatalf("loud has %d entries, want its three children's turn ends", n)
	}
	// ghost's escalation timer is lost (a Redis failover, say): every
	// scheduled task of the push queue is gone, its entry stays armed.
	known, err := insp.Queues()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range pushQueues(s.prefix) {
		if !slices.Contains(known, q) {
			continue // nothing was ever enqueued on it
		}
		if _, err := insp.DeleteAllScheduledTasks(q); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.rdb.ZCard(bg(), inbox.EscalationKey(s.prefix, ws, "session:ghost")).Val(); n != 1 {
		t.Fatalf("ghost has %d armed entries, want kid's turn end", n)
	}

	// The report names each violation, with a count and an example.
	want := map[string][]string{
		"I1": {`"session":"session:orphan"`},
		"I2": {`"kind":"fault"`, `"subject":"session:orphan"`, `"kind":"entry"`, `"party":"session:ghost"`, `"subject":"session:kid"`, `"reason":"unreached"`},
		"I4": {`"session":"session:driven"`, `"party":"human:alice"`, `"party":"session:boss2"`},
		"I5": {`"party":"session:loud"`, `"wakes_last_hour":3`},
		"I6": {`"subject":"` + pr9 + `"`, `"owner":"session:watcher"`},
		"I7": {`"party":"session:ghost"`},
	}
	var h healthReport
	waitFor(t, 45*time.Second, "the report naming every violation", func() (bool, string) {
		h = c.health(t, admin)
		var missing []string
		for id, names := range want {
			n, _, ex := h.row(id)
			if n < 1 {
				missing = append(missing, id+" count 0")
			}
			for _, name := range names {
				if !strings.Contains(ex, name) {
					missing = append(missing, id+" lacks "+name)
				}
			}
		}
		return len(missing) == 0, fmt.Sprintf("%v in %+v", missing, h)
	})
	if h.OK || h.Workspace != ws || h.At.IsZero() {
		t.Errorf("report ok=%v workspace=%q at=%v", h.OK, h.Workspace, h.At)
	}
	if n, _, ex := h.row("I3"); n < 1 || !strings.Contains(ex, `"unacked"`) {
		t.Errorf("I3 (unacked per party): %d\n%s", n, ex)
	}
	// An operator reads it too, naming the workspace.
	opAll := s.token(t, "human:operator", "elsewhere", "operator")
	if r := c.get(t, "/v1/health/supervision?workspace="+ws, opAll); r.Status != 200 || !strings.Contains(string(r.Body), `"workspace":"`+ws+`"`) {
		t.Errorf("operator naming %s: %s", ws, r)
	}
	// The report repaired and synthesized nothing.
	for _, id := range []string{"I2", "I6"} {
		if _, rep, _ := h.row(id); rep != 0 {
			t.Errorf("%s repaired %d by a report", id, rep)
		}
	}
	evs := s.journalEvents(t)
	if n := len(byType(evs, "session.stalled", "")) + len(byType(evs, "github.pull_request.stuck", "")); n != 0 {
		t.Fatalf("%d stalled/stuck journaled without the periodic sweep", n)
	}

	// Two workers sweep every second: they repair and synthesize, once.
	every := map[string]string{"WAKEGATE_HEALTH_EVERY": "1s"}
	w1, w2 := s.start("worker1", "worker", every), s.start("worker2", "worker", every)
	stalledID := "stalled/busy/"
	stuckID := "stuck/" + event.PRSubject(repo, 2) + "/" + prHead(t, opened)
	lostFault := "undeliverable/escalation/" + agentSource(ws, "session:kid") + "/kid-idle"
	waitFor(t, 45*time.Second, "repairs and synthesized events", func() (bool, string) {
		h = c.health(t, admin)
		n6, r6, _ := h.row("I6")
		_, r2, _ := h.row("I2")
		evs := s.journalEvents(t)
		stalled, stuck := byType(evs, "session.stalled", "session:busy"), byType(evs, "github.pull_request.stuck", "")
		faults := countIDs(byType(evs, "wakegate.fault.undeliverable", ""))
		return n6 == 0 && r6 >= 1 && r2 >= 1 && len(stalled) == 1 && len(stuck) == 1 && faults[lostFault] == 1,
			fmt.Sprintf("I6 %d repaired %d; I2 repaired %d; stalled %d, stuck %d; faults %v", n6, r6, r2, len(stalled), len(stuck), faults)
	})
	if subs := c.get(t, "/v1/subscriptions", watcher); !strings.Contains(string(subs.Body), `"subscriptions":[]`) {
		t.Errorf("the watch on the merged PR is still there: %s", subs)
	}
	// The periodic sweep synthesized each once, with its fact id, and the
	// router delivered the stall to busy's controller.
	evs = s.journalEvents(t)
	stalled := byType(evs, "session.stalled", "session:busy")
	if len(stalled) != 1 || !strings.HasPrefix(stalled[0].ID, stalledID) || stalled[0].SessionID != "busy" {
		t.Errorf("stalled events %+v, want one %s… about busy", stalled, stalledID)
	}
	if stuck := byType(evs, "github.pull_request.stuck", ""); len(stuck) != 1 || stuck[0].ID != stuckID {
		t.Errorf("stuck events %+v, want one %s", stuck, stuckID)
	}
	waitFor(t, routeTimeout, "the stall in warden's inbox", func() (bool, string) {
		pg := c.inbox(t, op, "party="+q("session:warden"))
		e := entry(pg.Entries, "session:busy")
		return e != nil && e.Type == "session.stalled", describeEntries(pg.Entries)
	})
	// Between the two workers, each repair and each fact happened once.
	for _, m := range []struct {
		name string
		want float64
	}{
		{`wakegate_health_repairs_total{invariant="I6"}`, 1},
		{`wakegate_health_synthesized_total{type="session.stalled"}`, 1},
		{`wakegate_health_synthesized_total{type="github.pull_request.stuck"}`, 1},
	} {
		var sum float64
		for _, w := range []*proc{w1, w2} {
			v, ok := metric(t, w.Work, m.name)
			if !ok {
				t.Fatalf("%s: no %s", w.name, m.name)
			}
			sum += v
		}
		if sum != m.want {
			t.Errorf("%s summed over the workers = %v, want %v", m.name, sum, m.want)
		}
	}
	// What cannot be repaired is still reported.
	h = c.health(t, admin)
	for _, id := range []string{"I1", "I4", "I5", "I7"} {
		if n, _, _ := h.row(id); n < 1 {
			t.Errorf("%s no longer reported after the sweep: %+v", id, h)
		}
	}
	if h.LastSweep.IsZero() {
		t.Errorf("report without last_sweep once the workers swept: %+v", h)
	}
}
