package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/integration/stack"
	"github.com/wakegate/wakegate/providers/agent"
)

const mcpSecret = "mcp-test-secret"

// allScopes are every scope a tool may need but admin.
const allScopes = "inbox subscribe supervise events:push events:read"

// mcpEnv is a gateway as serve assembles it (package stack),
// listening on loopback, with the workers routing what it commits.
type mcpEnv struct {
	t      *testing.T
	url    string
	routes gin.RoutesInfo
	st     *stack.Stack
}

func newMCPEnv(t *testing.T) *mcpEnv {
	t.Helper()
	rdb, prefix := redistest.New(t)
	st, err := stack.New(rdb, stack.Config{Prefix: prefix, Shards: 4},
		slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	components, _ := st.Workers()
	for _, run := range components {
		wg.Add(1)
		go func() { defer wg.Done(); _ = run(ctx) }()
	}
	gw := mcpGateway(t, st)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := gw.Run(ctx); err != nil {
			t.Errorf("gateway: %v", err)
		}
	}()
	waitUntil(t, "the gateway listens", func() bool { return gw.Addr() != "" })
	return &mcpEnv{t: t, url: "http://" + gw.Addr(), routes: gw.Handler().(*gin.Engine).Routes(), st: st}
}

func mcpGateway(t *testing.T, st *stack.Stack) *gateway.Server {
	t.Helper()
	v, err := agent.NewVerifier(agent.VerifierConfig{HS256Secret: []byte(mcpSecret)})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := st.Gateway(gateway.Config{Addr: "127.0.0.1:0", WebhookSecrets: [][]byte{[]byte("s")},
		TokenSecret: []byte(mcpSecret)}, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	return gw
}

// waitUntil polls cond until it holds, failing the test after 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func mcpToken(t *testing.T, workspace, party, scope string) string {
	t.Helper()
	c := agent.Claims{Workspace: workspace, Scope: scope}
	c.Subject = party
	c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(time.Hour))
	tok, err := agent.Mint([]byte(mcpSecret), c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// withBearer sends every request of an MCP client with a token.
type withBearer struct{ tok string }

func (b withBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

// connect is an MCP client of the SDK on /mcp over streamable HTTP.
func (e *mcpEnv) connect(tok string) (*mcp.ClientSession, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "wakegate-test", Version: "1"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.url + "/mcp",
		HTTPClient: &http.Client{Transport: withBearer{tok}}, MaxRetries: -1}, nil)
}

func (e *mcpEnv) client(tok string) *mcp.ClientSession {
	e.t.Helper()
	cs, err := e.connect(tok)
	if err != nil {
		e.t.Fatalf("connect to /mcp: %v", err)
	}
	e.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// toolResult is a tool's answer: its text, and its structured content
// decoded into out (when the call succeeded).
type toolResult struct {
	text    string
	isError bool
	err     error
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any, out any) toolResult {
	t.Helper()
	r := callTool(cs, name, args, out)
	if r.err != nil {
		t.Fatalf("%s: %v", name, r.err)
	}
	return r
}

// callTool is call for any goroutine: a failure is in err.
func callTool(cs *mcp.ClientSession, name string, args any, out any) toolResult {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return toolResult{err: err}
	}
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	r := toolResult{text: strings.Join(texts, "\n"), isError: res.IsError}
	if !res.IsError && out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			r.err = fmt.Errorf("structured content %s: %w", b, err)
		}
	}
	return r
}

// ok calls a tool that must succeed.
func ok(t *testing.T, cs *mcp.ClientSession, name string, args any, out any) string {
	t.Helper()
	r := call(t, cs, name, args, out)
	if r.isError {
		t.Fatalf("%s(%v): tool error %q", name, args, r.text)
	}
	return r.text
}

// refused calls a tool that must answer a tool error, and returns it.
func refused(t *testing.T, cs *mcp.ClientSession, name string, args any) string {
	t.Helper()
	r := call(t, cs, name, args, nil)
	if !r.isError {
		t.Fatalf("%s(%v) succeeded (%q); want a tool error", name, args, r.text)
	}
	return r.text
}

