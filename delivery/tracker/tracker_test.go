package tracker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/github"
)

const (
	shaA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	shaB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	shaC = "cccccccccccccccccccccccccccccccccccccccc"
)

func TestReadyOnceAfterSuitesAndRequiredRun(t *testing.T) {
	e := newEnv(t, tracker.Config{Required: requireBuild})
	e.apply(e.pr("opened", 1, shaA, at(0)))
	e.apply(e.run(shaA, "build", github.ResultPending, at(1), 1)) // created: tracker only
	for i, wf := range []string{"lint", "test", "docs"} {
		e.apply(e.check("check_suite", shaA, fmt.Sprint(100+i), github.ResultPass, at(10+i), 1))
		e.apply(e.run(shaA, wf, github.ResultPass, at(10+i), 1))
	}
	e.wantCount("github.pull_request.ready", 0) // build still pending
	e.apply(e.run(shaA, "build", github.ResultPass, at(20), 1))
	e.apply(e.check("check_suite", shaA, "104", github.ResultPass, at(21), 1))

	ready := e.wantCount("github.pull_request.ready", 1)[0]
	if want := "pr/1/ready/" + shaA; ready.ID != want {
		t.Errorf("ready id %q, want %q", ready.ID, want)
	}
	suites := e.wantCount("github.check_suite.completed", 4)
	for _, ev := range suites {
		if ev.Subject != event.PRSubject(e.repo, 1) || !regexpMatch(`^[a-z0-9]+/1$`, ev.ID) {
			t.Errorf("suite event subject %q id %q, want the PR and <guid>/1", ev.Subject, ev.ID)
		}
	}
	e.wantCount("github.check_run.completed", 4) // the pending one is not journaled
	if s := e.state(1); !reflect.DeepEqual(s.Ready, []string{shaA}) || s.Checks["build"].Result != "pass" {
		t.Errorf("state ready %v checks %v", s.Ready, s.Checks)
	}
}

func TestSynchronizeStartsOver(t *testing.T) {
	e := newEnv(t, tracker.Config{Required: requireBuild})
	e.apply(e.pr("opened", 1, shaA, at(0)))
	e.apply(e.run(shaA, "build", github.ResultPass, at(10), 1))
	e.wantCount("github.pull_request.ready", 1)

	e.apply(e.pr("synchronize", 1, shaB, at(20)))
	e.wantCount("github.pull_request.ready", 1)
	// A failure for the old head, after the push, does not count.
	e.apply(e.run(shaA, "build", github.ResultFail, at(30), 1))
	e.wantCount("github.pull_request.checks_failed", 0)
	e.wantCount("github.pull_request.ready", 1)

	e.apply(e.run(shaB, "build", github.ResultPass, at(40), 1))
	got := ids(e.wantCount("github.pull_request.ready", 2))
	if want := []string{"pr/1/ready/" + shaA, "pr/1/ready/" + shaB}; !reflect.DeepEqual(got, want) {
		t.Errorf("ready ids %v, want %v", got, want)
	}
	if s := e.state(1); s.Head != shaB || !reflect.DeepEqual(s.Ready, []string{shaA, shaB}) {
		t.Errorf("head %s ready %v", s.Head, s.Ready)
	}
}

func TestResultBeforeSynchronizeCounts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		required func(repo, base string) []string
	}{
		{"required check", requireBuild},
		{"no required checks", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tracker.Config{Required: tc.required})
			e.apply(e.pr("opened", 1, shaA, at(0)))
			// CI for the new head reports before GitHub's synchronize
			// arrives, and names no PR (as for a fork).
			e.apply(e.run(shaB, "build", github.ResultPass, at(10)))
			ev := e.wantCount("github.check_run.completed", 1)[0]
			if ev.Subject != event.ShaSubject(e.repo, shaB) {
				t.Errorf("subject %q, want the sha subject", ev.Subject)
			}
			e.wantCount("github.pull_request.ready", 0)
			e.apply(e.pr("synchronize", 1, shaB, at(20)))
			ready := e.wantCount("github.pull_request.ready", 1)[0]
			if ready.ID != "pr/1/ready/"+shaB {
				t.Errorf("ready id %q", ready.ID)
			}
		})
	}
}

func TestReviews(t *testing.T) {
	type step struct {
		fact      func(e *env) *github.Fact
		wantReady int
	}
	opened := func(e *env) *github.Fact { return e.pr("opened", 1, shaA, at(0)) }
	pass := func(sha string) func(e *env) *github.Fact {
		return func(e *env) *github.Fact { return e.run(sha, "ci", github.ResultPass, at(50), 1) }
	}
	rv := func(who, state string, s int) func(e *env) *github.Fact {
		return func(e *env) *github.Fact { return e.review(1, who, state, at(s)) }
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"changes requested blocks, commented does not clear, dismissed does", []step{
			{opened, 0}, {rv("alice", "changes_requested", 5), 0}, {pass(shaA), 0},
			{rv("alice", "commented", 60), 0}, {rv("alice", "dismissed", 70), 1},
		}},
		{"a later approval by the same reviewer clears", []step{
			{opened, 0}, {rv("alice", "changes_requested", 5), 0}, {pass(shaA), 0},
			{rv("alice", "approved", 60), 1},
		}},
		{"another reviewer's approval does not clear", []step{
			{opened, 0}, {rv("alice", "changes_requested", 5), 0}, {pass(shaA), 0},
			{rv("bob", "approved", 60), 0},
		}},
		{"an older changes_requested delivered after its dismissal stays dismissed", []step{
			{opened, 0}, {rv("alice", "dismissed", 20), 0}, {rv("alice", "changes_requested", 20), 0},
			{rv("alice", "changes_requested", 10), 0}, {pass(shaA), 1},
		}},
		{"an older approval delivered late does not clear", []step{
			{opened, 0}, {rv("alice", "changes_requested", 20), 0}, {rv("alice", "approved", 10), 0},
			{pass(shaA), 0},
		}},
		{"changes requested carries over to a new head", []step{
			{opened, 0}, {rv("alice", "changes_requested", 5), 0},
			{func(e *env) *github.Fact { return e.pr("synchronize", 1, shaB, at(30)) }, 0},
			{pass(shaB), 0}, {rv("alice", "dismissed", 70), 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tracker.Config{})
			for i, s := range tt.steps {
				e.apply(s.fact(e))
				if got := len(e.ofType("github.pull_request.ready")); got != s.wantReady {
					t.Fatalf("after step %d: %d ready, want %d", i, got, s.wantReady)
				}
			}
		})
	}
}

