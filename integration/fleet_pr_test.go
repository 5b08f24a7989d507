package integration

// A linked PR's people: the author's whole chain hears its milestones, a
// deployment of its head reaches it, and PRs get linked without anyone
// remembering to (the Wakegate-Session trailer, the post-tool-use hook).
// Every GitHub fact is a real signed webhook from testdata/github.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"testing"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/providers/event"
)

// accepted sends a signed webhook and fails the test unless it was
// accepted (202).
func (c *client) accepted(t testing.TB, eventType string, body []byte) {
	t.Helper()
	if r := c.mustWebhook(t, eventType, newGUID(), body); r.Status != 202 {
		t.Fatalf("%s webhook: %s, want 202", eventType, r)
	}
}

// spawned pushes session.spawned for tok's session under parent (the
// commit records the lineage).
func spawned(t *testing.T, c *client, tok, id, parent string) {
	t.Helper()
	c.accept(t, tok, ce(id+"-spawned", "session.spawned", map[string]any{"data": map[string]any{"parent": parent}}))
}

// controlledBy waits until GET /v1/sessions/{id}/supervision names party
// as the session's effective controller: the spawns were routed (the
// spawner's lease is set then), so what follows climbs as it should.
func controlledBy(t *testing.T, c *client, tok, id, party string) {
	t.Helper()
	waitFor(t, routeTimeout, party+" controls "+id, func() (bool, string) {
		r := c.get(t, "/v1/sessions/"+id+"/supervision", tok)
		var sv struct {
			Effective struct {
				Party string `json:"party"`
			} `json:"effective_controller"`
		}
		_ = json.Unmarshal(r.Body, &sv)
		return sv.Effective.Party == party, r.String()
	})
}

// TestFleetPRLineage: a grandchild's PR after its parent exited reaches
// the grandparent (not the workspace default), and a subtree observer of
// the root hears every milestone of the PR — opened, ready, checks_failed,
// the approving review, the merge — as it hears the grandchild's own
// events.
func TestFleetPRLineage(t *testing.T) {
	t.Parallel()
	const ws = "default"
	s := newStack(t, nil)
	p := s.start("serve", "serve", nil)
	c := s.client(p)
	root := s.token(t, "session:root", ws, "events:push inbox")
	mid := s.token(t, "session:mid", ws, "events:push inbox")
	kid := s.token(t, "session:kid", ws, "events:push inbox")
	watcher := s.token(t, "human:watcher", ws, "supervise inbox")
	admin := s.token(t, "human:admin", ws, "admin")
	reader := s.token(t, "human:auditor", ws, "events:read events:read:any")
	dflt := s.token(t, "human:default", ws, "inbox")

	c.putSettings(t, admin, map[string]any{"default_controller": "human:default"})
	c.accept(t, root, ce("root-start", "session.turn_started", nil))
	spawned(t, c, mid, "mid", "root")
	spawned(t, c, kid, "kid", "mid")
	if r := c.send(t, http.MethodPost, "/v1/sessions/root/supervise", watcher,
		map[string]any{"role": "observer", "scope": "subtree"}); r.Status != 200 {
		t.Fatalf("observe root's subtree: %s", r)
	}
	controlledBy(t, c, watcher, "kid", "session:mid")
	c.accept(t, mid, ce("mid-exited", "session.exited", nil))
	controlledBy(t, c, watcher, "kid", "session:root")
	c.accept(t, kid, ce("kid-pr", "session.pr_opened", map[string]any{"data": map[string]any{"repo": repo, "number": 2}}))

	opened := fixture(t, "octokit/pull_request/opened.payload.json")
	head := prHead(t, opened)
	c.accepted(t, "pull_request", opened)
	// A passing check at head (ready), then a failing one (checks_failed).
	pass := editJSON(t, atHead(t, fixture(t, "octokit/check_run/completed.payload.json"), head), func(m map[string]any) {
		obj(m, "check_run")["name"] = "build"
	})
	c.accepted(t, "check_run", pass)
	s.waitEvents(t, routeTimeout, "ready", func(evs []*event.Event) bool {
		return len(byType(evs, "github.pull_request.ready", prSubj)) == 1
	})
	c.accepted(t, "check_run", atHead(t, fixture(t, "octokit/check_run/completed.1.payload.json"), head))
	c.accepted(t, "pull_request_review", fixture(t, "derived/pull_request_review.submitted.approved.json"))
	c.accepted(t, "pull_request", fixture(t, "derived/pull_request.closed.merged.json"))
	// The kid's own idle turn end, for comparison: it reaches root too.
	c.accept(t, kid, idleTurn("kid-turn", nil))
	s.routed(t, true)

	milestones := map[string]string{} // id → type
	for _, typ := range []string{"github.pull_request.opened", "github.pull_request.ready", "github.pull_request.checks_failed",
		"github.pull_request_review.submitted", "github.pull_request.closed"} {
		evs := byType(c.journalOf(t, reader, typ), typ, prSubj)
		if len(evs) != 1 {
			t.Fatalf("%d %s about %s journaled, want 1: %s", len(evs), typ, prSubj, summarize(evs))
		}
		if evs[0].SessionID != "kid" {
			t.Errorf("%s carries sessionid %q, want kid (the linked session)", typ, evs[0].SessionID)
		}
		milestones[evs[0].ID] = typ
	}
	for _, who := range []struct{ name, tok, via string }{
		{"root (the nearest live ancestor's controller)", root, inbox.ViaController},
		{"the subtree observer of root", watcher, inbox.ViaObserver},
	} {
		pg := c.inbox(t, who.tok, "")
		e := entry(pg.Entries, prSubj)
		if e == nil {
			t.Errorf("%s has no entry about %s: %s", who.name, prSubj, describeEntries(pg.Entries))
			continue
		}
		for id, typ := range milestones {
			if !contains(e.FoldedIDs, id) {
				t.Errorf("%s did not hear %s (%s): its entry folded %v", who.name, typ, id, e.FoldedIDs)
			}
		}
		if e.Via != who.via {
			t.Errorf("%s's entry about %s came via %s, want %s", who.name, prSubj, e.Via, who.via)
		}
		if k := entry(pg.Entries, "session:kid"); k == nil || !contains(k.FoldedIDs, "kid-turn") {
			t.Errorf("%s did not hear kid's own turn end: %s", who.name, describeEntries(pg.Entries))
		}
	}
	if pg := c.inbox(t, dflt, ""); entry(pg.Entries, prSubj) != nil {
		t.Errorf("the workspace default heard of the kid's PR though root is alive: %s", describeEntries(pg.Entries))
	}
}