// rest makes a REST request and returns its status and body.
func (e *mcpEnv) rest(method, path, tok, contentType string, body []byte) (int, []byte) {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.url+path, bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// push commits one event as the token's session, through the REST API.
func (e *mcpEnv) push(tok, id, typ, summary string) {
	e.t.Helper()
	body, _ := json.Marshal(map[string]any{"specversion": "1.0", "id": id, "source": "harness", "type": typ, "summary": summary})
	if status, b := e.rest(http.MethodPost, "/v1/events", tok, "application/cloudevents+json", body); status != http.StatusAccepted {
		e.t.Fatalf("push %s: %d %s", typ, status, b)
	}
}

type entry struct {
	Seq     int64  `json:"seq"`
	Type    string `json:"type"`
	Subject string `json:"subject"`
	Kind    string `json:"kind"`
	Summary string `json:"summary"`
}

type page struct {
	Entries  []entry `json:"entries"`
	Next     int64   `json:"next"`
	TimedOut bool    `json:"timed_out"`
}

var mcpToolNames = []string{"events_read", "inbox_ack", "inbox_list", "inbox_wait", "message_send", "quiet",
	"subscribe", "subscription_list", "supervise", "supervision_brief", "supervision_get", "supervision_health",
	"unsubscribe", "unsupervise"}

// TestMCPToolsList: tools/list names every tool, each with a description
// and object schemas for its input and its structured output.
func TestMCPToolsList(t *testing.T) {
	e := newMCPEnv(t)
	cs := e.client(mcpToken(t, "default", "session:lister", "inbox"))
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" || strings.Contains(tool.Description, "\n") {
			t.Errorf("%s: description %q, want one line", tool.Name, tool.Description)
		}
		for what, schema := range map[string]any{"input": tool.InputSchema, "output": tool.OutputSchema} {
			m, _ := schema.(map[string]any)
			if m["type"] != "object" {
				t.Errorf("%s: %s schema %v, want an object schema", tool.Name, what, schema)
			}
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, mcpToolNames) {
		t.Fatalf("tools %v, want %v", names, mcpToolNames)
	}
	// An agent can act on the schemas: inbox_wait documents its wait and
	// its silent answer, quiet its actions.
	for _, tool := range res.Tools {
		b, _ := json.Marshal(tool)
		switch tool.Name {
		case "inbox_wait":
			for _, want := range []string{"wait_seconds", "timed_out", "at most 60"} {
				if !strings.Contains(string(b), want) {
					t.Errorf("inbox_wait does not document %q: %s", want, b)
				}
			}
		case "quiet":
			if !strings.Contains(string(b), `"enum":["on","off","status"]`) {
				t.Errorf("quiet does not list its actions: %s", b)
			}
		}
	}
}

