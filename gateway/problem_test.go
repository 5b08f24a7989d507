package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/agent"
)

// TestProblemFor: every error kind has its one status and problem type,
// the detail is the error's text, and an error of no kind is storage
// failing.
func TestProblemFor(t *testing.T) {
	tests := []struct {
		err    error
		status int
		typ    string
		detail string
	}{
		{fmt.Errorf("%w: types: bad", subscriptions.ErrInvalid), 400, "malformed", "invalid subscription: types: bad"},
		{fmt.Errorf("%w: until has passed", subscriptions.ErrUntil), 422, "unprocessable", "invalid until: until has passed"},
		{subscriptions.ErrNotFound, 404, "not-found", "no such subscription"},
		{supervision.ErrForbidden, 403, "forbidden", "takeover not allowed"},
		{fmt.Errorf("release: %w", supervision.ErrNotFound), 404, "not-found", "release: no such edge"},
		{agent.ErrTooMany, 413, "too-large", "too many"},
		{fmt.Errorf("subscribe: %w", subscriptions.ErrLimit), 422, "limit-reached", "subscribe: subscription limit reached"},
		{tracker.ErrLinkConflict, 409, "conflict", "pull request linked to another session"},
		{errors.New("dial tcp: connection refused"), 503, "unavailable", "storage unavailable; retry"},
		{fmt.Errorf("read: %w", context.DeadlineExceeded), 503, "unavailable",
			"the commit did not finish in time (storage slow or gateway overloaded); retry"},
		{&http.MaxBytesError{Limit: 1}, 413, "too-large", "body over the size limit"},
	}
	for _, tc := range tests {
		p := problemFor(tc.err)
		if p.Status != tc.status || p.Type != problemBase+tc.typ || p.Detail != tc.detail || p.Title == "" {
			t.Errorf("problemFor(%v) = %d %s %q (title %q), want %d %s %q", tc.err, p.Status, p.Type, p.Detail, p.Title,
				tc.status, tc.typ, tc.detail)
		}
	}
	p := problemFor(fmt.Errorf("supervise: %w", &supervision.HeldError{Holder: "session:boss", Epoch: 3}))
	if p.Status != 409 || p.Holder != "session:boss" || p.Epoch != 3 {
		t.Errorf("a held lease: %+v, want 409 with its holder and epoch", p)
	}
}

// TestPushStoreFailureLoggedAndCounted: a push whose lineage cannot be
// read (Redis away) answers 503, and the failure is logged once and
// counted, as every other storage failure is.
func TestPushStoreFailureLoggedAndCounted(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	j := journal.New(rdb, journal.Config{Prefix: "wgt", Shards: 4})
	v, err := agent.NewVerifier(agent.VerifierConfig{HS256Secret: []byte(testSecret)})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	s, err := New(Config{WebhookSecrets: [][]byte{[]byte(testSecret)}}, Deps{
		Log: slog.New(slog.NewTextHandler(&logs, nil)), Redis: rdb, Journal: j, Ingest: ingest.New(rdb, j),
		Sessions: sessions.New(rdb, j, 0), Linker: tracker.New(rdb, j, tracker.Config{}), Verifier: v, Registry: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)

	c := agent.Claims{Workspace: "acme", Scope: "events:push spawn"}
	c.Subject = "session:child"
	c.ExpiresAt = jwtTime(time.Now().Add(time.Hour))
	tok, err := agent.Mint([]byte(testSecret), c)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"specversion":"1.0","id":"1","source":"t","type":"session.spawned","data":{"parent":"session:mother"}}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/events", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var p problem
	_ = json.Unmarshal(raw, &p)
	if resp.StatusCode != http.StatusServiceUnavailable || p.Detail != "storage unavailable; retry" {
		t.Fatalf("answer %d %s, want 503 storage unavailable", resp.StatusCode, raw)
	}
	if n := strings.Count(logs.String(), "commit failed"); n != 1 || !strings.Contains(logs.String(), "what=lineage") {
		t.Errorf("logged %d times, want once, naming the lineage read:\n%s", n, logs.String())
	}
	if n := counter(t, reg, "wakegate_gateway_store_errors_total"); n != 1 {
		t.Errorf("wakegate_gateway_store_errors_total = %v, want 1", n)
	}
}

// counter reads a counter's value from reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}
