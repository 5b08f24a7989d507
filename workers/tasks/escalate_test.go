package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/escalate"
	"github.com/wakegate/wakegate/delivery/holds"
	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/outbound"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/workers/route"
)

// escEnv is escalation as serve assembles it, on real Redis under a fresh
// prefix: the router (pushes, holds, escalation), the pusher, the
// releaser and the escalator, worked by the production Asynq server
// (NewServer: 1 s delayed-task check), so timer accuracy is measured as
// it runs.
type escEnv struct {
	t    *testing.T
	ctx  context.Context
	rdb  redis.UniversalClient
	box  *inbox.Inbox
	eps  *outbound.Endpoints
	p    *Pusher
	j    *journal.Journal
	reg  *sessions.Registry
	sup  *supervision.Store
	r    *route.Router
	esc  *Escalator
	insp *asynq.Inspector
	n    int
}

func newEscEnv(t *testing.T, schedule []time.Duration, settings string) *escEnv {
	t.Helper()
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	metrics := prometheus.NewRegistry()
	guard := &outbound.Guard{AllowPrivate: true}
	e := &escEnv{t: t, ctx: ctx, rdb: rdb, box: inbox.New(rdb, inbox.Config{Prefix: prefix}),
		eps: outbound.NewEndpoints(rdb, prefix, guard), insp: asynq.NewInspectorFromRedisClient(rdb)}
	if schedule == nil {
		schedule = []time.Duration{time.Hour}
	}
	e.p = New(rdb, asynq.NewClientFromRedisClient(rdb), e.box, e.eps, log, metrics, Config{Prefix: prefix, Schedule: schedule, Guard: guard})
	e.j = journal.New(rdb, journal.Config{Prefix: prefix, Shards: 4})
	e.reg = sessions.New(rdb, e.j, 10*time.Minute)
	e.sup = supervision.New(rdb, prefix, func(ctx context.Context, ws, party string) (bool, error) {
		s, err := e.reg.Get(ctx, ws, party, time.Now())
		return err == nil && s.Liveness == sessions.Dead, err
	})
	h := holds.New(rdb, prefix)
	rel := NewReleaser(e.p, h, nil)
	e.esc = NewEscalator(e.p, rel, e.reg, e.sup, e.j, log, metrics)
	e.r = route.NewRouter(rdb, e.j, e.reg, subscriptions.New(rdb, prefix), e.sup, e.box, metrics).
		WithPusher(e.p).WithHolds(h, rel).WithEscalation(e.esc)
	if _, err := e.sup.MergeSettings(ctx, ws, []byte(settings)); err != nil {
		t.Fatal(err)
	}
	srv := NewServer(rdb, e.p, rel, log)
	srv.Handle(TypeEscalate, e.esc)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		dropQueues(rdb, e.p.Queues())
	})
	return e
}

// controls makes session:<parent> the controller (subtree) of child.
func (e *escEnv) controls(parent, child string) {
	e.t.Helper()
	if err := e.sup.SetDefaultController(e.ctx, ws, child, parent); err != nil {
		e.t.Fatal(err)
	}
}

// seen records a request by party at at.
func (e *escEnv) seen(party string, at time.Time) {
	e.t.Helper()
	if err := e.reg.Seen(e.ctx, ws, party, at); err != nil {
		e.t.Fatal(err)
	}
}

// exit marks a session exited (dead), as its session.exited would.
func (e *escEnv) exit(party string) {
	e.t.Helper()
	if err := e.rdb.HSet(e.ctx, sessions.Key(e.j, ws, party), "exited", "1").Err(); err != nil {
		e.t.Fatal(err)
	}
}

// route routes an event of typ pushed by session kid about itself, with
// kid's lineage, as the journal hands it to the router.
func (e *escEnv) route(typ, kid string, lineage ...string) *event.Event {
	e.t.Helper()
	e.n++
	ev := &event.Event{SpecVersion: event.SpecVersion, ID: fmt.Sprintf("%s-%d", kid, e.n), Source: event.AgentSource(ws, "session:"+kid),
		Type: typ, Subject: event.SessionSubject(kid), Time: time.Now().UTC(), Seq: fmt.Sprintf("0-%d-0", e.n), Workspace: ws,
		SessionID: kid, Lineage: lineage, Summary: typ + " " + kid}
	if typ == "session.turn_ended" {
		ev.Data = json.RawMessage(`{"idle":true}`)
	}
	ev.Priority = event.DefaultPriority(ev.Type, ev.Data)
	e.handle(ev)
	return ev
}