// TestMCPWakeRoundTrip: a session subscribes through /mcp, an event is
// routed to it, inbox_wait returns it as a wake, the brief shows it until
// inbox_ack acks it, and a wait with nothing new times out, distinctly,
// within its deadline.
func TestMCPWakeRoundTrip(t *testing.T) {
	e := newMCPEnv(t)
	boss := e.client(mcpToken(t, "default", "session:boss", allScopes))
	worker := mcpToken(t, "default", "session:w1", "events:push")

	var start page
	ok(t, boss, "inbox_list", map[string]any{}, &start)
	if len(start.Entries) != 0 {
		t.Fatalf("a new inbox lists %v", start.Entries)
	}
	var sub struct {
		ID       string   `json:"id"`
		Owner    string   `json:"owner"`
		Subjects []string `json:"subjects"`
	}
	text := ok(t, boss, "subscribe", map[string]any{"subjects": []string{"session:w1"}}, &sub)
	if sub.ID == "" || sub.Owner != "session:boss" || !strings.Contains(text, sub.ID) {
		t.Fatalf("subscribe: %+v %q", sub, text)
	}

	type waited struct {
		page    page
		text    string
		err     error
		elapsed time.Duration
	}
	done := make(chan waited, 1)
	began := time.Now()
	go func() {
		var p page
		r := callTool(boss, "inbox_wait", map[string]any{"after": start.Next, "wait_seconds": 30}, &p)
		done <- waited{p, r.text, r.err, time.Since(began)}
	}()
	e.push(worker, "ask-1", "session.awaiting_input", "which branch?")
	w := <-done
	if w.err != nil {
		t.Fatalf("inbox_wait: %v", w.err)
	}
	if w.page.TimedOut || len(w.page.Entries) != 1 || w.elapsed > 25*time.Second {
		t.Fatalf("inbox_wait after %s: %+v %q; want the wake, not a time-out", w.elapsed, w.page, w.text)
	}
	got := w.page.Entries[0]
	if got.Type != "session.awaiting_input" || got.Subject != "session:w1" || got.Kind != "wake" {
		t.Fatalf("inbox_wait returned %+v", got)
	}
	line := "#" + jsonInt(got.Seq) + " wake attention session.awaiting_input session:w1 — which branch?"
	if !strings.Contains(w.text, line) {
		t.Fatalf("inbox_wait text %q lacks the line %q", w.text, line)
	}

	var brief struct {
		UnackedCount int     `json:"unacked_count"`
		Unacked      []entry `json:"unacked"`
		Subs         []struct {
			ID string `json:"id"`
		} `json:"subscriptions"`
	}
	text = ok(t, boss, "supervision_brief", map[string]any{}, &brief)
	if brief.UnackedCount != 1 || len(brief.Unacked) != 1 || brief.Unacked[0].Seq != got.Seq ||
		len(brief.Subs) != 1 || brief.Subs[0].ID != sub.ID || !strings.Contains(text, line) {
		t.Fatalf("brief before the ack: %+v\n%s", brief, text)
	}

	var acked struct {
		Acked int `json:"acked"`
	}
	ok(t, boss, "inbox_ack", map[string]any{"through_seq": got.Seq}, &acked)
	if acked.Acked != 1 {
		t.Fatalf("inbox_ack acked %d, want 1", acked.Acked)
	}
	ok(t, boss, "supervision_brief", map[string]any{}, &brief)
	if brief.UnackedCount != 0 || len(brief.Unacked) != 0 {
		t.Fatalf("brief after the ack: %+v", brief)
	}
	var after page
	ok(t, boss, "inbox_list", map[string]any{}, &after)
	if len(after.Entries) != 0 {
		t.Fatalf("inbox after the ack: %+v", after.Entries)
	}

	// Silence: the documented result, after the wait and not long after.
	began = time.Now()
	var silent page
	text = ok(t, boss, "inbox_wait", map[string]any{"after": after.Next, "wait_seconds": 1}, &silent)
	elapsed := time.Since(began)
	if !silent.TimedOut || len(silent.Entries) != 0 || text != "no new entries within 1s; next "+jsonInt(after.Next) {
		t.Fatalf("a silent inbox_wait answered %+v %q", silent, text)
	}
	if elapsed < 900*time.Millisecond || elapsed > 10*time.Second {
		t.Fatalf("a 1s inbox_wait answered after %s", elapsed)
	}
	// Past 60 s is the REST route's refusal, word for word.
	msg := refused(t, boss, "inbox_wait", map[string]any{"wait_seconds": 61})
	if msg != "wait must be a duration of at most 60s" {
		t.Fatalf("inbox_wait of 61s: %q", msg)
	}
}

func jsonInt(n int64) string { return strconv.FormatInt(n, 10) }

