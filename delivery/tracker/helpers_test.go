package tracker_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/github"
)

// The tests run on real Redis (redistest: WAKEGATE_TEST_REDIS_URL, default
// redis://127.0.0.1:6379/0), each under its own random key prefix, whose
// keys are deleted when the test ends.

// t0 is the payload clock of the tests: facts carry times after it.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// at is t0 plus s seconds.
func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

type env struct {
	t    *testing.T
	ctx  context.Context
	rdb  *redis.Client
	j    *journal.Journal
	tr   *tracker.Tracker
	cfg  tracker.Config
	ws   string
	repo string
	now  time.Time // what Apply is told the time is
}

func newEnv(t *testing.T, cfg tracker.Config) *env {
	t.Helper()
	rdb, prefix := redistest.New(t)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 4})
	return &env{
		t: t, ctx: context.Background(), rdb: rdb, j: j, tr: tracker.New(rdb, j, cfg), cfg: cfg,
		ws: "acme", repo: "org/repo-" + strings.ToLower(rand.Text()[:6]),
		now: time.Now().Truncate(time.Millisecond),
	}
}

func newGUID() string { return strings.ToLower(rand.Text()) }

// apply applies f under a fresh delivery guid.
func (e *env) apply(f *github.Fact) tracker.Result {
	e.t.Helper()
	return e.applyGUID(newGUID(), f)
}

func (e *env) applyGUID(guid string, f *github.Fact) tracker.Result {
	e.t.Helper()
	res, err := e.tr.Apply(e.ctx, e.ws, guid, f, e.now)
	if err != nil {
		e.t.Fatalf("Apply(%s %s): %v", f.Event, f.Action, err)
	}
	return res
}

// events reads the whole journal of the test's workspace.
func (e *env) events() []*event.Event {
	e.t.Helper()
	return readAll(e.t, e.j, e.ws)
}

func readAll(t *testing.T, j *journal.Journal, ws string) []*event.Event {
	t.Helper()
	cur, err := journal.ParseCursor("", j.Config().Shards)
	if err != nil {
		t.Fatal(err)
	}
	var all []*event.Event
	for {
		evs, next, err := j.Read(context.Background(), cur, journal.Filter{Workspace: ws}, 1000)
		if err != nil {
			t.Fatalf("journal read: %v", err)
		}
		all = append(all, evs...)
		if len(evs) == 0 && next.String() == cur.String() {
			return all
		}
		cur = next
	}
}

// ofType returns the journaled events of a type.
func (e *env) ofType(typ string) []*event.Event {
	e.t.Helper()
	var out []*event.Event
	for _, ev := range e.events() {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// wantCount fails unless exactly n events of typ are journaled.
func (e *env) wantCount(typ string, n int) []*event.Event {
	e.t.Helper()
	got := e.ofType(typ)
	if len(got) != n {
		var ids []string
		for _, ev := range got {
			ids = append(ids, ev.ID)
		}
		e.t.Fatalf("%d %s events %v, want %d", len(got), typ, ids, n)
	}
	return got
}

func (e *env) state(n int) tracker.PRState {
	e.t.Helper()
	s, err := e.tr.State(e.ctx, e.repo, n)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// pr builds a pull_request fact: open, not draft, base main, as of updated.
func (e *env) pr(action string, n int, head string, updated time.Time, mods ...func(*github.PRFact)) *github.Fact {
	p := &github.PRFact{
		Number: n, Action: action, State: "open", Head: head, Base: "main",
		Author: "octocat", Title: "Add feature", Labels: []string{"ci"}, UpdatedAt: updated,
	}
	for _, m := range mods {
		m(p)
	}
	f := &github.Fact{
		Event: "pull_request", Action: action, Repo: e.repo,
		Type: "github.pull_request." + action, Subject: event.PRSubject(e.repo, n),
		Time: updated, Summary: fmt.Sprintf("PR #%d %s: %s (%s)", n, action, p.Title, e.repo),
		Data: mustJSON(map[string]any{"repo": e.repo, "number": n, "action": action, "head": head, "draft": p.Draft}),
		PR:   p,
	}
	if action == "closed" {
		p.State = "closed"
		p.ClosedAt = updated
		f.ID = fmt.Sprintf("pr/%d/closed/%s", n, updated.Format(time.RFC3339))
		f.Terminal = true
	}
	f.Priority = event.DefaultPriority(f.Type, f.Data)
	return f
}

func draft(p *github.PRFact) { p.Draft = true }

// check builds a check_run / check_suite / status fact; a pending check run
// or suite is tracker input only (no Type), as the normalizer makes it.
func (e *env) check(kind, sha, name, result string, when time.Time, prs ...int) *github.Fact {
	c := &github.CheckFact{SHA: sha, Name: name, Result: result, At: when, PRs: append([]int{}, prs...)}
	f := &github.Fact{Event: kind, Repo: e.repo, Time: when, Check: c}
	switch kind {
	case "check_suite":
		c.Suite = true
		c.Name = "suite:" + name
		f.Action = "completed"
		f.Type = "github.check_suite.completed"
	case "check_run":
		f.Action = "completed"
		f.Type = "github.check_run.completed"
	case "status":
		f.Type = "github.status"
	}
	if result == github.ResultPending && kind != "status" {
		f.Action, f.Type = "created", ""
	}
	f.Summary = fmt.Sprintf("%s %q %s on %s (%s)", kind, name, result, sha, e.repo)
	f.Data = mustJSON(map[string]any{"repo": e.repo, "sha": sha, "name": c.Name, "result": result, "pull_requests": c.PRs})
	if f.Type != "" {
		f.Priority = event.DefaultPriority(f.Type, f.Data)
	}
	return f
}

func (e *env) run(sha, name, result string, when time.Time, prs ...int) *github.Fact {
	return e.check("check_run", sha, name, result, when, prs...)
}

func (e *env) review(n int, who, state string, when time.Time) *github.Fact {
	action := "submitted"
	if state == "dismissed" {
		action = "dismissed"
	}
	f := &github.Fact{
		Event: "pull_request_review", Action: action, Repo: e.repo,
		Type: "github.pull_request_review." + action, Subject: event.PRSubject(e.repo, n), Time: when,
		Summary: fmt.Sprintf("%s %s PR #%d", who, state, n),
		Data:    mustJSON(map[string]any{"repo": e.repo, "number": n, "reviewer": who, "state": state}),
		Review:  &github.ReviewFact{Number: n, Reviewer: who, State: state, At: when},
	}
	f.Priority = event.DefaultPriority(f.Type, f.Data)
	return f
}

// requireBuild requires the check "build" on main.
func requireBuild(repo, base string) []string {
	if base == "main" {
		return []string{"build"}
	}
	return nil
}

// ids lists the ids of events.
func ids(evs []*event.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }

func contextWithCancel(e *env) (context.Context, context.CancelFunc) {
	return context.WithCancel(e.ctx)
}

// prKeyForTest is the tracker hash of PR n, as keys.go lays it out.
func prKeyForTest(e *env, n int) string {
	return fmt.Sprintf("%s:pr:%s#%d", e.j.Tag(e.j.Shard("github:"+e.repo)), e.repo, n)
}
