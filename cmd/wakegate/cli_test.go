package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/integration/stack/stacktest"
	"github.com/wakegate/wakegate/providers/agent/client"
	"github.com/wakegate/wakegate/providers/event"
)

// TestMain lets a test run this test binary as the wakegate binary
// (WAKEGATE_TEST_AS_BINARY=1): the whole process, start to exit.
func TestMain(m *testing.M) {
	if os.Getenv("WAKEGATE_TEST_AS_BINARY") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

const everyScope = "events:push events:push:any events:read events:read:any inbox subscribe supervise spawn admin"

// envOf is a getenv over kv pairs.
func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// syncBuffer is a buffer written by one goroutine and read by another.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// cliRun runs a client command against url with token.
func cliRun(t *testing.T, url, token string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code = runClientCommand(ctx, args[0], args[1:], envOf("WAKEGATE_URL", url, "WAKEGATE_TOKEN", token), &out, &errb)
	return code, out.String(), errb.String()
}

func mustCLI(t *testing.T, url, token string, args ...string) string {
	t.Helper()
	code, out, errs := cliRun(t, url, token, args...)
	if code != 0 {
		t.Fatalf("wakegate %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errs)
	}
	if errs != "" {
		t.Fatalf("wakegate %s: stderr %q on success", strings.Join(args, " "), errs)
	}
	return out
}

func apiClient(t *testing.T, url, token string) *client.Client {
	t.Helper()
	c, err := client.New(url, token)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func bg(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// checkAligned checks that every row of a table starts each column where
// the header does (the columns are aligned), for the first n columns.
func checkAligned(t *testing.T, out string, cols []string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	head := lines[0]
	starts := make([]int, len(cols))
	for i, c := range cols {
		starts[i] = strings.Index(head, c)
		if starts[i] < 0 || (i > 0 && starts[i] <= starts[i-1]) {
			t.Fatalf("header %q lacks column %s in order", head, c)
		}
	}
	rows := 0
	for _, l := range lines[1:] {
		if len(l) < starts[len(starts)-1] {
			continue // a footer line
		}
		for i := 1; i < len(starts); i++ {
			if l[starts[i]-1] != ' ' || l[starts[i]] == ' ' || l[starts[i]-2] != ' ' {
				t.Fatalf("row %q: column %s does not start at %d like the header's\n%s", l, cols[i], starts[i], out)
			}
		}
		rows++
	}
	if rows == 0 {
		t.Fatalf("table without rows:\n%s", out)
	}
}

// pushIdle has session w push a turn_ended idle=true (attention).
func pushIdle(t *testing.T, g *stacktest.Gateway, w, summary string) *event.Event {
	t.Helper()
	e := &event.Event{Type: "session.turn_ended", Summary: summary, Data: json.RawMessage(`{"idle":true}`)}
	if _, err := apiClient(t, g.URL, g.Token("session:"+w, "events:push")).Push(bg(t), e); err != nil {
		t.Fatal(err)
	}
	return e
}

// entries waits until party's inbox holds n entries.
func waitEntries(t *testing.T, c *client.Client, n int) []client.Entry {
	t.Helper()
	var got []client.Entry
	stacktest.Eventually(t, 10*time.Second, fmt.Sprintf("%d inbox entries", n), func() (bool, string) {
		p, err := c.Inbox(bg(t), client.InboxQuery{})
		if err != nil {
			return false, err.Error()
		}
		got = p.Entries
		return len(p.Entries) == n, fmt.Sprintf("%d entries", len(p.Entries))
	})
	return got
}

func TestInboxCommand(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	alice := g.Token("human:alice", "inbox subscribe")
	mustCLI(t, g.URL, alice, "subscribe", "--subjects", "session:w1,session:w2", "--min-priority", "attention")
	pushIdle(t, g, "w1", "w1 is idle and waits")
	pushIdle(t, g, "w2", "w2 is idle")
	got := waitEntries(t, apiClient(t, g.URL, alice), 2)

	out := mustCLI(t, g.URL, alice, "inbox")
	if ansi.MatchString(out) {
		t.Fatalf("colour on a non-terminal:\n%q", out)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 4 || !regexp.MustCompile(`^SEQ +PRIORITY +KIND +TYPE +SUBJECT +COUNT +AGE +SUMMARY$`).MatchString(lines[0]) {
		t.Fatalf("inbox table:\n%s", out)
	}
	w1 := got[0]
	if w1.Subject != "session:w1" {
		w1 = got[1]
	}
	row := regexp.MustCompile(fmt.Sprintf(`^%d +attention +wake +session\.turn_ended +session:w1 +1 +\d+s +w1 is idle and waits$`, w1.Seq))
	if !row.MatchString(lines[1]) && !row.MatchString(lines[2]) {
		t.Fatalf("no row of w1 like %s:\n%s", row, out)
	}
	if want := fmt.Sprintf("next %d · acknowledge with: wakegate inbox --ack-through %d", got[1].Seq, got[1].Seq); lines[3] != want {
		t.Fatalf("footer %q, want %q", lines[3], want)
	}
	checkAligned(t, strings.Join(lines[:3], "\n"), []string{"SEQ", "PRIORITY", "KIND", "TYPE", "SUBJECT", "COUNT", "AGE", "SUMMARY"})

	var page struct {
		Entries []client.Entry `json:"entries"`
		Next    int64          `json:"next"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, g.URL, alice, "inbox", "--json")), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Entries) != 2 || page.Entries[1].Subject != got[1].Subject || page.Next != got[1].Seq {
		t.Fatalf("--json: %+v", page)
	}

	if out := mustCLI(t, g.URL, alice, "inbox", "--ack-through", fmt.Sprint(got[0].Seq)); out != fmt.Sprintf("acked 1 entry through seq %d\n", got[0].Seq) {
		t.Fatalf("--ack-through: %q", out)
	}
	out = mustCLI(t, g.URL, alice, "inbox", "--ack")
	if !strings.Contains(out, got[1].Subject) || strings.Contains(out, got[0].Subject) || !strings.HasSuffix(out, fmt.Sprintf("acked 1 entry through seq %d\n", got[1].Seq)) {
		t.Fatalf("--ack:\n%s", out)
	}
	if out := mustCLI(t, g.URL, alice, "inbox"); !strings.HasPrefix(out, "no unacked entries") {
		t.Fatalf("after the acks: %q", out)
	}

	// --wait returns as soon as an entry decides a wake.
	done := make(chan string, 1)
	go func() {
		_, out, _ := cliRun(t, g.URL, alice, "inbox", "--wait", "30s", "--after", fmt.Sprint(got[1].Seq), "--json")
		done <- out
	}()
	pushIdle(t, g, "w1", "w1 again")
	select {
	case out := <-done:
		if !strings.Contains(out, "w1 again") {
			t.Fatalf("--wait answered %q", out)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("inbox --wait 30s did not return within 15 s of the wake")
	}
}

func TestQuietCommand(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	human := g.Token("human:gera", everyScope)
	out := mustCLI(t, g.URL, human, "quiet", "on", "--scope", "all", "--until", "1h", "--reason", "deploy freeze")
	if !regexp.MustCompile(`^quiet on for all until \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ — deploy freeze\n$`).MatchString(out) {
		t.Fatalf("quiet on: %q", out)
	}
	mustCLI(t, g.URL, g.Token("session:w1", "inbox"), "quiet", "on", "--reason", "heads down")
	out = mustCLI(t, g.URL, human, "quiet", "status")
	checkAligned(t, out, []string{"SCOPE", "BY", "SINCE", "UNTIL", "REASON"})
	if !strings.Contains(out, "deploy freeze") || !strings.Contains(out, "lifted by hand") || strings.Count(out, "\n") != 3 {
		t.Fatalf("quiet status:\n%s", out)
	}
	var status struct {
		Quiet []client.Quiet `json:"quiet"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, g.URL, human, "quiet", "status", "--json")), &status); err != nil || len(status.Quiet) != 2 {
		t.Fatalf("quiet status --json: %+v, %v", status, err)
	}
	if out := mustCLI(t, g.URL, human, "quiet", "off", "--scope", "all"); !strings.HasPrefix(out, "quiet lifted for all") {
		t.Fatalf("quiet off: %q", out)
	}
	code, out, errs := cliRun(t, g.URL, human, "quiet", "off", "--scope", "all")
	if code != exitError || out != "" || !strings.Contains(errs, "404") || strings.Count(errs, "\n") != 1 {
		t.Fatalf("quiet off twice: %d %q %q", code, out, errs)
	}
	code, _, errs = cliRun(t, g.URL, g.Token("session:w1", "inbox"), "quiet", "on", "--scope", "all", "--until", "1h")
	if code != exitError || !strings.Contains(errs, "403") {
		t.Fatalf("a session quieting all: %d %q", code, errs)
	}
}

func TestSubscribeCommands(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	tok := g.Token("session:boss", "subscribe inbox")
	out := mustCLI(t, g.URL, tok, "subscribe", "--subjects", "github:org/repo#12", "--types", "github.pull_request.*", "--until", "subject_terminal")
	m := regexp.MustCompile(`^subscribed (\S+): types=github\.pull_request\.\* subjects=github:org/repo#12 until=subject_terminal\n$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("subscribe: %q", out)
	}
	id := m[1]
	mustCLI(t, g.URL, tok, "subscribe", "--session", "w1", "--subtree", "--delivery", "inbox")
	out = mustCLI(t, g.URL, tok, "subscriptions")
	checkAligned(t, out, []string{"ID", "TYPES", "SUBJECTS", "SESSION", "MIN", "DELIVERY", "UNTIL", "CREATED"})
	if !strings.Contains(out, id) || !strings.Contains(out, "w1/subtree") {
		t.Fatalf("subscriptions:\n%s", out)
	}
	var list struct {
		Subscriptions []client.Subscription `json:"subscriptions"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, g.URL, tok, "subscriptions", "--json")), &list); err != nil || len(list.Subscriptions) != 2 {
		t.Fatalf("subscriptions --json: %+v, %v", list, err)
	}
	if out := mustCLI(t, g.URL, tok, "unsubscribe", id, "--json"); out != fmt.Sprintf(`{"deleted":[%q]}`+"\n", id) {
		t.Fatalf("unsubscribe --json: %q", out)
	}
	code, _, errs := cliRun(t, g.URL, tok, "unsubscribe", id)
	if code != exitError || !strings.Contains(errs, "404") {
		t.Fatalf("unsubscribe twice: %d %q", code, errs)
	}
	code, _, errs = cliRun(t, g.URL, tok, "subscribe", "--subjects", "not a subject")
	if code != exitError || !strings.Contains(errs, "400") {
		t.Fatalf("bad subject: %d %q", code, errs)
	}
}

func TestBriefCommand(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	tok := g.Token("session:boss", everyScope)
	mustCLI(t, g.URL, tok, "subscribe", "--subjects", "session:w7")
	pushIdle(t, g, "w7", "w7 finished its turn")
	waitEntries(t, apiClient(t, g.URL, tok), 1)
	out := mustCLI(t, g.URL, tok, "brief")
	for _, want := range []string{"wakegate brief for session:boss (workspace default)", "Subscriptions:\n  - ", "subjects=session:w7",
		"Unacked entries (1, highest priority first):\n  - seq ", "[attention wake] session.turn_ended session:w7 — w7 finished its turn",
		"Inbox next seq ", "journal cursor "} {
		if !strings.Contains(out, want) {
			t.Fatalf("brief lacks %q:\n%s", want, out)
		}
	}
	var b client.Brief
	if err := json.Unmarshal([]byte(mustCLI(t, g.URL, tok, "brief", "--json")), &b); err != nil || b.UnackedCount != 1 {
		t.Fatalf("brief --json: %+v, %v", b, err)
	}
}

func TestEventsTail(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	reader := g.Token("human:ops", everyScope)
	w := apiClient(t, g.URL, g.Token("session:w3", "events:push"))
	var ids []string
	for i := range 3 {
		e := &event.Event{Type: "session.turn_started", Summary: fmt.Sprintf("turn %d", i)}
		if _, err := w.Push(bg(t), e); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	out := mustCLI(t, g.URL, reader, "events", "tail", "-n", "2", "--types", "session.*")
	checkAligned(t, out, []string{"TIME", "PRIORITY", "TYPE", "SUBJECT", "SUMMARY"})
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[1], "turn 1") || !strings.HasSuffix(lines[2], "turn 2") ||
		!regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ +info +session\.turn_started +session:w3 +turn 2$`).MatchString(lines[2]) {
		t.Fatalf("events tail -n 2:\n%s", out)
	}
	out = mustCLI(t, g.URL, reader, "events", "tail", "--json", "--subjects", "session:w3")
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var e event.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("--json line %q: %v", l, err)
		}
		got = append(got, e.ID)
	}
	if strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Fatalf("--json ids %v, want %v", got, ids)
	}

	// --follow prints what is journaled after it started, until stopped.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var fout, ferr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- runClientCommand(ctx, "events", []string{"tail", "--follow", "-n", "0", "--subjects", "session:w3"},
			envOf("WAKEGATE_URL", g.URL, "WAKEGATE_TOKEN", reader), &fout, &ferr)
	}()
	stacktest.Eventually(t, 10*time.Second, "tail printed the backlog", func() (bool, string) {
		return strings.Count(fout.String(), "turn_started") == 3, fout.String()
	})
	if _, err := w.Push(bg(t), &event.Event{Type: "session.turn_ended", Summary: "followed"}); err != nil {
		t.Fatal(err)
	}
	stacktest.Eventually(t, 10*time.Second, "tail --follow printed the new event", func() (bool, string) {
		return strings.Contains(fout.String(), "followed"), fout.String()
	})
	cancel()
	select {
	case code := <-done:
		if code != 0 || ferr.String() != "" {
			t.Fatalf("interrupted --follow: exit %d, stderr %q", code, ferr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("--follow did not stop when interrupted")
	}
}

// The health route is another piece of work: against a gateway without it
// the command says so and exits 1; a report is a table, or --json as sent.
func TestHealthCommand(t *testing.T) {
	t.Parallel()
	notFound := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(404)
		_, _ = io.WriteString(w, `{"type":"https://wakegate.dev/problems/not-found","title":"Not found","status":404,"detail":"no such route"}`)
	}))
	t.Cleanup(notFound.Close)
	code, out, errs := cliRun(t, notFound.URL, "t", "health")
	if code != exitError || out != "" || errs != "wakegate health: this gateway does not serve GET /v1/health/supervision (404): the supervision health check is not built or not deployed on it yet\n" {
		t.Fatalf("without the route: %d %q %q", code, out, errs)
	}

	report := `{"workspace":"default","at":"2026-11-30T15:04:09Z","ok":false,"invariants":[` +
		`{"id":"I1","name":"coverage: every session that is not dead has an effective supervisor","ok":false,"count":2,"unit":"sessions","examples":[{"session":"session:a","liveness":"live"},"session:b",{"session":"session:c"},{"x":1}]},` +
		`{"id":"I3","name":"at-least-once: unacked entries per party (a measure)","ok":true,"count":1,"examples":[{"party":"session:boss","unacked":1}]},` +
		`{"id":"I6","name":"bounded watches","count":0}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/health/supervision" || r.Header.Get("Authorization") != "Bearer t" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, report)
	}))
	t.Cleanup(srv.Close)
	out = mustCLI(t, srv.URL, "t", "health")
	want := "supervision health of workspace default at 2026-11-30 15:04:09Z: 1 of 3 checks failing\n" +
		"CHECK  OK    COUNT  WHAT                                                          EXAMPLES\n" +
		"I1     FAIL  2      coverage: every session that is not dead has an effective s…  session:a, session:b, session:c, (+1)\n" +
		"I3     ok    1      at-least-once: unacked entries per party (a measure)          session:boss\n" +
		"I6     ok    0      bounded watches\n"
	if out != want {
		t.Fatalf("health table:\n%s\nwant:\n%s", out, want)
	}
	if out := mustCLI(t, srv.URL, "t", "health", "--json"); out != report+"\n" {
		t.Fatalf("health --json: %q", out)
	}

	// The real gateway: either the route is there (admin reads it) or the
	// command says it is not.
	g := stacktest.Start(t)
	code, _, errs = cliRun(t, g.URL, g.Token("human:ops", everyScope), "health")
	if code != 0 && !strings.Contains(errs, "does not serve GET /v1/health/supervision") {
		t.Fatalf("health on the gateway: %d %q", code, errs)
	}
}

