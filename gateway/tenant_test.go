package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestNoRouteCrossesWorkspaces walks the router's own /v1 route list
// with a token of another workspace that has every power but operator's,
// aimed at workspace A's own ids (its session, its subscription, its
// party): no answer may carry A's data, none may be a 5xx, and A's state
// must be intact afterwards — a route added later is walked too.
func TestNoRouteCrossesWorkspaces(t *testing.T) {
	e := newMCPEnv(t)
	const (
		wsA, wsB = "acme", "other"
		marker   = "zq7" // in every id and text of A's; B sends only those listed in sent
	)
	admin := mcpToken(t, wsA, "human:alice-zq7", "admin inbox subscribe supervise")
	worker := mcpToken(t, wsA, "session:sa-zq7", "events:push inbox subscribe supervise spawn")
	boss := mcpToken(t, wsA, "session:boss-zq7", "inbox subscribe supervise events:push events:read")
	call := func(method, path, tok, body string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, e.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body) // a stream ends at the context's deadline: what came is what counts
		return resp.StatusCode, string(b)
	}
	must := func(want int, method, path, tok, body string) string {
		t.Helper()
		status, b := call(method, path, tok, body)
		if status != want {
			t.Fatalf("A: %s %s: %d %s, want %d", method, path, status, b, want)
		}
		return b
	}

	// Workspace A: settings, a session with a controller lease, its idle
	// turn end routed to the controller, a message, a subscription, quiet.
	must(200, http.MethodPut, "/v1/workspace/supervision", admin, `{"default_controller": "session:boss-zq7", "fallback": {"party": "human:ops-zq7"}}`)
	must(202, http.MethodPost, "/v1/events", worker, `{"specversion":"1.0","id":"1","source":"t","type":"session.spawned","data":{"labels":["team-zq7"]}}`)
	must(200, http.MethodPost, "/v1/sessions/sa-zq7/supervise", boss, `{"role": "controller"}`)
	must(202, http.MethodPost, "/v1/events", worker, `{"specversion":"1.0","id":"2","source":"t","type":"session.turn_ended","summary":"waiting-zq7","data":{"idle":true}}`)
	must(202, http.MethodPost, "/v1/sessions/sa-zq7/messages", boss, `{"text": "text-zq7", "intent": "info"}`)
	var sub struct{ ID string }
	if err := json.Unmarshal([]byte(must(201, http.MethodPost, "/v1/subscriptions", boss, `{"subjects": ["github:org/repo-zq7#*"]}`)), &sub); err != nil || sub.ID == "" {
		t.Fatalf("subscription: %v %q", err, sub.ID)
	}
	must(200, http.MethodPut, "/v1/quiet", admin, `{"scope": "all", "reason": "reason-zq7", "until": "`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"}`)
	waitUntil(t, "A's controller has its entry", func() bool {
		_, b := call(http.MethodGet, "/v1/inbox", boss, "")
		return strings.Contains(b, "waiting-zq7")
	})

	// Workspace B, every scope but operator, aimed at A's ids.
	other := mcpToken(t, wsB, "human:bob", "events:push events:push:any events:read events:read:any inbox subscribe supervise spawn admin")
	sent := strings.NewReplacer("sa-zq7", "", "human:ops-zq7", "", "session:boss-zq7", "")
	paths := strings.NewReplacer(":id", "sa-zq7", ":party", "human:ops-zq7")
	walked := 0
	for _, rt := range e.routes {
		if !strings.HasPrefix(rt.Path, "/v1/") {
			continue
		}
		path := paths.Replace(rt.Path)
		if rt.Path == "/v1/subscriptions/:id" {
			path = "/v1/subscriptions/" + sub.ID
		}
		query := "?party=session:boss-zq7&subjects=session:sa-zq7&session=sa-zq7&scope=all&workspace=" + wsA
		for _, body := range []string{`{}`, `{"role": "controller", "takeover": true, "text": "x", "intent": "control", "through_seq": 1,
			"scope": "all", "subjects": ["session:sa-zq7"], "specversion": "1.0", "id": "9", "source": "t", "type": "session.turn_ended", "subject": "session:sa-zq7"}`} {
			status, b := call(rt.Method, path+query, other, body)
			if status >= 500 {
				t.Errorf("B: %s %s: %d %s", rt.Method, path, status, b)
			}
			if leaked := sent.Replace(b); strings.Contains(leaked, marker) {
				t.Errorf("B: %s %s answered %d with workspace A's data: %.300s", rt.Method, path, status, b)
			}
		}
		walked++
	}
	if walked < 20 {
		t.Fatalf("walked %d /v1 routes; the route list is not the gateway's", walked)
	}

	// A's state is as A left it.
	if b := must(200, http.MethodGet, "/v1/subscriptions", boss, ""); !strings.Contains(b, sub.ID) {
		t.Errorf("A's subscription is gone: %s", b)
	}
	if b := must(200, http.MethodGet, "/v1/sessions/sa-zq7/supervision", boss, ""); !strings.Contains(b, `"session:boss-zq7"`) {
		t.Errorf("A's controller lease moved: %s", b)
	}
	if b := must(200, http.MethodGet, "/v1/quiet", admin, ""); !strings.Contains(b, "reason-zq7") {
		t.Errorf("A's quiet was lifted: %s", b)
	}
	if b := must(200, http.MethodGet, "/v1/workspace/supervision", admin, ""); !strings.Contains(b, "boss-zq7") {
		t.Errorf("A's settings changed: %s", b)
	}
	if b := must(200, http.MethodGet, "/v1/inbox", boss, ""); !strings.Contains(b, "waiting-zq7") {
		t.Errorf("A's controller lost its entry: %s", b)
	}
	waitUntil(t, "the message in A's session's inbox", func() bool {
		_, b := call(http.MethodGet, "/v1/inbox", worker, "")
		return strings.Contains(b, "text-zq7")
	})
}
