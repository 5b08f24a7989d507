package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/delivery/holds"
	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/workers/route"
)

// holdsEnv is the router with presence and holds, the pusher and the
// releaser on one Asynq server, on real Redis.
type holdsEnv struct {
	*env
	h   *holds.Store
	rel *Releaser
	sup *supervision.Store
	sub *subscriptions.Store
	r   *route.Router
	n   int
}

func newHoldsEnv(t *testing.T) *holdsEnv {
	he := &holdsEnv{}
	he.env = newEnv(t, envOpts{mux: func(e *env, mux *asynq.ServeMux) {
		he.h = holds.New(e.rdb, e.prefix)
		he.sup = supervision.New(e.rdb, e.prefix, func(context.Context, string, string) (bool, error) { return false, nil })
		he.rel = NewReleaser(e.p, he.h, func(ctx context.Context, ws string) (time.Duration, int, error) {
			s, err := he.sup.Settings(ctx, ws)
			return time.Duration(s.Rate.Per), s.Rate.Burst, err
		})
		mux.Handle(TypeRelease, he.rel)
	}})
	j := journal.New(he.rdb, journal.Config{Prefix: he.prefix, Shards: 4})
	he.sub = subscriptions.New(he.rdb, he.prefix)
	he.r = route.NewRouter(he.rdb, j, sessions.New(he.rdb, j, time.Minute), he.sub, he.sup, he.box,
		prometheus.NewRegistry()).WithPusher(he.p).WithHolds(he.h, he.rel)
	return he
}

// subscribe makes owner subscribe with the JSON filter.
func (he *holdsEnv) subscribe(owner, filter string) {
	he.t.Helper()
	sub, err := subscriptions.Parse([]byte(filter))
	if err != nil {
		he.t.Fatal(err)
	}
	sub.Workspace, sub.Owner = ws, owner
	if _, err := he.sub.Create(he.ctx, sub, time.Now()); err != nil {
		he.t.Fatal(err)
	}
}

// route routes one event of type typ about subject (a PR "#N" or a session
// id), attention unless the vocabulary says critical.
func (he *holdsEnv) route(typ, subject, data, session string) *event.Event {
	he.t.Helper()
	he.n++
	e := &event.Event{SpecVersion: event.SpecVersion, ID: fmt.Sprint("ev", he.n), Source: "//github.com/org/repo", Type: typ,
		Time: time.Now().UTC(), Workspace: ws, SessionID: session, Summary: typ + " " + subject}
	if n, ok := strings.CutPrefix(subject, "#"); ok {
		e.Subject = "github:org/repo#" + n
	} else {
		e.Subject = event.SessionSubject(subject)
		e.SessionID = subject
		e.Source = event.AgentSource(ws, "session:"+subject)
	}
	if data != "" {
		e.Data = json.RawMessage(data)
	}
	e.Priority = event.DefaultPriority(typ, e.Data)
	if e.Priority.Rank() < event.Attention.Rank() {
		e.Priority = event.Attention
	}
	e.Terminal = event.Lookup(typ).Terminal
	if err := he.r.Handle(he.ctx, 0, e); err != nil {
		he.t.Fatal(err)
	}
	return e
}

type pushBody struct {
	WebhookID string        `json:"webhook_id"`
	Kind      string        `json:"kind"`
	Party     string        `json:"party"`
	Text      string        `json:"text"`
	Entry     *inbox.Entry  `json:"entry"`
	Digest    []inbox.Entry `json:"digest"`
}

