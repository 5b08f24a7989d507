package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/integration/stack"
	"github.com/wakegate/wakegate/providers/agent"
	"github.com/wakegate/wakegate/providers/github/app"
	"github.com/wakegate/wakegate/providers/github/app/apptest"
)

// advEnv is the gateway as serve assembles it, every optional part on,
// listening on loopback, its workers routing what it commits.
func advEnv(t *testing.T) (url string, routes gin.RoutesInfo) {
	t.Helper()
	rdb, prefix := redistest.New(t)
	_, key := apptest.Key()
	st, err := stack.New(rdb, stack.Config{Prefix: prefix, Shards: 4, AllowPrivateEndpoints: true,
		GitHubApp: app.Config{AppID: apptest.AppID, PrivateKey: key, APIURL: "http://127.0.0.1:1/"}},
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
	v, err := agent.NewVerifier(agent.VerifierConfig{HS256Secret: []byte(mcpSecret)})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := st.Gateway(gateway.Config{Addr: "127.0.0.1:0", WebhookSecrets: [][]byte{[]byte("adversarial-webhook-secret")},
		TokenSecret: []byte(mcpSecret), OperatorPassword: []byte(opPassword)}, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = gw.Run(ctx) }()
	waitUntil(t, "the gateway listens", func() bool { return gw.Addr() != "" })
	return "http://" + gw.Addr(), gw.Handler().(*gin.Engine).Routes()
}

// knownOpen are refusals this branch expects but does not make yet, each
// with where it is made. Delete an entry once that fix is merged: the
// test then holds it.
var knownOpen = map[string]string{}

// probe is one request an attacker makes on a route, aimed at the
// victim's ids, and the answers each caller may get.
type probe struct {
	path, body string
	// anon, other, sibling: the statuses allowed for no token, a token of
	// workspace B with every scope but operator, and a sibling session of
	// the victim in its own workspace. nil: the route is public, checked
	// for leaks only.
	anon, other, sibling []int
}

const (
	advMarker = "zq7adv" // in the victim's ids (an answer may echo an id it was asked about)
	advData   = "dq9adv" // in the victim's data: texts, summaries, event data, URLs, subjects
)

// TestAdversarialEveryRoute walks the router's own route list: every
// route must have an entry below (a route added later fails the test
// until someone decides who may call it), and each is called with no
// token, with a token of another workspace, and with a sibling session's
// token, aimed at the victim's session, party, subscription and inbox.
// Each answer must be one of the entry's, never a 5xx, and never carry
// the victim's data; the victim's state is intact afterwards.
func TestAdversarialEveryRoute(t *testing.T) {
	url, routes := advEnv(t)
	const ws = "acme"
	parent := mcpToken(t, ws, "session:par-"+advMarker, "events:push inbox subscribe supervise spawn events:read")
	victim := mcpToken(t, ws, "session:vic-"+advMarker, "events:push inbox subscribe supervise events:read")
	sibling := mcpToken(t, ws, "session:sib", "events:push inbox subscribe supervise spawn events:read")
	other := mcpToken(t, "other", "human:mallory", "events:push events:push:any events:read events:read:any inbox subscribe supervise spawn admin")
	admin := mcpToken(t, ws, "human:alice", "admin inbox subscribe supervise")

	call := func(method, path, tok, body string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body) // a stream ends at the deadline: what came is what counts
		return resp.StatusCode, string(b)
	}
	must := func(want int, method, path, tok, body string) string {
		t.Helper()
		status, b := call(method, path, tok, body)
		if status != want {
			t.Fatalf("victim's setup: %s %s: %d %s, want %d", method, path, status, b, want)
		}
		return b
	}

	// The victim: a child session under its parent's controller lease,
	// with a message, an entry, a subscription and a push endpoint.
	must(202, http.MethodPost, "/v1/events", victim, `{"specversion":"1.0","id":"1","source":"t","type":"session.spawned","data":{"parent":"session:par-`+advMarker+`"}}`)
	must(200, http.MethodPost, "/v1/sessions/vic-"+advMarker+"/supervise", parent, `{"role": "controller"}`)
	must(202, http.MethodPost, "/v1/sessions/vic-"+advMarker+"/messages", parent, `{"text": "text-`+advData+`", "intent": "info"}`)
	must(202, http.MethodPost, "/v1/events", victim, `{"specversion":"1.0","id":"2","source":"t","type":"session.permission_requested","summary":"perm-`+advData+`","data":{"token":"tok-`+advData+`"}}`)
	var sub struct{ ID string }
	if err := json.Unmarshal([]byte(must(201, http.MethodPost, "/v1/subscriptions", victim, `{"subjects": ["github:org/repo-`+advData+`#*"]}`)), &sub); err != nil || sub.ID == "" {
		t.Fatalf("subscription: %v %q", err, sub.ID)
	}
	must(201, http.MethodPut, "/v1/endpoints/session:vic-"+advMarker, victim, `{"url": "http://127.0.0.1:1/hook-`+advData+`"}`)
	waitUntil(t, "the message is in the victim's inbox", func() bool {
		_, b := call(http.MethodGet, "/v1/inbox", victim, "")
		return strings.Contains(b, "text-"+advData)
	})
	waitUntil(t, "the permission request is in the parent's inbox", func() bool {
		_, b := call(http.MethodGet, "/v1/inbox", parent, "")
		return strings.Contains(b, "perm-"+advData)
	})

	vic := "vic-" + advMarker
	party := "session:" + vic
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	u := func(s ...int) []int { return s }
	unauth := u(401)
	// Who may call what (docs/security.md). Statuses are what a refusal
	// or a harmless answer looks like for that caller; a 2xx is allowed
	// only where the route acts on the caller's own things.
	table := map[string]probe{
		"GET /healthz": {path: "/healthz"},
		"GET /readyz":  {path: "/readyz"},
		"GET /metrics": {path: "/metrics"},
		"GET /monitor": {path: "/monitor"},
		"POST /webhooks/github": {path: "/webhooks/github", body: `{"repository":{"full_name":"org/repo-` + advData + `"}}`,
			anon: u(400, 401), other: u(400, 401), sibling: u(400, 401)},
		"POST /v1/events": {path: "/v1/events", body: `{"specversion":"1.0","id":"x1","source":"t","type":"session.exited","subject":"` + party + `"}`,
			anon: unauth, other: u(202, 403, 422), sibling: u(403)},
		"GET /v1/events": {path: "/v1/events?subjects=" + party + "&session=" + vic,
			anon: unauth, other: u(200), sibling: u(200, 403)},
		"POST /v1/sessions/:id/token": {path: "/v1/sessions/" + vic + "/token", body: `{}`,
			anon: unauth, other: u(200, 403, 404), sibling: u(403)},
		"GET /v1/inbox":        {path: "/v1/inbox?party=" + party, anon: unauth, other: u(403), sibling: u(403)},
		"GET /v1/inbox/stream": {path: "/v1/inbox/stream?party=" + party, anon: unauth, other: u(403), sibling: u(403)},
		"POST /v1/inbox/ack": {path: "/v1/inbox/ack?party=" + party, body: `{"through_seq": 100}`,
			anon: unauth, other: u(403), sibling: u(403)},
		"GET /v1/brief":                {path: "/v1/brief?party=" + party + "&session=" + vic, anon: unauth, other: u(200, 403), sibling: u(200, 403)},
		"POST /v1/subscriptions":       {path: "/v1/subscriptions", body: `{"subjects": ["` + party + `"]}`, anon: unauth, other: u(201, 403, 422), sibling: u(201, 403, 422)},
		"GET /v1/subscriptions":        {path: "/v1/subscriptions?party=" + party, anon: unauth, other: u(200, 403), sibling: u(200, 403)},
		"DELETE /v1/subscriptions/:id": {path: "/v1/subscriptions/" + sub.ID, anon: unauth, other: u(404), sibling: u(404)},
		"POST /v1/sessions/:id/supervise": {path: "/v1/sessions/" + vic + "/supervise", body: `{"role": "controller", "takeover": true}`,
			anon: unauth, other: u(200, 404), sibling: u(403, 409)},
		"DELETE /v1/sessions/:id/supervise": {path: "/v1/sessions/" + vic + "/supervise?role=controller",
			anon: unauth, other: u(200, 204, 404), sibling: u(200, 204, 403, 404, 409)},
		"GET /v1/sessions/:id/supervision": {path: "/v1/sessions/" + vic + "/supervision",
			anon: unauth, other: u(200, 404), sibling: u(200)},
		"POST /v1/sessions/:id/messages": {path: "/v1/sessions/" + vic + "/messages", body: `{"text": "hijack", "intent": "control"}`,
			anon: unauth, other: u(202, 403, 404, 409), sibling: u(202)}, // lease mode off by default: a message is not a lease
		"GET /v1/workspace/supervision": {path: "/v1/workspace/supervision", anon: unauth, other: u(200), sibling: u(403)},
		"PUT /v1/workspace/supervision": {path: "/v1/workspace/supervision", body: `{"default_controller": "session:sib"}`,
			anon: unauth, other: u(200, 422), sibling: u(403)},
		"GET /v1/health/supervision": {path: "/v1/health/supervision", anon: unauth, other: u(200, 404), sibling: u(403, 404)},
		"PUT /v1/presence":           {path: "/v1/presence", body: `{"attended": true}`, anon: unauth, other: u(200, 204), sibling: u(200, 204)},
		"GET /v1/presence":           {path: "/v1/presence?party=" + party, anon: unauth, other: u(200, 403), sibling: u(200, 403)},
		"PUT /v1/quiet": {path: "/v1/quiet", body: `{"scope": "` + party + `", "reason": "x", "until": "` + until + `"}`,
			anon: unauth, other: u(200, 403, 422), sibling: u(403)},
		"DELETE /v1/quiet": {path: "/v1/quiet?scope=all", anon: unauth, other: u(200, 204, 404), sibling: u(403)},
		"GET /v1/quiet":    {path: "/v1/quiet?party=" + party, anon: unauth, other: u(200, 403), sibling: u(200, 403)},
		"PUT /v1/endpoints/:party": {path: "/v1/endpoints/" + party, body: `{"url": "http://127.0.0.1:1/evil"}`,
			anon: unauth, other: u(201, 200), sibling: u(403)},
		"GET /v1/endpoints/:party":               {path: "/v1/endpoints/" + party, anon: unauth, other: u(404), sibling: u(403)},
		"DELETE /v1/endpoints/:party":            {path: "/v1/endpoints/" + party, anon: unauth, other: u(404, 204), sibling: u(403)},
		"GET /admin/dead-letters":                {path: "/admin/dead-letters", anon: unauth, other: u(403), sibling: u(403)},
		"POST /admin/dead-letters/:id/redeliver": {path: "/admin/dead-letters/x/redeliver", anon: unauth, other: u(403), sibling: u(403)},
		"POST /admin/deliveries/:guid/redeliver": {path: "/admin/deliveries/x/redeliver", anon: unauth, other: u(403), sibling: u(403)},
		"POST /admin/events/:id/redeliver":       {path: "/admin/events/2/redeliver?source=t", anon: unauth, other: u(403), sibling: u(403)},
		"POST /admin/github/redeliver-failed":    {path: "/admin/github/redeliver-failed", anon: unauth, other: u(403), sibling: u(403)},
		// The dashboard: a person's own workspace, the operator's Basic
		// password; an agent session's token is refused.
		"GET /ui":              {path: "/ui"},
		"GET /ui/login":        {path: "/ui/login"},
		"GET /ui/static/*file": {path: "/ui/static/x"},
		"GET /ui/":             {path: "/ui/?ws=" + ws, anon: u(303), other: u(200, 403), sibling: u(403)},
		"GET /ui/live":         {path: "/ui/live?ws=" + ws, anon: unauth, other: u(200, 403), sibling: u(403)},
		"GET /ui/operator":     {path: "/ui/operator", anon: unauth, other: unauth, sibling: unauth},
		"POST /ui/login":       {path: "/ui/login", body: "token=" + sibling, anon: u(400, 403, 415), other: u(400, 403, 415), sibling: u(400, 403, 415)},
		"POST /ui/logout":      {path: "/ui/logout", anon: u(401, 403), other: u(303, 403), sibling: u(403)},
		"POST /ui/ack":         {path: "/ui/ack", body: "party=" + party + "&through_seq=100", anon: u(401, 403), other: u(400, 403), sibling: u(403)}, // B: its own inbox
		"POST /ui/quiet":       {path: "/ui/quiet", body: "scope=" + party + "&reason=x", anon: u(401, 403), other: u(400, 403), sibling: u(403)},
		// Every method of these two: the MCP transport and the monitor.
		"* /mcp": {path: "/mcp", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			anon: unauth, other: u(200, 202, 400, 405), sibling: u(200, 202, 400, 405)},
		"* /monitor/*rest": {path: "/monitor/api/queues", anon: unauth, other: u(403), sibling: u(403)},
	}
	// Who the victim's data must never reach: the parent and the victim
	// themselves excepted, every caller here.
	callers := []struct {
		name, tok string
		want      func(probe) []int
	}{
		{"no token", "", func(p probe) []int { return p.anon }},
		{"workspace B", other, func(p probe) []int { return p.other }},
		{"sibling session", sibling, func(p probe) []int { return p.sibling }},
	}
	seen := map[string]bool{}
	for _, rt := range routes {
		key := rt.Method + " " + rt.Path
		p, ok := table[key]
		if !ok {
			p, ok = table["* "+rt.Path]
			key = "* " + rt.Path
		}
		if !ok {
			t.Errorf("%s %s has no entry in the adversarial table: decide who may call it", rt.Method, rt.Path)
			continue
		}
		seen[key] = true
		for _, c := range callers {
			status, body := call(rt.Method, p.path, c.tok, p.body)
			if status >= 500 && !(rt.Path == "/readyz" && status == 503) {
				t.Errorf("%s: %s %s: %d %.300s", c.name, rt.Method, p.path, status, body)
			}
			if strings.Contains(body, advData) {
				t.Errorf("%s: %s %s answered %d with the victim's data: %.300s", c.name, rt.Method, p.path, status, body)
			}
			if want := c.want(p); want != nil && !slices.Contains(want, status) && rt.Method != http.MethodHead {
				if why := knownOpen[key+" / "+c.name]; why != "" {
					t.Logf("KNOWN OPEN (%s): %s: %s %s: %d", why, c.name, rt.Method, p.path, status)
					continue
				}
				t.Errorf("%s: %s %s: %d %.200s; want one of %v", c.name, rt.Method, p.path, status, body, want)
			}
		}
	}
	for key := range table {
		if !seen[key] {
			t.Errorf("the adversarial table has %q, which the router does not serve", key)
		}
	}

	// /mcp: every tool tools/list names, called by the sibling and by
	// workspace B aimed at the victim. A tool with no entry fails the test.
	type toolProbe struct {
		args    map[string]any
		refused bool // the sibling must get a tool error (workspace B: a refusal or its own namespace)
	}
	tools := map[string]toolProbe{
		"inbox_list":         {args: map[string]any{}},
		"inbox_wait":         {args: map[string]any{"wait_seconds": 1}},
		"inbox_ack":          {args: map[string]any{"through_seq": 100}},
		"subscribe":          {args: map[string]any{"subjects": []string{party}}},
		"unsubscribe":        {args: map[string]any{"id": sub.ID}, refused: true},
		"subscription_list":  {args: map[string]any{}},
		"supervise":          {args: map[string]any{"session_id": vic, "role": "controller", "takeover": true}, refused: true},
		"unsupervise":        {args: map[string]any{"session_id": vic, "role": "controller"}, refused: true},
		"supervision_get":    {args: map[string]any{"session_id": vic}},
		"message_send":       {args: map[string]any{"session_id": vic, "text": "hi", "intent": "info"}},
		"events_read":        {args: map[string]any{"subjects": []string{party}}},
		"supervision_brief":  {args: map[string]any{}},
		"supervision_health": {args: map[string]any{}, refused: true},
		"quiet":              {args: map[string]any{"action": "on", "scope": party, "reason": "x", "until": until}, refused: true},
	}
	for _, c := range []struct{ name, tok string }{{"sibling session", sibling}, {"workspace B", other}} {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "adversary", Version: "1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: withBearer{c.tok}}, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		list, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range list.Tools {
			tp, ok := tools[tool.Name]
			if !ok {
				t.Errorf("MCP tool %s has no entry in the adversarial table: decide who may call it", tool.Name)
				continue
			}
			r := callTool(cs, tool.Name, tp.args, nil)
			if r.err != nil {
				t.Errorf("%s: %s: %v", c.name, tool.Name, r.err)
				continue
			}
			if strings.Contains(r.text, advData) {
				t.Errorf("%s: %s answered with the victim's data: %.300s", c.name, tool.Name, r.text)
			}
			if tp.refused && c.name == "sibling session" && !r.isError {
				t.Errorf("%s: %s(%v) succeeded: %.300s; want a tool error", c.name, tool.Name, tp.args, r.text)
			}
		}
		_ = cs.Close()
	}

	// The victim's state is as it was.
	if b := must(200, http.MethodGet, "/v1/inbox", victim, ""); !strings.Contains(b, "text-"+advData) {
		t.Errorf("the victim's message is gone: %s", b)
	}
	if b := must(200, http.MethodGet, "/v1/sessions/"+vic+"/supervision", parent, ""); !strings.Contains(b, "session:par-"+advMarker) {
		t.Errorf("the parent's lease moved: %s", b)
	}
	if b := must(200, http.MethodGet, "/v1/subscriptions", victim, ""); !strings.Contains(b, sub.ID) {
		t.Errorf("the victim's subscription is gone: %s", b)
	}
	if b := must(200, http.MethodGet, "/v1/endpoints/"+party, victim, ""); !strings.Contains(b, "hook-"+advData) {
		t.Errorf("the victim's endpoint changed: %s", b)
	}
	if b := must(200, http.MethodGet, "/v1/workspace/supervision", admin, ""); strings.Contains(b, "session:sib") {
		t.Errorf("a sibling changed the workspace's settings: %s", b)
	}
}
