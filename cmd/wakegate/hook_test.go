package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/integration/stack/stacktest"
	"github.com/wakegate/wakegate/providers/agent/client"
	"github.com/wakegate/wakegate/providers/event"
)

// stateDirs gives each test one hook state directory (the id counters).
var stateDirs sync.Map

func stateDir(t *testing.T) string {
	t.Helper()
	if d, ok := stateDirs.Load(t.Name()); ok {
		return d.(string)
	}
	d := t.TempDir()
	stateDirs.Store(t.Name(), d)
	return d
}

// runHookT runs wakegate hook in-process with stdin and extra env pairs
// after the args (as "KEY=value").
func runHookT(t *testing.T, url, token, stdin string, args ...string) (code int, out, errs string) {
	t.Helper()
	env := []string{"WAKEGATE_URL", url, "WAKEGATE_TOKEN", token, "WAKEGATE_STATE_DIR", stateDir(t)}
	var hookArgs []string
	for _, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "WAKEGATE_") {
			env = append(env, k, v)
			continue
		}
		hookArgs = append(hookArgs, a)
	}
	var o, e bytes.Buffer
	code = runHook(hookArgs, strings.NewReader(stdin), envOf(env...), &o, &e)
	return code, o.String(), e.String()
}

// journal reads every event of the workspace, by id.
func journal(t *testing.T, g *stacktest.Gateway) map[string]event.Event {
	t.Helper()
	c := apiClient(t, g.URL, g.Token("human:ops", everyScope))
	out := map[string]event.Event{}
	after := ""
	for {
		p, err := c.Events(bg(t), client.EventsQuery{After: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Events {
			out[e.ID] = e
		}
		if len(p.Events) == 0 {
			return out
		}
		after = p.Next
	}
}

func dataOf(t *testing.T, e event.Event) map[string]any {
	t.Helper()
	m := map[string]any{}
	if len(e.Data) > 0 {
		if err := json.Unmarshal(e.Data, &m); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// hookContext decodes a hook's Claude Code output.
func hookContext(t *testing.T, out string) (eventName, context string) {
	t.Helper()
	var o hookOutput
	if err := json.Unmarshal([]byte(out), &o); err != nil || strings.Count(out, "\n") != 1 {
		t.Fatalf("hook stdout is not one JSON object: %q (%v)", out, err)
	}
	return o.HookSpecificOutput.HookEventName, o.HookSpecificOutput.AdditionalContext
}

// family is a boss session and a child session spawned with a child token
// (boss is its parent and controller).
func family(t *testing.T, g *stacktest.Gateway, kid string) (boss *client.Client, bossTok, kidTok string) {
	t.Helper()
	bossTok = g.Token("session:boss", everyScope)
	boss = apiClient(t, g.URL, bossTok)
	ct, err := boss.ChildToken(bg(t), kid, client.ChildTokenRequest{Scope: "events:push inbox subscribe"})
	if err != nil {
		t.Fatal(err)
	}
	return boss, bossTok, ct.Token
}

// The hook fails open: unreachable, hanging, failing (5xx), refusing the
// token (401) — exit 0 within 2 s, nothing on stdout, exactly one line on
// stderr.
func TestHookFailsOpen(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"type":"https://wakegate.dev/problems/unavailable","title":"Service unavailable","status":503,"detail":"storage unavailable; retry"}`)
	}))
	t.Cleanup(failing.Close)
	good := stacktest.Token(t, "session:w1", "events:push inbox", time.Hour)
	forged := forgeToken(t, "session:w1")
	gateways := []struct {
		name, url, token, want string
	}{
		{"unreachable", "http://" + stacktest.FreeAddr(t), good, "gateway unreachable"},
		{"hanging", stacktest.Hanging(t), good, "gateway unreachable"},
		{"5xx", failing.URL, good, "503 Service unavailable"},
		{"bad token", g.URL, forged, "401 Unauthenticated"},
	}
	hooks := []struct {
		args  []string
		stdin string
	}{
		{[]string{"stop"}, `{"session_id":"cc","hook_event_name":"Stop"}`},
		{[]string{"prompt"}, `{"session_id":"cc","hook_event_name":"UserPromptSubmit","prompt":"hi"}`},
		{[]string{"session-start"}, `{"session_id":"cc","hook_event_name":"SessionStart","source":"compact"}`},
		{[]string{"notification"}, `{"session_id":"cc","notification_type":"idle_prompt","message":"waiting"}`},
		{[]string{"pr-opened", "org/repo", "12"}, ``},
	}
	for _, gw := range gateways {
		for _, h := range hooks {
			t.Run(gw.name+"/"+h.args[0], func(t *testing.T) {
				t.Parallel()
				start := time.Now()
				code, out, errs := runHookT(t, gw.url, gw.token, h.stdin, h.args...)
				took := time.Since(start)
				if code != 0 || out != "" || took > 2*time.Second {
					t.Fatalf("exit %d after %s, stdout %q; want 0 within 2 s and nothing on stdout", code, took, out)
				}
				if strings.Count(errs, "\n") != 1 || !strings.HasSuffix(errs, "\n") || !strings.Contains(errs, gw.want) ||
					!strings.HasPrefix(errs, "wakegate hook "+h.args[0]+": ") {
					t.Fatalf("stderr %q: want one line naming %q", errs, gw.want)
				}
			})
		}
	}
	t.Run("misuse", func(t *testing.T) {
		for _, tt := range []struct {
			token string
			args  []string
			want  string
		}{
			{"", []string{"stop"}, "WAKEGATE_TOKEN is not set"},
			{good, []string{"bogus"}, "unknown harness event"},
			{good, nil, "name the harness event"},
			{good, []string{"pr-opened", "org/repo"}, "want: wakegate hook pr-opened"},
			{good, []string{"stop", "--bogus"}, "flag provided but not defined"},
			{stacktest.Token(t, "human:ops", "events:push", time.Hour), []string{"stop"}, "no session: set WAKEGATE_SESSION"},
		} {
			code, out, errs := runHookT(t, g.URL, tt.token, "", tt.args...)
			if code != 0 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tt.want) {
				t.Errorf("hook %v: exit %d, stdout %q, stderr %q; want 0 and one line with %q", tt.args, code, out, errs, tt.want)
			}
		}
		var o, e bytes.Buffer
		if code := runHook([]string{"--help"}, nil, envOf(), &o, &e); code != 0 || o.Len() != 0 || !strings.Contains(e.String(), "Usage: wakegate hook") {
			t.Errorf("hook --help: %d, stdout %q", code, o.String())
		}
	})
}

// forgeToken is a token with a valid shape signed by another secret.
func forgeToken(t *testing.T, sub string) string {
	t.Helper()
	tok := stacktest.Token(t, sub, "events:push inbox", time.Hour)
	return tok[:len(tok)-4] + "AAAA"
}

// The whole process — start, stdin left open by the harness, a gateway
// that never answers — exits 0 within its budget (hookBudget, 1.5 s) and
// 0.5 s more, on top of what the process's own start takes on this machine
// right now (measured first: a loaded machine or the race detector slows
// the start, not the hook).
func TestHookFailsOpenAsAProcess(t *testing.T) {
	t.Parallel()
	hang := stacktest.Hanging(t)
	env := append(os.Environ(), "WAKEGATE_TEST_AS_BINARY=1", "WAKEGATE_URL="+hang,
		"WAKEGATE_TOKEN="+stacktest.Token(t, "session:w1", "events:push inbox", time.Hour), "WAKEGATE_STATE_DIR="+t.TempDir())
	limit := hookBudget + 500*time.Millisecond
	cmd := exec.Command(os.Args[0], "hook", "--help") // starts, prints its help, sends nothing
	cmd.Env = env
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	limit += time.Since(start)
	for _, closeStdin := range []bool{true, false} {
		cmd := exec.Command(os.Args[0], "hook", "stop")
		cmd.Env = env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(stdin, `{"session_id":"cc","hook_event_name":"Stop"}`)
		if closeStdin {
			_ = stdin.Close()
		}
		err = cmd.Wait()
		took := time.Since(start)
		_ = stdin.Close()
		if err != nil || took >= limit || out.Len() != 0 || strings.Count(errb.String(), "\n") != 1 {
			t.Fatalf("stdin closed %v: %v after %s (limit %s), stdout %q, stderr %q", closeStdin, err, took, limit, out.String(), errb.String())
		}
	}
}

// prompt: the turn and its provenance are journaled, the session is
// attended, and the pending entries are printed once as Claude Code
// additional context, then acked; the next prompt prints nothing.
func TestHookPromptPrintsNoticesOnce(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	boss, _, kid := family(t, g, "kid")
	kidC := apiClient(t, g.URL, kid)
	if _, err := boss.SendMessage(bg(t), "kid", client.Message{Text: "rebase on main before you push", Intent: "control"}); err != nil {
		t.Fatal(err)
	}
	pushIdle(t, g, "other", "unrelated")
	waitEntries(t, kidC, 1)

	stdin := `{"session_id":"cc-1","transcript_path":"/tmp/t.jsonl","hook_event_name":"UserPromptSubmit","prompt":"fix the build"}`
	code, out, errs := runHookT(t, g.URL, kid, stdin, "prompt")
	if code != 0 || errs != "" {
		t.Fatalf("prompt: %d %q", code, errs)
	}
	name, ctx := hookContext(t, out)
	if name != "UserPromptSubmit" || !strings.HasPrefix(ctx, "wakegate: 1 notice for session:kid since your last prompt (now acknowledged):\n- [attention] session:kid message.sent — session:boss (control): rebase on main before you push (seq ") {
		t.Fatalf("context %q (event %q)", ctx, name)
	}
	j := journal(t, g)
	started, prompted := j["hook/kid/prompt/1/turn_started"], j["hook/kid/prompt/1/prompted"]
	if started.Type != "session.turn_started" || started.Subject != "session:kid" || prompted.Type != "session.prompted" {
		t.Fatalf("journaled: %+v / %+v", started, prompted)
	}
	if d := dataOf(t, prompted); d["source"] != "human:terminal" || d["prompt_chars"] != 13.0 || d["harness_session_id"] != "cc-1" {
		t.Fatalf("prompted data %v", d)
	}
	if p, err := kidC.GetPresence(bg(t)); err != nil || !p.Attended {
		t.Fatalf("presence after a human prompt: %+v, %v", p, err)
	}
	if p, err := kidC.Inbox(bg(t), client.InboxQuery{}); err != nil || len(p.Entries) != 0 {
		t.Fatalf("inbox after the prompt: %+v, %v", p, err)
	}

	code, out, errs = runHookT(t, g.URL, kid, stdin, "prompt", "WAKEGATE_CHANNEL=slack")
	if code != 0 || out != "" || errs != "" {
		t.Fatalf("second prompt printed %q %q: the notices were handed over already", out, errs)
	}
	if d := dataOf(t, journal(t, g)["hook/kid/prompt/2/prompted"]); d["source"] != "human:slack" {
		t.Fatalf("second prompted data %v", d)
	}
}

// hook stop for a child wakes its parent's wakegate wait within a
// second; with an entry waiting, the turn is not idle.
func TestHookStopWakesTheParentsWait(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	boss, bossTok, kid := family(t, g, "kid2")
	done, _ := startWait(t, g.URL, bossTok, "--subject", "session:kid2", "--types", "session.turn_ended", "--timeout", "30s")
	subscribed(t, boss, 1)
	code, out, errs := runHookT(t, g.URL, kid, `{"session_id":"cc","hook_event_name":"Stop","stop_hook_active":false}`, "stop")
	hookDone := time.Now()
	if code != 0 || out != "" || errs != "" {
		t.Fatalf("stop: %d %q %q", code, out, errs)
	}
	r := await(t, done, 10*time.Second, "the child's stop")
	if r.code != 0 || !strings.Contains(r.out, "session.turn_ended session:kid2 — turn ended; idle") {
		t.Fatalf("parent's wait: %d %q %q", r.code, r.out, r.errs)
	}
	if lag := r.returnedAt.Sub(hookDone); lag > time.Second {
		t.Fatalf("the parent's wait returned %s after the child's hook stop, want within 1 s", lag)
	}
	if d := dataOf(t, journal(t, g)["hook/kid2/stop/1"]); d["idle"] != true || d["queued"] != 0.0 {
		t.Fatalf("turn_ended data %v", d)
	}

	if _, err := boss.SendMessage(bg(t), "kid2", client.Message{Text: "one more thing", Intent: "info"}); err != nil {
		t.Fatal(err)
	}
	waitEntries(t, apiClient(t, g.URL, kid), 1)
	if code, _, errs := runHookT(t, g.URL, kid, "", "stop", "WAKEGATE_STOP_BLOCK=off"); code != 0 || errs != "" {
		t.Fatalf("second stop: %d %q", code, errs)
	}
	e := journal(t, g)["hook/kid2/stop/2"]
	if d := dataOf(t, e); d["idle"] != false || d["queued"] != 1.0 || e.Priority != event.Info {
		t.Fatalf("a stop with an entry waiting: %+v %v", e, d)
	}
}

// session-start: spawned at startup (labels, parent); resumed otherwise;
// after a compaction the brief, unacked entries included, is the context.
func TestHookSessionStart(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	boss, _, kid := family(t, g, "kid3")
	code, out, errs := runHookT(t, g.URL, kid, `{"session_id":"cc","hook_event_name":"SessionStart","source":"startup","cwd":"/src/app"}`,
		"session-start", "WAKEGATE_LABELS=team-a,nightly")
	if code != 0 || out != "" || errs != "" {
		t.Fatalf("startup: %d %q %q", code, out, errs)
	}
	sp := journal(t, g)["hook/kid3/session-start/1"]
	if d := dataOf(t, sp); sp.Type != "session.spawned" || fmt.Sprint(d["labels"]) != "[team-a nightly]" || d["cwd"] != "/src/app" {
		t.Fatalf("spawned: %+v %v", sp, d)
	}

	if _, err := boss.SendMessage(bg(t), "kid3", client.Message{Text: "the release is blocked on you", Intent: "control", Blocker: true}); err != nil {
		t.Fatal(err)
	}
	waitEntries(t, apiClient(t, g.URL, kid), 1)
	code, out, errs = runHookT(t, g.URL, kid, `{"session_id":"cc","hook_event_name":"SessionStart","source":"compact"}`, "session-start")
	if code != 0 || errs != "" {
		t.Fatalf("compact: %d %q", code, errs)
	}
	name, ctx := hookContext(t, out)
	for _, want := range []string{"This session was compacted.", "wakegate brief for session:kid3 (workspace default)",
		"Unacked entries (1, highest priority first):", "[critical", "message.sent session:kid3 — session:boss (control): the release is blocked on you"} {
		if !strings.Contains(ctx, want) {
			t.Fatalf("SessionStart context lacks %q:\n%s", want, ctx)
		}
	}
	if name != "SessionStart" {
		t.Fatalf("hookEventName %q", name)
	}
	if e := journal(t, g)["hook/kid3/session-start/2"]; e.Type != "session.resumed" || dataOf(t, e)["source"] != "compact" {
		t.Fatalf("resumed: %+v", e)
	}
	// The brief is not an ack: the entry is still there.
	waitEntries(t, apiClient(t, g.URL, kid), 1)

	code, out, errs = runHookT(t, g.URL, kid, `{"source":"clear"}`, "SessionStart", "--format", "text")
	if code != 0 || out != "" || errs != "" {
		t.Fatalf("clear: %d %q %q", code, out, errs)
	}
	code, out, _ = runHookT(t, g.URL, kid, `{"source":"resume"}`, "session-start", "--format", "text")
	if code != 0 || !strings.HasPrefix(out, "This session was resumed.") {
		t.Fatalf("resume --format text: %q", out)
	}
}

func TestHookNotificationAndPROpened(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	_, _, kid := family(t, g, "kid4")
	for _, tt := range []struct {
		stdin, typ, summary string
	}{
		{`{"notification_type":"permission_prompt","message":"Claude needs your permission to use Bash"}`, "session.permission_requested", "Claude needs your permission to use Bash"},
		{`{"notification_type":"idle_prompt","message":"Claude is waiting for your input"}`, "session.awaiting_input", "Claude is waiting for your input"},
		{`{"message":"Claude needs your permission to use Edit"}`, "session.permission_requested", "Claude needs your permission to use Edit"},
		{`{"notification_type":"auth_success","message":"signed in"}`, "", ""},
	} {
		code, out, errs := runHookT(t, g.URL, kid, tt.stdin, "notification")
		if code != 0 || out != "" || errs != "" {
			t.Fatalf("notification %s: %d %q %q", tt.stdin, code, out, errs)
		}
	}
	j := journal(t, g)
	for i, want := range []struct{ typ, summary string }{
		{"session.permission_requested", "Claude needs your permission to use Bash"},
		{"session.awaiting_input", "Claude is waiting for your input"},
		{"session.permission_requested", "Claude needs your permission to use Edit"},
	} {
		e := j[fmt.Sprintf("hook/kid4/notification/%d", i+1)]
		if e.Type != want.typ || e.Summary != want.summary {
			t.Fatalf("notification %d journaled %+v, want %s %q", i+1, e, want.typ, want.summary)
		}
	}
	if _, ok := j["hook/kid4/notification/4"]; ok {
		t.Fatal("auth_success was journaled")
	}

	if code, out, errs := runHookT(t, g.URL, kid, "", "pr-opened", "org/repo", "#12"); code != 0 || out != "" || errs != "" {
		t.Fatalf("pr-opened: %d %q %q", code, out, errs)
	}
	e := journal(t, g)["hook/kid4/pr-opened/1"]
	if d := dataOf(t, e); e.Type != "session.pr_opened" || d["repo"] != "org/repo" || d["number"] != 12.0 {
		t.Fatalf("pr_opened: %+v", e)
	}
	// Another session claiming the same PR: refused, and the hook goes on.
	_, _, other := family(t, g, "kid5")
	code, out, errs := runHookT(t, g.URL, other, "", "pr-opened", "org/repo", "12")
	if code != 0 || out != "" || !strings.Contains(errs, "409") || strings.Count(errs, "\n") != 1 {
		t.Fatalf("a second claim: %d %q %q", code, out, errs)
	}
}

// Ids are deterministic: the same --stamp is the same fact; without one a
// counter advances only once the gateway may have the events, so a hook
// re-run after a failure sends the same ids.
func TestHookIDsAreIdempotent(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	_, _, kid := family(t, g, "kid6")
	for range 2 {
		if code, _, errs := runHookT(t, g.URL, kid, "", "prompt", "--stamp", "1733000000.5"); code != 0 || errs != "" {
			t.Fatalf("prompt --stamp: %d %q", code, errs)
		}
	}
	n := 0
	for id := range journal(t, g) {
		if strings.HasPrefix(id, "hook/kid6/prompt/") {
			n++
		}
	}
	if n != 2 { // one turn_started, one prompted
		t.Fatalf("two runs with one stamp journaled %d prompt events, want 2", n)
	}

	down := "http://" + stacktest.FreeAddr(t)
	if code, _, errs := runHookT(t, down, kid, "", "stop"); code != 0 || !strings.Contains(errs, "unreachable") {
		t.Fatalf("stop with the gateway down: %d %q", code, errs)
	}
	for range 2 {
		if code, _, errs := runHookT(t, g.URL, kid, "", "stop", "WAKEGATE_STOP_BLOCK=off"); code != 0 || errs != "" {
			t.Fatalf("stop: %d %q", code, errs)
		}
	}
	j := journal(t, g)
	if _, ok := j["hook/kid6/stop/1"]; !ok {
		t.Fatal("the run after the failed one did not reuse id stop/1")
	}
	if _, ok := j["hook/kid6/stop/2"]; !ok {
		t.Fatal("the next run did not take stop/2")
	}
	if _, ok := j["hook/kid6/stop/3"]; ok {
		t.Fatal("the failed run consumed a number")
	}
}
