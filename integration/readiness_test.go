package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/providers/event"
)

// prHead is the head sha of PR #2 in the opened fixture.
func prHead(t testing.TB, opened []byte) string {
	t.Helper()
	var p struct {
		PullRequest struct {
			Head struct {
				SHA string `json:"sha"`
			} `json:"head"`
		} `json:"pull_request"`
	}
	if err := json.Unmarshal(opened, &p); err != nil || p.PullRequest.Head.SHA == "" {
		t.Fatalf("opened fixture without pull_request.head.sha: %v", err)
	}
	return p.PullRequest.Head.SHA
}

// atHead returns a check_run fixture whose head_sha (and the head of the
// PRs it lists) is head: the fixture unchanged when it already is, else a
// copy edited with encoding/json (a distinct body, signed as sent).
func atHead(t testing.TB, body []byte, head string) []byte {
	t.Helper()
	var p struct {
		CheckRun struct {
			HeadSHA string `json:"head_sha"`
		} `json:"check_run"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	if p.CheckRun.HeadSHA == head {
		return body
	}
	t.Logf("check_run fixture head_sha %s differs from the PR head %s: edited to the PR head", p.CheckRun.HeadSHA, head)
	return editJSON(t, body, func(m map[string]any) {
		cr := obj(m, "check_run")
		cr["head_sha"] = head
		prs, _ := cr["pull_requests"].([]any)
		for _, pr := range prs {
			if h := obj(pr.(map[string]any), "head"); h != nil {
				h["sha"] = head
			}
		}
	})
}

// TestPRReadinessPipeline drives PR #2 through the whole pipeline with the
// real signed fixtures, no required checks and a 2 s settle: opened →
// exactly one ready, only after the settle → a failing check at head →
// one critical checks_failed → the merge, replayed and redelivered and
// seen by a second hook → one closed.
func TestPRReadinessPipeline(t *testing.T) {
	t.Parallel()
	const settle = 2 * time.Second
	s := newStack(t, map[string]string{"WAKEGATE_READY_SETTLE": settle.String()})
	p := s.start("serve", "serve", nil)
	c := s.client(p)

	opened := fixture(t, "octokit/pull_request/opened.payload.json")
	head := prHead(t, opened)
	readyID := "pr/2/ready/" + head

	sent := time.Now()
	guidOpened := newGUID()
	r := c.mustWebhook(t, "pull_request", guidOpened, opened)
	if r.Status != 202 {
		t.Fatalf("opened: %s, want 202", r)
	}
	s.waitEvents(t, 15*time.Second, "github.pull_request.opened", func(evs []*event.Event) bool {
		return len(byType(evs, "github.pull_request.opened", prSubj)) == 1
	})

	// No check has reported: nothing may be ready before the settle time.
	// (Any read that finished before sent+settle must see no ready.)
	for {
		evs := s.journalEvents(t)
		if time.Now().After(sent.Add(settle)) {
			break
		}
		if got := byType(evs, "github.pull_request.ready", prSubj); len(got) > 0 {
			t.Fatalf("ready journaled %s after opened was sent, before the %s settle: %+v", time.Since(sent), settle, got[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
	evs := s.waitEvents(t, settle+15*time.Second, "github.pull_request.ready after the settle", func(evs []*event.Event) bool {
		return len(byType(evs, "github.pull_request.ready", prSubj)) > 0
	})
	ready := byType(evs, "github.pull_request.ready", prSubj)
	if len(ready) != 1 || ready[0].ID != readyID {
		t.Fatalf("ready events %+v, want exactly one with id %s", ready, readyID)
	}
	if ready[0].Time.Before(sent.Add(settle - time.Millisecond)) {
		t.Errorf("ready stamped %s, %s after opened was sent: before the %s settle", ready[0].Time, ready[0].Time.Sub(sent), settle)
	}
	if ready[0].Priority != event.Attention {
		t.Errorf("ready priority %q, want attention", ready[0].Priority)
	}

	// A failing check run at the head: one checks_failed, critical because
	// that head had been ready.
	failure := atHead(t, fixture(t, "octokit/check_run/completed.1.payload.json"), head)
	guidFail := newGUID()
	if r := c.mustWebhook(t, "check_run", guidFail, failure); r.Status != 202 {
		t.Fatalf("check_run failure: %s, want 202", r)
	}
	evs = s.waitEvents(t, 15*time.Second, "github.pull_request.checks_failed", func(evs []*event.Event) bool {
		return len(byType(evs, "github.pull_request.checks_failed", prSubj)) > 0
	})
	failed := byType(evs, "github.pull_request.checks_failed", prSubj)
	if len(failed) != 1 || failed[0].ID != "pr/2/checks_failed/"+head {
		t.Fatalf("checks_failed events %+v, want exactly one with id pr/2/checks_failed/%s", failed, head)
	}
	if failed[0].Priority != event.Critical {
		t.Errorf("checks_failed priority %q, want critical (the head had been ready)", failed[0].Priority)
	}
	var fd struct {
		Failed []string `json:"failed"`
	}
	_ = json.Unmarshal(failed[0].Data, &fd)
	if !slices.Contains(fd.Failed, "Octocoders-linter") {
		t.Errorf("checks_failed data %s does not name Octocoders-linter", failed[0].Data)
	}
	if own := find(evs, guidFail+"/2"); own == nil || own.Type != "github.check_run.completed" || own.Subject != prSubj {
		t.Errorf("check run's own event %s/2 about %s missing or wrong: %+v", guidFail, prSubj, own)
	}

	// The merge: delivered, replayed byte-identical under a fresh GUID,
	// redelivered by GitHub under its GUID, and seen by a second hook with a
	// body of its own → one closed event.
	merged := fixture(t, "derived/pull_request.closed.merged.json")
	guidA, guidB := newGUID(), newGUID()
	r = c.mustWebhook(t, "pull_request", guidA, merged)
	if r.Status != 202 {
		t.Fatalf("merge: %s, want 202", r)
	}
	s.waitDerived(t, 20*time.Second)
	before := s.state(t)
	r = c.mustWebhook(t, "pull_request", guidB, merged)
	var dup deliveryAnswer
	r.decode(t, &dup)
	if r.Status != 200 || !dup.Duplicate || dup.Delivery != guidB {
		t.Errorf("byte-identical merge under a new GUID: %s, want 200 {delivery: %s, duplicate: true}", r, guidB)
	}
	r = c.mustWebhook(t, "pull_request", guidA, merged)
	r.decode(t, &dup)
	if r.Status != 200 || !dup.Duplicate || dup.Delivery != guidA {
		t.Errorf("GitHub redelivery of the merge: %s, want 200 {delivery: %s, duplicate: true}", r, guidA)
	}
	s.waitDerived(t, 20*time.Second)
	if d := changed(before, s.state(t)); len(d) > 0 {
		t.Errorf("duplicates committed something: %v", d)
	}
	secondHook := editJSON(t, merged, func(m map[string]any) {
		m["installation"] = map[string]any{"id": 987654}
	})
	guidC := newGUID()
	r = c.mustWebhook(t, "pull_request", guidC, secondHook, func(req *http.Request) {
		req.Header.Set("X-GitHub-Hook-ID", "515151")
	})
	if r.Status != 202 {
		t.Fatalf("the merge seen by a second hook: %s, want 202", r)
	}
	s.waitDerived(t, 20*time.Second)

	evs = s.journalEvents(t)
	closed := byType(evs, "github.pull_request.closed", prSubj)
	if len(closed) != 1 {
		t.Fatalf("%d github.pull_request.closed events, want exactly 1: %+v", len(closed), closed)
	}
	var cd struct {
		Merged bool `json:"merged"`
	}
	_ = json.Unmarshal(closed[0].Data, &cd)
	if !cd.Merged || !closed[0].Terminal {
		t.Errorf("closed event %+v: want data.merged true and terminal", closed[0])
	}
	if n := len(byType(evs, "github.pull_request.ready", prSubj)); n != 1 {
		t.Errorf("%d ready events at the end, want 1", n)
	}
	if n := len(byType(evs, "github.pull_request.checks_failed", prSubj)); n != 1 {
		t.Errorf("%d checks_failed events at the end, want 1", n)
	}
}

// TestTwoGatewaysOneReady feeds the same PR's deliveries — opened, a
// queued run, three suites, two other runs and the required check —
// concurrently to two gateway processes (each delivery to both at once,
// as a racing redelivery would) with one or two workers deriving: exactly
// one ready, and each delivery committed by exactly one gateway.
func TestTwoGatewaysOneReady(t *testing.T) {
	t.Parallel()
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			t.Parallel()
			twoGateways(t, workers)
		})
	}
}

func twoGateways(t *testing.T, workers int) {
	const required = "Octocoders-linter"
	s := newStack(t, map[string]string{"WAKEGATE_REQUIRED_CHECKS": repo + "=" + required})
	gws := []*proc{s.start("gateway-1", "gateway", nil), s.start("gateway-2", "gateway", nil)}
	for i := range workers {
		s.start(fmt.Sprintf("worker-%d", i+1), "worker", nil)
	}
	clients := []*client{s.client(gws[0]), s.client(gws[1])}

	opened := fixture(t, "octokit/pull_request/opened.payload.json")
	head := prHead(t, opened)
	success := atHead(t, fixture(t, "octokit/check_run/completed.payload.json"), head)
	suite := fixture(t, "octokit/check_suite/completed.payload.json")
	suiteNoPRs := fixture(t, "octokit/check_suite/completed.1.payload.json")
	withSuiteID := func(body []byte, id int) []byte {
		return editJSON(t, body, func(m map[string]any) { obj(m, "check_suite")["id"] = id })
	}
	otherRun := func(name string, id int) []byte {
		return editJSON(t, success, func(m map[string]any) {
			cr := obj(m, "check_run")
			cr["name"], cr["id"] = name, id
		})
	}
	type delivery struct {
		event, guid string
		body        []byte
		pending     bool // a queued run: tracker input only, never journaled
	}
	ds := []delivery{
		{"pull_request", newGUID(), opened, false},
		{"check_run", newGUID(), atHead(t, fixture(t, "octokit/check_run/created.payload.json"), head), true},
		{"check_suite", newGUID(), suite, false},
		{"check_suite", newGUID(), withSuiteID(suiteNoPRs, 118578148), false},
		{"check_suite", newGUID(), withSuiteID(suite, 118578149), false},
		{"check_run", newGUID(), otherRun("build", 9001), false},
		{"check_run", newGUID(), otherRun("test", 9002), false},
		{"check_run", newGUID(), success, false},
	}

	type result struct {
		r   *response
		err error
	}
	results := make([][2]result, len(ds))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, d := range ds {
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := clients[g].webhook(d.event, d.guid, d.body)
				results[i][g] = result{r, err}
			}()
		}
	}
	close(start)
	wg.Wait()
	for i, d := range ds {
		accepted, duplicate := 0, 0
		for g, res := range results[i] {
			if res.err != nil {
				t.Fatalf("%s %s to gateway-%d: %v", d.event, d.guid, g+1, res.err)
			}
			var a deliveryAnswer
			res.r.decode(t, &a)
			switch {
			case res.r.Status == 202 && a.Status == "accepted":
				accepted++
			case res.r.Status == 200 && a.Duplicate:
				duplicate++
			default:
				t.Errorf("%s %s to gateway-%d: %s", d.event, d.guid, g+1, res.r)
			}
		}
		if accepted != 1 || duplicate != 1 {
			t.Errorf("%s %s sent to both gateways: %d accepted, %d duplicate; want exactly one of each", d.event, d.guid, accepted, duplicate)
		}
	}

	s.waitDerived(t, 30*time.Second)
	evs := s.journalEvents(t)
	ready := byType(evs, "github.pull_request.ready", prSubj)
	if len(ready) != 1 || ready[0].ID != "pr/2/ready/"+head {
		t.Errorf("ready events %+v, want exactly one with id pr/2/ready/%s", ready, head)
	}
	if f := byType(evs, "github.pull_request.checks_failed", ""); len(f) != 0 {
		t.Errorf("checks_failed journaled for all-green checks: %+v", f)
	}
	// Every delivery's own event(s), once each.
	perID := countIDs(evs)
	for _, d := range ds {
		n := 0
		for id, k := range perID {
			if id == d.guid || (len(id) > len(d.guid) && id[:len(d.guid)+1] == d.guid+"/") {
				n += k
				if k != 1 {
					t.Errorf("event %s journaled %d times", id, k)
				}
			}
		}
		if n == 0 && !d.pending {
			t.Errorf("%s delivery %s produced no journal event", d.event, d.guid)
		}
		if n != 0 && d.pending {
			t.Errorf("queued check run %s was journaled (%d events)", d.guid, n)
		}
	}
}