// TestMCPSuperviseAndMessage: a held controller lease refuses another
// party naming its holder; a message lands in its target's inbox; the
// other supervision tools answer what REST answers.
func TestMCPSuperviseAndMessage(t *testing.T) {
	e := newMCPEnv(t)
	boss := e.client(mcpToken(t, "default", "session:boss", allScopes))
	rival := e.client(mcpToken(t, "default", "session:rival", allScopes))
	w1 := e.client(mcpToken(t, "default", "session:w1", "inbox"))

	var edge struct {
		Session string `json:"session_id"`
		Role    string `json:"role"`
		Holder  string `json:"holder"`
		Epoch   int64  `json:"epoch"`
	}
	ok(t, boss, "supervise", map[string]any{"session_id": "w1", "role": "controller", "scope": "subtree"}, &edge)
	if edge.Holder != "session:boss" || edge.Role != "controller" || edge.Epoch < 1 {
		t.Fatalf("supervise: %+v", edge)
	}
	msg := refused(t, rival, "supervise", map[string]any{"session_id": "w1", "role": "controller"})
	if !strings.Contains(msg, "held by session:boss") {
		t.Fatalf("a held lease answered %q; want the holder named", msg)
	}
	var view struct {
		Edges []struct {
			Holder string `json:"holder"`
		} `json:"edges"`
		Effective struct {
			Party    string `json:"party"`
			Resolved string `json:"resolved"`
		} `json:"effective_controller"`
	}
	text := ok(t, rival, "supervision_get", map[string]any{"session_id": "w1"}, &view)
	if view.Effective.Party != "session:boss" || view.Effective.Resolved != "own" || len(view.Edges) != 1 ||
		!strings.Contains(text, "effective controller session:boss (own)") {
		t.Fatalf("supervision_get: %+v %q", view, text)
	}
	if msg := refused(t, boss, "supervise", map[string]any{"session_id": "a/b", "role": "controller"}); msg != "session id must match ^[A-Za-z0-9._-]{1,128}$" {
		t.Fatalf("a bad session id: %q", msg)
	}

	var before page
	ok(t, w1, "inbox_list", map[string]any{}, &before)
	var sent struct {
		ID  string `json:"id"`
		Seq string `json:"seq"`
	}
	ok(t, boss, "message_send", map[string]any{"session_id": "w1", "text": "rebase on main\nthen push", "intent": "control"}, &sent)
	if sent.ID == "" || sent.Seq == "" {
		t.Fatalf("message_send: %+v", sent)
	}
	var got page
	text = ok(t, w1, "inbox_wait", map[string]any{"after": before.Next, "wait_seconds": 30}, &got)
	if got.TimedOut || len(got.Entries) != 1 || got.Entries[0].Type != "message.sent" ||
		!strings.Contains(got.Entries[0].Summary, "rebase on main") || !strings.Contains(text, "session:boss (control): rebase on main") {
		t.Fatalf("w1's inbox after the message: %+v %q", got, text)
	}
	if msg := refused(t, boss, "message_send", map[string]any{"session_id": "w1", "text": "x", "intent": "shout"}); msg != `intent must be "control" or "info"` {
		t.Fatalf("a bad intent: %q", msg)
	}

	var released struct {
		Released bool `json:"released"`
	}
	ok(t, boss, "unsupervise", map[string]any{"session_id": "w1"}, &released)
	ok(t, rival, "supervise", map[string]any{"session_id": "w1", "role": "controller"}, &edge)
	if !released.Released || edge.Holder != "session:rival" {
		t.Fatalf("after the release the lease went to %+v", edge)
	}
}