// TestFleetPRDeployment: a deployment status of a PR's head reaches the
// PR's people — the author's controller, a subscriber of the repository's
// PRs — as well as a subscriber of the repository's commits (github:…@*).
func TestFleetPRDeployment(t *testing.T) {
	t.Parallel()
	const ws = "default"
	s := newStack(t, nil)
	p := s.start("serve", "serve", nil)
	c := s.client(p)
	boss := s.token(t, "session:boss", ws, "events:push inbox")
	author := s.token(t, "session:author", ws, "events:push inbox")
	prs := s.token(t, "human:prs", ws, "subscribe inbox")
	shas := s.token(t, "human:shas", ws, "subscribe inbox")
	reader := s.token(t, "human:auditor", ws, "events:read events:read:any")
	for _, sub := range []struct{ tok, subject string }{{prs, "github:" + repo + "#*"}, {shas, "github:" + repo + "@*"}} {
		if r := c.send(t, http.MethodPost, "/v1/subscriptions", sub.tok, map[string]any{"subjects": []string{sub.subject}}); r.Status != 201 {
			t.Fatalf("subscribe %s: %s, want 201", sub.subject, r)
		}
	}
	c.accept(t, boss, ce("boss-start", "session.turn_started", nil))
	spawned(t, c, author, "author", "boss")
	controlledBy(t, c, s.token(t, "human:operator", ws, "supervise"), "author", "session:boss")
	c.accept(t, author, ce("author-pr", "session.pr_opened", map[string]any{"data": map[string]any{"repo": repo, "number": 2}}))
	opened := fixture(t, "octokit/pull_request/opened.payload.json")
	head := prHead(t, opened)
	c.accepted(t, "pull_request", opened)
	failed := editJSON(t, fixture(t, "octokit/deployment_status/payload.json"), func(m map[string]any) {
		obj(m, "deployment")["sha"] = head
		obj(m, "deployment_status")["state"] = "failure"
	})
	c.accepted(t, "deployment_status", failed)
	s.routed(t, true)

	deploys := c.journalOf(t, reader, "github.deployment_status")
	if len(deploys) != 1 || deploys[0].Subject != event.ShaSubject(repo, head) || deploys[0].SessionID != "author" {
		t.Fatalf("deployment statuses journaled: %s; want one about %s carrying sessionid author", summarize(deploys), event.ShaSubject(repo, head))
	}
	d := deploys[0]
	for _, who := range []struct{ name, tok, via string }{
		{"boss (the author's controller)", boss, inbox.ViaController},
		{"the subscriber of the repository's PRs", prs, inbox.ViaSubscription},
		{"the subscriber of the repository's commits", shas, inbox.ViaSubscription},
	} {
		pg := c.inbox(t, who.tok, "")
		e := entry(pg.Entries, d.CoalesceKey)
		if e == nil || !contains(e.FoldedIDs, d.ID) || e.Via != who.via || e.Priority != event.Attention {
			t.Errorf("%s: entries %s; want the failed deployment (%s, key %s) via %s, attention", who.name, describeEntries(pg.Entries), d.ID, d.CoalesceKey, who.via)
		}
	}
}

