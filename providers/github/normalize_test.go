package github

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/providers/event"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the fixtures")

// fixturesDir is testdata/github at the repository root.
func fixturesDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join("..", "..", "testdata", "github")
	if _, err := os.Stat(filepath.Join(dir, "octokit")); err != nil {
		t.Fatalf("fixtures missing: %v", err)
	}
	return dir
}

type fixture struct {
	event  string // X-GitHub-Event
	path   string // under fixturesDir
	golden string // under testdata/golden
	body   []byte
}

// fixtures lists every payload: octokit/<event>/<file> and
// derived/<event>.<rest>.json.
func fixtures(t testing.TB) []fixture {
	t.Helper()
	dir := fixturesDir(t)
	var all []fixture
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		parts := strings.Split(filepath.ToSlash(rel), "/")
		var fx fixture
		switch {
		case len(parts) == 3 && parts[0] == "octokit":
			fx = fixture{event: parts[1], golden: filepath.Join(parts[1], parts[2])}
		case len(parts) == 2 && parts[0] == "derived":
			ev, _, _ := strings.Cut(parts[1], ".")
			fx = fixture{event: ev, golden: filepath.Join("derived", parts[1])}
		default:
			return nil
		}
		fx.path = filepath.ToSlash(rel)
		fx.body, err = os.ReadFile(path)
		all = append(all, fx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 {
		t.Fatalf("no fixtures under %s", dir)
	}
	return all
}

func TestNormalizeGolden(t *testing.T) {
	for _, fx := range fixtures(t) {
		t.Run(fx.path, func(t *testing.T) {
			f, err := Normalize(fx.event, fx.body)
			if err != nil {
				t.Fatalf("Normalize(%s): %v", fx.event, err)
			}
			got, err := json.MarshalIndent(f, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata", "golden", fx.golden)
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./providers/github -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the golden file; got:\n%s", golden, got)
			}
		})
	}
}

// TestNormalizeKeyFields pins the facts that matter, so a wrongly
// regenerated golden file still fails.
func TestNormalizeKeyFields(t *testing.T) {
	ts := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	const (
		repo = "Codertocat/Hello-World"
		head = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
	)
	pr2 := event.PRSubject(repo, 2)
	byPath := map[string]fixture{}
	for _, fx := range fixtures(t) {
		byPath[fx.path] = fx
	}
	tests := []struct {
		path  string
		check func(t *testing.T, f Fact)
	}{
		{"octokit/pull_request/opened.payload.json", func(t *testing.T, f Fact) {
			want(t, "Type", f.Type, "github.pull_request.opened")
			want(t, "Subject", f.Subject, pr2)
			want(t, "Priority", f.Priority, event.Attention)
			want(t, "ID", f.ID, "")
			want(t, "Terminal", f.Terminal, false)
			want(t, "PR.State", f.PR.State, "open")
			want(t, "PR.Head", f.PR.Head, head)
			want(t, "PR.Base", f.PR.Base, "master")
			want(t, "PR.Author", f.PR.Author, "Codertocat")
		}},
		{"octokit/pull_request/closed.payload.json", func(t *testing.T, f Fact) {
			want(t, "Type", f.Type, "github.pull_request.closed")
			want(t, "PR.Merged", f.PR.Merged, false)
			want(t, "Terminal", f.Terminal, true)
			want(t, "ID", f.ID, "pr/2/closed/2019-05-15T15:21:18Z")
			want(t, "Time", f.Time, ts("2019-05-15T15:21:18Z"))
			want(t, "Summary", f.Summary, "PR #2 closed: Update the README with new information. (Codertocat/Hello-World)")
			wantData(t, f, "merged", false)
		}},
		{"derived/pull_request.closed.merged.json", func(t *testing.T, f Fact) {
			want(t, "PR.Merged", f.PR.Merged, true)
			want(t, "Terminal", f.Terminal, true)
			want(t, "ID", f.ID, "pr/2/closed/2019-05-15T15:21:18Z")
			want(t, "Priority", f.Priority, event.Attention)
			want(t, "Summary", f.Summary, "PR #2 merged: Update the README with new information. (Codertocat/Hello-World)")
			wantData(t, f, "merged", true)
		}},
		{"derived/pull_request.dequeued.json", func(t *testing.T, f Fact) {
			want(t, "Type", f.Type, "github.pull_request.dequeued")
			want(t, "Priority", f.Priority, event.Attention)
			wantData(t, f, "reason", "CI_FAILURE")
		}},
		{"octokit/pull_request/converted_to_draft.with-installation.payload.json", func(t *testing.T, f Fact) {
			want(t, "Type", f.Type, "github.pull_request.converted_to_draft")
			want(t, "PR.Draft", f.PR.Draft, true)
			want(t, "Priority", f.Priority, event.Info)
		}},
		{"octokit/pull_request/synchronize.payload.json", func(t *testing.T, f Fact) {
			want(t, "Type", f.Type, "github.pull_request.synchronize")
			want(t, "PR.Head", f.PR.Head, head)
			wantData(t, f, "before", "f95f852bd8fca8fcc58a9a2d6c842781e32a215e")
		}},
		{"octokit/pull_request/assigned.payload.json", func(t *testing.T, f Fact) {
			want(t, "Ignored", f.Ignored, "action not mapped: pull_request.assigned")
			want(t, "Type", f.Type, "")
			want(t, "PR", f.PR == nil, true)
		}},
		{"octokit/check_run/completed.1.payload.json", func(t *testing.T, f Fact) {
			want(t, "Type", f.Type, "github.check_run.completed")
			want(t, "Subject", f.Subject, "")
			want(t, "Check.Result", f.Check.Result, ResultFail)
			want(t, "Check.Name", f.Check.Name, "Octocoders-linter")
			want(t, "Check.SHA", f.Check.SHA, head)
			want(t, "Check.PRs", f.Check.PRs, []int{2})
			want(t, "Check.At", f.Check.At, ts("2019-05-15T15:21:12Z"))
			want(t, "Summary", f.Summary, `check "Octocoders-linter" failed on ec26c3e (Codertocat/Hello-World)`)
		}},
		{"octokit/check_run/completed.payload.json", func(t *testing.T, f Fact) {
			want(t, "Check.Result", f.Check.Result, ResultPass)
		}},
		{"octokit/check_run/created.payload.json", func(t *testing.T, f Fact) {
			want(t, "Type", f.Type, "")
			want(t, "Ignored", f.Ignored, "")
			want(t, "Priority", f.Priority, event.Priority(""))
			want(t, "Check.Result", f.Check.Result, ResultPending)
		}},
		{"octokit/check_run/rerequested.payload.json", func(t *testing.T, f Fact) {
			want(t, "Type", f.Type, "")
			want(t, "Check.Result", f.Check.Result, ResultPending)
		}},
		{"octokit/check_suite/completed.1.payload.json", func(t *testing.T, f Fact) {
			want(t, "Type", f.Type, "github.check_suite.completed")
			want(t, "Check.Suite", f.Check.Suite, true)
			want(t, "Check.Name", f.Check.Name, "suite:118578147")
			want(t, "Check.Result", f.Check.Result, ResultPass)
			want(t, "Check.PRs", f.Check.PRs, []int{})
			want(t, "Check.At", f.Check.At, ts("2019-05-15T15:21:14Z"))
		}},
		{"octokit/check_suite/requested.payload.json", func(t *testing.T, f Fact) {
			want(t, "Type", f.Type, "")
			want(t, "Check.Result", f.Check.Result, ResultPending)
			want(t, "Check.SHA", f.Check.SHA, "f95f852bd8fca8fcc58a9a2d6c842781e32a215e")
		}},
		{"octokit/status/payload.json", func(t *testing.T, f Fact) {
			want(t, "Type", f.Type, "github.status")
			want(t, "Check.Name", f.Check.Name, "default")
			want(t, "Check.Result", f.Check.Result, ResultPass)
			want(t, "Check.SHA", f.Check.SHA, "6113728f27ae82c7b1a177c8d03f9e96e0adf246")
			want(t, "Check.At", f.Check.At, ts("2019-05-15T15:20:55Z"))
		}},
		{"octokit/pull_request_review/submitted.payload.json", func(t *testing.T, f Fact) {
			want(t, "Type", f.Type, "github.pull_request_review.submitted")
			want(t, "Subject", f.Subject, pr2)
			want(t, "Review.State", f.Review.State, "commented")
			want(t, "Review.Reviewer", f.Review.Reviewer, "Codertocat")
			want(t, "Review.CommitID", f.Review.CommitID, head)
			want(t, "Priority", f.Priority, event.Info)
		}},
		{"derived/pull_request_review.submitted.approved.json", func(t *testing.T, f Fact) {
			want(t, "Review.State", f.Review.State, "approved")
			want(t, "Priority", f.Priority, event.Attention)
			wantData(t, f, "state", "approved")
		}},
		{"derived/pull_request_review.submitted.changes_requested.json", func(t *testing.T, f Fact) {
			want(t, "Review.State", f.Review.State, "changes_requested")
			want(t, "Priority", f.Priority, event.Attention)
		}},
		{"octokit/pull_request_review/dismissed.payload.json", func(t *testing.T, f Fact) {
			want(t, "Type", f.Type, "github.pull_request_review.dismissed")
			want(t, "Review.State", f.Review.State, "dismissed")
		}},
		{"octokit/issue_comment/created.payload.json", func(t *testing.T, f Fact) {
			want(t, "Type", f.Type, "github.issue_comment.created")
			want(t, "Subject", f.Subject, event.PRSubject(repo, 1))
			wantData(t, f, "pull_request", false)
		}},
		{"octokit/issue_comment/edited.payload.json", func(t *testing.T, f Fact) {
			want(t, "Ignored", f.Ignored, "action not mapped: issue_comment.edited")
		}},
		{"octokit/deployment_status/payload.json", func(t *testing.T, f Fact) {
			want(t, "Type", f.Type, "github.deployment_status")
			want(t, "Subject", f.Subject, event.ShaSubject(repo, "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"))
			want(t, "CoalesceKey", f.CoalesceKey, "github:Codertocat/Hello-World/deployment/145988746")
			want(t, "Priority", f.Priority, event.Info)
			wantData(t, f, "state", "success")
		}},
		{"octokit/installation/created.payload.json", func(t *testing.T, f Fact) {
			want(t, "Type", f.Type, "github.installation.created")
			want(t, "Subject", f.Subject, "github:installation/957387")
			want(t, "Repo", f.Repo, "")
			want(t, "Time", f.Time, time.Unix(1557933591, 0).UTC())
		}},
		{"octokit/installation_repositories/added.payload.json", func(t *testing.T, f Fact) {
			want(t, "Ignored", f.Ignored, "event not mapped: installation_repositories")
		}},
		{"octokit/ping/with-app_id.payload.json", func(t *testing.T, f Fact) {
			want(t, "Ignored", f.Ignored, "ping")
		}},
		{"octokit/merge_group/checks_requested.payload.json", func(t *testing.T, f Fact) {
			want(t, "Ignored", f.Ignored, "event not mapped: merge_group")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			fx, ok := byPath[tt.path]
			if !ok {
				t.Fatalf("fixture %s not found", tt.path)
			}
			f, err := Normalize(fx.event, fx.body)
			if err != nil {
				t.Fatalf("Normalize: %v", err)
			}
			tt.check(t, f)
		})
	}
}

// TestNormalizeInvariants checks every fixture against the rules every
// Fact obeys.
func TestNormalizeInvariants(t *testing.T) {
	for _, fx := range fixtures(t) {
		f, err := Normalize(fx.event, fx.body)
		if err != nil {
			t.Errorf("%s: %v", fx.path, err)
			continue
		}
		checkInvariants(t, fx.path, f)
	}
}

func checkInvariants(t *testing.T, name string, f Fact) {
	t.Helper()
	if f.Ignored != "" {
		if f.Type != "" || f.Subject != "" || f.Data != nil || f.PR != nil || f.Check != nil || f.Review != nil {
			t.Errorf("%s: ignored fact carries more: %+v", name, f)
		}
		return
	}
	if f.Type == "" {
		if f.Check == nil || f.Check.Result != ResultPending || f.Priority != "" {
			t.Errorf("%s: tracker-only fact must be a pending check without priority: %+v", name, f)
		}
		return
	}
	if !event.ValidType(f.Type) {
		t.Errorf("%s: invalid type %q", name, f.Type)
	}
	if f.Priority.Rank() < 0 {
		t.Errorf("%s: priority %q", name, f.Priority)
	}
	if f.Summary == "" || strings.ContainsAny(f.Summary, "\r\n") {
		t.Errorf("%s: summary %q", name, f.Summary)
	}
	var data map[string]any
	if err := json.Unmarshal(f.Data, &data); err != nil {
		t.Errorf("%s: data is not a JSON object: %v", name, err)
	}
	if f.Time.Location() != time.UTC {
		t.Errorf("%s: time %v not UTC", name, f.Time)
	}
	if (f.Subject == "") != (f.Check != nil) {
		t.Errorf("%s: subject %q with check %v", name, f.Subject, f.Check)
	}
}

func want[T any](t *testing.T, field string, got, want T) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) {
		t.Errorf("%s = %s, want %s", field, g, w)
	}
}