func TestUsageAndErrors(t *testing.T) {
	t.Parallel()
	down := "http://" + stacktest.FreeAddr(t)
	for _, tt := range []struct {
		args   []string
		token  string
		code   int
		stderr string
	}{
		{[]string{"inbox", "--bogus"}, "t", exitUsage, "flag provided but not defined: -bogus"},
		{[]string{"quiet"}, "t", exitUsage, "want one of: on, off, status"},
		{[]string{"quiet", "maybe"}, "t", exitUsage, "unknown quiet action"},
		{[]string{"events"}, "t", exitUsage, "want: wakegate events tail"},
		{[]string{"inbox"}, "", exitUsage, "no token: set WAKEGATE_TOKEN or pass --token"},
		{[]string{"inbox", "--wait", "2m"}, "t", exitUsage, "--wait must be from 0 to 60s"},
		{[]string{"unsubscribe"}, "t", exitUsage, "name the subscription id"},
		{[]string{"subscribe"}, "t", exitUsage, "at least one filter"},
		{[]string{"wait", "--subject", "org/repo#1"}, "t", exitUsage, "want github:org/repo#12"},
		{[]string{"wait", "--timeout", "0s"}, "t", exitUsage, "--timeout must be positive"},
		{[]string{"inbox"}, "t", exitError, "gateway unreachable"},
		{[]string{"inbox", "--help"}, "t", exitOK, "Usage: wakegate inbox"},
		{[]string{"wait", "--help"}, "t", exitOK, "3  the deadline passed"},
	} {
		code, out, errs := cliRun(t, down, tt.token, tt.args...)
		if code != tt.code || !strings.Contains(errs, tt.stderr) || out != "" {
			t.Errorf("wakegate %s: exit %d, stdout %q, stderr %q; want exit %d and %q", strings.Join(tt.args, " "), code, out, errs, tt.code, tt.stderr)
		}
	}
	// Dispatch through the binary's own entry point.
	var out, errb bytes.Buffer
	if code := run([]string{"subscriptions", "--help"}, &out, &errb); code != 0 || !strings.Contains(errb.String(), "Usage: wakegate subscriptions") {
		t.Fatalf("run subscriptions --help: %d %q", code, errb.String())
	}
	if code := run([]string{"--help"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "wakegate wait --subject") {
		t.Fatalf("usage does not list the client commands: %q", out.String())
	}
}

func TestColour(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		tty  bool
		env  []string
		want bool
	}{
		{false, nil, false},
		{true, nil, true},
		{true, []string{"NO_COLOR", "1"}, false},
		{true, []string{"TERM", "dumb"}, false},
	} {
		if got := useColor(tt.tty, envOf(tt.env...)); got != tt.want {
			t.Errorf("useColor(tty=%v, %v) = %v", tt.tty, tt.env, got)
		}
	}
	render := func(color bool) string {
		var b bytes.Buffer
		c := &cli{stdout: &b, color: color}
		tb := &table{head: []string{"SEQ", "PRIORITY", "SUMMARY"}}
		tb.add(plain("1"), cell{"critical", priorityColor("critical")}, plain("crashed"))
		tb.add(plain("12"), cell{"info", priorityColor("info")}, plain("spawned"))
		tb.render(c)
		return b.String()
	}
	colored, bare := render(true), render(false)
	if !strings.Contains(colored, "\x1b[31m\x1b[1mcritical\x1b[0m") {
		t.Fatalf("no colour on a terminal: %q", colored)
	}
	if got := ansi.ReplaceAllString(colored, ""); got != bare {
		t.Fatalf("colour shifted the columns:\n%s\nwant:\n%s", got, bare)
	}
	if bare != "SEQ  PRIORITY  SUMMARY\n1    critical  crashed\n12   info      spawned\n" {
		t.Fatalf("table:\n%q", bare)
	}
}