// TestMCPMatchesREST: a refusal is the REST route's problem detail, word
// for word; the other tools answer the REST shapes.
func TestMCPMatchesREST(t *testing.T) {
	e := newMCPEnv(t)
	tok := mcpToken(t, "default", "session:boss", allScopes)
	cs := e.client(tok)
	for _, c := range []struct {
		tool         string
		args         any
		method, path string
		body         string
	}{
		{"inbox_ack", map[string]any{"through_seq": 5}, http.MethodPost, "/v1/inbox/ack", `{"through_seq": 5}`},
		{"inbox_ack", map[string]any{}, http.MethodPost, "/v1/inbox/ack", `{}`},
		{"inbox_list", map[string]any{"limit": 0}, http.MethodGet, "/v1/inbox?limit=0", ``},
		{"subscribe", map[string]any{"types": []string{"Not A Type"}}, http.MethodPost, "/v1/subscriptions", `{"types": ["Not A Type"]}`},
		{"subscribe", map[string]any{"subjects": []string{"session:a", "session:b"}, "until": "subject_terminal"},
			http.MethodPost, "/v1/subscriptions", `{"subjects": ["session:a", "session:b"], "until": "subject_terminal"}`},
		{"unsubscribe", map[string]any{"id": "nope"}, http.MethodDelete, "/v1/subscriptions/nope", ``},
		{"unsupervise", map[string]any{"session_id": "w9"}, http.MethodDelete, "/v1/sessions/w9/supervise", ``},
		{"events_read", map[string]any{"after": "garbage"}, http.MethodGet, "/v1/events?after=garbage", ``},
		{"quiet", map[string]any{"action": "on", "scope": "all"}, http.MethodPut, "/v1/quiet", `{"scope": "all"}`},
		{"quiet", map[string]any{"action": "on", "until": "tomorrow"}, http.MethodPut, "/v1/quiet", `{"until": "tomorrow"}`},
	} {
		status, body := e.rest(c.method, c.path, tok, "application/json", []byte(c.body))
		var p struct {
			Detail string `json:"detail"`
		}
		if err := json.Unmarshal(body, &p); err != nil || status < 400 || p.Detail == "" {
			t.Fatalf("REST %s %s %s: %d %s; want a problem", c.method, c.path, c.body, status, body)
		}
		if msg := refused(t, cs, c.tool, c.args); msg != p.Detail {
			t.Errorf("%s(%v): %q; REST answers %q", c.tool, c.args, msg, p.Detail)
		}
	}

	// The REST shapes: a subscription listed, unsubscribed; quiet set,
	// shown and lifted; the journal read.
	var sub struct {
		ID string `json:"id"`
	}
	ok(t, cs, "subscribe", map[string]any{"types": []string{"github.pull_request.*"}, "min_priority": "attention"}, &sub)
	var list struct {
		Subscriptions []struct {
			ID          string `json:"id"`
			MinPriority string `json:"min_priority"`
		} `json:"subscriptions"`
	}
	_, body := e.rest(http.MethodGet, "/v1/subscriptions", tok, "", nil)
	var restList struct {
		Subscriptions []json.RawMessage `json:"subscriptions"`
	}
	_ = json.Unmarshal(body, &restList)
	text := ok(t, cs, "subscription_list", map[string]any{}, &list)
	if len(list.Subscriptions) != 1 || list.Subscriptions[0].ID != sub.ID || list.Subscriptions[0].MinPriority != "attention" ||
		len(restList.Subscriptions) != 1 || !strings.Contains(text, sub.ID+" types=github.pull_request.* min_priority=attention delivery=wake") {
		t.Fatalf("subscription_list: %+v %q (REST %s)", list, text, body)
	}
	ok(t, cs, "unsubscribe", map[string]any{"id": sub.ID}, nil)
	ok(t, cs, "subscription_list", map[string]any{}, &list)
	if len(list.Subscriptions) != 0 {
		t.Fatalf("after unsubscribe: %+v", list)
	}

	var q struct {
		Action string `json:"action"`
		Quiet  []struct {
			Scope  string `json:"scope"`
			Reason string `json:"reason"`
		} `json:"quiet"`
		Scope string `json:"scope"`
	}
	ok(t, cs, "quiet", map[string]any{"action": "on", "reason": "deploy"}, &q)
	if q.Action != "on" || len(q.Quiet) != 1 || q.Quiet[0].Scope != "session:boss" {
		t.Fatalf("quiet on: %+v", q)
	}
	text = ok(t, cs, "quiet", map[string]any{"action": "status"}, &q)
	if len(q.Quiet) != 1 || q.Quiet[0].Reason != "deploy" || !strings.Contains(text, "quiet for session:boss by session:boss — deploy") {
		t.Fatalf("quiet status: %+v %q", q, text)
	}
	ok(t, cs, "quiet", map[string]any{"action": "off"}, &q)
	if q.Action != "off" || q.Scope != "session:boss" {
		t.Fatalf("quiet off: %+v", q)
	}
	if text := ok(t, cs, "quiet", map[string]any{"action": "status"}, &q); text != "no quiet in force" {
		t.Fatalf("quiet status after off: %q", text)
	}
	if msg := refused(t, cs, "quiet", map[string]any{"action": "loud"}); !strings.Contains(msg, "action") {
		t.Fatalf("a bad action: %q", msg)
	}

	e.push(mcpToken(t, "default", "session:boss", "events:push"), "own-1", "session.turn_ended", "done for now")
	var evs struct {
		Events []struct {
			Type    string `json:"type"`
			Subject string `json:"subject"`
		} `json:"events"`
		Next string `json:"next"`
	}
	text = ok(t, cs, "events_read", map[string]any{"types": []string{"session.*"}, "wait_seconds": 30}, &evs)
	if len(evs.Events) != 1 || evs.Events[0].Type != "session.turn_ended" || evs.Next == "" ||
		!strings.Contains(text, "session.turn_ended session:boss — done for now") {
		t.Fatalf("events_read: %+v %q", evs, text)
	}
}

