package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/integration/stack/stacktest"
	"github.com/wakegate/wakegate/providers/agent/client"
	"github.com/wakegate/wakegate/providers/event"
)

// waitResult is the outcome of a wakegate wait run in the background.
type waitResult struct {
	code       int
	out, errs  string
	took       time.Duration
	returnedAt time.Time
}

// startWait runs wakegate wait in the background with token against url.
func startWait(t *testing.T, url, token string, args ...string) (<-chan waitResult, *syncBuffer) {
	t.Helper()
	var out, errb syncBuffer
	done := make(chan waitResult, 1)
	go func() {
		start := time.Now()
		code := runClientCommand(context.Background(), "wait", args, envOf("WAKEGATE_URL", url, "WAKEGATE_TOKEN", token), &out, &errb)
		done <- waitResult{code: code, out: out.String(), errs: errb.String(), took: time.Since(start), returnedAt: time.Now()}
	}()
	return done, &errb
}

func await(t *testing.T, done <-chan waitResult, within time.Duration, what string) waitResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(within):
		t.Fatalf("%s: wakegate wait did not return within %s", what, within)
	}
	return waitResult{}
}

// subscribed waits until party has n live subscriptions (wait subscribes
// before it parks).
func subscribed(t *testing.T, c *client.Client, n int) []client.Subscription {
	t.Helper()
	var subs []client.Subscription
	stacktest.Eventually(t, 10*time.Second, fmt.Sprintf("%d subscriptions", n), func() (bool, string) {
		var err error
		subs, err = c.Subscriptions(bg(t))
		if err != nil {
			return false, err.Error()
		}
		return len(subs) == n, fmt.Sprintf("%d", len(subs))
	})
	return subs
}

