package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/integration/stack/stacktest"
	"github.com/wakegate/wakegate/providers/agent/client"
)

// hookProc runs `wakegate hook args…` as a process (this test binary as
// wakegate) with stdin written and closed, as Claude Code runs a hook.
func hookProc(t *testing.T, url, token, stdin string, extraEnv []string, args ...string) (code int, out, errs string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"hook"}, args...)...)
	cmd.Env = append(append(os.Environ(), "WAKEGATE_TEST_AS_BINARY=1", "WAKEGATE_URL="+url, "WAKEGATE_TOKEN="+token,
		"WAKEGATE_STATE_DIR="+stateDir(t)), extraEnv...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(in, stdin)
	_ = in.Close()
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatal(err)
	}
	return code, o.String(), e.String()
}

// decision decodes a hook's {"decision": "block", "reason"} answer.
func decision(t *testing.T, out string) hookDecision {
	t.Helper()
	var d hookDecision
	if err := json.Unmarshal([]byte(out), &d); err != nil || strings.Count(out, "\n") != 1 || d.Decision != "block" {
		t.Fatalf("hook stdout %q is not one block decision (%v)", out, err)
	}
	return d
}

// stopInput is Claude Code's documented Stop hook input.
func stopInput(active bool) string {
	b, _ := json.Marshal(map[string]any{"session_id": "cc-1", "transcript_path": "/tmp/cc-1.jsonl", "cwd": "/src",
		"permission_mode": "default", "hook_event_name": "Stop", "stop_hook_active": active})
	return string(b)
}

// promptInput is Claude Code's documented UserPromptSubmit hook input.
func promptInput(prompt string) string {
	b, _ := json.Marshal(map[string]any{"session_id": "cc-1", "transcript_path": "/tmp/cc-1.jsonl", "cwd": "/src",
		"permission_mode": "default", "hook_event_name": "UserPromptSubmit", "prompt": prompt})
	return string(b)
}

// No turn ends blind (docs/design.md §12): with attention+ entries unacked in the
// session's own inbox, hook stop blocks naming each on a line (and reports
// no turn end); with stop_hook_active it does not block again; with the
// gateway unreachable it exits 0 and blocks nothing; WAKEGATE_STOP_BLOCK=off
// turns it off.
func TestHookStopBlocksOverWaitingEntries(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	boss, _, kid := family(t, g, "kid-stop")
	kc := apiClient(t, g.URL, kid)
	for _, text := range []string{"the build is red on main", "review #12 before you stop"} {
		if _, err := boss.SendMessage(bg(t), "kid-stop", client.Message{Text: text, Intent: "control"}); err != nil {
			t.Fatal(err)
		}
	}
	waiting := waitEntries(t, kc, 2)

	// 1. Block, one line per entry.
	code, out, errs := hookProc(t, g.URL, kid, stopInput(false), nil, "stop")
	if code != 0 || errs != "" {
		t.Fatalf("stop: exit %d, stderr %q", code, errs)
	}
	d := decision(t, out)
	lines := strings.Split(d.Reason, "\n")
	if len(lines) != 3 {
		t.Fatalf("reason %q: want a heading and one line per entry", d.Reason)
	}
	for i, e := range waiting {
		if !strings.Contains(lines[i+1], "message.sent") || !strings.Contains(lines[i+1], "seq ") || !strings.Contains(d.Reason, e.Summary[:20]) {
			t.Errorf("reason line %q does not name entry %d (%s)", lines[i+1], e.Seq, e.Summary)
		}
	}
	if _, ok := journal(t, g)["hook/kid-stop/stop/1"]; ok {
		t.Errorf("a blocked stop journaled a turn end: the turn goes on")
	}

	// 2. Never twice in a row: the turn already goes on because of a stop
	// hook, so a new waiting entry does not block it again.
	if _, err := boss.SendMessage(bg(t), "kid-stop", client.Message{Text: "and one more", Intent: "control"}); err != nil {
		t.Fatal(err)
	}
	waitEntries(t, kc, 1)
	code, out, errs = hookProc(t, g.URL, kid, stopInput(true), nil, "stop")
	if code != 0 || out != "" || errs != "" {
		t.Fatalf("stop with stop_hook_active: exit %d, stdout %q, stderr %q; want no block", code, out, errs)
	}
	ended := false
	for id, e := range journal(t, g) {
		if strings.HasPrefix(id, "hook/kid-stop/stop/") && e.Type == "session.turn_ended" {
			ended = dataOf(t, e)["queued"] == 1.0
		}
	}
	if !ended {
		t.Errorf("the unblocked stop journaled no turn_ended with queued 1")
	}

	// The setting turns it off.
	code, out, errs = hookProc(t, g.URL, kid, stopInput(false), []string{"WAKEGATE_STOP_BLOCK=off"}, "stop")
	if code != 0 || out != "" || errs != "" {
		t.Fatalf("stop with WAKEGATE_STOP_BLOCK=off: exit %d, stdout %q, stderr %q; want no block", code, out, errs)
	}

	// 3. The gateway unreachable: exit 0, no block, one line on stderr.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String()
	_ = l.Close()
	start := time.Now()
	code, out, errs = hookProc(t, down, kid, stopInput(false), nil, "stop")
	if code != 0 || out != "" || strings.Count(errs, "\n") != 1 || time.Since(start) > 5*time.Second {
		t.Fatalf("stop with the gateway down: exit %d, stdout %q, stderr %q after %s; want exit 0, no block", code, out, errs, time.Since(start))
	}
}