// TestMCPScopes: each tool needs its REST route's scope; a token without
// it gets a tool error naming the scope, and the session goes on.
func TestMCPScopes(t *testing.T) {
	e := newMCPEnv(t)
	cs := e.client(mcpToken(t, "default", "session:narrow", "subscribe"))
	for tool, args := range map[string]map[string]any{
		"inbox_list":        {},
		"inbox_wait":        {"wait_seconds": 1},
		"inbox_ack":         {"through_seq": 1},
		"supervision_brief": {},
		"supervise":         {"session_id": "w1", "role": "controller"},
		"unsupervise":       {"session_id": "w1"},
		"supervision_get":   {"session_id": "w1"},
		"message_send":      {"session_id": "w1", "text": "hi", "intent": "info"},
		"events_read":       {},
		"quiet":             {"action": "status"},
	} {
		scope := map[string]string{"inbox_list": "inbox", "inbox_wait": "inbox", "inbox_ack": "inbox",
			"supervision_brief": "inbox", "quiet": "inbox", "supervise": "supervise", "unsupervise": "supervise",
			"supervision_get": "supervise", "message_send": "events:push", "events_read": "events:read"}[tool]
		if msg := refused(t, cs, tool, args); msg != "token lacks scope "+scope {
			t.Errorf("%s without %s: %q", tool, scope, msg)
		}
	}
	// The scope it has still works on the same connection.
	ok(t, cs, "subscription_list", map[string]any{}, nil)
	noSubscribe := e.client(mcpToken(t, "default", "session:narrow", "inbox"))
	if msg := refused(t, noSubscribe, "subscribe", map[string]any{"types": []string{"session.*"}}); msg != "token lacks scope subscribe" {
		t.Errorf("subscribe without subscribe: %q", msg)
	}

	// supervision_health needs admin, once the gateway serves it.
	served := slices.ContainsFunc(e.routes, func(r gin.RouteInfo) bool {
		return r.Method == http.MethodGet && r.Path == "/v1/health/supervision"
	})
	msg := refused(t, cs, "supervision_health", map[string]any{})
	if !served {
		if msg != "health is not available on this gateway" {
			t.Fatalf("supervision_health without the route: %q", msg)
		}
		return
	}
	if msg != "token lacks scope admin" {
		t.Fatalf("supervision_health without admin: %q", msg)
	}
	admin := e.client(mcpToken(t, "default", "human:ops", "admin"))
	var health map[string]any
	text := ok(t, admin, "supervision_health", map[string]any{}, &health)
	if len(health) == 0 || health["invariants"] == nil {
		t.Fatalf("supervision_health structured content %v, want the report", health)
	}
	// The text is a short summary a person reads, not the report's JSON.
	if strings.HasPrefix(strings.TrimSpace(text), "{") || !strings.HasPrefix(text, "workspace default: ") || len(strings.Split(text, "\n")) > 10 {
		t.Fatalf("supervision_health text %q, want a short summary", text)
	}
}