func (e *escEnv) handle(ev *event.Event) {
	e.t.Helper()
	if err := e.r.Handle(e.ctx, 0, ev); err != nil {
		e.t.Fatal(err)
	}
}

// entryOf is party's unacked entry about session kid, nil if none.
func (e *escEnv) entryOf(party, kid string) *inbox.Entry {
	e.t.Helper()
	ent, err := e.box.Get(e.ctx, ws, party, event.SessionSubject(kid))
	if err != nil {
		e.t.Fatal(err)
	}
	return ent
}

// faults lists the journaled wakegate.* events of one type, by id.
func (e *escEnv) journaled(typ string) []string {
	e.t.Helper()
	evs, _, err := e.j.Read(e.ctx, make(journal.Cursor, 4), journal.Filter{Workspace: ws, Types: []string{typ}}, 1000)
	if err != nil {
		e.t.Fatal(err)
	}
	var ids []string
	for _, ev := range evs {
		ids = append(ids, ev.ID)
	}
	sort.Strings(ids)
	return ids
}

// armed is party's escalation due index.
func (e *escEnv) armed(party string) []string {
	e.t.Helper()
	cks, err := e.rdb.ZRange(e.ctx, inbox.EscalationKey(e.p.cfg.Prefix, ws, party), 0, -1).Result()
	if err != nil {
		e.t.Fatal(err)
	}
	return cks
}

// timers counts the escalation timer tasks of party waiting in the queue.
func (e *escEnv) timers(party string) int {
	e.t.Helper()
	n := 0
	for _, list := range []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){e.insp.ListScheduledTasks, e.insp.ListPendingTasks} {
		tasks, err := list(e.p.QueueOf(ws, party))
		if err != nil && !strings.Contains(err.Error(), "not found") {
			e.t.Fatal(err)
		}
		for _, ti := range tasks {
			var tm timer
			if ti.Type == TypeEscalate && json.Unmarshal(ti.Payload, &tm) == nil && tm.Party == party {
				n++
			}
		}
	}
	return n
}