// prFact is the opened fixture as PR number n of the repository, with
// action and body set.
func prFact(t testing.TB, n int, action, body string) []byte {
	t.Helper()
	return editJSON(t, fixture(t, "octokit/pull_request/opened.payload.json"), func(m map[string]any) {
		m["action"] = action
		m["number"] = n
		pr := obj(m, "pull_request")
		pr["number"] = n
		pr["body"] = body
		pr["html_url"] = fmt.Sprintf("https://github.com/%s/pull/%d", repo, n)
	})
}

// TestFleetPRTrailer: a Wakegate-Session trailer in a PR body links the PR
// to that session when it is opened or edited and nothing claims it; a
// session's own claim wins over a trailer link, before or after it; a
// trailer naming a session nobody knows links nothing and the journal
// says so.
func TestFleetPRTrailer(t *testing.T) {
	t.Parallel()
	const ws = "default"
	s := newStack(t, nil)
	p := s.start("serve", "serve", nil)
	c := s.client(p)
	boss := s.token(t, "session:boss", ws, "events:push inbox")
	trailed := s.token(t, "session:trailed", ws, "events:push inbox")
	claimer := s.token(t, "session:claimer", ws, "events:push inbox")
	reader := s.token(t, "human:auditor", ws, "events:read events:read:any")
	c.accept(t, boss, ce("boss-start", "session.turn_started", nil))
	spawned(t, c, trailed, "trailed", "boss")
	c.accept(t, claimer, ce("claimer-start", "session.turn_started", nil))
	controlledBy(t, c, s.token(t, "human:operator", ws, "supervise"), "trailed", "session:boss")
	claim := func(tok string, n int) *response {
		return c.mustPush(t, tok, ctEvent, ce(fmt.Sprintf("claim-%d", n), "session.pr_opened",
			map[string]any{"data": map[string]any{"repo": repo, "number": n}}))
	}
	subj := func(n int) string { return event.PRSubject(repo, n) }
	one := func(typ string, n int) *event.Event {
		t.Helper()
		evs := byType(c.journalOf(t, reader, typ), typ, subj(n))
		if len(evs) != 1 {
			t.Fatalf("%d %s about %s, want 1: %s", len(evs), typ, subj(n), summarize(evs))
		}
		return evs[0]
	}

	// 1. Opened with the trailer: the opened event itself carries the
	// session, and its controller hears of it.
	c.accepted(t, "pull_request", prFact(t, 11, "opened", "Adds a thing.\n\nWakegate-Session: trailed\n"))
	// 2. Opened with no trailer, then edited to carry one: linked.
	c.accepted(t, "pull_request", prFact(t, 12, "opened", "No trailer yet."))
	s.routed(t, true)
	c.accepted(t, "pull_request", prFact(t, 12, "edited", "Now it has one.\r\nwakegate-session: trailed"))
	// 3. A trailer link, then the session's own claim: the claim wins.
	c.accepted(t, "pull_request", prFact(t, 13, "opened", "Wakegate-Session: trailed"))
	s.routed(t, true)
	if r := claim(claimer, 13); r.Status != 202 {
		t.Errorf("claimer's claim of a PR only a trailer linked: %s, want 202", r)
	}
	// 4. A claim first: a trailer naming another session changes nothing.
	if r := claim(claimer, 14); r.Status != 202 {
		t.Fatalf("claim of #14: %s", r)
	}
	c.accepted(t, "pull_request", prFact(t, 14, "opened", "Wakegate-Session: trailed"))
	// 5. A trailer naming a session nobody knows links nothing.
	c.accepted(t, "pull_request", prFact(t, 15, "opened", "Wakegate-Session: ghost"))
	s.routed(t, true)

	if e := one("github.pull_request.opened", 11); e.SessionID != "trailed" {
		t.Errorf("#11 opened with the trailer carries sessionid %q, want trailed", e.SessionID)
	}
	pg := c.inbox(t, boss, "")
	if e := entry(pg.Entries, subj(11)); e == nil || e.Type != "github.pull_request.opened" || e.Via != inbox.ViaController {
		t.Errorf("boss (trailed's controller) entries %s; want #11's opened via controller", describeEntries(pg.Entries))
	}
	if e := one("github.pull_request.linked", 12); e.SessionID != "trailed" || e.ID != "pr/12/linked/trailed" {
		t.Errorf("#12 edited to carry the trailer: linked %+v, want sessionid trailed, id pr/12/linked/trailed", e)
	}
	if e := entry(pg.Entries, subj(12)); e == nil || !contains(e.FoldedIDs, "pr/12/linked/trailed") {
		t.Errorf("boss did not hear #12 linked: %s", describeEntries(pg.Entries))
	}
	if e := one("github.pull_request.linked", 13); e.SessionID != "claimer" {
		t.Errorf("#13 claimed after a trailer link: linked carries %q, want claimer", e.SessionID)
	}
	if e := one("github.pull_request.opened", 14); e.SessionID != "claimer" {
		t.Errorf("#14 claimed, then opened with another session's trailer: sessionid %q, want claimer", e.SessionID)
	}
	if e := one("github.pull_request.opened", 15); e.SessionID != "" {
		t.Errorf("#15's trailer names an unknown session, yet opened carries sessionid %q", e.SessionID)
	}
	refused := one("wakegate.link_refused", 15)
	var d struct{ Session, Reason string }
	_ = json.Unmarshal(refused.Data, &d)
	if d.Session != "ghost" || d.Reason != "unknown session" {
		t.Errorf("link_refused data %s: want session ghost, reason unknown session", refused.Data)
	}
	// Later facts follow the link that stands.
	merged := func(n int) []byte {
		return editJSON(t, fixture(t, "derived/pull_request.closed.merged.json"), func(m map[string]any) {
			m["number"] = n
			obj(m, "pull_request")["number"] = n
		})
	}
	c.accepted(t, "pull_request", merged(13))
	c.accepted(t, "pull_request", merged(15))
	s.routed(t, true)
	if e := one("github.pull_request.closed", 13); e.SessionID != "claimer" {
		t.Errorf("#13 merged after the claim won: sessionid %q, want claimer", e.SessionID)
	}
	if e := one("github.pull_request.closed", 15); e.SessionID != "" {
		t.Errorf("#15 merged: sessionid %q, want none (nothing linked it)", e.SessionID)
	}
	if n := len(byType(c.journalOf(t, reader, "wakegate.link_conflict"), "wakegate.link_conflict", "")); n != 0 {
		t.Errorf("%d link conflicts journaled: a claim over a trailer link is no conflict", n)
	}
}