// Quiet in one word (docs/design.md §12): a prompt that is exactly "quiet" sets
// quiet for the prompting session and never reaches the model (a block
// that says so, no turn journaled); "quiet off" lifts it and shows its
// digest; "resume" is an ordinary prompt.
func TestHookPromptQuietInOneWord(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	_, _, kid := family(t, g, "kid-q")
	ops := apiClient(t, g.URL, g.Token("human:ops", everyScope))

	code, out, errs := hookProc(t, g.URL, kid, promptInput("quiet"), nil, "prompt")
	if code != 0 || errs != "" {
		t.Fatalf("quiet: exit %d, stderr %q", code, errs)
	}
	if d := decision(t, out); !strings.Contains(d.Reason, "quiet on for session:kid-q") {
		t.Fatalf("quiet's reason %q", d.Reason)
	}
	qs, err := ops.QuietStatus(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || qs[0].Scope != "session:kid-q" {
		t.Fatalf("quiet records %+v, want one for session:kid-q", qs)
	}
	for id := range journal(t, g) {
		if strings.HasPrefix(id, "hook/kid-q/prompt/") {
			t.Fatalf("the quiet prompt journaled %s: it must not start a turn", id)
		}
	}

	code, out, errs = hookProc(t, g.URL, kid, promptInput(" quiet off\n"), nil, "prompt")
	if code != 0 || errs != "" {
		t.Fatalf("quiet off: exit %d, stderr %q", code, errs)
	}
	if d := decision(t, out); !strings.Contains(d.Reason, "quiet lifted for session:kid-q") {
		t.Fatalf("quiet off's reason %q", d.Reason)
	}
	if qs, err = ops.QuietStatus(bg(t)); err != nil || len(qs) != 0 {
		t.Fatalf("quiet records after quiet off: %+v %v", qs, err)
	}

	code, out, errs = hookProc(t, g.URL, kid, promptInput("resume"), nil, "prompt")
	if code != 0 || errs != "" || strings.Contains(out, `"decision"`) {
		t.Fatalf("resume: exit %d, stdout %q, stderr %q; want an ordinary prompt", code, out, errs)
	}
	if qs, _ = ops.QuietStatus(bg(t)); len(qs) != 0 {
		t.Fatalf("resume set quiet: %+v", qs)
	}
	found := false
	for id, e := range journal(t, g) {
		if strings.HasPrefix(id, "hook/kid-q/prompt/") && e.Type == "session.prompted" {
			found = dataOf(t, e)["source"] == "human:terminal"
		}
	}
	if !found {
		t.Fatalf("resume journaled no session.prompted by human:terminal")
	}
}

// i4Names returns I4's count and whether one of its examples names the
// session.
func i4Names(t *testing.T, c *client.Client, session string) (int, bool) {
	t.Helper()
	h, err := c.Health(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, inv := range h.Invariants {
		if inv.ID == "I4" {
			for _, ex := range inv.Examples {
				if strings.Contains(string(ex), `"session:`+session+`"`) {
					return inv.Count, true
				}
			}
			return inv.Count, false
		}
	}
	t.Fatalf("no I4 in the health report %s", h.Raw)
	return 0, false
}

// Provenance (docs/design.md §12): a turn started by a wakegate message (the
// harness injects it with its marker, as `wakegate inbox` prints it) is
// journaled with the message's sender as its source, so health's I4 does
// not count the session as driven by two parties; a typed prompt after it
// is human:<channel>, and then I4 rightly does.
func TestHookPromptProvenanceOfAMessage(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	boss, _, kid := family(t, g, "kid-p")
	admin := apiClient(t, g.URL, g.Token("human:ops", everyScope))
	sent, err := boss.SendMessage(bg(t), "kid-p", client.Message{Text: "rebase on main and push", Intent: "control"})
	if err != nil {
		t.Fatal(err)
	}
	entries := waitEntries(t, apiClient(t, g.URL, kid), 1)
	marker := entryMessageMarker(entries[0])
	if !strings.Contains(marker, sent.ID) || !strings.Contains(entryLine(entries[0], time.Now()), marker) {
		t.Fatalf("the inbox line of the message carries no marker with its id %s: %q", sent.ID, entryLine(entries[0], time.Now()))
	}
	prompt := "[" + marker + "]\nrebase on main and push"
	code, _, errs := hookProc(t, g.URL, kid, promptInput(prompt), nil, "prompt")
	if code != 0 || errs != "" {
		t.Fatalf("prompt: exit %d, stderr %q", code, errs)
	}
	sources := func() map[string]bool {
		out := map[string]bool{}
		for id, e := range journal(t, g) {
			if strings.HasPrefix(id, "hook/kid-p/prompt/") && e.Type == "session.prompted" {
				out[dataOf(t, e)["source"].(string)] = true
			}
		}
		return out
	}
	if s := sources(); len(s) != 1 || !s["session:boss"] {
		t.Fatalf("prompted sources %v, want session:boss (the message's sender)", s)
	}
	if n, named := i4Names(t, admin, "kid-p"); named {
		t.Fatalf("I4 (%d) names session:kid-p after a turn its controller's message started", n)
	}

	// A person types next: now two parties drive it, and I4 says so.
	if code, _, errs := hookProc(t, g.URL, kid, promptInput("looks good, merge it"), nil, "prompt"); code != 0 || errs != "" {
		t.Fatalf("typed prompt: exit %d, stderr %q", code, errs)
	}
	if s := sources(); !s["human:terminal"] {
		t.Fatalf("prompted sources %v, want human:terminal for the typed prompt", s)
	}
	if _, named := i4Names(t, admin, "kid-p"); !named {
		t.Fatalf("I4 does not name session:kid-p, prompted by a person and driven by session:boss")
	}
}
