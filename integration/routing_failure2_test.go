package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/providers/event"
)

// TestRoutingFailure2PullRequests is field failure 2 (docs/design.md, "Why") with the real
// signed fixtures: a PR linked to its author session reaches the author's
// controller and a repository subscriber with no per-PR wiring; an unread
// opened followed by ready wakes for ready; twenty check suite successes
// fold into one entry that wakes nobody and never hides the earlier
// checks_failed; a subscription created after the merge gets the merge at
// once and is closed.
func TestRoutingFailure2PullRequests(t *testing.T) {
	t.Parallel()
	const ws = "default"
	s := newStack(t, map[string]string{"WAKEGATE_READY_SETTLE": "2s"})
	p := s.start("serve", "serve", nil)
	c := s.client(p)
	op := s.token(t, "human:operator", ws, "supervise")
	boss := s.token(t, "session:boss", ws, "inbox")
	author := s.token(t, "session:author", ws, "events:push inbox")
	watcher := s.token(t, "session:watcher", ws, "subscribe inbox")
	suites := s.token(t, "session:suites", ws, "subscribe inbox")

	// A repository subscriber and a check-suite subscriber, before the PR exists.
	for _, sub := range []struct {
		tok  string
		body map[string]any
	}{
		{watcher, map[string]any{"subjects": []string{"github:" + repo + "#*"}}},
		{suites, map[string]any{"types": []string{"github.check_suite.completed"}, "subjects": []string{prSubj}}},
	} {
		if r := c.send(t, http.MethodPost, "/v1/subscriptions", sub.tok, sub.body); r.Status != 201 {
			t.Fatalf("POST /v1/subscriptions %v: %s", sub.body, r)
		}
	}
	// The author is boss's child; boss has never made a request.
	c.accept(t, author, ce("author-spawned", "session.spawned", map[string]any{"data": map[string]any{"parent": "boss"}}))
	waitFor(t, routeTimeout, "boss controls author (the spawner)", func() (bool, string) {
		r := c.get(t, "/v1/sessions/author/supervision", op)
		var sv struct {
			Effective struct {
				Party string `json:"party"`
			} `json:"effective_controller"`
		}
		_ = json.Unmarshal(r.Body, &sv)
		return sv.Effective.Party == "session:boss", r.String()
	})
	c.accept(t, author, ce("author-pr", "session.pr_opened", map[string]any{"data": map[string]any{"repo": repo, "number": 2}}))

	opened := fixture(t, "octokit/pull_request/opened.payload.json")
	head := prHead(t, opened)
	if r := c.mustWebhook(t, "pull_request", newGUID(), opened); r.Status != 202 {
		t.Fatalf("opened: %s", r)
	}

	// Boss (unattended) is woken by opened…
	pg, took := c.timedInbox(t, boss, "wait=20s")
	e1 := entry(pg.Entries, prSubj)
	if e1 == nil || e1.Type != "github.pull_request.opened" || !e1.Wake || e1.Via != inbox.ViaController {
		t.Fatalf("boss's first long-poll (%s): %s; want a waking github.pull_request.opened entry about %s via controller",
			took, describeEntries(pg.Entries), prSubj)
	}
	openedEv := decodeEvent(t, e1.Event)
	if openedEv.SessionID != "author" {
		t.Errorf("opened event sessionid %q, want author (the linked session)", openedEv.SessionID)
	}
	// …and, leaving it unread, woken again by ready.
	pg, took = c.timedInbox(t, boss, fmt.Sprintf("after=%d&wait=20s", e1.Seq))
	e2 := entry(pg.Entries, prSubj)
	switch {
	case e2 == nil || e2.Type != "github.pull_request.ready":
		t.Fatalf("boss's long-poll after the unread opened (%s): %s; want the entry about %s with headline ready", took, describeEntries(pg.Entries), prSubj)
	case took > 15*time.Second:
		t.Errorf("ready ended the long-poll only after %s: not a wake", took)
	}
	if !e2.Wake || e2.WakeSeq != e2.Seq || e2.Seq <= e1.Seq || e2.Count != 2 ||
		!slices.Equal(e2.FoldedIDs, []string{openedEv.ID, "pr/2/ready/" + head}) {
		t.Errorf("entry after ready %s folded %v: want a wake at a new seq above %d, count 2, folded [%s pr/2/ready/%s]",
			describeEntries([]inbox.Entry{*e2}), e2.FoldedIDs, e1.Seq, openedEv.ID, head)
	}
	// The repository subscriber heard of the PR with no per-PR wiring.
	wp := c.waitInbox(t, watcher, "", "the repository subscriber's entry about #2", func(p inboxPage) bool {
		e := entry(p.Entries, prSubj)
		return e != nil && slices.Contains(e.FoldedIDs, openedEv.ID)
	})
	if e := entry(wp.Entries, prSubj); e.Via != inbox.ViaSubscription || !e.Wake {
		t.Errorf("watcher's entry %s: want via subscription, waking", describeEntries([]inbox.Entry{*e}))
	}

	// A failing check at head: checks_failed, critical (the head was ready).
	failing := atHead(t, fixture(t, "octokit/check_run/completed.1.payload.json"), head)
	if r := c.mustWebhook(t, "check_run", newGUID(), failing); r.Status != 202 {
		t.Fatalf("check_run: %s", r)
	}
	pg = c.waitInbox(t, boss, "", "checks_failed headline in boss's entry", hasEntry(prSubj, "github.pull_request.checks_failed"))
	e3 := *entry(pg.Entries, prSubj)
	if e3.Priority != event.Critical || !e3.Wake || e3.WakeSeq != e3.Seq {
		t.Errorf("entry after checks_failed %s: want critical, a wake at its seq", describeEntries([]inbox.Entry{e3}))
	}

	// Twenty check suite successes for the PR, each its own delivery.
	suite := fixture(t, "octokit/check_suite/completed.payload.json")
	type poll struct {
		page inboxPage
		took time.Duration
	}
	during := make(chan poll, 1)
	go func() {
		// A long-poll open while they arrive.
		req, _ := http.NewRequest(http.MethodGet, c.base+fmt.Sprintf("/v1/inbox?after=%d&wait=3s", e3.Seq), nil)
		req.Header.Set("Authorization", "Bearer "+boss)
		var pg inboxPage
		if r, err := c.do(req); err == nil {
			_ = json.Unmarshal(r.Body, &pg)
		}
		during <- poll{pg, 0}
	}()
	duringStart := time.Now()
	var suiteIDs []string
	for i := range 20 {
		body := editJSON(t, suite, func(m map[string]any) {
			cs := obj(m, "check_suite")
			cs["id"] = 900000 + i
			cs["head_sha"] = head
		})
		guid := newGUID()
		if r := c.mustWebhook(t, "check_suite", guid, body); r.Status != 202 {
			t.Fatalf("check_suite %d: %s", i, r)
		}
		suiteIDs = append(suiteIDs, guid+"/2")
	}
	pg = c.waitInbox(t, boss, "", "twenty suites folded into boss's entry", func(p inboxPage) bool {
		e := entry(p.Entries, prSubj)
		return e != nil && e.Count >= e3.Count+20
	})
	d := <-during
	d.took = time.Since(duringStart)
	if d.took < 2900*time.Millisecond {
		t.Errorf("a long-poll after seq %d open while twenty suites folded in returned after %s (%s): an info fold ended it",
			e3.Seq, d.took, describeEntries(d.page.Entries))
	}
	for _, e := range d.page.Entries {
		if e.Wake {
			t.Errorf("the long-poll open during the suites returned a waking entry %s", describeEntries([]inbox.Entry{e}))
		}
	}
	pg2, took := c.timedInbox(t, boss, fmt.Sprintf("after=%d&wait=2s", e3.Seq))
	if took < 1900*time.Millisecond {
		t.Errorf("a long-poll after seq %d (before the suites) returned after %s: the suites woke boss (%s)", e3.Seq, took, describeEntries(pg2.Entries))
	}
	e4 := entry(pg2.Entries, prSubj)
	switch {
	case e4 == nil:
		t.Fatalf("boss's entry about %s missing after the suites: %s", prSubj, describeEntries(pg2.Entries))
	case e4.Count != e3.Count+20 || e4.Seq <= e3.Seq:
		t.Errorf("after twenty suites the entry has count %d at seq %d, want %d at a seq above %d", e4.Count, e4.Seq, e3.Count+20, e3.Seq)
	case e4.Type != "github.pull_request.checks_failed" || e4.Priority != event.Critical:
		t.Errorf("after twenty suites the headline is %s (%s): a success hid the checks_failed", e4.Type, e4.Priority)
	case e4.Wake || e4.Kind != inbox.KindDigest || e4.WakeSeq != e3.Seq:
		t.Errorf("after twenty suites the entry is %s: want no wake (kind digest) and its last wake still seq %d", describeEntries([]inbox.Entry{*e4}), e3.Seq)
	}
	if e4 != nil {
		if latest := decodeEvent(t, e4.Latest); latest.Type != "github.check_suite.completed" {
			t.Errorf("latest of the entry is %s, want the last check suite", latest.Type)
		}
		for _, id := range suiteIDs {
			if n := countOf(e4.FoldedIDs, id); n != 1 {
				t.Errorf("suite %s folded %d times into boss's entry, want once", id, n)
			}
		}
	}
	// The suite subscriber: one entry, count 20, that never woke.
	sp, took := c.timedInbox(t, suites, "wait=2s")
	if took < 1900*time.Millisecond {
		t.Errorf("the suite subscriber's long-poll returned after %s: something woke it", took)
	}
	if len(sp.Entries) != 1 {
		t.Fatalf("suite subscriber has %d entries, want 1: %s", len(sp.Entries), describeEntries(sp.Entries))
	}
	if e := sp.Entries[0]; e.CoalesceKey != prSubj || e.Count != 20 || e.Wake || e.WakeSeq != 0 || e.Kind != inbox.KindDigest ||
		e.Priority != event.Info || len(e.FoldedIDs) != 20 || !sameSet(e.FoldedIDs, suiteIDs) {
		t.Errorf("suite subscriber's entry %s folded %v: want one info digest about %s, count 20, never a wake, folding the twenty suites",
			describeEntries(sp.Entries), e.FoldedIDs, prSubj)
	}

	// The merge; then subscriptions created after it.
	if r := c.mustWebhook(t, "pull_request", newGUID(), fixture(t, "derived/pull_request.closed.merged.json")); r.Status != 202 {
		t.Fatalf("merge: %s", r)
	}
	s.waitEvents(t, routeTimeout, "github.pull_request.closed journaled", func(evs []*event.Event) bool {
		return len(byType(evs, "github.pull_request.closed", prSubj)) == 1
	})
	checkLate := func(t *testing.T, party string, body map[string]any) {
		tok := s.token(t, party, ws, "subscribe inbox")
		r := c.send(t, http.MethodPost, "/v1/subscriptions", tok, body)
		if r.Status != 201 {
			t.Fatalf("POST /v1/subscriptions %v after the merge: %s, want 201", body, r)
		}
		// At once: no waiting.
		pg := c.inbox(t, tok, "")
		e := entry(pg.Entries, prSubj)
		if e == nil || e.Type != "github.pull_request.closed" || e.Via != inbox.ViaSubscription || !e.Wake {
			t.Errorf("%s subscribed %v after the merge; its inbox at once: %s; want a waking github.pull_request.closed entry via subscription",
				party, body, describeEntries(pg.Entries))
		} else {
			var d struct {
				Merged bool `json:"merged"`
			}
			_ = json.Unmarshal(decodeEvent(t, e.Event).Data, &d)
			if !d.Merged {
				t.Errorf("the closed event delivered to %s is not a merge: %s", party, e.Event)
			}
		}
		lr := c.get(t, "/v1/subscriptions", tok)
		var list struct {
			Subscriptions []map[string]any `json:"subscriptions"`
		}
		lr.decode(t, &list)
		if lr.Status != 200 || len(list.Subscriptions) != 0 {
			t.Errorf("GET /v1/subscriptions of %s after subscribing %v to the merged PR: %s; want it closed (none listed)", party, body, lr)
		}
	}
	t.Run("late_until_subject_terminal", func(t *testing.T) {
		checkLate(t, "session:late", map[string]any{"subjects": []string{prSubj}, "until": "subject_terminal"})
	})
	// docs/design.md §3 (DeathWatch): subscribing to a subject that is already
	// terminal delivers its terminal event at once and closes the
	// subscription — whatever its until.
	t.Run("late_plain", func(t *testing.T) {
		checkLate(t, "session:late2", map[string]any{"subjects": []string{prSubj}})
	})
}

func countOf(list []string, v string) int {
	n := 0
	for _, x := range list {
		if x == v {
			n++
		}
	}
	return n
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
