package ghapp

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/event"
	wgh "github.com/wakegate/wakegate/providers/github"
	"github.com/wakegate/wakegate/providers/github/app/apptest"
)

// The fixture's repository and PR (pull_request.closed.merged.json).
const (
	fixtureRepo = "Codertocat/Hello-World"
	fixturePR   = 2
)

type reconcileEnv struct {
	redisEnv
	ctx  context.Context
	g    *apptest.GitHub
	j    *journal.Journal
	tr   *tracker.Tracker
	subs *subscriptions.Store
	rec  *Reconciler
	logs *apptest.LogBuffer
}

func newReconcileEnv(t *testing.T) *reconcileEnv {
	t.Helper()
	e := &reconcileEnv{redisEnv: newRedisEnv(t), ctx: context.Background(), g: apptest.New(t)}
	e.j = journal.New(e.rdb, journal.Config{Prefix: e.prefix, Shards: 4})
	e.tr = tracker.New(e.rdb, e.j, tracker.Config{})
	e.subs = subscriptions.New(e.rdb, e.prefix)
	ws, err := wgh.ParseWorkspaces("other/*=elsewhere,*=default", event.ValidWorkspace)
	if err != nil {
		t.Fatal(err)
	}
	log, logs := apptest.NewLog()
	e.logs = logs
	e.rec = NewReconciler(newTestClient(t, e.g), e.rdb, ws, e.tr, e.j, e.subs, log, e.reg,
		ReconcileConfig{Prefix: e.prefix, Grace: time.Nanosecond})
	return e
}

