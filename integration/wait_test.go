package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestWaitReturnsOnReadyWhileAttended: a worker whose presence is
// attended parks `wakegate wait` (a process) on its PR; the PR's opened
// (signed webhook) and its ready after the settle reach it as notices —
// not wakes — and still the wait returns within 2 s of ready: an explicit
// wait is explicit interest (docs/design.md §12).
func TestWaitReturnsOnReadyWhileAttended(t *testing.T) {
	t.Parallel()
	s := newStack(t, map[string]string{"WAKEGATE_READY_SETTLE": "3s"})
	p := s.start("serve", "serve", nil)
	c := s.client(p)
	tok := s.token(t, "session:waiter", "default", "events:push inbox subscribe")
	if r := c.send(t, http.MethodPut, "/v1/presence", tok, map[string]any{"attended": true, "for": "30m"}); r.Status != 200 {
		t.Fatalf("PUT /v1/presence: %s", r)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "wait", "--subject", prSubj, "--types", "github.pull_request.ready", "--timeout", "50s", "--json")
	cmd.Env = processEnv(map[string]string{"WAKEGATE_URL": "http://" + p.Addr, "WAKEGATE_TOKEN": tok})
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var exitAt time.Time
	go func() { err := cmd.Wait(); exitAt = time.Now(); exited <- err }()
	waitFor(t, 15*time.Second, "wait's subscription to the PR", func() (bool, string) {
		r := c.get(t, "/v1/subscriptions", tok)
		return strings.Contains(string(r.Body), prSubj), r.String()
	})

	if r := c.mustWebhook(t, "pull_request", newGUID(), fixture(t, "octokit/pull_request/opened.payload.json")); r.Status != 202 {
		t.Fatalf("opened: %s", r)
	}
	var err error
	select {
	case err = <-exited:
	case <-ctx.Done():
		t.Fatalf("wait did not return; stderr %s", errb.String())
	}
	if err != nil {
		t.Fatalf("wait exited with %v; stderr %s", err, errb.String())
	}
	evs := s.journalEvents(t)
	ready := byType(evs, "github.pull_request.ready", prSubj)
	if len(ready) != 1 {
		t.Fatalf("ready events %d, want 1", len(ready))
	}
	if took := exitAt.Sub(ready[0].Time); took > 2*time.Second {
		t.Errorf("wait returned %s after ready, want within 2 s", took)
	}
	var e struct {
		Subject string `json:"subject"`
		Kind    string `json:"kind"`
		Latest  struct {
			Type string `json:"type"`
		} `json:"latest"`
		Type string `json:"type"`
	}
	if err := json.Unmarshal(out.Bytes(), &e); err != nil {
		t.Fatalf("wait printed %q: %v", out.String(), err)
	}
	if e.Subject != prSubj || (e.Type != "github.pull_request.ready" && e.Latest.Type != "github.pull_request.ready") {
		t.Errorf("wait printed %s, want the PR's ready", out.String())
	}
	if e.Kind != "notice" {
		t.Errorf("the entry's kind %q, want notice (the waiter is attended)", e.Kind)
	}
}