func TestDraft(t *testing.T) {
	tests := []struct {
		name      string
		toggles   []*github.PRFact // applied in this order, while CI runs, after opened as a draft at 0s
		wantDraft bool
	}{
		{"a draft never becomes ready", nil, true},
		{"ready_for_review", []*github.PRFact{{Action: "ready_for_review", UpdatedAt: at(10)}}, false},
		{"toggles in order", []*github.PRFact{
			{Action: "ready_for_review", UpdatedAt: at(10)},
			{Action: "converted_to_draft", Draft: true, UpdatedAt: at(20)},
		}, true},
		{"toggles out of order", []*github.PRFact{
			{Action: "ready_for_review", UpdatedAt: at(30)},
			{Action: "converted_to_draft", Draft: true, UpdatedAt: at(20)}, // happened first, arrives last
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tracker.Config{})
			e.apply(e.pr("opened", 1, shaA, at(0), draft))
			e.apply(e.run(shaA, "ci", github.ResultPending, at(5), 1))
			for _, tg := range tt.toggles {
				e.apply(e.pr(tg.Action, 1, shaA, tg.UpdatedAt, func(p *github.PRFact) { p.Draft = tg.Draft }))
			}
			e.apply(e.run(shaA, "ci", github.ResultPass, at(50), 1))
			want := 1
			if tt.wantDraft {
				want = 0
			}
			e.wantCount("github.pull_request.ready", want)
			if s := e.state(1); s.Draft != tt.wantDraft {
				t.Errorf("draft %v, want %v", s.Draft, tt.wantDraft)
			}
		})
	}
}

func TestStalePushKeepsNewestHead(t *testing.T) {
	e := newEnv(t, tracker.Config{})
	e.apply(e.pr("opened", 1, shaA, at(0)))
	e.apply(e.pr("synchronize", 1, shaC, at(30)))
	e.apply(e.pr("synchronize", 1, shaB, at(20))) // the earlier push, delivered late
	if s := e.state(1); s.Head != shaC {
		t.Fatalf("head %s, want %s", s.Head, shaC)
	}
	// The stale push still indexes its sha: a status there reaches the PR.
	e.apply(e.check("status", shaB, "ci", github.ResultPass, at(40)))
	if ev := e.wantCount("github.status", 1)[0]; ev.Subject != event.PRSubject(e.repo, 1) {
		t.Errorf("status subject %q", ev.Subject)
	}
	e.wantCount("github.pull_request.ready", 0) // B is not the head
}

