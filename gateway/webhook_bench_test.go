package gateway

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"syscall"
	"testing"

	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/agent"
)

// BenchmarkGitHubWebhook: the gateway path of a signed 28 KB
// pull_request/opened delivery (octokit's example, a new title each time,
// as `wakegate bench ingest` sends it), served in-process (no network) and
// committed on real Redis: read, verify, parse, compress, commit, answer.
// Wall time per delivery, one at a time, so Redis's time is in it, and the
// gateway's own CPU per delivery (cpu-ns/op, this process's, the request's
// making included); for a before/after, run it on both trees one after
// the other:
// go test -run '^$' -bench GitHubWebhook -benchtime 3000x -count 6 ./gateway
func BenchmarkGitHubWebhook(b *testing.B) {
	body, err := os.ReadFile("../testdata/github/octokit/pull_request/opened.payload.json")
	if err != nil {
		b.Fatal(err)
	}
	rdb, prefix := redistest.New(b)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 16})
	v, err := agent.NewVerifier(agent.VerifierConfig{HS256Secret: []byte(testSecret)})
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(Config{WebhookSecrets: [][]byte{[]byte(testSecret)}}, Deps{
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Redis: rdb, Journal: j, Ingest: ingest.New(rdb, j),
		Sessions: sessions.New(rdb, j, 0), Linker: tracker.New(rdb, j, tracker.Config{}), Verifier: v,
	})
	if err != nil {
		b.Fatal(err)
	}
	h := s.Handler()
	const variants = 1 << 12
	bodies, sigs := make([][]byte, variants), make([]string, variants)
	title := []byte(`"title": "`)
	if !bytes.Contains(body, title) {
		b.Fatal("the example has no title")
	}
	for i := range bodies {
		bodies[i] = bytes.Replace(body, title, fmt.Appendf(nil, `"title": "run %d `, i), 1)
		mac := hmac.New(sha256.New, []byte(testSecret))
		mac.Write(bodies[i])
		sigs[i] = "sha256=" + hex.EncodeToString(mac.Sum(nil))
	}
	i := 0
	cpu0 := processCPU()
	for b.Loop() {
		if i == variants {
			b.StopTimer()
			redistest.Flush(rdb, prefix) // the same bodies again: not duplicates
			i = 0
			b.StartTimer()
		}
		req := httptest.NewRequest(http.MethodPost, "/webhooks/github", bytes.NewReader(bodies[i]))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "pull_request")
		req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("bench-%d-%d", b.N, i))
		req.Header.Set("X-Hub-Signature-256", sigs[i])
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusAccepted {
			b.Fatalf("delivery %d: %d %s", i, rec.Code, rec.Body)
		}
		i++
	}
	// the gateway's own CPU (this process), less noisy than wall time on
	// a shared machine
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is this process's user and system CPU time, in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