// TestMCPAuth: /mcp takes the REST API's bearer tokens: none or a bad one
// is a 401 problem before any MCP; the transport keeps no session a
// second request could reuse; a proxied Host is served.
func TestMCPAuth(t *testing.T) {
	e := newMCPEnv(t)
	initialize := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`)
	expired := agent.Claims{Workspace: "default", Scope: "inbox"}
	expired.Subject = "session:late"
	expired.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-time.Minute))
	late, _ := agent.Mint([]byte(mcpSecret), expired)
	other := agent.Claims{Workspace: "default", Scope: "inbox"}
	other.Subject = "session:forged"
	other.ExpiresAt = jwt.NewNumericDate(time.Now().Add(time.Hour))
	forged, _ := agent.Mint([]byte("another secret"), other)
	for name, tok := range map[string]string{"no token": "", "expired": late, "wrong key": forged, "garbage": "not.a.jwt"} {
		for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
			req, _ := http.NewRequest(method, e.url+"/mcp", bytes.NewReader(initialize))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != "application/problem+json" ||
				!strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s, %s /mcp: %d %s %s; want a 401 problem", name, method, resp.StatusCode, resp.Header, b)
			}
		}
		if tok == "" {
			continue
		}
		if _, err := e.connect(tok); err == nil {
			t.Errorf("%s: the SDK client connected", name)
		}
	}

	// A good token, through a reverse proxy's Host: served, and no
	// Mcp-Session-Id is issued (every request stands on its own token).
	good := mcpToken(t, "default", "session:ok", "inbox")
	req, _ := http.NewRequest(http.MethodPost, e.url+"/mcp", bytes.NewReader(initialize))
	req.Host = "wakegate.example.com"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+good)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"serverInfo":{"name":"wakegate"`) {
		t.Fatalf("initialize: %d %s", resp.StatusCode, b)
	}
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		t.Fatalf("initialize issued Mcp-Session-Id %q: a stateless endpoint keeps no session", id)
	}
	// A tool call on its own, with no initialize before it, runs as its
	// token's party.
	callList := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"inbox_list","arguments":{}}}`)
	req, _ = http.NewRequest(http.MethodPost, e.url+"/mcp", bytes.NewReader(callList))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+good)
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"entries":[]`) || !strings.Contains(string(b), "no unacked entries") {
		t.Fatalf("a lone tools/call: %d %s", resp.StatusCode, b)
	}
}

// TestMCPWorkspaces: the workspace and party come from the token: a token
// of workspace B never sees workspace A's subscriptions, inbox, leases or
// events, even with the same party name.
func TestMCPWorkspaces(t *testing.T) {
	e := newMCPEnv(t)
	a := e.client(mcpToken(t, "ws-a", "session:boss", allScopes+" events:read:any"))
	b := e.client(mcpToken(t, "ws-b", "session:boss", allScopes+" events:read:any"))
	var sub struct {
		ID string `json:"id"`
	}
	ok(t, a, "subscribe", map[string]any{"subjects": []string{"session:w1"}}, &sub)
	ok(t, a, "supervise", map[string]any{"session_id": "w1", "role": "controller"}, nil)
	e.push(mcpToken(t, "ws-a", "session:w1", "events:push"), "a-1", "session.awaiting_input", "secret of A")
	var got page
	ok(t, a, "inbox_wait", map[string]any{"wait_seconds": 30}, &got)
	if len(got.Entries) != 1 || got.Entries[0].Summary != "secret of A" {
		t.Fatalf("A's inbox: %+v", got)
	}

	var list struct {
		Subscriptions []any `json:"subscriptions"`
	}
	ok(t, b, "subscription_list", map[string]any{}, &list)
	var inboxB page
	ok(t, b, "inbox_list", map[string]any{}, &inboxB)
	var view struct {
		Edges     []any `json:"edges"`
		Effective struct {
			Party string `json:"party"`
		} `json:"effective_controller"`
	}
	ok(t, b, "supervision_get", map[string]any{"session_id": "w1"}, &view)
	var evs struct {
		Events []any `json:"events"`
	}
	ok(t, b, "events_read", map[string]any{}, &evs)
	var brief struct {
		Workspace string `json:"workspace"`
		Leases    []any  `json:"leases"`
		Unacked   []any  `json:"unacked"`
	}
	ok(t, b, "supervision_brief", map[string]any{}, &brief)
	if len(list.Subscriptions) != 0 || len(inboxB.Entries) != 0 || len(view.Edges) != 0 || view.Effective.Party != "" ||
		len(evs.Events) != 0 || brief.Workspace != "ws-b" || len(brief.Leases) != 0 || len(brief.Unacked) != 0 {
		t.Fatalf("workspace B sees A's data: subscriptions %v, inbox %v, edges %v (controller %q), events %v, brief %+v",
			list.Subscriptions, inboxB.Entries, view.Edges, view.Effective.Party, evs.Events, brief)
	}
	if msg := refused(t, b, "unsubscribe", map[string]any{"id": sub.ID}); msg != "no such subscription" {
		t.Fatalf("B unsubscribing A's subscription: %q", msg)
	}
	if msg := refused(t, b, "inbox_ack", map[string]any{"through_seq": got.Entries[0].Seq}); !strings.Contains(msg, "beyond the inbox's last") {
		t.Fatalf("B acking A's seq: %q", msg)
	}
	// A's still there.
	ok(t, a, "inbox_list", map[string]any{}, &got)
	ok(t, a, "subscription_list", map[string]any{}, &list)
	if len(got.Entries) != 1 || len(list.Subscriptions) != 1 {
		t.Fatalf("A after B's attempts: inbox %+v, subscriptions %v", got.Entries, list.Subscriptions)
	}
}