func TestWaitReturnsOnAMatchingEntry(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	boss := g.Token("session:boss", "inbox subscribe supervise")
	bossC := apiClient(t, g.URL, boss)
	w := apiClient(t, g.URL, g.Token("session:w2", "events:push"))
	// boss controls w2: every attention+ event of w2 reaches its inbox.
	if _, err := bossC.Supervise(bg(t), "w2", "controller", "self", false); err != nil {
		t.Fatal(err)
	}

	done, _ := startWait(t, g.URL, boss, "--subject", "session:w2", "--types", "session.turn_ended,session.crashed", "--timeout", "30s")
	subs := subscribed(t, bossC, 1)
	if s := subs[0]; len(s.Subjects) != 1 || s.Subjects[0] != "session:w2" || s.Until != "subject_terminal" || s.MinPriority != "attention" {
		t.Fatalf("wait subscribed %+v", s)
	}
	// Info, and another type: neither ends the wait.
	for _, e := range []*event.Event{{Type: "session.turn_started"}, {Type: "session.awaiting_input", Summary: "a question"}} {
		if _, err := w.Push(bg(t), e); err != nil {
			t.Fatal(err)
		}
	}
	waitEntries(t, bossC, 1) // the awaiting_input entry reached boss, as its controller
	select {
	case r := <-done:
		t.Fatalf("wait returned on an entry it does not wait for: %+v", r)
	case <-time.After(300 * time.Millisecond):
	}
	pushIdle(t, g, "w2", "w2 is done")
	r := await(t, done, 10*time.Second, "turn_ended idle")
	if r.code != 0 || r.errs != "" || !strings.Contains(r.out, "session.turn_ended session:w2 — w2 is done") || strings.Count(r.out, "\n") != 1 {
		t.Fatalf("wait: exit %d, stdout %q, stderr %q", r.code, r.out, r.errs)
	}

	// A second wait reuses the subscription, counts the unacked entry
	// already there, prints it as JSON and acks it.
	done, _ = startWait(t, g.URL, boss, "--subject", "session:w2", "--types", "session.turn_ended", "--timeout", "30s", "--json", "--ack")
	r = await(t, done, 10*time.Second, "an unacked entry already there")
	var e client.Entry
	if err := json.Unmarshal([]byte(r.out), &e); r.code != 0 || err != nil || e.Type != "session.turn_ended" {
		t.Fatalf("wait --json: exit %d, %q, %v", r.code, r.out, err)
	}
	subscribed(t, bossC, 1)
	p, err := bossC.Inbox(bg(t), client.InboxQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, left := range p.Entries {
		if left.Seq == e.Seq {
			t.Fatalf("--ack left entry %d unacked", e.Seq)
		}
	}
}

func TestWaitTimesOutWithItsExitCode(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	// 3 s: under a loaded CI machine's -race, a gateway answer that comes
	// late looks like an outage at a short deadline (exit 1, not 3).
	done, _ := startWait(t, g.URL, g.Token("session:w3", "inbox subscribe"), "--subject", "github:org/repo#12", "--timeout", "3s")
	r := await(t, done, 15*time.Second, "the deadline")
	if r.code != exitSilence || r.out != "" || r.took < 3*time.Second || r.took > 8*time.Second {
		t.Fatalf("wait past its deadline: exit %d after %s, stdout %q, stderr %q", r.code, r.took, r.out, r.errs)
	}
	if r.errs != "wakegate wait: nothing matching github:org/repo#12 at attention+ within 3s\n" {
		t.Fatalf("stderr %q", r.errs)
	}
	// A gateway that never answers until the deadline is an error, not silence.
	done, _ = startWait(t, "http://"+stacktest.FreeAddr(t), g.Token("session:w3", "inbox subscribe"), "--timeout", "1s")
	if r := await(t, done, 10*time.Second, "a gateway down throughout"); r.code != exitError ||
		!strings.Contains(r.errs, "the gateway did not answer before the deadline (1s): gateway unreachable") {
		t.Fatalf("gateway down: exit %d, %q", r.code, r.errs)
	}
	// Interrupted (Ctrl-C): not a match.
	ctx, cancel := context.WithCancel(context.Background())
	var errb syncBuffer
	res := make(chan int, 1)
	go func() {
		res <- runClientCommand(ctx, "wait", []string{"--no-subscribe", "--timeout", "30s"},
			envOf("WAKEGATE_URL", g.URL, "WAKEGATE_TOKEN", g.Token("session:w3", "inbox")), io.Discard, &errb)
	}()
	cancel()
	if code := <-res; code != exitError || !strings.Contains(errb.String(), "interrupted before anything matched") {
		t.Fatalf("interrupted: exit %d, %q", code, errb.String())
	}
	// A refused token is an error, not silence.
	done, _ = startWait(t, g.URL, "not-a-token", "--timeout", "10s")
	if r := await(t, done, 10*time.Second, "a bad token"); r.code != exitError || !strings.Contains(r.errs, "401") {
		t.Fatalf("bad token: exit %d, %q", r.code, r.errs)
	}
}

// A gateway that stops and comes back (a restart) is ridden out: the wait
// retries within its deadline and returns on the entry routed after.
func TestWaitSurvivesAGatewayRestart(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	boss := g.Token("session:boss", "inbox subscribe")
	done, errb := startWait(t, g.URL, boss, "--subject", "session:w4", "--timeout", "60s")
	subscribed(t, apiClient(t, g.URL, boss), 1)
	g.Stop()
	stacktest.Eventually(t, 10*time.Second, "wait notices the gateway is gone", func() (bool, string) {
		return strings.Contains(errb.String(), "retrying until the deadline"), errb.String()
	})
	g.Restart()
	pushIdle(t, g, "w4", "after the restart")
	r := await(t, done, 20*time.Second, "the entry after the restart")
	if r.code != 0 || !strings.Contains(r.out, "after the restart") || !strings.Contains(r.errs, "the gateway answers again") {
		t.Fatalf("wait across a restart: exit %d, stdout %q, stderr %q", r.code, r.out, r.errs)
	}
}

// a worker's wakegate wait on its own PR returns when the PR
// becomes ready, while quiet all is on for the workspace. The worker links
// the PR with its hook (pr-opened); GitHub's signed webhooks (the shared
// fixtures) open it and report a passing check at its head.
func TestWaitOnOwnPRWhileQuietAll(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	worker := g.Token("session:worker", "events:push inbox subscribe")
	human := g.Token("human:gera", everyScope)
	mustCLI(t, g.URL, human, "quiet", "on", "--scope", "all", "--until", "1h", "--reason", "night")

	code, out, errs := runHookT(t, g.URL, worker, "", "pr-opened", "Codertocat/Hello-World", "2")
	if code != 0 || out != "" || errs != "" {
		t.Fatalf("hook pr-opened: %d %q %q", code, out, errs)
	}
	subject := "github:Codertocat/Hello-World#2"
	done, _ := startWait(t, g.URL, worker, "--subject", subject, "--types", "github.pull_request.ready", "--timeout", "60s")
	subscribed(t, apiClient(t, g.URL, worker), 1)

	opened := readFixture(t, "octokit/pull_request/opened.payload.json")
	check := readFixture(t, "octokit/check_run/completed.payload.json") // success at the PR's head
	sendWebhook(t, g.URL, "pull_request", "guid-opened-1", opened)
	sendWebhook(t, g.URL, "check_run", "guid-check-1", check)

	r := await(t, done, 30*time.Second, "the PR became ready")
	if r.code != 0 || !strings.Contains(r.out, "github.pull_request.ready "+subject) {
		t.Fatalf("wait on the PR: exit %d, stdout %q, stderr %q", r.code, r.out, r.errs)
	}
	if r.took > 20*time.Second {
		t.Fatalf("the ready took %s to resume the worker: quiet held it?", r.took)
	}
	qs, err := apiClient(t, g.URL, human).QuietStatus(bg(t))
	if err != nil || len(qs) != 1 || qs[0].Scope != "all" {
		t.Fatalf("quiet all was not on throughout: %+v, %v", qs, err)
	}
}

func readFixture(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile("../../testdata/github/" + rel)
	if err != nil {
		t.Fatalf("fixture %s: %v", rel, err)
	}
	return b
}

// sendWebhook delivers a GitHub webhook signed as stacktest's gateway
// expects.
func sendWebhook(t *testing.T, url, eventType, guid string, body []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/webhooks/github", strings.NewReader(string(body)))
	m := hmac.New(sha256.New, []byte("webhook-secret"))
	m.Write(body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", eventType)
	req.Header.Set("X-GitHub-Delivery", guid)
	req.Header.Set("X-GitHub-Hook-ID", "4242")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("webhook %s: %d", eventType, resp.StatusCode)
	}
}

// TestWaitEndedAtTheDeadline: an error met once the deadline has passed
// by the clock is the deadline's (silence, or an outage when the gateway
// was failing), even when the context's timer has not fired yet and the
// error is the poll's own context.DeadlineExceeded; before the deadline
// the error is returned as it is.
func TestWaitEndedAtTheDeadline(t *testing.T) {
	f := waitFilter{subjects: []string{"github:org/repo#12"}, min: event.Attention}
	refused := errors.New("401 unauthorized")
	for _, c := range []struct {
		name        string
		err         error
		interrupted bool
		past        bool
		failures    int
		code        int
		msg         string
	}{
		{"the poll's own deadline, timer not fired", context.DeadlineExceeded, false, true, 0, exitSilence, "nothing matching github:org/repo#12 at attention+ within 3s"},
		{"at the deadline after failures", context.DeadlineExceeded, false, true, 2, exitError, "the gateway did not answer before the deadline (3s): gateway unreachable"},
		{"interrupted", context.Canceled, true, false, 0, exitError, "interrupted before anything matched"},
	} {
		err := waitEnded(c.err, c.interrupted, c.past, c.failures, errors.New("gateway unreachable"), 3*time.Second, f)
		var x exitCodeError
		if !errors.As(err, &x) || x.code != c.code || !strings.Contains(x.msg, c.msg) {
			t.Errorf("%s: %v, want exit %d %q", c.name, err, c.code, c.msg)
		}
	}
	if err := waitEnded(refused, false, false, 0, nil, 3*time.Second, f); !errors.Is(err, refused) {
		t.Errorf("before the deadline: %v, want the error itself", err)
	}
}