func TestSettleWithoutCI(t *testing.T) {
	const settle = 60 * time.Second
	t.Run("ready once the settle time has passed, not before", func(t *testing.T) {
		e := newEnv(t, tracker.Config{Settle: settle})
		e.apply(e.pr("opened", 1, shaA, at(0)))
		if s := e.state(1); !s.HeadSeenAt.Equal(e.now) {
			t.Errorf("head seen at %v, want %v", s.HeadSeenAt, e.now)
		}
		for _, early := range []time.Duration{0, settle - time.Millisecond} {
			if n, err := e.tr.SettleDue(e.ctx, e.now.Add(early)); err != nil || n != 0 {
				t.Fatalf("SettleDue(+%v) = %d, %v; want 0", early, n, err)
			}
		}
		e.wantCount("github.pull_request.ready", 0)
		if n, err := e.tr.Settling(e.ctx); err != nil || n != 1 {
			t.Fatalf("Settling before the settle time = %d, %v; want 1", n, err)
		}
		if n, err := e.tr.SettleDue(e.ctx, e.now.Add(settle)); err != nil || n != 1 {
			t.Fatalf("SettleDue(+settle) = %d, %v; want 1", n, err)
		}
		e.wantCount("github.pull_request.ready", 1)
		if n, err := e.tr.Settling(e.ctx); err != nil || n != 0 {
			t.Fatalf("Settling after it = %d, %v; want 0", n, err)
		}
		if n, err := e.tr.SettleDue(e.ctx, e.now.Add(2*settle)); err != nil || n != 0 {
			t.Fatalf("second SettleDue = %d, %v; want 0", n, err)
		}
		// An event after the settle time finds it ready already.
		e.now = e.now.Add(3 * settle)
		e.apply(e.pr("labeled", 1, shaA, at(60)))
		e.wantCount("github.pull_request.ready", 1)
	})
	t.Run("a push before the settle time restarts the clock", func(t *testing.T) {
		e := newEnv(t, tracker.Config{Settle: settle})
		e.apply(e.pr("opened", 1, shaA, at(0)))
		e.now = e.now.Add(30 * time.Second)
		e.apply(e.pr("synchronize", 1, shaB, at(30)))
		n, err := e.tr.SettleDue(e.ctx, e.now.Add(settle-time.Millisecond)) // A is due, B is not
		if err != nil || n != 1 {
			t.Fatalf("SettleDue = %d, %v; want 1 (A's, now stale)", n, err)
		}
		e.wantCount("github.pull_request.ready", 0)
		if _, err := e.tr.SettleDue(e.ctx, e.now.Add(settle)); err != nil {
			t.Fatal(err)
		}
		if got := ids(e.wantCount("github.pull_request.ready", 1)); got[0] != "pr/1/ready/"+shaB {
			t.Errorf("ready %v", got)
		}
	})
	t.Run("a pending check reported before the settle time holds it", func(t *testing.T) {
		e := newEnv(t, tracker.Config{Settle: settle})
		e.apply(e.pr("opened", 1, shaA, at(0)))
		e.apply(e.run(shaA, "ci", github.ResultPending, at(5), 1))
		if _, err := e.tr.SettleDue(e.ctx, e.now.Add(settle)); err != nil {
			t.Fatal(err)
		}
		e.wantCount("github.pull_request.ready", 0)
		e.apply(e.run(shaA, "ci", github.ResultPass, at(90), 1))
		e.wantCount("github.pull_request.ready", 1)
	})
	t.Run("required checks are never settled", func(t *testing.T) {
		e := newEnv(t, tracker.Config{Settle: settle, Required: requireBuild})
		e.apply(e.pr("opened", 1, shaA, at(0)))
		if n, err := e.tr.SettleDue(e.ctx, e.now.Add(2*settle)); err != nil || n != 0 {
			t.Fatalf("SettleDue = %d, %v; want nothing scheduled", n, err)
		}
		e.wantCount("github.pull_request.ready", 0)
	})
	t.Run("a burst settles in batches, learning the bases on the way", func(t *testing.T) {
		// No check is required anywhere, but only the function knows:
		// a settler that has not seen the repository yet gets "need"
		// from its first member and goes on with the bases.
		noneRequired := func(repo, base string) []string { return nil }
		e := newEnv(t, tracker.Config{Settle: settle, Required: noneRequired})
		const prs = 250 // one repository, one shard: more than one batch
		for n := 1; n <= prs; n++ {
			e.apply(e.pr("opened", n, fmt.Sprintf("%040d", n), at(0)))
		}
		fresh := tracker.New(e.rdb, e.j, tracker.Config{Settle: settle, Required: noneRequired})
		if n, err := fresh.SettleDue(e.ctx, e.now.Add(settle)); err != nil || n != prs {
			t.Fatalf("SettleDue = %d, %v; want %d", n, err, prs)
		}
		got := ids(e.wantCount("github.pull_request.ready", prs))
		seen := map[string]bool{}
		for _, id := range got {
			seen[id] = true
		}
		if len(seen) != prs || !seen[fmt.Sprintf("pr/%d/ready/%040d", prs, prs)] {
			t.Errorf("%d distinct ready ids of %d, want one per PR", len(seen), len(got))
		}
		if n, err := fresh.SettleDue(e.ctx, e.now.Add(2*settle)); err != nil || n != 0 {
			t.Fatalf("second SettleDue = %d, %v; want 0", n, err)
		}
	})
	t.Run("concurrent settlers claim once", func(t *testing.T) {
		e := newEnv(t, tracker.Config{Settle: settle})
		for n := 1; n <= 20; n++ {
			e.apply(e.pr("opened", n, fmt.Sprintf("%040d", n), at(0)))
		}
		var wg sync.WaitGroup
		claimed := make([]int, 4)
		for i := range claimed {
			wg.Go(func() {
				n, err := e.tr.SettleDue(e.ctx, e.now.Add(settle))
				if err != nil {
					t.Error(err)
				}
				claimed[i] = n
			})
		}
		wg.Wait()
		if total := claimed[0] + claimed[1] + claimed[2] + claimed[3]; total != 20 {
			t.Errorf("claimed %v, want 20 in all", claimed)
		}
		e.wantCount("github.pull_request.ready", 20)
	})
}

func TestRunSettler(t *testing.T) {
	e := newEnv(t, tracker.Config{Settle: 300 * time.Millisecond})
	ctx, cancel := contextWithCancel(e)
	done := make(chan error, 1)
	go func() { done <- e.tr.RunSettler(ctx) }()

	e.now = time.Now()
	e.apply(e.pr("opened", 1, shaA, at(0)))
	deadline := time.Now().Add(10 * time.Second)
	for len(e.ofType("github.pull_request.ready")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no ready within 10s of a 300ms settle")
		}
		time.Sleep(50 * time.Millisecond) // polling interval, bounded by the deadline
	}
	if time.Since(e.now) < 300*time.Millisecond {
		t.Errorf("ready after %v, before the settle time", time.Since(e.now))
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("RunSettler returned %v, want nil on cancel", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RunSettler did not return after cancel")
	}
	e.wantCount("github.pull_request.ready", 1)
}