func bodies(t *testing.T, rc *receiver) []pushBody {
	t.Helper()
	var out []pushBody
	for _, r := range rc.got() {
		var b pushBody
		if err := json.Unmarshal(r.body, &b); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// stays asserts the receiver's count stays n once the queue is idle.
func (he *holdsEnv) settle(t *testing.T, rc *receiver, n int) {
	t.Helper()
	eventually(t, 15*time.Second, "the queue drained", he.idle)
	if got := rc.count(); got != n {
		t.Fatalf("%d pushes, want %d", got, n)
	}
}

// TestAttendedGetsAlertsNotNotices replays a field incident: an attended recipient gets an idle turn_ended as a notice (no push)
// and a failed check, a review verdict and a merge as alerts (pushed).
func TestAttendedGetsAlertsNotNotices(t *testing.T) {
	he := newHoldsEnv(t)
	if _, err := he.sup.MergeSettings(he.ctx, ws, []byte(`{"rate":{"per":"30s","burst":10}}`)); err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t, statuses(200))
	he.endpoint("session:owner", rc.url(), "")
	he.subscribe("session:owner", `{"subjects":["github:org/repo#*"]}`)
	he.subscribe("session:owner", `{"session":{"id":"w1"}}`)
	if err := he.h.SetPresence(he.ctx, ws, "session:owner", holds.Presence{AttendedUntil: time.Now().Add(30 * time.Minute)}, time.Now()); err != nil {
		t.Fatal(err)
	}
	he.route("session.turn_ended", "w1", `{"idle":true}`, "")
	he.route("github.pull_request.checks_failed", "#20", "", "")
	he.route("github.pull_request_review.submitted", "#21", `{"review":{"state":"approved"}}`, "")
	he.route("github.pull_request.closed", "#22", `{"merged":true}`, "")
	eventually(t, 10*time.Second, "three alerts", func() bool { return rc.count() >= 3 })
	he.settle(t, rc, 3)
	types := map[string]bool{}
	for _, b := range bodies(t, rc) {
		if b.Kind != inbox.KindAlert || b.Entry == nil {
			t.Fatalf("push %+v, want an alert", b)
		}
		types[b.Entry.Type] = true
	}
	if types["session.turn_ended"] || len(types) != 3 {
		t.Fatalf("pushed %v, want the check, the verdict and the merge", types)
	}
	es, _, err := he.box.List(he.ctx, ws, "session:owner", 0, false, 10)
	if err != nil || len(es) != 4 {
		t.Fatalf("inbox %+v %v", es, err)
	}
	for _, e := range es {
		if e.Type == "session.turn_ended" && (e.Kind != inbox.KindNotice || e.Wake) {
			t.Fatalf("idle turn end %+v, want a notice", e)
		}
	}
	// Unattended, the same idle turn end wakes.
	if err := he.h.SetPresence(he.ctx, ws, "session:owner", holds.Presence{}, time.Now()); err != nil {
		t.Fatal(err)
	}
	he.route("session.turn_ended", "w2", `{"idle":true}`, "")
	he.subscribe("session:owner", `{"session":{"id":"w3"}}`)
	he.route("session.turn_ended", "w3", `{"idle":true}`, "")
	eventually(t, 10*time.Second, "the unattended wake", func() bool { return rc.count() >= 4 })
}

// TestRateCapFoldsIntoOneDigest: ten attention events to one recipient
// within 5 s (burst 3 per 2s) → exactly 3 wakes, then one digest at the
// next token carrying the other 7.
func TestRateCapFoldsIntoOneDigest(t *testing.T) {
	he := newHoldsEnv(t)
	if _, err := he.sup.MergeSettings(he.ctx, ws, []byte(`{"rate":{"per":"2s","burst":3}}`)); err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t, statuses(200))
	he.endpoint("human:gera", rc.url(), "")
	he.subscribe("human:gera", `{"subjects":["github:org/repo#*"]}`)
	start := time.Now()
	for i := range 10 {
		he.route("github.pull_request.ready", fmt.Sprintf("#%d", 100+i), "", "")
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("routing ten events took %v", time.Since(start))
	}
	eventually(t, 15*time.Second, "three wakes and a digest", func() bool { return rc.count() >= 4 })
	he.settle(t, rc, 4)
	bs := bodies(t, rc)
	for _, b := range bs[:3] {
		if b.Kind != inbox.KindWake {
			t.Fatalf("first pushes %+v, want three wakes before the digest", bs)
		}
	}
	d := bs[3]
	if d.Kind != inbox.KindDigest || len(d.Digest) != 7 || !strings.HasPrefix(d.Text, "[rate cap") {
		t.Fatalf("fourth push %+v, want a digest of 7", d)
	}
	seen := map[string]bool{}
	for _, b := range bs[:3] {
		seen[b.Entry.Subject] = true
	}
	for _, e := range d.Digest {
		if seen[e.Subject] {
			t.Fatalf("%s pushed twice", e.Subject)
		}
		seen[e.Subject] = true
	}
	if len(seen) != 10 {
		t.Fatalf("%d subjects reached the receiver, want 10", len(seen))
	}
}