// value reads a counter.
func value(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

func escalatedID(level int, from string, ev *event.Event) string {
	return fmt.Sprintf("escalated/%d/%s/%s/%s", level, from, ev.Source, ev.ID)
}

// wantCopy checks an escalated copy's mark.
func wantCopy(t *testing.T, what string, ent *inbox.Entry, level int, path []string, rung, reason string) {
	t.Helper()
	if ent == nil {
		t.Fatalf("%s: no entry", what)
	}
	x := ent.Escalated
	if x == nil || x.Level != level || x.From != path[len(path)-1] || fmt.Sprint(x.Path) != fmt.Sprint(path) || x.Rung != rung || x.Reason != reason {
		t.Fatalf("%s: escalated %+v, want level %d from %s path %v rung %s reason %s", what, x, level, path[len(path)-1], path, rung, reason)
	}
}

// maxLate is how late a check may run: docs/design.md §8 says ±2 s; the margin is
// for a loaded test machine.
const maxLate = 2*time.Second + 500*time.Millisecond

// wantStep checks that a copy arrived escalate_after (1 s) after the
// previous level's, within the timers' accuracy.
func wantStep(t *testing.T, what string, prev, next time.Time) {
	t.Helper()
	d := next.Sub(prev)
	t.Logf("%s: %v after the previous level (escalate_after 1s)", what, d)
	if d < time.Second-escalate.Slack || d > time.Second+maxLate {
		t.Errorf("%s: %v after the previous level, want 1s within -%v/+%v", what, d, escalate.Slack, maxLate)
	}
}

// TestEscalationClimbsOncePerLevel: an entry for a recipient that never
// reads (silent since before the entry) and has no endpoint climbs the
// parent's controller → the workspace default → the human fallback, one
// level per escalate_after, once per level; the fallback's push carries an
// entry marked escalated; re-running the timers and the routing escalates
// nothing again.
func TestEscalationClimbsOncePerLevel(t *testing.T) {
	e := newEscEnv(t, nil, `{"escalate_after":"1s","default_controller":"session:boss","fallback":{"party":"human:ops"}}`)
	rc := newReceiver(t, statuses(200))
	if _, _, _, err := e.eps.Put(e.ctx, ws, "human:ops", outbound.Put{URL: rc.url()}); err != nil {
		t.Fatal(err)
	}
	e.controls("gp", "mid")
	e.controls("mid", "kid")
	e.seen("session:mid", time.Now().Add(-time.Minute)) // mid spoke once, before the entry, then went silent

	ev := e.route("session.awaiting_input", "kid", "mid", "gp")
	first := e.entryOf("session:mid", "kid")
	if first == nil || first.Via != inbox.ViaController || !first.Armed {
		t.Fatalf("mid's entry %+v: want via controller, armed", first)
	}
	if got := e.timers("session:mid"); got != 1 {
		t.Fatalf("%d timers for mid, want 1", got)
	}

	eventually(t, 20*time.Second, "the fallback's push", func() bool { return rc.count() >= 1 })
	gp, boss := e.entryOf("session:gp", "kid"), e.entryOf("session:boss", "kid")
	wantCopy(t, "gp", gp, 1, []string{"session:mid"}, "controller:mid", escalate.ReasonUnreached)
	wantCopy(t, "boss", boss, 2, []string{"session:mid", "session:gp"}, "default", escalate.ReasonUnreached)
	if gp.Via != inbox.ViaEscalation || !gp.Wake || gp.Count != 1 || !strings.Contains(string(gp.Event), `"id":"`+ev.ID+`"`) {
		t.Errorf("gp's copy %+v: want a waking escalation copy of %s", gp, ev.ID)
	}
	wantStep(t, "mid → gp", first.FirstAt, gp.FirstAt)
	wantStep(t, "gp → boss", gp.FirstAt, boss.FirstAt)

	bs := bodies(t, rc)
	if len(bs) != 1 || bs[0].Entry == nil || bs[0].Party != "human:ops" {
		t.Fatalf("fallback pushes %+v", bs)
	}
	ops := bs[0].Entry
	wantCopy(t, "the fallback's pushed entry", ops, 3, []string{"session:mid", "session:gp", "session:boss"}, "fallback", escalate.ReasonUnreached)
	wantStep(t, "boss → ops", boss.FirstAt, ops.FirstAt)
	if !strings.Contains(string(rc.got()[0].body), `"escalated":{"level":3,"from":"session:boss"`) {
		t.Errorf("the fallback's push body does not mark the entry escalated: %s", rc.got()[0].body)
	}
	// The human's 2xx acks its copy: nothing is left to escalate above it.
	eventually(t, 10*time.Second, "the fallback's copy acked by its 2xx", func() bool { return e.entryOf("human:ops", "kid") == nil })

	want := []string{escalatedID(1, "session:mid", ev), escalatedID(2, "session:gp", ev), escalatedID(3, "session:boss", ev)}
	sort.Strings(want)
	if got := e.journaled("wakegate.escalated"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("journaled escalations %v, want %v", got, want)
	}
	for _, p := range []string{"session:mid", "session:gp", "session:boss", "human:ops"} {
		if a := e.armed(p); len(a) != 0 {
			t.Errorf("%s still armed: %v", p, a)
		}
	}
	// Unacked entries stay where they are: each level keeps its copy.
	if e.entryOf("session:mid", "kid") == nil || e.entryOf("session:gp", "kid") == nil {
		t.Error("an escalated entry left its inbox")
	}

	// Re-runs: the timers again, and the routing of the same event (a
	// duplicate), escalate nothing twice.
	for _, p := range []string{"session:mid", "session:gp", "session:boss"} {
		if err := e.esc.Check(e.ctx, ws, p); err != nil {
			t.Fatal(err)
		}
	}
	e.handle(ev)
	if a := e.armed("session:mid"); len(a) != 0 {
		t.Errorf("a re-run of the routing re-armed mid: %v", a)
	}
	if got := e.journaled("wakegate.escalated"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after re-runs: journaled escalations %v, want still %v", got, want)
	}
	if n := rc.count(); n != 1 {
		t.Errorf("%d pushes to the fallback, want 1", n)
	}
	if n := value(e.esc.m.escalations.WithLabelValues(escalate.RungController)); n != 1 {
		t.Errorf("wakegate_escalations_total{level=controller} = %v, want 1", n)
	}
	if f := e.journaled("wakegate.fault.undeliverable"); len(f) != 0 {
		t.Errorf("undeliverable faults %v", f)
	}
}

// TestEscalationLiveRecipient: a live recipient (it made a request since
// its entries arrived) that leaves them unacked is not paged over, except
// the priorities escalate_unacked names; an ack before the due stops even
// those.
func TestEscalationLiveRecipient(t *testing.T) {
	e := newEscEnv(t, nil, `{"escalate_after":"1s","escalate_unacked":["critical"],"fallback":{"party":"human:ops"}}`)
	e.controls("gp", "mid")
	for _, k := range []string{"k1", "k2", "k3"} {
		e.controls("mid", k)
	}
	attention := e.route("session.awaiting_input", "k1", "mid", "gp")
	acked := e.route("session.crashed", "k2", "mid", "gp")
	critical := e.route("session.crashed", "k3", "mid", "gp")
	e.seen("session:mid", time.Now()) // mid reads: live, reached
	ack := e.entryOf("session:mid", "k2")
	if n, err := e.box.Ack(e.ctx, ws, "session:mid", 0, []int64{ack.Seq}); err != nil || n != 1 {
		t.Fatalf("ack: %d %v", n, err)
	}

	eventually(t, 10*time.Second, "the critical entry escalated to gp", func() bool { return e.entryOf("session:gp", "k3") != nil })
	wantCopy(t, "gp's critical copy", e.entryOf("session:gp", "k3"), 1, []string{"session:mid"}, "controller:mid", escalate.ReasonUnacked)
	// The attention entry was due first: its check has run, and decided
	// the recipient was reached. (The check disarms just after it has
	// delivered the critical copy.)
	eventually(t, 5*time.Second, "mid disarmed", func() bool { return len(e.armed("session:mid")) == 0 })
	if e.entryOf("session:gp", "k1") != nil || e.entryOf("session:gp", "k2") != nil {
		t.Error("the attention entry, or the acked one, escalated")
	}
	if n := value(e.esc.m.checks.WithLabelValues("reached")); n != 1 {
		t.Errorf("checks that found the recipient reached: %v, want 1 (the attention entry)", n)
	}
	if e.entryOf("session:mid", "k1") == nil {
		t.Error("the live recipient's unacked entry is gone")
	}
	want := []string{escalatedID(1, "session:mid", critical)}
	if got := e.journaled("wakegate.escalated"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("journaled escalations %v, want %v (not %s nor %s)", got, want, attention.ID, acked.ID)
	}
}

// TestEscalationDeadRecipient: a recipient dead at its check escalates;
// a dead party above it is passed at once (no copy, no wait); and the dead
// recipient's entry is never escalated again by its later timers.
func TestEscalationDeadRecipient(t *testing.T) {
	e := newEscEnv(t, nil, `{"escalate_after":"1s","default_controller":"session:boss","fallback":{"party":"human:ops"}}`)
	rc := newReceiver(t, statuses(200))
	if _, _, _, err := e.eps.Put(e.ctx, ws, "human:ops", outbound.Put{URL: rc.url()}); err != nil {
		t.Fatal(err)
	}
	e.controls("gp", "mid")
	e.controls("mid", "kid")
	e.controls("mid", "kid2")
	e.seen("session:mid", time.Now())
	e.seen("session:gp", time.Now().Add(-time.Minute))
	e.exit("session:gp") // gp exited: dead

	ev := e.route("session.awaiting_input", "kid", "mid", "gp")
	first := e.entryOf("session:mid", "kid")
	if first == nil || first.Via != inbox.ViaController {
		t.Fatalf("mid's entry %+v", first)
	}
	e.exit("session:mid") // mid dies with the entry unread

	eventually(t, 20*time.Second, "the fallback's push", func() bool { return rc.count() >= 1 })
	boss := e.entryOf("session:boss", "kid")
	wantCopy(t, "boss", boss, 1, []string{"session:mid"}, "default", escalate.ReasonDead)
	wantStep(t, "mid → boss (gp passed)", first.FirstAt, boss.FirstAt)
	if e.entryOf("session:gp", "kid") != nil {
		t.Error("dead gp got a copy")
	}
	ops := bodies(t, rc)[0].Entry
	wantCopy(t, "ops", ops, 2, []string{"session:mid", "session:boss"}, "fallback", escalate.ReasonUnreached)
	want := []string{escalatedID(1, "session:mid", ev), escalatedID(2, "session:boss", ev)}
	sort.Strings(want)
	if got := e.journaled("wakegate.escalated"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("journaled escalations %v, want %v", got, want)
	}

	// mid's timer runs again for another entry (armed directly: routing
	// no longer picks the dead mid); its first entry stays escalated once.
	ev2 := e.route("session.awaiting_input", "kid2", "mid", "gp")
	if e.entryOf("session:mid", "kid2") != nil {
		t.Fatal("routing delivered to the dead mid")
	}
	ev2.ID += "-direct"
	if _, err := e.box.Deliver(e.ctx, inbox.Delivery{Workspace: ws, Party: "session:mid", Event: ev2, Via: inbox.ViaController,
		Settings: json.RawMessage(`{"escalate_after":"1s","default_controller":"session:boss"}`), EscalateAt: time.Now().Add(time.Second)}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := e.esc.Schedule(e.ctx, ws, "session:mid"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "mid's second entry escalated", func() bool {
		for _, id := range e.journaled("wakegate.escalated") {
			if id == escalatedID(1, "session:mid", ev2) {
				return true
			}
		}
		return false
	})
	n := 0
	for _, id := range e.journaled("wakegate.escalated") {
		if strings.HasSuffix(id, "/"+ev.ID) && strings.HasPrefix(id, "escalated/1/session:mid/") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("mid's first entry escalated %d times, want once", n)
	}
}

// TestEscalationUndeliverable: with no default controller and no
// fallback, the climb tops out in exactly one wakegate.fault.undeliverable,
// however often the timers run again.
func TestEscalationUndeliverable(t *testing.T) {
	e := newEscEnv(t, nil, `{"escalate_after":"1s"}`)
	e.controls("gp", "mid")
	e.controls("mid", "kid")
	ev := e.route("session.awaiting_input", "kid", "mid", "gp")
	eventually(t, 20*time.Second, "an undeliverable fault", func() bool { return len(e.journaled("wakegate.fault.undeliverable")) > 0 })
	for _, p := range []string{"session:mid", "session:gp"} {
		if err := e.esc.Check(e.ctx, ws, p); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.journaled("wakegate.fault.undeliverable"); fmt.Sprint(got) != fmt.Sprint([]string{"undeliverable/escalation/" + ev.Source + "/" + ev.ID}) {
		t.Errorf("faults %v, want exactly one for %s", got, ev.ID)
	}
	if got := e.journaled("wakegate.escalated"); fmt.Sprint(got) != fmt.Sprint([]string{escalatedID(1, "session:mid", ev)}) {
		t.Errorf("escalations %v, want mid → gp only", got)
	}
	if n := value(e.esc.m.escalations.WithLabelValues("undeliverable")); n != 1 {
		t.Errorf("wakegate_escalations_total{level=undeliverable} = %v, want 1", n)
	}
}

// TestDeadLetterEscalatesAtOnce: a recipient with an endpoint is reached,
// so its entry waits for no escalate_after — but when the push to it is
// dead-lettered, the entry escalates then, at once.
func TestDeadLetterEscalatesAtOnce(t *testing.T) {
	e := newEscEnv(t, []time.Duration{time.Second}, `{"escalate_after":"1h"}`)
	rc := newReceiver(t, statuses(http.StatusInternalServerError))
	if _, _, _, err := e.eps.Put(e.ctx, ws, "session:mid", outbound.Put{URL: rc.url()}); err != nil {
		t.Fatal(err)
	}
	e.controls("gp", "mid")
	e.controls("mid", "kid")
	ev := e.route("session.awaiting_input", "kid", "mid", "gp")
	eventually(t, 20*time.Second, "the escalation of the dead-lettered entry", func() bool { return e.entryOf("session:gp", "kid") != nil })
	dead, _, err := e.p.DeadLetters(e.ctx, 10)
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead letters %+v %v", dead, err)
	}
	gp := e.entryOf("session:gp", "kid")
	wantCopy(t, "gp", gp, 1, []string{"session:mid"}, "controller:mid", escalate.ReasonDeadLetter)
	if late := gp.FirstAt.Sub(dead[0].DeadAt); late > maxLate {
		t.Errorf("escalated %v after the dead letter, want at once (within %v)", late, maxLate)
	}
	if rc.count() != 2 {
		t.Errorf("%d attempts, want 2", rc.count())
	}
	// The step is journaled just after the copy is delivered.
	want := fmt.Sprint([]string{escalatedID(1, "session:mid", ev)})
	eventually(t, 5*time.Second, "the escalation journaled once", func() bool { return fmt.Sprint(e.journaled("wakegate.escalated")) == want })
}

// TestOneTimerPerRecipient: many armed entries of one recipient make one
// timer task, not one per entry.
func TestOneTimerPerRecipient(t *testing.T) {
	e := newEscEnv(t, nil, `{"escalate_after":"1h"}`)
	const n = 25
	for i := range n {
		kid := fmt.Sprintf("k%d", i)
		e.controls("mid", kid)
		e.route("session.awaiting_input", kid, "mid")
	}
	if a := e.armed("session:mid"); len(a) != n {
		t.Fatalf("%d entries armed, want %d", len(a), n)
	}
	if got := e.timers("session:mid"); got != 1 {
		t.Fatalf("%d timer tasks for %d armed entries, want 1", got, n)
	}
}

// TestReplayedClaim: a check that crashed after recording its decision is
// replayed as decided (not decided again) and, replayed twice, escalates
// once; an entry acked before its check only ends the check.
func TestReplayedClaim(t *testing.T) {
	e := newEscEnv(t, nil, `{"escalate_after":"1h","fallback":{"party":"human:ops"}}`)
	e.controls("mid", "kid")
	ev := e.route("session.awaiting_input", "kid", "mid")
	ent := e.entryOf("session:mid", "kid")
	due, ok, err := e.esc.store.Next(e.ctx, ws, "session:mid")
	if err != nil || !ok {
		t.Fatal(due, ok, err)
	}
	// The crashed run decided: escalate to the fallback.
	c := escalate.Claim{Due: due.UnixMilli(), Reason: escalate.ReasonUnreached, To: "human:ops", Rung: "fallback", Level: 1,
		Path: []string{"session:mid"}, Seq: ent.Seq, Event: ent.Event, Settings: ent.Settings}
	if _, ok, err := e.esc.store.Claim(e.ctx, ws, "session:mid", "session:kid", c); err != nil || !ok {
		t.Fatal(ok, err)
	}
	p := escalate.Pending{CK: "session:kid", Due: due.UnixMilli(), Claim: &c}
	for range 2 { // replayed twice: the second finds its effects done
		if err := e.esc.check(e.ctx, ws, "session:mid", p, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	ops := e.entryOf("human:ops", "kid")
	wantCopy(t, "ops", ops, 1, []string{"session:mid"}, "fallback", escalate.ReasonUnreached)
	if ops.Count != 1 {
		t.Errorf("ops's copy folded %d events, want 1", ops.Count)
	}
	if got := e.journaled("wakegate.escalated"); fmt.Sprint(got) != fmt.Sprint([]string{escalatedID(1, "session:mid", ev)}) {
		t.Errorf("escalations %v", got)
	}
	if a := e.armed("session:mid"); len(a) != 0 {
		t.Errorf("mid still armed after the replay: %v", a)
	}

	// Acked between the timer's read and its check: the check only ends.
	ev2 := e.route("session.awaiting_input", "kid", "mid")
	ent2 := e.entryOf("session:mid", "kid")
	if ent2 == nil || ent2.FoldedIDs[len(ent2.FoldedIDs)-1] != ev2.ID {
		t.Fatalf("mid's entry %+v", ent2)
	}
	if _, err := e.box.Ack(e.ctx, ws, "session:mid", ent2.Seq, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.esc.check(e.ctx, ws, "session:mid", escalate.Pending{CK: "session:kid", Due: 1}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := value(e.esc.m.checks.WithLabelValues("acked")); n != 1 {
		t.Errorf("checks of acked entries: %v, want 1", n)
	}
	if got := e.journaled("wakegate.escalated"); len(got) != 1 {
		t.Errorf("escalations after an acked check %v", got)
	}
}

// TestBadEntryGivenUp: an entry that can never be escalated (its claimed
// event does not decode) is given up — logged, counted, disarmed — and
// does not hold back the recipient's other entries.
func TestBadEntryGivenUp(t *testing.T) {
	e := newEscEnv(t, nil, `{"escalate_after":"1h","fallback":{"party":"human:ops"}}`)
	e.controls("mid", "bad")
	e.controls("mid", "good")
	e.route("session.awaiting_input", "bad", "mid")
	good := e.route("session.awaiting_input", "good", "mid")
	// Both due now: bad as a crashed run left it, good as a dead letter.
	due := time.Now()
	if err := e.rdb.ZAdd(e.ctx, inbox.EscalationKey(e.p.cfg.Prefix, ws, "session:mid"), redis.Z{Score: float64(due.UnixMilli()), Member: "session:bad"}).Err(); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := e.esc.store.Claim(e.ctx, ws, "session:mid", "session:bad", escalate.Claim{Due: due.UnixMilli(),
		Reason: escalate.ReasonUnreached, To: "human:ops", Rung: "fallback", Level: 1, Path: []string{"session:mid"},
		Event: json.RawMessage(`"not an event"`)}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if err := e.esc.store.DeadLettered(e.ctx, ws, "session:mid", []string{"session:good"}, due); err != nil {
		t.Fatal(err)
	}
	if err := e.esc.Check(e.ctx, ws, "session:mid"); err != nil {
		t.Fatal(err)
	}
	if n := value(e.esc.m.checks.WithLabelValues("failed")); n != 1 {
		t.Errorf("checks given up: %v, want 1", n)
	}
	if a := e.armed("session:mid"); len(a) != 0 {
		t.Errorf("still armed: %v", a)
	}
	wantCopy(t, "the good entry's copy", e.entryOf("human:ops", "good"), 1, []string{"session:mid"}, "fallback", escalate.ReasonDeadLetter)
	if got := e.journaled("wakegate.escalated"); fmt.Sprint(got) != fmt.Sprint([]string{escalatedID(1, "session:mid", good)}) {
		t.Errorf("escalations %v", got)
	}
}

// TestArmedSkipsCoveredTimer: after a delivery armed an entry, Armed
// reads and writes nothing when this process scheduled the recipient's
// timer for a slot still ahead and no later than the new due, and
// schedules as Schedule does otherwise.
func TestArmedSkipsCoveredTimer(t *testing.T) {
	e := newEscEnv(t, nil, `{"escalate_after":"1h"}`)
	e.controls("mid", "k1")
	e.route("session.awaiting_input", "k1", "mid")
	if got := e.timers("session:mid"); got != 1 {
		t.Fatalf("%d timer tasks, want 1", got)
	}
	slot := e.esc.pending[ws+"\x00session:mid"]
	if !slot.After(time.Now().Add(59 * time.Minute)) {
		t.Fatalf("remembered slot %v, want the timer's, about an hour ahead", slot)
	}
	count := &redistest.RoundTrips{}
	e.rdb.(*redis.Client).AddHook(count)
	sent := func(due time.Time) int64 {
		t.Helper()
		before := count.Count()
		if err := e.esc.Armed(e.ctx, ws, "session:mid", due); err != nil {
			t.Fatal(err)
		}
		return count.Count() - before
	}
	if n := sent(slot); n != 0 {
		t.Fatalf("a due at the timer's slot made %d round trips, want 0", n)
	}
	if n := sent(slot.Add(time.Hour)); n != 0 {
		t.Fatalf("a due after the timer's slot made %d round trips, want 0", n)
	}
	if n := sent(slot.Add(-time.Minute)); n == 0 {
		t.Fatal("a due before the timer's slot was not scheduled")
	}
	if n := sent(time.Time{}); n == 0 {
		t.Fatal("an unknown due was not scheduled")
	}
	if got := e.timers("session:mid"); got != 1 {
		t.Fatalf("%d timer tasks, want still 1", got)
	}
	e.esc.now = func() time.Time { return slot.Add(time.Second) } // the timer's slot has passed
	if n := sent(slot.Add(time.Hour)); n == 0 {
		t.Fatal("a due after a past slot was not scheduled")
	}
}