// TestMCPStorageUnavailable: with Redis gone a tool answers the REST
// route's "storage unavailable; retry", as a tool error.
func TestMCPStorageUnavailable(t *testing.T) {
	base, prefix := redistest.New(t)
	rdb := redis.NewClient(base.Options())
	st, err := stack.New(rdb, stack.Config{Prefix: prefix, Shards: 4},
		slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mcpGateway(t, st).Handler())
	t.Cleanup(srv.Close)
	e := &mcpEnv{t: t, url: srv.URL}
	cs := e.client(mcpToken(t, "default", "session:boss", allScopes))
	ok(t, cs, "inbox_list", map[string]any{}, nil)
	if err := rdb.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
		t.Fatal(err)
	}
	if msg := refused(t, cs, "inbox_list", map[string]any{}); msg != "storage unavailable; retry" {
		t.Fatalf("inbox_list with Redis gone: %q", msg)
	}
}

// bodyRead closes read once the body it wraps has been read to its end.
type bodyRead struct {
	io.ReadCloser
	once *sync.Once
	read chan struct{}
}

func (b bodyRead) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(func() { close(b.read) })
	}
	return n, err
}

// TestMCPHangUpEndsTheCall: a client that hangs up on a 60 s inbox_wait
// ends its call, and the REST long-poll under it, at once, not at its
// deadline (the SDK runs a call on a context detached from its request).
func TestMCPHangUpEndsTheCall(t *testing.T) {
	rdb, prefix := redistest.New(t)
	st, err := stack.New(rdb, stack.Config{Prefix: prefix, Shards: 4},
		slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	gw := mcpGateway(t, st).Handler()
	read := make(chan struct{})
	ended := make(chan time.Time, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = bodyRead{r.Body, &sync.Once{}, read}
		gw.ServeHTTP(w, r)
		ended <- time.Now()
	}))
	t.Cleanup(srv.Close)

	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"inbox_wait","arguments":{"wait_seconds":60}}}`)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+mcpToken(t, "default", "session:gone", "inbox"))
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-read:
	case <-time.After(10 * time.Second):
		t.Fatal("the gateway did not read the call within 10s")
	}
	hungUp := time.Now()
	hangUp()
	select {
	case at := <-ended:
		if d := at.Sub(hungUp); d > 5*time.Second {
			t.Fatalf("the call ended %s after its client hung up", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call outlived its client's hang-up by 20s")
	}
}
