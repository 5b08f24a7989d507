package tracker_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/github"
)

// fixture normalizes a GitHub payload under testdata/github at the repository
// root; a missing one fails the test.
func fixture(t *testing.T, eventType, path string) *github.Fact {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("..", "..", "testdata", "github", path))
	if err != nil {
		t.Fatalf("fixture missing: %v", err)
	}
	f, err := github.Normalize(eventType, body)
	if err != nil {
		t.Fatalf("Normalize(%s): %v", path, err)
	}
	return &f
}

// TestFixtures feeds real payloads (Codertocat/Hello-World PR #2, head
// ec26c3e) through github.Normalize and the tracker.
func TestFixtures(t *testing.T) {
	const head = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
	t.Run("opened, checks, a failing re-run, a status elsewhere, closed twice", func(t *testing.T) {
		e := newEnv(t, tracker.Config{})
		e.repo = "Codertocat/Hello-World"
		for _, step := range []struct {
			event, path                 string
			wantReady, wantFailed, want int // ready and checks_failed so far; events journaled by this step
		}{
			{"pull_request", "octokit/pull_request/opened.payload.json", 0, 0, 1},
			{"check_suite", "octokit/check_suite/completed.payload.json", 1, 0, 2},   // pull_requests [#2]: suite event + ready
			{"check_suite", "octokit/check_suite/completed.1.payload.json", 1, 0, 1}, // pull_requests []: found through the sha index
			{"check_run", "octokit/check_run/completed.payload.json", 1, 0, 1},       // Octocoders-linter success
			{"check_run", "octokit/check_run/completed.1.payload.json", 1, 1, 2},     // the same check, failed: checks_failed
			{"status", "octokit/status/payload.json", 1, 1, 1},                       // another sha: the sha subject
			{"pull_request", "octokit/pull_request/closed.payload.json", 1, 1, 1},    // closed
			{"pull_request", "derived/pull_request.closed.merged.json", 1, 1, 0},     // the same close (same closed_at): one fact
			{"pull_request", "octokit/pull_request/closed.payload.json", 1, 1, 0},    // redelivered
		} {
			f := fixture(t, step.event, step.path)
			r := e.apply(f)
			if len(r.Seqs) != step.want {
				t.Errorf("%s: appended %d events, want %d", step.path, len(r.Seqs), step.want)
			}
			e.wantCount("github.pull_request.ready", step.wantReady)
			e.wantCount("github.pull_request.checks_failed", step.wantFailed)
		}
		if ev := e.wantCount("github.pull_request.checks_failed", 1)[0]; ev.Priority != event.Critical {
			t.Errorf("checks_failed after ready: priority %s, want critical", ev.Priority)
		}
		for _, ev := range e.ofType("github.check_suite.completed") {
			if ev.Subject != event.PRSubject(e.repo, 2) {
				t.Errorf("suite %s subject %q", ev.ID, ev.Subject)
			}
		}
		if ev := e.wantCount("github.status", 1)[0]; ev.Subject != event.ShaSubject(e.repo, "6113728f27ae82c7b1a177c8d03f9e96e0adf246") {
			t.Errorf("status subject %q", ev.Subject)
		}
		e.wantCount("github.pull_request.closed", 1)
		s := e.state(2)
		if s.State != "closed" || s.Head != head || s.Base != "master" || s.Author != "Codertocat" {
			t.Errorf("state %+v", s)
		}
	})
	t.Run("changes requested, then dismissed (same timestamp)", func(t *testing.T) {
		e := newEnv(t, tracker.Config{})
		e.repo = "Codertocat/Hello-World"
		e.apply(fixture(t, "pull_request", "octokit/pull_request/opened.payload.json"))
		e.apply(fixture(t, "pull_request_review", "derived/pull_request_review.submitted.changes_requested.json"))
		e.apply(fixture(t, "check_run", "octokit/check_run/completed.payload.json"))
		e.wantCount("github.pull_request.ready", 0)
		if s := e.state(2); s.Reviews["Codertocat"] != "changes_requested" {
			t.Errorf("reviews %v", s.Reviews)
		}
		e.apply(fixture(t, "pull_request_review", "octokit/pull_request_review/dismissed.payload.json"))
		e.wantCount("github.pull_request.ready", 1)
	})
	t.Run("an installation event is journaled under its own subject", func(t *testing.T) {
		e := newEnv(t, tracker.Config{Required: requireBuild})
		f := fixture(t, "installation", "octokit/installation/created.payload.json")
		if r := e.apply(f); len(r.Seqs) != 1 {
			t.Fatalf("appended %v, want 1", r.Seqs)
		}
		if ev := e.wantCount(f.Type, 1)[0]; ev.Subject != f.Subject || ev.Subject == "" {
			t.Errorf("subject %q, want %q", ev.Subject, f.Subject)
		}
	})
}