func TestChecksFailed(t *testing.T) {
	t.Run("once per head sha, attention", func(t *testing.T) {
		e := newEnv(t, tracker.Config{})
		e.apply(e.pr("opened", 1, shaA, at(0)))
		e.apply(e.run(shaA, "lint", github.ResultFail, at(10), 1))
		e.apply(e.run(shaA, "test", github.ResultFail, at(11), 1))
		e.apply(e.check("check_suite", shaA, "7", github.ResultFail, at(12), 1))
		ev := e.wantCount("github.pull_request.checks_failed", 1)[0]
		if ev.ID != "pr/1/checks_failed/"+shaA || ev.Priority != event.Attention {
			t.Errorf("checks_failed %s priority %s", ev.ID, ev.Priority)
		}
		if want := fmt.Sprintf("PR #1 checks failed (lint): Add feature (%s)", e.repo); ev.Summary != want {
			t.Errorf("summary %q, want %q", ev.Summary, want)
		}
		var data struct {
			Repo   string   `json:"repo"`
			Number int      `json:"number"`
			Head   string   `json:"head"`
			Title  string   `json:"title"`
			URL    string   `json:"url"`
			Failed []string `json:"failed"`
		}
		if err := json.Unmarshal(ev.Data, &data); err != nil || data.Repo != e.repo || data.Number != 1 || data.Head != shaA ||
			data.Title != "Add feature" || data.URL != "https://github.com/"+e.repo+"/pull/1" || !reflect.DeepEqual(data.Failed, []string{"lint"}) {
			t.Errorf("data %s: %+v, %v", ev.Data, data, err)
		}
		e.wantCount("github.pull_request.ready", 0)
		// A new head that fails too is a new checks_failed.
		e.apply(e.pr("synchronize", 1, shaB, at(20)))
		e.apply(e.run(shaB, "lint", github.ResultFail, at(30), 1))
		e.wantCount("github.pull_request.checks_failed", 2)
	})
	t.Run("critical when that head had been ready", func(t *testing.T) {
		e := newEnv(t, tracker.Config{Required: requireBuild})
		e.apply(e.pr("opened", 1, shaA, at(0)))
		e.apply(e.run(shaA, "build", github.ResultPass, at(10), 1))
		e.wantCount("github.pull_request.ready", 1)
		e.apply(e.run(shaA, "e2e", github.ResultFail, at(20), 1))
		e.apply(e.run(shaA, "e2e", github.ResultFail, at(21), 1))
		if ev := e.wantCount("github.pull_request.checks_failed", 1)[0]; ev.Priority != event.Critical {
			t.Errorf("priority %s, want critical", ev.Priority)
		}
	})
	t.Run("the latest result per name by payload time wins, not arrival", func(t *testing.T) {
		e := newEnv(t, tracker.Config{})
		e.apply(e.pr("opened", 1, shaA, at(0)))
		e.apply(e.run(shaA, "ci", github.ResultFail, at(20), 1))
		e.apply(e.run(shaA, "ci", github.ResultPass, at(10), 1)) // older, delivered late
		if s := e.state(1); s.Checks["ci"].Result != "fail" || !s.Checks["ci"].At.Equal(at(20)) {
			t.Errorf("ci = %+v, want fail at %v", s.Checks["ci"], at(20))
		}
		e.wantCount("github.pull_request.ready", 0)
		e.apply(e.run(shaA, "ci", github.ResultPass, at(30), 1)) // a re-run passes
		e.wantCount("github.pull_request.ready", 1)
		e.wantCount("github.pull_request.checks_failed", 1)
	})
	t.Run("a failure before the push that makes it head counts", func(t *testing.T) {
		e := newEnv(t, tracker.Config{})
		e.apply(e.pr("opened", 1, shaA, at(0)))
		e.apply(e.run(shaB, "ci", github.ResultFail, at(10)))
		e.wantCount("github.pull_request.checks_failed", 0)
		e.apply(e.pr("synchronize", 1, shaB, at(20)))
		e.wantCount("github.pull_request.checks_failed", 1)
	})
}

func TestStatusReachesPRThroughShaIndex(t *testing.T) {
	e := newEnv(t, tracker.Config{})
	e.apply(e.pr("opened", 7, shaA, at(0)))
	guid := newGUID()
	e.applyGUID(guid, e.check("status", shaA, "ci/jenkins", github.ResultPass, at(10)))
	ev := e.wantCount("github.status", 1)[0]
	if ev.Subject != event.PRSubject(e.repo, 7) || ev.ID != guid+"/7" {
		t.Errorf("status subject %q id %q, want PR #7 and %s/7", ev.Subject, ev.ID, guid)
	}
	e.wantCount("github.pull_request.ready", 1)

	// A sha two PRs have as head: one event per PR.
	e.apply(e.pr("opened", 8, shaA, at(1)))
	guid2 := newGUID()
	e.applyGUID(guid2, e.check("check_suite", shaA, "9", github.ResultPass, at(20)))
	got := ids(e.wantCount("github.check_suite.completed", 2))
	if want := []string{guid2 + "/7", guid2 + "/8"}; !reflect.DeepEqual(got, want) {
		t.Errorf("suite ids %v, want %v", got, want)
	}

	// No PR knows the sha: once, under the sha subject, id <guid>.
	guid3 := newGUID()
	e.applyGUID(guid3, e.check("status", shaC, "ci/jenkins", github.ResultFail, at(30)))
	var last *event.Event
	for _, ev := range e.ofType("github.status") {
		if ev.ID == guid3 {
			last = ev
		}
	}
	if last == nil || last.Subject != event.ShaSubject(e.repo, shaC) {
		t.Fatalf("status on an unknown sha: %+v", last)
	}
}