// runHook runs `wakegate hook args…` as a process, as Claude Code runs a
// command hook: its hook JSON on stdin. It returns the exit code, stdout
// and stderr.
func runHook(t *testing.T, p *proc, token string, stdin any, args ...string) (int, string, string) {
	t.Helper()
	in, err := json.Marshal(stdin)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binPath, append([]string{"hook"}, args...)...)
	cmd.Env = append(os.Environ(), "WAKEGATE_URL=http://"+p.Addr, "WAKEGATE_TOKEN="+token, "WAKEGATE_STATE_DIR="+t.TempDir())
	cmd.Stdin = bytes.NewReader(in)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// postToolUse is Claude Code's PostToolUse hook input for a Bash call.
func postToolUse(command, stdout string) map[string]any {
	return map[string]any{
		"session_id": "cc-1", "transcript_path": "/tmp/t.jsonl", "cwd": "/work", "permission_mode": "default",
		"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_use_id": "toolu_01",
		"tool_input":    map[string]any{"command": command, "description": "run it"},
		"tool_response": map[string]any{"stdout": stdout, "stderr": "", "interrupted": false, "isImage": false},
	}
}

// TestFleetPRPostToolUseHook: `wakegate hook post-tool-use`, run as
// Claude Code runs it after a Bash call, claims the PR `gh pr create`
// created: the PR's events then carry the session and reach its
// controller. Other Bash calls send nothing; the same call again is a
// duplicate.
func TestFleetPRPostToolUseHook(t *testing.T) {
	t.Parallel()
	const ws = "default"
	s := newStack(t, nil)
	p := s.start("serve", "serve", nil)
	c := s.client(p)
	boss := s.token(t, "session:boss", ws, "events:push inbox")
	kid := s.token(t, "session:kid", ws, "events:push inbox")
	reader := s.token(t, "human:auditor", ws, "events:read events:read:any")
	c.accept(t, boss, ce("boss-start", "session.turn_started", nil))
	spawned(t, c, kid, "kid", "boss")
	controlledBy(t, c, s.token(t, "human:operator", ws, "supervise"), "kid", "session:boss")

	url := fmt.Sprintf("https://github.com/%s/pull/2", repo)
	for _, call := range []struct {
		what string
		in   map[string]any
	}{
		{"a build", postToolUse("go build ./...", "")},
		{"viewing another PR", postToolUse("gh pr view 7", "title:\tOther\n"+fmt.Sprintf("url:\thttps://github.com/%s/pull/7\n", repo))},
		{"gh pr create", postToolUse(`gh pr create --title "Fix" --body "$(cat body.md)"`,
			"Warning: 1 uncommitted change\n\nCreating pull request for fix into main in "+repo+"\n\n"+url+"\n")},
		{"gh pr create again (a re-run)", postToolUse(`gh pr create --title "Fix" --body "$(cat body.md)"`, url+"\n")},
		{"an Edit", map[string]any{"hook_event_name": "PostToolUse", "tool_name": "Edit", "tool_input": map[string]any{"file_path": "x"},
			"tool_response": map[string]any{"filePath": url}}},
	} {
		code, out, errs := runHook(t, p, kid, call.in, "post-tool-use")
		if code != 0 || out != "" || errs != "" {
			t.Fatalf("hook post-tool-use after %s: exit %d, stdout %q, stderr %q; want 0 and silence", call.what, code, out, errs)
		}
	}
	claims := c.journalOf(t, reader, "session.pr_opened")
	if len(claims) != 1 || claims[0].SessionID != "kid" {
		t.Fatalf("session.pr_opened journaled: %s; want exactly one, about kid", summarize(claims))
	}
	var d struct {
		Repo   string `json:"repo"`
		Number int    `json:"number"`
	}
	_ = json.Unmarshal(claims[0].Data, &d)
	if d.Repo != repo || d.Number != 2 {
		t.Errorf("the claim names %s#%d, want %s#2", d.Repo, d.Number, repo)
	}
	c.accepted(t, "pull_request", fixture(t, "octokit/pull_request/opened.payload.json"))
	s.routed(t, true)
	opened := byType(c.journalOf(t, reader, "github.pull_request.opened"), "github.pull_request.opened", prSubj)
	if len(opened) != 1 || opened[0].SessionID != "kid" {
		t.Fatalf("opened: %s; want one carrying sessionid kid (the hook's claim)", summarize(opened))
	}
	pg := c.inbox(t, boss, "")
	if e := entry(pg.Entries, prSubj); e == nil || e.Type != "github.pull_request.opened" || e.Via != inbox.ViaController {
		t.Errorf("boss's entries %s; want kid's PR opened via controller", describeEntries(pg.Entries))
	}
}