// subscribe stores a subscription of owner to subject (and watches it, as
// the gateway does before storing).
func (e *reconcileEnv) subscribe(t *testing.T, owner, subject, until string) subscriptions.Created {
	t.Helper()
	if err := e.rec.Baseline(e.ctx, "default", subject); err != nil {
		t.Fatal(err)
	}
	c, err := e.subs.CreateWatching(e.ctx, subscriptions.Subscription{Workspace: "default", Owner: owner,
		Subjects: []string{subject}, Until: until}, time.Now(), e.j.TerminalOf)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// closedEvents are the journal's github.pull_request.closed events.
func (e *reconcileEnv) closedEvents(t *testing.T) []*event.Event {
	t.Helper()
	var out []*event.Event
	for _, ev := range journaled(t, e.rdb, e.j) {
		if ev.Type == "github.pull_request.closed" {
			out = append(out, ev)
		}
	}
	return out
}

func (e *reconcileEnv) watched(t *testing.T, subject string) bool {
	t.Helper()
	repo, n, _ := parsePRSubject(subject)
	_, err := e.rdb.ZScore(e.ctx, e.rec.k.watch(), watchMember("default", repo, n)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return err == nil
}

// TestReconcileRecordsAMissedMerge: a subscribed PR that merges with no
// webhook is journaled by the next pass, once, under the id the webhook
// path gives it (github.pull_request.closed from subject + closed_at), so
// the webhook that arrives later — the real fixture, signed bytes and all
// — adds nothing; the watch ends with the PR, and a pass with nothing to
// watch makes no call.
func TestReconcileRecordsAMissedMerge(t *testing.T) {
	e := newReconcileEnv(t)
	e.g.Install(fixtureRepo, 1)
	subject := event.PRSubject(fixtureRepo, fixturePR)
	opened := time.Now().Add(-time.Hour).Truncate(time.Second)
	e.g.SetPR(apptest.PR{Repo: fixtureRepo, Number: fixturePR, State: "open", Title: "Update the README", Author: "Codertocat",
		Base: "master", CreatedAt: opened, UpdatedAt: opened})
	if c := e.subscribe(t, "session:boss", subject, subscriptions.UntilSubjectTerminal); c.Closed {
		t.Fatal("an open PR closed the subscription")
	}
	rep, err := e.rec.Reconcile(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Calls != 1 || rep.Closed != 0 || !e.watched(t, subject) {
		t.Fatalf("open PR: %+v, watched %v", rep, e.watched(t, subject))
	}

	merged := time.Now().Add(-10 * time.Second).Truncate(time.Second)
	e.g.SetPR(apptest.PR{Repo: fixtureRepo, Number: fixturePR, State: "closed", Merged: true, Title: "Update the README",
		Author: "Codertocat", Base: "master", CreatedAt: opened, UpdatedAt: merged, ClosedAt: merged})
	rep, err = e.rec.Reconcile(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Calls != 1 || rep.Closed != 1 {
		t.Fatalf("merged PR: %+v, want one call and one closed event", rep)
	}
	closed := e.closedEvents(t)
	wantID := fmt.Sprintf("pr/%d/closed/%s", fixturePR, merged.UTC().Format(time.RFC3339))
	if len(closed) != 1 || closed[0].ID != wantID || closed[0].Subject != subject || !closed[0].Terminal ||
		closed[0].Source != event.GitHubSource(fixtureRepo) || closed[0].Workspace != "default" {
		t.Fatalf("closed events %+v, want one %s about %s", closed, wantID, subject)
	}
	if term, err := e.j.TerminalOf(e.ctx, "default", subject); err != nil || term == nil {
		t.Fatalf("terminal record %v, %v", term, err)
	}
	if e.watched(t, subject) {
		t.Fatal("the ended PR is still watched")
	}

	// The webhook arrives late: the derive path (Normalize, then the
	// tracker) journals nothing.
	f, err := wgh.Normalize("pull_request", closedFixture(t, merged))
	if err != nil {
		t.Fatal(err)
	}
	if f.ID != wantID {
		t.Fatalf("the webhook's fact id %q, the reconciliation's %q", f.ID, wantID)
	}
	res, err := e.tr.Apply(e.ctx, "default", "72d3162e-cc78-11e3-81ab-4c9367dc0958", &f, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Seqs) != 0 || len(e.closedEvents(t)) != 1 {
		t.Fatalf("the late webhook journaled %v", res.Seqs)
	}

	rep, err = e.rec.Reconcile(e.ctx)
	if err != nil || rep.Calls != 0 || rep.Repos != 0 {
		t.Fatalf("nothing watched: %+v, %v; want no call", rep, err)
	}
	apptest.AssertNoSecrets(t, e.logs.String(), e.g)
}

// TestReconcileWatches: one call per watched repository per pass; a
// repository glob subscription reconciles every PR closed since the last
// pass, an exact one only its PR; a linked PR is watched without a
// subscription; a PR closed before the window is left alone; a watch
// nobody needs is dropped; a repository of another workspace is never
// watched.
func TestReconcileWatches(t *testing.T) {
	e := newReconcileEnv(t)
	e.g.Install("org/globbed", 1)
	e.g.Install("org/exact", 2)
	e.g.Install("org/linked", 3)
	e.g.Install("org/dropped", 4)
	e.subscribe(t, "human:ops", "github:org/globbed#*", "")
	e.subscribe(t, "session:w1", "github:org/exact#1", subscriptions.UntilSubjectTerminal)
	if _, err := e.tr.Claim(e.ctx, "default", "org/linked", 5, "w2", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := e.rec.Watch(e.ctx, "default", "github:org/linked#5"); err != nil { // the gateway's linker does this
		t.Fatal(err)
	}
	if err := e.rec.Watch(e.ctx, "default", "github:org/dropped#1"); err != nil { // nobody subscribes
		t.Fatal(err)
	}
	if err := e.rec.Watch(e.ctx, "default", "github:other/repo#1"); err != nil { // maps to "elsewhere"
		t.Fatal(err)
	}
	if err := e.rec.Watch(e.ctx, "default", "session:w1"); err != nil {
		t.Fatal(err)
	}
	rep, err := e.rec.Reconcile(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Calls != 3 || rep.Repos != 3 || rep.Pruned != 1 || e.watched(t, "github:org/dropped#1") {
		t.Fatalf("first pass %+v: want 3 repositories polled, org/dropped pruned", rep)
	}
	if n, err := e.rdb.ZCard(e.ctx, e.rec.k.watch()).Result(); err != nil || n != 3 {
		t.Fatalf("%d watches left (%v), want 3", n, err)
	}

	now := time.Now().Truncate(time.Second)
	pr := func(repo string, n int, closedAgo time.Duration) apptest.PR {
		at := now.Add(-closedAgo)
		return apptest.PR{Repo: repo, Number: n, State: "closed", Merged: n%2 == 1, Title: "t", Author: "a",
			CreatedAt: at.Add(-time.Hour), UpdatedAt: at, ClosedAt: at}
	}
	e.g.SetPR(pr("org/globbed", 11, time.Second))
	e.g.SetPR(pr("org/globbed", 12, 2*time.Second))
	e.g.SetPR(pr("org/globbed", 13, 3*time.Hour)) // closed before anyone watched
	e.g.SetPR(pr("org/exact", 1, time.Second))
	e.g.SetPR(pr("org/exact", 2, time.Second)) // nobody watches #2
	e.g.SetPR(pr("org/linked", 5, time.Second))
	rep, err = e.rec.Reconcile(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, ev := range e.closedEvents(t) {
		got[ev.Subject] = true
	}
	want := map[string]bool{"github:org/globbed#11": true, "github:org/globbed#12": true, "github:org/exact#1": true, "github:org/linked#5": true}
	if rep.Calls != 3 || rep.Closed != 4 || !mapsEqual(got, want) {
		t.Fatalf("second pass %+v, closed %v; want %v", rep, got, want)
	}
	// The linked PR's event carries its session, as the webhook's would.
	for _, ev := range e.closedEvents(t) {
		if ev.Subject == "github:org/linked#5" && ev.SessionID != "w2" {
			t.Fatalf("linked PR's closed event has sessionid %q, want w2", ev.SessionID)
		}
	}

	// Only the glob remains; a third pass polls it alone and adds nothing.
	rep, err = e.rec.Reconcile(e.ctx)
	if err != nil || rep.Calls != 1 || rep.Closed != 0 {
		t.Fatalf("third pass %+v, %v", rep, err)
	}
	apptest.AssertNoSecrets(t, e.logs.String(), e.g)
}

// TestBaselineDeliversAMergeAtOnce: subscribing to a PR wakegate has never
// seen, which GitHub says merged, records the merge through the tracker
// before the subscription is stored, so DeathWatch delivers it at once
// and closes the subscription; the PR is fetched once; a PR the tracker
// has seen is not fetched.
func TestBaselineDeliversAMergeAtOnce(t *testing.T) {
	e := newReconcileEnv(t)
	e.g.Install("org/repo", 9)
	merged := time.Now().Add(-48 * time.Hour).Truncate(time.Second)
	e.g.SetPR(apptest.PR{Repo: "org/repo", Number: 7, State: "closed", Merged: true, Title: "Ship it", Author: "dev",
		CreatedAt: merged.Add(-time.Hour), UpdatedAt: merged, ClosedAt: merged})

	c := e.subscribe(t, "session:waiter", "github:org/repo#7", subscriptions.UntilSubjectTerminal)
	if !c.Closed || len(c.Ended) != 1 || c.Ended[0].Terminal.Type != "github.pull_request.closed" {
		t.Fatalf("created %+v: want the subscription closed on the merge", c)
	}
	ev, err := e.j.Get(e.ctx, c.Ended[0].Terminal.Seq)
	if err != nil || ev == nil || ev.ID != "pr/7/closed/"+merged.UTC().Format(time.RFC3339) || string(ev.Data) == "" {
		t.Fatalf("terminal event %+v, %v", ev, err)
	}
	c = e.subscribe(t, "session:late", "github:org/repo#7", subscriptions.UntilSubjectTerminal)
	if !c.Closed || e.g.Calls("get_pull") != 1 {
		t.Fatalf("second subscriber: closed %v, %d fetches; want closed, one fetch", c.Closed, e.g.Calls("get_pull"))
	}

	// A PR the webhooks brought is never fetched.
	f, err := wgh.Normalize("pull_request", closedFixture(t, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	f.Type, f.ID, f.Terminal, f.PR.State = "", "", false, "open" // tracker input only: an open PR seen
	if _, err := e.tr.Apply(e.ctx, "default", "guid-opened", &f, time.Now()); err != nil {
		t.Fatal(err)
	}
	c = e.subscribe(t, "session:w", event.PRSubject(fixtureRepo, fixturePR), "")
	if c.Closed || e.g.Calls("get_pull") != 1 {
		t.Fatalf("seen PR: closed %v, %d fetches", c.Closed, e.g.Calls("get_pull"))
	}

	// An open PR is fetched once, and a failed fetch may be tried again.
	e.g.SetPR(apptest.PR{Repo: "org/repo", Number: 8, State: "open", Title: "wip", Author: "dev", CreatedAt: merged, UpdatedAt: merged})
	e.g.Fail("get_pull", 502)
	if err := e.rec.Baseline(e.ctx, "default", "github:org/repo#8"); err == nil {
		t.Fatal("a failed fetch reported no error")
	}
	e.g.Fail("get_pull", 0)
	for range 2 {
		if err := e.rec.Baseline(e.ctx, "default", "github:org/repo#8"); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.g.Calls("get_pull"); n != 3 {
		t.Fatalf("%d fetches, want 3 (#7, #8 failed, #8)", n)
	}
	if term, _ := e.j.TerminalOf(e.ctx, "default", "github:org/repo#8"); term != nil {
		t.Fatal("an open PR got a terminal record")
	}
	apptest.AssertNoSecrets(t, e.logs.String(), e.g)
}