func wantData(t *testing.T, f Fact, key string, v any) {
	t.Helper()
	var data map[string]any
	if err := json.Unmarshal(f.Data, &data); err != nil {
		t.Fatalf("data: %v", err)
	}
	want(t, "data."+key, data[key], v)
}

func TestNormalizeMalformed(t *testing.T) {
	tests := []struct{ event, body string }{
		{"pull_request", `not json`},
		{"ping", `{`},
		{"workflow_run", `[1]`},
		{"pull_request", `{"action":"opened","repository":{"full_name":"o/r"}}`},
		{"pull_request", `{"action":"opened","repository":{"full_name":"o/r"},"pull_request":{}}`},
		{"pull_request", `{"action":"opened","pull_request":{"number":1}}`},
		{"pull_request", `{"action":"opened","repository":{"full_name":"o/r#1"},"pull_request":{"number":1}}`},
		{"pull_request", `{"action":"closed","repository":{"full_name":"o/r"},"pull_request":{"number":1}}`},
		{"pull_request", `{"action":"opened","repository":{"full_name":"o/r"},"pull_request":{"number":1,"updated_at":"yesterday"}}`},
		{"pull_request", `{"action":"opened","repository":{"full_name":"o/r"},"pull_request":{"number":1,"updated_at":99999999999999}}`},
		{"pull_request", `{"action":"opened","repository":{"full_name":"o/r"},"pull_request":{"number":"1"}}`},
		{"check_run", `{"action":"completed","repository":{"full_name":"o/r"},"check_run":{"name":"x","conclusion":"success"}}`},
		{"check_run", `{"action":"completed","repository":{"full_name":"o/r"},"check_run":{"name":"x","head_sha":"abc"}}`},
		{"check_run", `{"action":"created","repository":{"full_name":"o/r"},"check_run":{"head_sha":"abc"}}`},
		{"check_suite", `{"action":"completed","repository":{"full_name":"o/r"},"check_suite":{"head_sha":"abc","conclusion":"success"}}`},
		{"status", `{"repository":{"full_name":"o/r"},"sha":"abc","context":"ci"}`},
		{"pull_request_review", `{"action":"submitted","repository":{"full_name":"o/r"},"review":{"state":"approved","user":{"login":"u"}}}`},
		{"pull_request_review", `{"action":"submitted","repository":{"full_name":"o/r"},"review":{"state":"approved"},"pull_request":{"number":1}}`},
		{"issue_comment", `{"action":"created","repository":{"full_name":"o/r"},"comment":{}}`},
		{"deployment_status", `{"repository":{"full_name":"o/r"},"deployment_status":{"state":"success"},"deployment":{"id":1}}`},
		{"installation", `{"action":"created"}`},
	}
	for _, tt := range tests {
		f, err := Normalize(tt.event, []byte(tt.body))
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("Normalize(%s, %s) = %+v, %v; want ErrMalformed", tt.event, tt.body, f, err)
		}
	}
}

