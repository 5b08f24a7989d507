package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/wakegate/wakegate/workers/tasks"
)

// hookLog is a push endpoint on loopback that records the entry type of
// every push it gets and answers 204.
type hookLog struct {
	mu    sync.Mutex
	kinds []string        // "kind type"
	ids   map[string]bool // every event id a push carried (its event, or its entry's folded ids)
}

func (h *hookLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var b struct {
		Kind  string `json:"kind"`
		Entry struct {
			Type      string   `json:"type"`
			FoldedIDs []string `json:"folded_ids"`
		} `json:"entry"`
		Event struct {
			ID string `json:"id"`
		} `json:"event"`
	}
	_ = json.Unmarshal(body, &b)
	h.mu.Lock()
	h.kinds = append(h.kinds, b.Kind+" "+b.Entry.Type)
	if h.ids == nil {
		h.ids = map[string]bool{}
	}
	for _, id := range append(b.Entry.FoldedIDs, b.Event.ID) {
		h.ids[id] = true
	}
	h.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// carried reports whether some push carried the event id.
func (h *hookLog) carried(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ids[id]
}

func (h *hookLog) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.kinds...)
}

// pushStack is a gateway and a worker with private endpoints allowed,
// one loopback receiver, and a barrier that waits until everything
// journaled is routed and every push due now has been sent.
type pushStack struct {
	*stack
	c     *client
	admin string
	recv  *hookLog
	url   string
	insp  *asynq.Inspector
}

func newPushStack(t *testing.T) *pushStack {
	s := newStack(t, map[string]string{"WAKEGATE_ALLOW_PRIVATE_ENDPOINTS": "true"})
	ps := &pushStack{stack: s, recv: &hookLog{}, insp: asynq.NewInspectorFromRedisClient(s.rdb)}
	t.Cleanup(func() { dropPushQueues(s.rdb, s.prefix) }) // after the processes have stopped
	srv := httptest.NewServer(ps.recv)
	t.Cleanup(srv.Close)
	ps.url = srv.URL + "/hook"
	g := s.start("gateway", "gateway", nil)
	s.start("worker", "worker", nil)
	ps.c = s.client(g)
	ps.admin = s.token(t, "human:admin", "default", "admin")
	return ps
}

func (ps *pushStack) endpoint(t *testing.T, party string) {
	t.Helper()
	if r := ps.c.send(t, http.MethodPut, "/v1/endpoints/"+party, ps.admin, map[string]any{"url": ps.url}); r.Status != 201 {
		t.Fatalf("PUT endpoint of %s: %s", party, r)
	}
}

// settle waits until every journaled event is routed and nothing is left
// to push now (scheduled releases may wait), and returns the pushes.
func (ps *pushStack) settle(t *testing.T) []string {
	t.Helper()
	ps.routed(t, false)
	waitFor(t, 20*time.Second, "every push due now sent", func() (bool, string) {
		qi, err := pushQueueInfo(ps.insp, ps.prefix)
		if err != nil {
			return false, err.Error()
		}
		n := qi.Pending + qi.Active + qi.Retry
		return n == 0, fmt.Sprintf("%d pending, %d active, %d retrying", qi.Pending, qi.Active, qi.Retry)
	})
	return ps.recv.got()
}

