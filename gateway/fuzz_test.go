package gateway

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/agent"
)

// FuzzGitHubWebhook signs arbitrary JSON and form bodies correctly and
// checks the handler never answers 5xx, never panics, and answers every
// refusal with problem+json.
func FuzzGitHubWebhook(f *testing.F) {
	body, err := os.ReadFile("../testdata/github/octokit/check_run/completed.payload.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(false, "check_run", body)
	f.Add(true, "pull_request", []byte("payload="+url.QueryEscape(`{"action":"opened","repository":{"full_name":"o/r"}}`)))
	f.Add(true, "status", []byte("payload=%ZZ"))
	f.Add(false, "issue_comment", []byte(`{"action":"created","repository":{"full_name":1}}`))

	mr := miniredis.RunT(f)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	j := journal.New(rdb, journal.Config{Prefix: "wg", Shards: 2})
	v, _ := agent.NewVerifier(agent.VerifierConfig{HS256Secret: []byte(testSecret)})
	s, err := New(Config{WebhookSecrets: [][]byte{[]byte(testSecret)}, MaxBody: 1 << 20}, Deps{
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Redis: rdb, Journal: j, Ingest: ingest.New(rdb, j),
		Sessions: sessions.New(rdb, j, 0), Linker: tracker.New(rdb, j, tracker.Config{}), Verifier: v,
	})
	if err != nil {
		f.Fatal(err)
	}
	h := s.Handler()
	n := 0
	f.Fuzz(func(t *testing.T, form bool, eventType string, body []byte) {
		n++
		mac := hmac.New(sha256.New, []byte(testSecret))
		mac.Write(body)
		req := httptest.NewRequest(http.MethodPost, "/webhooks/github", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if form {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		req.Header.Set("X-GitHub-Event", eventType)
		req.Header.Set("X-GitHub-Delivery", "guid-"+hex.EncodeToString([]byte{byte(n >> 8), byte(n)}))
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("status %d for %q body %q: %s", w.Code, eventType, body, w.Body)
		}
		if w.Code >= 400 && w.Header().Get("Content-Type") != "application/problem+json" {
			t.Fatalf("status %d without problem+json", w.Code)
		}
	})
}
