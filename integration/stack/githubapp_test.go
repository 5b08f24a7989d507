package stack_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/integration/stack"
	"github.com/wakegate/wakegate/providers/agent"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/github/app"
	"github.com/wakegate/wakegate/providers/github/app/apptest"
)

// The GitHub App side assembled as serve assembles it — the stack's
// workers running, its gateway answering over HTTP — against the fake
// GitHub API, on real Redis under a fresh prefix.

const (
	webhookSecret = "stack-webhook-secret"
	tokenSecret   = "stack-token-secret-0123456789abcdef"
	repo          = "Codertocat/Hello-World" // the fixture's
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type appEnv struct {
	t    *testing.T
	st   *stack.Stack
	g    *apptest.GitHub
	url  string
	reg  *prometheus.Registry
	logs *syncBuffer
}

func newAppEnv(t *testing.T) *appEnv {
	t.Helper()
	rdb, prefix := redistest.New(t)
	g := apptest.New(t)
	g.Install(repo, 1)
	_, pem := apptest.Key()
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := prometheus.NewRegistry()
	st, err := stack.New(rdb, stack.Config{Prefix: prefix, Shards: 4,
		GitHubApp: app.Config{AppID: apptest.AppID, PrivateKey: pem, APIURL: g.URL}}, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	if st.GitHub == nil {
		t.Fatal("a private key did not turn the App on")
	}
	components, _ := st.Workers()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range components {
		wg.Add(1)
		go func() { defer wg.Done(); _ = run(ctx) }()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	verifier, err := agent.NewVerifier(agent.VerifierConfig{HS256Secret: []byte(tokenSecret)})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := st.Gateway(gateway.Config{WebhookSecrets: [][]byte{[]byte(webhookSecret)}, AppID: apptest.AppID,
		TokenSecret: []byte(tokenSecret)}, verifier, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(srv.Close)
	e := &appEnv{t: t, st: st, g: g, url: srv.URL, reg: reg, logs: logs}
	// The workers sweep and reconcile once at start, then every 5 min:
	// let those first runs end so they cannot race what a test does.
	waitFor(t, "the first sweep and reconciliation", func() bool {
		return e.counter("wakegate_github_sweeps_total", "outcome", "ok") == 1 &&
			e.counter("wakegate_github_reconcile_ticks_total", "outcome", "ok") == 1
	})
	return e
}

func token(t *testing.T, party, scope string) string {
	t.Helper()
	c := agent.Claims{Workspace: "default", Scope: scope}
	c.Subject = party
	c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(time.Hour))
	tok, err := agent.Mint([]byte(tokenSecret), c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// do makes a request and decodes a JSON answer into out (when not nil).
func (e *appEnv) do(method, path, tok string, body any, out any) int {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.url+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			e.t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return resp.StatusCode
}

func (e *appEnv) inbox(tok string) []inbox.Entry {
	e.t.Helper()
	var page struct {
		Entries []inbox.Entry `json:"entries"`
	}
	if code := e.do(http.MethodGet, "/v1/inbox", tok, nil, &page); code != http.StatusOK {
		e.t.Fatalf("GET /v1/inbox: %d", code)
	}
	return page.Entries
}

func (e *appEnv) subscribe(tok, subject string) (closed bool) {
	e.t.Helper()
	var created struct {
		ID     string `json:"id"`
		Closed bool   `json:"closed"`
	}
	body := map[string]any{"subjects": []string{subject}, "until": "subject_terminal"}
	if code := e.do(http.MethodPost, "/v1/subscriptions", tok, body, &created); code != http.StatusCreated {
		e.t.Fatalf("subscribe to %s: %d", subject, code)
	}
	return created.Closed
}

// counter reads a counter of the stack's registry by name and label.
func (e *appEnv) counter(name, label, value string) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// webhook sends body as GitHub would, signed, for the App.
func (e *appEnv) webhook(event, guid string, body []byte) int {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url+"/webhooks/github", bytes.NewReader(body))
	m := hmac.New(sha256.New, []byte(webhookSecret))
	m.Write(body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/test")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", guid)
	req.Header.Set("X-GitHub-Hook-ID", "77")
	req.Header.Set("X-GitHub-Hook-Installation-Target-Type", "integration")
	req.Header.Set("X-GitHub-Hook-Installation-Target-ID", apptest.AppID)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// closedFixture is the derived merge fixture (Codertocat/Hello-World#2),
// closed, merged and updated at at.
func closedFixture(t *testing.T, at time.Time) []byte {
	t.Helper()
	path := filepath.Join("..", "..", "testdata", "github", "derived", "pull_request.closed.merged.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the GitHub fixture is required: %v", err)
	}
	const was = "2019-05-15T15:21:18Z"
	if !bytes.Contains(raw, []byte(`"closed_at": "`+was+`"`)) {
		t.Fatalf("%s: closed_at is no longer %s", path, was)
	}
	return bytes.ReplaceAll(raw, []byte(was), []byte(at.UTC().Format(time.RFC3339)))
}

func closedEntries(entries []inbox.Entry, subject string) []inbox.Entry {
	var out []inbox.Entry
	for _, en := range entries {
		if en.Subject == subject && en.Type == "github.pull_request.closed" {
			out = append(out, en)
		}
	}
	return out
}

// TestAppReconciliationReachesSubscriberOnce: a PR merged with no webhook
// reaches its subscriber once through reconciliation; the real webhook
// arriving later (signed, committed, derived) adds nothing to the journal
// or the inbox; a subscription to a never-seen PR already merged gets the
// merge at once; the logs carry no credential.
func TestAppReconciliationReachesSubscriberOnce(t *testing.T) {
	e := newAppEnv(t)
	ctx := context.Background()
	boss := token(t, "session:boss", "subscribe inbox")
	subject := "github:" + repo + "#2"
	opened := time.Now().Add(-time.Hour).Truncate(time.Second)
	e.g.SetPR(apptest.PR{Repo: repo, Number: 2, State: "open", Title: "Update the README with new information.",
		Author: "Codertocat", Base: "master", CreatedAt: opened, UpdatedAt: opened})
	if e.subscribe(boss, subject) {
		t.Fatal("subscribing to an open PR closed the subscription")
	}

	merged := time.Now().Add(-5 * time.Second).Truncate(time.Second)
	e.g.SetPR(apptest.PR{Repo: repo, Number: 2, State: "closed", Merged: true, Title: "Update the README with new information.",
		Author: "Codertocat", Base: "master", CreatedAt: opened, UpdatedAt: merged, ClosedAt: merged})
	rep, err := e.st.GitHub.Reconcile.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Closed != 1 {
		t.Fatalf("reconciliation %+v, want the merge recorded", rep)
	}
	var got []inbox.Entry
	waitFor(t, "the merge in the subscriber's inbox", func() bool {
		got = closedEntries(e.inbox(boss), subject)
		return len(got) > 0
	})
	wantID := "pr/2/closed/" + merged.UTC().Format(time.RFC3339)
	if len(got) != 1 || got[0].Count != 1 || len(got[0].FoldedIDs) != 1 || got[0].FoldedIDs[0] != wantID {
		t.Fatalf("entries %+v, want one entry of %s", got, wantID)
	}
	waitFor(t, "the subscription closed by the terminal event", func() bool {
		var list struct {
			Subscriptions []json.RawMessage `json:"subscriptions"`
		}
		e.do(http.MethodGet, "/v1/subscriptions", boss, nil, &list)
		return len(list.Subscriptions) == 0
	})

	// The webhook GitHub sends late: committed and derived, journaling
	// nothing new.
	if code := e.webhook("pull_request", "d1f0c6a0-5e1b-11ef-8f5a-2f0a3c1e9b11", closedFixture(t, merged)); code != http.StatusAccepted {
		t.Fatalf("the late webhook: %d, want 202", code)
	}
	waitFor(t, "the late webhook derived", func() bool {
		return e.counter("wakegate_derive_records_total", "outcome", "journaled") == 1
	})
	var n int
	for s := range e.st.Journal.Config().Shards {
		msgs, err := e.st.Redis.XRange(ctx, e.st.Journal.StreamKey(s), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			ev, err := journal.Decode(s, m)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type == event.TypeGitHubPullRequestClosed {
				n++
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d closed events journaled, want 1", n)
	}
	if got = closedEntries(e.inbox(boss), subject); len(got) != 1 || got[0].Count != 1 {
		t.Fatalf("after the late webhook: %+v", got)
	}

	// Baseline: #7 merged before anyone watched; subscribing gets it at once.
	e.g.SetPR(apptest.PR{Repo: repo, Number: 7, State: "closed", Merged: true, Title: "Old merge", Author: "dev",
		CreatedAt: opened.Add(-48 * time.Hour), UpdatedAt: opened.Add(-24 * time.Hour), ClosedAt: opened.Add(-24 * time.Hour)})
	late := token(t, "session:late", "subscribe inbox")
	if !e.subscribe(late, "github:"+repo+"#7") {
		t.Fatal("the subscription to a PR merged before was not closed at once")
	}
	if got := closedEntries(e.inbox(late), "github:"+repo+"#7"); len(got) != 1 {
		t.Fatalf("the late subscriber's inbox: %+v, want the merge", got)
	}
	assertNoCredentials(t, e)
}

// TestAppRedeliverFailedRoute: POST /admin/github/redeliver-failed needs
// the operator scope, checks since, and answers the sweep's summary.
func TestAppRedeliverFailedRoute(t *testing.T) {
	e := newAppEnv(t)
	now := time.Now()
	failed := e.g.AddDelivery(apptest.Delivery{GUID: "g-down", DeliveredAt: now.Add(-2 * time.Hour), StatusCode: 503})
	e.g.AddDelivery(apptest.Delivery{GUID: "g-bad-sig", DeliveredAt: now.Add(-time.Hour), StatusCode: 401})
	e.g.AddDelivery(apptest.Delivery{GUID: "g-fine", DeliveredAt: now.Add(-time.Hour), StatusCode: 202})
	op := token(t, "human:ops", "operator")
	admin := token(t, "human:admin", "admin")
	since := now.Add(-3 * time.Hour).UTC().Format(time.RFC3339)

	if code := e.do(http.MethodPost, "/admin/github/redeliver-failed?since="+since, admin, nil, nil); code != http.StatusForbidden {
		t.Fatalf("admin token: %d, want 403", code)
	}
	if code := e.do(http.MethodPost, "/admin/github/redeliver-failed?since="+since, "", nil, nil); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d, want 401", code)
	}
	for _, bad := range []string{"yesterday", now.Add(time.Hour).UTC().Format(time.RFC3339)} {
		if code := e.do(http.MethodPost, "/admin/github/redeliver-failed?since="+bad, op, nil, nil); code != http.StatusBadRequest {
			t.Fatalf("since=%s: %d, want 400", bad, code)
		}
	}
	var rep struct {
		Scanned     int      `json:"scanned"`
		Failed      []string `json:"failed"`
		Redelivered []string `json:"redelivered"`
		Skipped     []struct {
			GUID       string `json:"guid"`
			Reason     string `json:"reason"`
			StatusCode int    `json:"status_code"`
		} `json:"skipped"`
	}
	if code := e.do(http.MethodPost, "/admin/github/redeliver-failed?since="+since, op, nil, &rep); code != http.StatusOK {
		t.Fatalf("operator: %d", code)
	}
	if rep.Scanned != 3 || len(rep.Failed) != 2 || len(rep.Redelivered) != 1 || rep.Redelivered[0] != "g-down" ||
		len(rep.Skipped) != 1 || rep.Skipped[0].GUID != "g-bad-sig" || rep.Skipped[0].Reason != "refused_on_purpose" || rep.Skipped[0].StatusCode != 401 {
		t.Fatalf("summary %+v", rep)
	}
	if got := e.g.Redelivered(); len(got) != 1 || got[failed] != 1 {
		t.Fatalf("redelivery requests %v", got)
	}
	if code := e.do(http.MethodPost, "/admin/github/redeliver-failed?since="+since, op, nil, &rep); code != http.StatusOK || len(rep.Redelivered) != 0 {
		t.Fatalf("second call: %d %+v, want nothing redelivered", code, rep)
	}
	assertNoCredentials(t, e)
}

func assertNoCredentials(t *testing.T, e *appEnv) {
	t.Helper()
	logs := e.logs.String()
	_, pem := apptest.Key()
	if strings.Contains(logs, strings.Split(string(pem), "\n")[1]) {
		t.Error("the logs carry the App private key")
	}
	creds := e.g.Credentials()
	if len(creds) == 0 {
		t.Fatal("no credential was used: the check proves nothing")
	}
	for _, c := range creds {
		if strings.Contains(logs, c) {
			t.Errorf("the logs carry a credential (%.12s…)", c)
		}
	}
}