func TestConcurrentAppliersEmitOneReady(t *testing.T) {
	e := newEnv(t, tracker.Config{Required: requireBuild})
	const prs = 25
	type delivery struct {
		guid string
		fact *github.Fact
	}
	var all [][]delivery
	for n := 1; n <= prs; n++ {
		sha := fmt.Sprintf("%040x", n)
		all = append(all, []delivery{
			{newGUID(), e.pr("opened", n, sha, at(0))},
			{newGUID(), e.check("check_suite", sha, "1", github.ResultPass, at(5), n)},
			{newGUID(), e.run(sha, "build", github.ResultPass, at(6), n)},
			{newGUID(), e.run(sha, "lint", github.ResultPass, at(7), n)},
			{newGUID(), e.review(n, "alice", "approved", at(8))},
		})
	}
	// Two gateways each receive every delivery (a redelivery racing the
	// original), in opposite orders, and a third receives new-guid copies of
	// the checks only.
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() {
			for _, ds := range all {
				order := slices.Clone(ds)
				if g == 1 {
					slices.Reverse(order)
				}
				for _, d := range order {
					guid := d.guid
					if g == 2 {
						if d.fact.Check == nil {
							continue
						}
						guid = newGUID()
					}
					if _, err := e.tr.Apply(e.ctx, e.ws, guid, d.fact, e.now); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	ready := e.wantCount("github.pull_request.ready", prs)
	seen := map[string]bool{}
	for _, ev := range ready {
		if seen[ev.Subject] {
			t.Errorf("two ready for %s", ev.Subject)
		}
		seen[ev.Subject] = true
	}
	e.wantCount("github.pull_request.opened", prs)
}

func TestClosedOnce(t *testing.T) {
	e := newEnv(t, tracker.Config{})
	e.apply(e.pr("opened", 3, shaA, at(0)))
	closed := e.pr("closed", 3, shaA, at(100), func(p *github.PRFact) { p.Merged = true })
	guid := newGUID()
	if r := e.applyGUID(guid, closed); len(r.Seqs) != 1 {
		t.Fatalf("first closed appended %v, want 1 seq", r.Seqs)
	}
	if r := e.applyGUID(guid, closed); len(r.Seqs) != 0 { // same delivery again
		t.Errorf("same guid appended %v", r.Seqs)
	}
	if r := e.apply(closed); len(r.Seqs) != 0 { // redelivery under a new guid
		t.Errorf("new guid appended %v", r.Seqs)
	}
	ev := e.wantCount("github.pull_request.closed", 1)[0]
	if ev.ID != closed.ID || !ev.Terminal {
		t.Errorf("closed id %q terminal %v", ev.ID, ev.Terminal)
	}
	if s := e.state(3); s.State != "closed" || !s.Merged {
		t.Errorf("state %s merged %v", s.State, s.Merged)
	}
	// The compact terminal record outlives the journal (DeathWatch).
	term, err := e.j.TerminalOf(e.ctx, e.ws, ev.Subject)
	if err != nil || term == nil || term.Type != "github.pull_request.closed" || term.Seq != ev.Seq {
		t.Errorf("terminal record %+v, %v; want the closed event at %s", term, err, ev.Seq)
	}
	// Nothing becomes ready after the close.
	e.apply(e.run(shaA, "ci", github.ResultPass, at(110), 3))
	e.wantCount("github.pull_request.ready", 0)
	if ttl := e.rdb.TTL(e.ctx, prKeyForTest(e, 3)).Val(); ttl <= 0 {
		t.Errorf("closed PR's tracker has TTL %v, want it to expire", ttl)
	}
}

func TestClaim(t *testing.T) {
	t.Run("claim before opened: first wins, later events carry the session", func(t *testing.T) {
		e := newEnv(t, tracker.Config{})
		holder, err := e.tr.Claim(e.ctx, e.ws, e.repo, 5, "s1", e.now)
		if err != nil || holder != "s1" {
			t.Fatalf("Claim = %q, %v", holder, err)
		}
		if holder, err := e.tr.Claim(e.ctx, e.ws, e.repo, 5, "s1", e.now); err != nil || holder != "s1" {
			t.Fatalf("same session again = %q, %v", holder, err)
		}
		e.apply(e.pr("opened", 5, shaA, at(0)))
		e.apply(e.run(shaA, "ci", github.ResultPass, at(10), 5))
		e.wantCount("github.pull_request.linked", 0) // the link came first: opened carries it
		for _, typ := range []string{"github.pull_request.opened", "github.check_run.completed", "github.pull_request.ready"} {
			if ev := e.wantCount(typ, 1)[0]; ev.SessionID != "s1" {
				t.Errorf("%s sessionid %q, want s1", typ, ev.SessionID)
			}
		}
		for _, claimant := range []string{"s2", "s2", "s3"} {
			holder, err := e.tr.Claim(e.ctx, e.ws, e.repo, 5, claimant, e.now)
			if !errors.Is(err, tracker.ErrLinkConflict) || holder != "s1" {
				t.Fatalf("Claim(%s) = %q, %v; want s1, ErrLinkConflict", claimant, holder, err)
			}
		}
		conflicts := e.wantCount("wakegate.link_conflict", 2) // once per (PR, claimant)
		if c := conflicts[0]; c.Priority != event.Internal || c.Source != event.ServerSource(e.ws) || c.SessionID != "s2" {
			t.Errorf("conflict %+v", c)
		}
		if got, _ := e.tr.Link(e.ctx, e.ws, e.repo, 5); got != "s1" {
			t.Errorf("Link = %q", got)
		}
		if got, _ := e.tr.Link(e.ctx, "other", e.repo, 5); got != "" {
			t.Errorf("Link from another workspace = %q, want none", got)
		}
		if holder, err := e.tr.Claim(e.ctx, "other", e.repo, 5, "s1", e.now); !errors.Is(err, tracker.ErrLinkConflict) || holder != "" {
			t.Errorf("claim from another workspace = %q, %v; want a conflict with the holder hidden", holder, err)
		}
	})
	t.Run("claim after opened journals linked once", func(t *testing.T) {
		e := newEnv(t, tracker.Config{})
		e.apply(e.pr("opened", 6, shaA, at(0)))
		for range 2 {
			if _, err := e.tr.Claim(e.ctx, e.ws, e.repo, 6, "s9", e.now); err != nil {
				t.Fatal(err)
			}
		}
		ev := e.wantCount("github.pull_request.linked", 1)[0]
		if ev.ID != "pr/6/linked/s9" || ev.SessionID != "s9" || ev.Priority != event.Attention ||
			ev.Subject != event.PRSubject(e.repo, 6) || ev.Source != event.GitHubSource(e.repo) {
			t.Errorf("linked %+v", ev)
		}
		if ev := e.wantCount("github.pull_request.opened", 1)[0]; ev.SessionID != "" {
			t.Errorf("opened before the link carries sessionid %q", ev.SessionID)
		}
		e.apply(e.review(6, "bob", "approved", at(5)))
		if ev := e.wantCount("github.pull_request_review.submitted", 1)[0]; ev.SessionID != "s9" {
			t.Errorf("review after the link: sessionid %q", ev.SessionID)
		}
	})
	t.Run("bad input", func(t *testing.T) {
		e := newEnv(t, tracker.Config{})
		if _, err := e.tr.Claim(e.ctx, e.ws, e.repo, 1, "bad id", e.now); !errors.Is(err, tracker.ErrInvalidFact) {
			t.Errorf("bad session: %v", err)
		}
	})
}

func TestReapplyAppendsNothing(t *testing.T) {
	e := newEnv(t, tracker.Config{Required: requireBuild})
	type delivery struct {
		guid string
		f    *github.Fact
	}
	ds := []delivery{
		{newGUID(), e.check("status", shaA, "build", github.ResultPass, at(1))}, // before any PR knows shaA
		{newGUID(), e.pr("opened", 1, shaA, at(0))},
		{newGUID(), e.check("check_suite", shaA, "1", github.ResultFail, at(2))},
		{newGUID(), e.review(1, "alice", "changes_requested", at(3))},
		{newGUID(), e.pr("closed", 1, shaA, at(9))},
	}
	first := 0
	for _, d := range ds {
		first += len(e.applyGUID(d.guid, d.f).Seqs)
	}
	before := len(e.events())
	if before != first {
		t.Fatalf("journal has %d events, Apply reported %d seqs", before, first)
	}
	for _, d := range ds {
		if r := e.applyGUID(d.guid, d.f); len(r.Seqs) != 0 {
			t.Errorf("re-applying %s %s appended %v", d.f.Event, d.f.Action, r.Seqs)
		}
	}
	if after := len(e.events()); after != before {
		t.Errorf("journal grew from %d to %d", before, after)
	}
	// The status journaled under the sha subject stays that single event.
	if evs := e.ofType("github.status"); len(evs) != 1 || evs[0].Subject != event.ShaSubject(e.repo, shaA) {
		t.Errorf("status events %v", ids(evs))
	}
}

func TestEventShape(t *testing.T) {
	e := newEnv(t, tracker.Config{})
	if _, err := e.tr.Claim(e.ctx, e.ws, e.repo, 2, "author", e.now); err != nil {
		t.Fatal(err)
	}
	opened := e.pr("opened", 2, shaA, at(0))
	opened.Data = json.RawMessage(`{"repo": "` + e.repo + `", "title": "caf\u00e9 \"x\" </b>", "n": [1, 2.5e3]}`)
	opened.CoalesceKey = "custom-key"
	r := e.apply(opened)
	if len(r.Seqs) != 1 {
		t.Fatalf("seqs %v", r.Seqs)
	}
	got, err := e.j.Get(e.ctx, r.Seqs[0])
	if err != nil || got == nil {
		t.Fatalf("Get(%s) = %v, %v", r.Seqs[0], got, err)
	}
	want := &event.Event{
		SpecVersion: "1.0", ID: got.ID, Source: event.GitHubSource(e.repo), Type: "github.pull_request.opened",
		Subject: event.PRSubject(e.repo, 2), Time: at(0), DataContentType: "application/json",
		Seq: r.Seqs[0], Workspace: e.ws, SessionID: "author", Priority: event.Attention,
		CoalesceKey: "custom-key", Summary: opened.Summary, Data: got.Data,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("event\n got %+v\nwant %+v", got, want)
	}
	if !regexpMatch(`^[a-z0-9]{26}$`, got.ID) {
		t.Errorf("id %q, want the delivery guid", got.ID)
	}
	if string(got.Data) != string(opened.Data) {
		t.Errorf("data re-encoded:\n got %s\nwant %s", got.Data, opened.Data)
	}

	e.apply(e.run(shaA, "ci", github.ResultPass, at(10), 2))
	ready := e.wantCount("github.pull_request.ready", 1)[0]
	if ready.Source != event.GitHubSource(e.repo) || ready.Subject != event.PRSubject(e.repo, 2) ||
		!ready.Time.Equal(e.now) || ready.CoalesceKey != ready.Subject || ready.SessionID != "author" ||
		ready.Summary != fmt.Sprintf("PR #2 ready: Add feature (%s)", e.repo) || ready.DataContentType != "application/json" {
		t.Errorf("ready %+v", ready)
	}
	var d struct {
		Repo   string `json:"repo"`
		Number int    `json:"number"`
		Head   string `json:"head"`
		Title  string `json:"title"`
		URL    string `json:"url"`
	}
	if err := json.Unmarshal(ready.Data, &d); err != nil {
		t.Fatal(err)
	}
	if d.Repo != e.repo || d.Number != 2 || d.Head != shaA || d.Title != "Add feature" ||
		d.URL != "https://github.com/"+e.repo+"/pull/2" {
		t.Errorf("ready data %s", ready.Data)
	}
}

func TestRequiredLearnedFromTheTracker(t *testing.T) {
	// A fresh process (another Tracker) meets the PR's base only through
	// the stored tracker when a check arrives: it must still apply the
	// base's required checks.
	e := newEnv(t, tracker.Config{Required: requireBuild})
	e.apply(e.pr("opened", 1, shaA, at(0)))
	other := tracker.New(e.rdb, e.j, tracker.Config{Required: requireBuild})
	if _, err := other.Apply(e.ctx, e.ws, newGUID(), e.run(shaA, "lint", github.ResultPass, at(5), 1), e.now); err != nil {
		t.Fatal(err)
	}
	e.wantCount("github.pull_request.ready", 0) // build is required and pending
	other2 := tracker.New(e.rdb, e.j, tracker.Config{Required: requireBuild})
	if _, err := other2.Apply(e.ctx, e.ws, newGUID(), e.run(shaA, "build", github.ResultPass, at(6), 1), e.now); err != nil {
		t.Fatal(err)
	}
	e.wantCount("github.pull_request.ready", 1)
	// A suite named like a required check never stands in for it.
	e2 := newEnv(t, tracker.Config{Required: func(string, string) []string { return []string{"suite:1"} }})
	e2.apply(e2.pr("opened", 1, shaA, at(0)))
	e2.apply(e2.check("check_suite", shaA, "1", github.ResultPass, at(5), 1))
	e2.wantCount("github.pull_request.ready", 0)
}

func TestInvalidFacts(t *testing.T) {
	e := newEnv(t, tracker.Config{})
	bad := []*github.Fact{
		func() *github.Fact { f := e.pr("opened", 1, shaA, at(0)); f.Data = json.RawMessage(`{nope`); return f }(),
		func() *github.Fact { f := e.run(shaA, "ci", "maybe", at(0)); return f }(),
		func() *github.Fact { f := e.pr("opened", 1, shaA, at(0)); f.PR.State = "weird"; return f }(),
		func() *github.Fact { f := e.review(1, "", "approved", at(0)); return f }(),
	}
	for i, f := range bad {
		if _, err := e.tr.Apply(e.ctx, e.ws, newGUID(), f, e.now); !errors.Is(err, tracker.ErrInvalidFact) {
			t.Errorf("fact %d: err %v, want ErrInvalidFact", i, err)
		}
	}
	if _, err := e.tr.Apply(e.ctx, "bad ws", newGUID(), e.pr("opened", 1, shaA, at(0)), e.now); !errors.Is(err, tracker.ErrInvalidFact) {
		t.Errorf("bad workspace: %v", err)
	}
	if n := len(e.events()); n != 0 {
		t.Errorf("%d events journaled from invalid facts", n)
	}
	// Ignored facts are no-ops.
	if r, err := e.tr.Apply(e.ctx, e.ws, newGUID(), &github.Fact{Event: "ping", Ignored: "ping"}, e.now); err != nil || len(r.Seqs) != 0 {
		t.Errorf("ignored fact: %v, %v", r, err)
	}
}

// An open PR's tracker and reviews never expire, however it got there: a
// link claimed before its first snapshot (which expires on its own), a
// reopen after a close (whose keys expire), or snapshot after snapshot.
func TestOpenPRKeysPersist(t *testing.T) {
	e := newEnv(t, tracker.Config{})
	ttl := func(key string) time.Duration { return e.rdb.TTL(e.ctx, key).Val() }
	reviews := func(n int) string { return prKeyForTest(e, n) + ":reviews" }
	const sha = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

	if _, err := e.tr.Claim(e.ctx, e.ws, e.repo, 1, "s1", e.now); err != nil {
		t.Fatal(err)
	}
	if d := ttl(prKeyForTest(e, 1)); d <= 0 {
		t.Fatalf("a claim before the PR: TTL %v, want one", d)
	}
	e.apply(e.pr("opened", 1, sha, at(1)))
	if d := ttl(prKeyForTest(e, 1)); d != -1 {
		t.Errorf("claimed, then opened: TTL %v, want none", d)
	}

	e.apply(e.pr("opened", 2, sha, at(1)))
	e.apply(e.review(2, "alice", "approved", at(2)))
	e.apply(e.pr("closed", 2, sha, at(3)))
	if ttl(prKeyForTest(e, 2)) <= 0 || ttl(reviews(2)) <= 0 {
		t.Fatalf("closed: TTLs %v, %v; want both to expire", ttl(prKeyForTest(e, 2)), ttl(reviews(2)))
	}
	e.apply(e.pr("reopened", 2, sha, at(4)))
	e.apply(e.pr("synchronize", 2, sha, at(5)))
	if a, b := ttl(prKeyForTest(e, 2)), ttl(reviews(2)); a != -1 || b != -1 {
		t.Errorf("reopened: TTLs %v, %v; want none", a, b)
	}
}

// TestStateInOneRoundTrip: State reads the tracker, the reviews and the
// results at the head in one round trip (once its script is loaded), and
// reads the same on Redis and on the embedded miniredis.
func TestStateInOneRoundTrip(t *testing.T) {
	e := newEnv(t, tracker.Config{})
	e.apply(e.pr("opened", 1, shaA, at(0)))
	e.apply(e.run(shaA, "ci", github.ResultFail, at(10), 1))
	e.apply(e.run(shaB, "ci", github.ResultPass, at(11), 1)) // not the head
	e.apply(e.review(1, "octocat", "changes_requested", at(20)))
	e.apply(e.review(1, "hubot", "approved", at(21)))
	want := e.state(1)
	if want.Head != shaA || len(want.Checks) != 1 || want.Checks["ci"].Result != github.ResultFail ||
		len(want.Reviews) != 2 || len(want.Failed) != 1 {
		t.Fatalf("state %+v", want)
	}
	count := &redistest.RoundTrips{}
	e.rdb.AddHook(count)
	if _, err := e.tr.State(e.ctx, e.repo, 1); err != nil {
		t.Fatal(err)
	}
	if n := count.Count(); n != 1 {
		t.Errorf("State took %d round trips, want 1", n)
	}

	// The same keys copied onto a miniredis read the same.
	mr := miniredis.RunT(t)
	mrdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	keys, err := e.rdb.Keys(e.ctx, e.j.Config().Prefix+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if e.rdb.Type(e.ctx, k).Val() != "hash" {
			continue
		}
		if err := mrdb.HSet(e.ctx, k, e.rdb.HGetAll(e.ctx, k).Val()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := tracker.New(mrdb, journal.New(mrdb, e.j.Config()), tracker.Config{}).State(e.ctx, e.repo, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("miniredis state\n%+v\nwant\n%+v", got, want)
	}
}

// TestSettleOnMiniredis: the batched settle script also runs on the
// embedded miniredis that wakegate serve uses by default.
func TestSettleOnMiniredis(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	j := journal.New(rdb, journal.Config{Prefix: "wg", Shards: 4})
	e := &env{t: t, ctx: context.Background(), rdb: rdb, j: j, ws: "acme", repo: "org/repo", now: time.Now().Truncate(time.Millisecond),
		cfg: tracker.Config{Settle: time.Minute, Required: func(repo, base string) []string { return nil }}}
	e.tr = tracker.New(rdb, j, e.cfg)
	for n := 1; n <= 3; n++ {
		e.apply(e.pr("opened", n, fmt.Sprintf("%040d", n), at(0)))
	}
	fresh := tracker.New(rdb, j, e.cfg) // learns the base from the script's "need"
	if n, err := fresh.SettleDue(e.ctx, e.now.Add(time.Minute)); err != nil || n != 3 {
		t.Fatalf("SettleDue = %d, %v; want 3", n, err)
	}
	e.wantCount("github.pull_request.ready", 3)
}

// TestPreviousHashLayout: a PR tracker hash written before repo and number
// left it (they are the key's) is still read, folded into and evaluated;
// a hash written now leaves them out.
func TestPreviousHashLayout(t *testing.T) {
	e := newEnv(t, tracker.Config{Settle: time.Hour})
	const sha = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	updated := at(0).UnixMilli()
	old := prKeyForTest(e, 7)
	// the previous layout, as apply.lua wrote it
	if err := e.rdb.HSet(e.ctx, old, "ws", e.ws, "repo", e.repo, "number", "7", "state", "open", "draft", "0",
		"merged", "0", "base", "main", "author", "octocat", "title", "Old layout", "labels", "[]",
		"updated_at", updated, "head", sha, "head_seen_at", e.now.UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	st := e.state(7)
	if !st.Seen || st.Workspace != e.ws || st.Repo != e.repo || st.Number != 7 || st.Head != sha || st.Title != "Old layout" {
		t.Fatalf("state of the previous layout: %+v", st)
	}
	e.apply(e.run(sha, "build", "pass", at(1), 7))
	if ready := e.wantCount("github.pull_request.ready", 1); ready[0].Subject != event.PRSubject(e.repo, 7) {
		t.Errorf("ready about %s", ready[0].Subject)
	}
	e.apply(e.pr("edited", 7, sha, at(2)))
	if st := e.state(7); st.Title == "" || len(st.Ready) != 1 || st.Ready[0] != sha || st.Repo != e.repo {
		t.Errorf("after an edit: %+v", st)
	}

	e.apply(e.pr("opened", 8, sha, at(3)))
	fields, err := e.rdb.HKeys(e.ctx, prKeyForTest(e, 8)).Result()
	if err != nil || len(fields) == 0 {
		t.Fatalf("HKEYS = %v, %v", fields, err)
	}
	for _, f := range fields {
		if f == "repo" || f == "number" {
			t.Errorf("a hash written now holds %q (the key's): %v", f, fields)
		}
	}
	if st := e.state(8); !st.Seen || st.Repo != e.repo || st.Number != 8 || st.Workspace != e.ws {
		t.Errorf("state of the new layout: %+v", st)
	}
}

// TestReadyOncePerHead: ready and checks_failed are made once per head by
// the PR's r and f fields (its head's), which hold their entry's
// stream id; they keep their (source, id) marker, so the journal finds
// them by it (the admin redelivery does), and applying again (a
// redelivery, a re-derivation after a crash) appends nothing.
func TestReadyOncePerHead(t *testing.T) {
	e := newEnv(t, tracker.Config{})
	shard := e.j.Shard("github:" + e.repo)
	opened := e.pr("opened", 1, shaA, at(0))
	e.applyGUID("g-open", opened)
	failing := e.run(shaA, "lint", github.ResultFail, at(5), 1)
	e.applyGUID("g-fail", failing)
	passing := e.run(shaA, "lint", github.ResultPass, at(10), 1)
	e.applyGUID("g-pass", passing)
	for _, typ := range []string{"github.pull_request.checks_failed", "github.pull_request.ready", "github.pull_request.opened"} {
		ev := e.wantCount(typ, 1)[0]
		found, err := e.j.Find(e.ctx, ev.Source, ev.ID)
		if err != nil || len(found) != 1 || found[0].Seq != ev.Seq {
			t.Errorf("%s: Find(%s, %s) = %d events, %v; want its entry", typ, ev.Source, ev.ID, len(found), err)
		}
		if typ == "github.pull_request.opened" {
			continue
		}
		field := "r" // the current head's (docs/design.md §3)
		if typ == "github.pull_request.checks_failed" {
			field = "f"
		}
		sid, err := e.rdb.HGet(e.ctx, prKeyForTest(e, 1), field).Result()
		if err != nil || journal.FormatSeq(shard, sid) != ev.Seq {
			t.Errorf("%s = %q, %v; want the entry's id (seq %s)", field, sid, err, ev.Seq)
		}
	}
	before := len(e.events())
	e.applyGUID("g-open", opened)
	e.applyGUID("g-fail", failing)
	e.applyGUID("g-pass", passing)
	if n, err := e.tr.SettleDue(e.ctx, time.Now().Add(time.Hour)); err != nil || len(e.events()) != before {
		t.Errorf("applied again, settled (%d, %v): %d events, want %d", n, err, len(e.events()), before)
	}
}
