package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/agent"
)

// fakeHealth answers a report naming the workspace it was asked about.
type fakeHealth struct {
	mu    sync.Mutex
	asked []string
	err   error
}

func (f *fakeHealth) ReportJSON(_ context.Context, workspace string, _ time.Time) (any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, workspace)
	if f.err != nil {
		return nil, f.err
	}
	return map[string]any{"workspace": workspace, "ok": true, "invariants": []any{}}, nil
}

// GET /v1/health/supervision: admin reads its own workspace; another
// workspace needs operator; no admin scope is 403, no token 401; a bad
// workspace name 400; a storage failure 503; without a reporter the route
// does not exist.
func TestSupervisionHealthRoute(t *testing.T) {
	rdb, prefix := redistest.New(t)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 4})
	v, err := agent.NewVerifier(agent.VerifierConfig{HS256Secret: []byte(testSecret)})
	if err != nil {
		t.Fatal(err)
	}
	serve := func(h healthReporter) string {
		deps := Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Redis: rdb, Journal: j, Ingest: ingest.New(rdb, j),
			Sessions: sessions.New(rdb, j, time.Minute), Linker: tracker.New(rdb, j, tracker.Config{}), Verifier: v}
		if h != nil {
			deps.Health = h
		}
		s, err := New(Config{WebhookSecrets: [][]byte{[]byte(testSecret)}}, deps)
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(s.Handler())
		t.Cleanup(hs.Close)
		return hs.URL
	}
	fake := &fakeHealth{}
	url := serve(fake)
	get := func(base, query, ws, scope string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/health/supervision"+query, nil)
		if scope != "-" {
			c := agent.Claims{Workspace: ws, Scope: scope}
			c.Subject = "human:ops"
			c.ExpiresAt = jwtTime(time.Now().Add(time.Hour))
			tok, err := agent.Mint([]byte(testSecret), c)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	for _, c := range []struct {
		name, query, ws, scope string
		status                 int
		workspace              string
	}{
		{"admin, own workspace", "", "acme", "admin", 200, "acme"},
		{"admin naming its own", "?workspace=acme", "acme", "admin", 200, "acme"},
		{"operator, own workspace", "", "acme", "operator", 200, "acme"},
		{"operator, another", "?workspace=other", "acme", "operator", 200, "other"},
		{"admin, another", "?workspace=other", "acme", "admin", 403, ""},
		{"no admin scope", "", "acme", "inbox events:read:any", 403, ""},
		{"no token", "", "acme", "-", 401, ""},
		{"bad workspace", "?workspace=a%20b", "acme", "operator", 400, ""},
	} {
		status, body := get(url, c.query, c.ws, c.scope)
		if status != c.status {
			t.Errorf("%s: status %d, want %d (%v)", c.name, status, c.status, body)
			continue
		}
		if c.status == 200 && body["workspace"] != c.workspace {
			t.Errorf("%s: report of %v, want %s", c.name, body["workspace"], c.workspace)
		}
	}
	if want := []string{"acme", "acme", "acme", "other"}; len(fake.asked) != len(want) {
		t.Errorf("reports asked for %v, want %v (no refused request reaches the sweep)", fake.asked, want)
	}
	fake.err = errors.New("redis down")
	if status, _ := get(url, "", "acme", "admin"); status != http.StatusServiceUnavailable {
		t.Errorf("a failing report: %d, want 503", status)
	}
	if status, _ := get(serve(nil), "", "acme", "admin"); status != http.StatusNotFound {
		t.Errorf("without a reporter: %d, want 404", status)
	}
}