func TestNormalizeIgnored(t *testing.T) {
	tests := []struct{ event, body, reason string }{
		{"pull_request", `{"action":"assigned"}`, "action not mapped: pull_request.assigned"},
		{"check_run", `{"action":"requested_action"}`, "action not mapped: check_run.requested_action"},
		{"pull_request_review", `{"action":"edited"}`, "action not mapped: pull_request_review.edited"},
		{"issue_comment", `{"action":"deleted"}`, "action not mapped: issue_comment.deleted"},
		{"installation", `{"action":"Bad Action"}`, "action not mapped: installation.Bad Action"},
		{"workflow_run", `{"action":"completed"}`, "event not mapped: workflow_run"},
		{"ping", `{"zen":"Keep it logically awesome."}`, "ping"},
	}
	for _, tt := range tests {
		f, err := Normalize(tt.event, []byte(tt.body))
		if err != nil || f.Ignored != tt.reason {
			t.Errorf("Normalize(%s, %s) = %q, %v; want ignored %q", tt.event, tt.body, f.Ignored, err, tt.reason)
		}
	}
}

func TestNormalizeStatusStates(t *testing.T) {
	for state, result := range map[string]string{"pending": ResultPending, "success": ResultPass, "failure": ResultFail, "error": ResultFail} {
		body := `{"repository":{"full_name":"o/r"},"sha":"abc","context":"ci","state":"` + state + `"}`
		f, err := Normalize("status", []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if f.Type != "github.status" || f.Check.Result != result {
			t.Errorf("status %s: type %q result %q, want github.status %q", state, f.Type, f.Check.Result, result)
		}
	}
}

func TestNormalizeConclusions(t *testing.T) {
	pass := []string{"success", "neutral", "skipped"}
	for _, c := range []string{"success", "neutral", "skipped", "failure", "cancelled", "timed_out", "action_required", "stale", "startup_failure"} {
		body := `{"action":"completed","repository":{"full_name":"o/r"},"check_run":{"name":"ci","head_sha":"abc","status":"completed","conclusion":"` + c + `"}}`
		f, err := Normalize("check_run", []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		wantResult := ResultFail
		if slices.Contains(pass, c) {
			wantResult = ResultPass
		}
		if f.Check.Result != wantResult {
			t.Errorf("conclusion %s: result %q, want %q", c, f.Check.Result, wantResult)
		}
	}
}

func TestNormalizeDeploymentFailureIsAttention(t *testing.T) {
	body := `{"action":"created","repository":{"full_name":"o/r"},"deployment_status":{"state":"failure","environment":"prod"},"deployment":{"id":7,"sha":"abc"}}`
	f, err := Normalize("deployment_status", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want(t, "Priority", f.Priority, event.Attention)
	want(t, "CoalesceKey", f.CoalesceKey, "github:o/r/deployment/7")
}

func TestNormalizeSummaryIsOneLine(t *testing.T) {
	body := `{"action":"opened","repository":{"full_name":"o/r"},"pull_request":{"number":3,"title":"fix\nthe\u2028 bug\r\n"}}`
	f, err := Normalize("pull_request", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want(t, "Summary", f.Summary, "PR #3 opened: fix the bug (o/r)")
}