// TestQuietHoursOverHTTP: with the workspace's quiet_hours covering now,
// a critical event about a session reaches the human subscriber's
// endpoint at once, an attention event is not pushed but stays in the
// human's inbox, and its release is scheduled at the period's end (the
// digest itself at the end is shown by workers/tasks
// TestQuietHoursHoldThenOneDigest, on a shifted clock).
func TestQuietHoursOverHTTP(t *testing.T) {
	t.Parallel()
	ps := newPushStack(t)
	now := time.Now().UTC()
	end := now.Add(time.Hour).Truncate(time.Minute)
	ps.c.putSettings(t, ps.admin, map[string]any{"quiet_hours": map[string]any{
		"start": now.Add(-time.Hour).Format("15:04"), "end": end.Format("15:04"), "tz": "UTC"}})
	ops := ps.token(t, "human:ops", "default", "subscribe inbox")
	if r := ps.c.send(t, http.MethodPost, "/v1/subscriptions", ops, map[string]any{"types": []string{"session.*"}}); r.Status != 201 {
		t.Fatalf("subscribe: %s", r)
	}
	ps.endpoint(t, "human:ops")
	ps.c.accept(t, ps.token(t, "session:qh-w1", "default", "events:push"), idleTurn("qh-1", nil))
	ps.c.accept(t, ps.token(t, "session:qh-w2", "default", "events:push"), ce("qh-2", "session.crashed", map[string]any{"summary": "crashed"}))

	got := ps.settle(t)
	if len(got) != 1 || got[0] != "wake session.crashed" {
		t.Fatalf("pushes during quiet hours %v, want the crash alone", got)
	}
	// The idle turn end waits in the human's inbox, unacked (the crash's
	// 2xx acked the crash's entry).
	pg := ps.c.inbox(t, ops, "")
	if len(pg.Entries) != 1 || pg.Entries[0].CoalesceKey != "session:qh-w1" || pg.Entries[0].Type != "session.turn_ended" {
		t.Fatalf("human's inbox: %s, want the idle turn end alone", describeEntries(pg.Entries))
	}
	// The release of what quiet hours hold is scheduled at the period's end.
	scheduled, err := ps.insp.ListScheduledTasks(pushQueueOf(ps.prefix, "default", "human:ops"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, task := range scheduled {
		var rl struct {
			Party  string `json:"party"`
			Reason string `json:"reason"`
			At     int64  `json:"at"`
		}
		if task.Type == tasks.TypeRelease && json.Unmarshal(task.Payload, &rl) == nil &&
			rl.Party == "human:ops" && rl.Reason == "quiet_hours" && rl.At == end.UnixMilli() {
			found = true
		}
	}
	if !found {
		t.Fatalf("no holds:release of human:ops at %s among the scheduled tasks %d", end, len(scheduled))
	}
}

// TestPausedSessionOverHTTP is a paused session through real processes: a session
// that pushes session.paused with an until has its first idle alarm
// pushed to its controller (first sight), the next idle and stale alarms
// delivered to the controller's inbox without a push, a question
// (awaiting_input) pushed as usual, and after its turn_started its idle
// alarms pushed again. The controller reads and acks between events, so
// every alarm is a fresh entry that would wake on its own; the rate cap
// is raised out of the way.
func TestPausedSessionOverHTTP(t *testing.T) {
	t.Parallel()
	ps := newPushStack(t)
	ps.c.putSettings(t, ps.admin, map[string]any{"default_controller": "session:pz-boss", "rate": map[string]any{"per": "1s", "burst": 100}})
	ps.endpoint(t, "session:pz-boss")
	boss := ps.token(t, "session:pz-boss", "default", "inbox")
	w := ps.token(t, "session:pz-w", "default", "events:push")
	n := 0
	step := func(body []byte, wantPush bool, id string) {
		t.Helper()
		before := len(ps.recv.got())
		ps.c.accept(t, w, body)
		got := ps.settle(t)
		if pushed := len(got) > before; pushed != wantPush {
			t.Fatalf("%s: pushed %v, want %v (pushes %v)", id, pushed, wantPush, got)
		}
		pg := ps.c.inbox(t, boss, "")
		e := entry(pg.Entries, "session:pz-w")
		if e == nil || e.FoldedIDs[len(e.FoldedIDs)-1] != id {
			t.Fatalf("%s: not in the controller's inbox: %s", id, describeEntries(pg.Entries))
		}
		if r := ps.c.send(t, http.MethodPost, "/v1/inbox/ack", boss, map[string]any{"through_seq": e.Seq}); r.Status != 200 {
			t.Fatalf("ack: %s", r)
		}
	}
	id := func() string { n++; return fmt.Sprintf("pz-%d", n) }
	var k string
	k = id()
	step(idleTurn(k, nil), true, k) // not paused
	k = id()
	step(ce(k, "session.paused", map[string]any{"data": map[string]any{
		"until": time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "reason": "waiting on an upstream release"}}), false, k)
	k = id()
	step(idleTurn(k, nil), true, k) // first sight
	k = id()
	step(idleTurn(k, nil), false, k) // within 4 h
	k = id()
	step(ce(k, "session.stalled", map[string]any{"summary": "no progress"}), false, k)
	k = id()
	step(ce(k, "session.awaiting_input", map[string]any{"summary": "which branch?"}), true, k)
	k = id()
	step(ce(k, "session.turn_started", nil), false, k) // ends the pause
	k = id()
	step(idleTurn(k, nil), true, k)
}