// TestQuietHoldsAndLiftsWithOneDigest: quiet on, seven events → zero
// pushes, every entry kept; quiet off → exactly one digest listing all
// seven, grouped by kind; with quiet "all" on, a worker's own wait on its
// PR (a waiter delivery) still pushes.
func TestQuietHoldsAndLiftsWithOneDigest(t *testing.T) {
	he := newHoldsEnv(t)
	rc := newReceiver(t, statuses(200))
	he.endpoint("human:gera", rc.url(), "")
	he.subscribe("human:gera", `{"subjects":["github:org/repo#*"]}`)
	he.subscribe("human:gera", `{"types":["session.*"]}`)
	if err := he.h.SetQuiet(he.ctx, ws, holds.Quiet{Scope: "human:gera", By: "human:gera", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	he.route("github.pull_request.closed", "#12", `{"merged":true}`, "")
	he.route("github.pull_request.closed", "#13", `{"merged":true}`, "")
	he.route("github.pull_request.ready", "#14", "", "")
	he.route("github.pull_request.checks_failed", "#20", "", "")
	he.route("session.crashed", "w1", "", "")
	he.route("session.turn_ended", "w2", `{"idle":true}`, "")
	he.route("session.turn_ended", "w3", `{"idle":true}`, "")
	he.settle(t, rc, 0)
	if es, _, _ := he.box.List(he.ctx, ws, "human:gera", 0, false, 20); len(es) != 7 {
		t.Fatalf("%d entries kept, want 7", len(es))
	}
	digests, ok, err := he.rel.LiftQuiet(he.ctx, ws, "human:gera")
	if err != nil || !ok || len(digests) != 1 || len(digests[0].Entries) != 7 {
		t.Fatalf("lift: %+v %v %v", digests, ok, err)
	}
	eventually(t, 10*time.Second, "the digest", func() bool { return rc.count() >= 1 })
	he.settle(t, rc, 1)
	d := bodies(t, rc)[0]
	if d.Kind != inbox.KindDigest || len(d.Digest) != 7 {
		t.Fatalf("digest %+v", d)
	}
	for _, want := range []string{"[quiet lifted ", "7 events]", "merged: #12 #13", "ready: #14", "checks failed: #20",
		"crashed: session:w1", "idle: session:w2 session:w3"} {
		if !strings.Contains(d.Text, want) {
			t.Fatalf("digest text %q lacks %q", d.Text, want)
		}
	}
	// Grouped: each kind's entries are adjacent.
	var order []string
	for _, e := range d.Digest {
		l := e.Type
		if len(order) == 0 || order[len(order)-1] != l {
			order = append(order, l)
		}
	}
	if len(order) != 5 {
		t.Fatalf("digest order %v, want five groups", order)
	}
	// A second lift finds nothing.
	if ds, ok, err := he.rel.LiftQuiet(he.ctx, ws, "human:gera"); err != nil || ok || len(ds) != 0 {
		t.Fatalf("second lift: %+v %v %v", ds, ok, err)
	}

	// Quiet all: a human's wake is held, a worker's own wait is not.
	wc := newReceiver(t, statuses(200))
	he.endpoint("session:w9", wc.url(), "")
	he.subscribe("session:w9", `{"subjects":["github:org/repo#30"]}`)
	if err := he.h.SetQuiet(he.ctx, ws, holds.Quiet{Scope: holds.ScopeAll, By: "human:gera", At: time.Now(),
		Until: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	he.route("github.pull_request_review.submitted", "#30", `{"review":{"state":"changes_requested"}}`, "w9")
	eventually(t, 10*time.Second, "the waiter's push", func() bool { return wc.count() == 1 })
	he.settle(t, rc, 1)
	if ds, _, err := he.rel.LiftQuiet(he.ctx, ws, holds.ScopeAll); err != nil || len(ds) != 1 || ds[0].Party != "human:gera" {
		t.Fatalf("lift all: %+v %v", ds, err)
	}
	eventually(t, 10*time.Second, "the human's digest", func() bool { return rc.count() == 2 })
	he.settle(t, rc, 2)
}

// TestQuietUntilAndPausedRelease: quiet with an until lifts itself at it,
// and PAUSED releases its held wakes as one digest when it ends.
func TestQuietUntilAndPausedRelease(t *testing.T) {
	he := newHoldsEnv(t)
	rc := newReceiver(t, statuses(200))
	he.endpoint("human:gera", rc.url(), "")
	he.subscribe("human:gera", `{"subjects":["github:org/repo#*"]}`)
	until := time.Now().Add(1500 * time.Millisecond)
	if err := he.h.SetQuiet(he.ctx, ws, holds.Quiet{Scope: "human:gera", By: "human:gera", At: time.Now(), Until: until}); err != nil {
		t.Fatal(err)
	}
	if err := he.rel.ScheduleQuietEnd(he.ctx, ws, "human:gera", until); err != nil {
		t.Fatal(err)
	}
	he.route("github.pull_request.ready", "#1", "", "")
	he.route("github.pull_request.ready", "#2", "", "")
	eventually(t, 15*time.Second, "the digest at until", func() bool { return rc.count() >= 1 })
	he.settle(t, rc, 1)
	if b := bodies(t, rc)[0]; b.Kind != inbox.KindDigest || len(b.Digest) != 2 {
		t.Fatalf("digest %+v", b)
	}

	paused := time.Now().Add(1500 * time.Millisecond)
	if err := he.h.SetPresence(he.ctx, ws, "human:gera", holds.Presence{PausedUntil: paused}, time.Now()); err != nil {
		t.Fatal(err)
	}
	he.route("github.pull_request.checks_failed", "#3", "", "")
	he.route("github.pull_request.closed", "#4", `{"merged":true}`, "")
	eventually(t, 15*time.Second, "the digest when the pause ends", func() bool { return rc.count() >= 2 })
	he.settle(t, rc, 2)
	b := bodies(t, rc)[1]
	if b.Kind != inbox.KindDigest || len(b.Digest) != 2 || !strings.HasPrefix(b.Text, "[pause ended") {
		t.Fatalf("digest %+v", b)
	}
}

// TestQuietOffCancelsItsEnd: lifting a quiet with an until by hand deletes
// the task scheduled to lift it then.
func TestQuietOffCancelsItsEnd(t *testing.T) {
	he := newHoldsEnv(t)
	until := time.Now().Add(time.Hour)
	if err := he.h.SetQuiet(he.ctx, ws, holds.Quiet{Scope: "human:gera", By: "human:gera", At: time.Now(), Until: until}); err != nil {
		t.Fatal(err)
	}
	if err := he.rel.ScheduleQuietEnd(he.ctx, ws, "human:gera", until); err != nil {
		t.Fatal(err)
	}
	in := asynq.NewInspectorFromRedisClient(he.rdb)
	id := he.rel.quietEndID(ws, "human:gera", until.UnixMilli())
	if info, err := in.GetTaskInfo(he.rel.p.QueueOf(ws, "human:gera"), id); err != nil || info.State != asynq.TaskStateScheduled {
		t.Fatalf("the quiet's end is not scheduled: %+v %v", info, err)
	}
	if _, ok, err := he.rel.LiftQuiet(he.ctx, ws, "human:gera"); err != nil || !ok {
		t.Fatalf("lift: %v %v", ok, err)
	}
	if info, err := in.GetTaskInfo(he.rel.p.QueueOf(ws, "human:gera"), id); !errors.Is(err, asynq.ErrTaskNotFound) {
		t.Fatalf("the lifted quiet's end is still there: %+v %v", info, err)
	}
}
