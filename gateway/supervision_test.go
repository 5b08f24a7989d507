package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/agent"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/workers/route"
)

const tws = "acme"

// env is a gateway with every store of docs/design.md §5–§7 on real Redis, and a
// router to route what it commits.
type env struct {
	t     *testing.T
	ctx   context.Context
	url   string
	rdb   *redis.Client
	j     *journal.Journal
	reg   *sessions.Registry
	store *ingest.Store
	subs  *subscriptions.Store
	sup   *supervision.Store
	box   *inbox.Inbox
	r     *route.Router

	prefix string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvConfig(t, Config{})
}

// newEnvConfig is newEnv with a gateway configuration (its webhook
// secrets are the test's).
func newEnvConfig(t *testing.T, cfg Config) *env {
	t.Helper()
	rdb, prefix := redistest.New(t)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 4})
	reg := sessions.New(rdb, j, time.Minute)
	e := &env{t: t, ctx: context.Background(), rdb: rdb, j: j, reg: reg, store: ingest.New(rdb, j), prefix: prefix,
		subs: subscriptions.New(rdb, prefix), box: inbox.New(rdb, inbox.Config{Prefix: prefix})}
	e.sup = supervision.New(rdb, prefix, func(ctx context.Context, ws, party string) (bool, error) {
		s, err := reg.Get(ctx, ws, party, time.Now())
		return err == nil && s.Liveness == sessions.Dead, err
	})
	e.r = route.NewRouter(rdb, j, reg, e.subs, e.sup, e.box, prometheus.NewRegistry())
	v, err := agent.NewVerifier(agent.VerifierConfig{HS256Secret: []byte(testSecret)})
	if err != nil {
		t.Fatal(err)
	}
	cfg.WebhookSecrets = [][]byte{[]byte(testSecret)}
	s, err := New(cfg, Deps{
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Redis: rdb, Journal: j, Ingest: e.store,
		Sessions: reg, Linker: tracker.New(rdb, j, tracker.Config{}), Verifier: v,
		Subs: e.subs, Sup: e.sup, Inbox: e.box,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// token mints a token of the test workspace.
func (e *env) token(sub, scope string) string {
	e.t.Helper()
	c := agent.Claims{Workspace: tws, Scope: scope}
	c.Subject = sub
	c.ExpiresAt = jwtTime(time.Now().Add(time.Hour))
	tok, err := agent.Mint([]byte(testSecret), c)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// answer is a decoded response.
type answer struct {
	status int
	ctype  string
	body   map[string]any
	raw    []byte
}

// str reads a string field of the body by a dotted path.
func (a answer) str(path string) string {
	var v any = a.body
	for _, k := range strings.Split(path, ".") {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// do sends a request as sub with the given scopes; body "" sends none.
func (e *env) do(method, path, sub, scope, body string) answer {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, e.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+e.token(sub, scope))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), raw: raw}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

// want fails unless the answer has the status; errors must be problem+json.
func (a answer) want(t *testing.T, status int) answer {
	t.Helper()
	if a.status != status {
		t.Fatalf("status %d, want %d: %s", a.status, status, a.raw)
	}
	if status >= 400 && (a.ctype != "application/problem+json" || a.str("status") != fmt.Sprint(status)) {
		t.Fatalf("error %d is not problem+json: %s %s", status, a.ctype, a.raw)
	}
	return a
}

// parent records parent as child's parent, as a spawn does.
func (e *env) parent(child, parent string) {
	e.t.Helper()
	if err := e.reg.SetParent(e.ctx, tws, child, parent, time.Now()); err != nil {
		e.t.Fatal(err)
	}
}

// push commits an agent event about session as pusher.
func (e *env) push(pusher, session, typ, data string) {
	e.t.Helper()
	ev := &event.Event{SpecVersion: "1.0", ID: fmt.Sprint(time.Now().UnixNano()), Source: event.AgentSource(tws, pusher),
		Type: typ, Subject: event.SessionSubject(session), Workspace: tws, SessionID: session, Time: time.Now().UTC(),
		Priority: event.DefaultPriority(typ, json.RawMessage(data)), Terminal: event.Lookup(typ).Terminal}
	if data != "" {
		ev.Data = json.RawMessage(data)
	}
	if _, err := e.store.CommitEvents(e.ctx, tws, pusher, []ingest.Item{{Event: ev, Journal: true}}, time.Now()); err != nil {
		e.t.Fatal(err)
	}
}

// inbox returns a party's unacked entries.
func (e *env) inbox(party string) []inbox.Entry {
	e.t.Helper()
	entries, _, err := e.box.List(e.ctx, tws, party, 0, false, 100)
	if err != nil {
		e.t.Fatal(err)
	}
	return entries
}

// events returns the journaled events of a type, routing each one.
func (e *env) events(typ string) []*event.Event {
	e.t.Helper()
	evs, _, err := e.j.Read(e.ctx, make(journal.Cursor, 4), journal.Filter{Workspace: tws, Types: []string{typ}}, 1000)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, ev := range evs {
		shard, _, _ := journal.ParseSeq(ev.Seq)
		if err := e.r.Handle(e.ctx, shard, ev); err != nil {
			e.t.Fatal(err)
		}
	}
	return evs
}

const supScope = "supervise"

// Field failure 3 (docs/design.md, "Why"): a second supervisor gets 409 naming the holder and
// epoch; a takeover by an unrelated session is refused; one by an ancestor
// moves the lease and tells the first holder.
func TestSuperviseLeaseAndTakeover(t *testing.T) {
	e := newEnv(t)
	e.parent("kid", "boss")
	e.parent("grandkid", "kid")

	a := e.do("POST", "/v1/sessions/kid/supervise", "session:w1", supScope, `{"role":"controller"}`).want(t, 200)
	if a.str("session_id") != "kid" || a.str("role") != "controller" || a.str("holder") != "session:w1" ||
		a.str("scope") != "subtree" || a.str("epoch") != "1" {
		t.Fatalf("granted: %s", a.raw)
	}
	a = e.do("POST", "/v1/sessions/kid/supervise", "session:w2", supScope, `{"role":"controller"}`).want(t, 409)
	if a.str("holder") != "session:w1" || a.str("epoch") != "1" {
		t.Fatalf("held: %s", a.raw)
	}
	e.do("POST", "/v1/sessions/kid/supervise", "session:w2", supScope, `{"role":"controller","takeover":true}`).want(t, 403)
	// A descendant is no ancestor either.
	e.do("POST", "/v1/sessions/kid/supervise", "session:grandkid", supScope, `{"role":"controller","takeover":true}`).want(t, 403)
	if len(e.inbox("session:w1")) != 0 {
		t.Fatal("a refused takeover told the holder")
	}

	a = e.do("POST", "/v1/sessions/kid/supervise", "session:boss", supScope, `{"role":"controller","takeover":true}`).want(t, 200)
	if a.str("holder") != "session:boss" || a.str("epoch") != "2" {
		t.Fatalf("takeover by the parent: %s", a.raw)
	}
	got := e.inbox("session:w1")
	if len(got) != 1 || got[0].Type != "supervision.lease_lost" || got[0].Via != inbox.ViaTakeover ||
		got[0].Priority != event.Attention || got[0].Summary != "you are no longer driving kid (taken over by session:boss)" {
		t.Fatalf("first holder's inbox: %+v", got)
	}
	var lost event.Event
	_ = json.Unmarshal(got[0].Event, &lost)
	if lost.ID != "takeover/kid/2" || lost.Subject != "session:kid" || lost.SessionID != "kid" || lost.Source != "//wakegate/"+tws {
		t.Fatalf("lease_lost event: %s", got[0].Event)
	}
	// A human and an admin may take over; neither tells a party twice.
	e.do("POST", "/v1/sessions/kid/supervise", "human:ops", supScope, `{"role":"controller","takeover":true}`).want(t, 200)
	a = e.do("POST", "/v1/sessions/kid/supervise", "session:root", supScope+" admin", `{"role":"controller","takeover":true}`).want(t, 200)
	if a.str("epoch") != "4" || len(e.inbox("session:boss")) != 1 || len(e.inbox("human:ops")) != 1 || len(e.inbox("session:w1")) != 1 {
		t.Fatalf("after two more takeovers: %s", a.raw)
	}

	// Observers, release.
	e.do("POST", "/v1/sessions/kid/supervise", "human:carol", supScope, `{"role":"observer","scope":"subtree"}`).want(t, 200)
	e.do("DELETE", "/v1/sessions/kid/supervise?role=observer", "human:carol", supScope, "").want(t, 204)
	e.do("DELETE", "/v1/sessions/kid/supervise?role=observer", "human:carol", supScope, "").want(t, 404)
	e.do("DELETE", "/v1/sessions/kid/supervise", "session:w1", supScope, "").want(t, 404) // not the holder
	e.do("DELETE", "/v1/sessions/kid/supervise?role=controller", "session:root", supScope, "").want(t, 204)
	e.do("DELETE", "/v1/sessions/kid/supervise?role=boss", "session:root", supScope, "").want(t, 400)
}

// TestSupervisionView: own edges, inherited subtree edges naming their
// ancestor, and the effective controller resolved as the router does.
func TestSupervisionView(t *testing.T) {
	e := newEnv(t)
	e.parent("kid", "boss")
	e.parent("grandkid", "kid")
	view := func(id string) answer {
		return e.do("GET", "/v1/sessions/"+id+"/supervision", "human:ops", supScope, "").want(t, 200)
	}

	a := view("grandkid")
	if string(mustJSON(a.body["edges"])) != "[]" || string(mustJSON(a.body["inherited"])) != "[]" ||
		a.str("effective_controller.resolved") != "none" || a.str("effective_controller.party") != "" {
		t.Fatalf("no edges: %s", a.raw)
	}
	if _, err := e.sup.MergeSettings(e.ctx, tws, []byte(`{"default_controller":"human:chief"}`)); err != nil {
		t.Fatal(err)
	}
	if a = view("grandkid"); a.str("effective_controller.party") != "human:chief" || a.str("effective_controller.resolved") != "workspace_default" {
		t.Fatalf("default: %s", a.raw)
	}
	e.do("POST", "/v1/sessions/kid/supervise", "session:boss", supScope, `{"role":"controller"}`).want(t, 200)
	e.do("POST", "/v1/sessions/kid/supervise", "human:carol", supScope, `{"role":"observer","scope":"subtree"}`).want(t, 200)
	e.do("POST", "/v1/sessions/kid/supervise", "human:dave", supScope, `{"role":"observer"}`).want(t, 200) // self: not inherited
	a = view("grandkid")
	if a.str("effective_controller.party") != "session:boss" || a.str("effective_controller.resolved") != "ancestor:kid" {
		t.Fatalf("inherited controller: %s", a.raw)
	}
	inh, _ := a.body["inherited"].([]any)
	if len(inh) != 2 || fmt.Sprint(inh[0]) != "map[epoch:1 holder:session:boss role:controller scope:subtree session_id:kid]" ||
		fmt.Sprint(inh[1]) != "map[epoch:0 holder:human:carol role:observer scope:subtree session_id:kid]" {
		t.Fatalf("inherited edges: %v", inh)
	}
	a = view("kid")
	if edges, _ := a.body["edges"].([]any); len(edges) != 3 || a.str("effective_controller.resolved") != "own" {
		t.Fatalf("own view: %s", a.raw)
	}
	// A dead holder is climbed past, as the router does.
	e.push("session:boss", "boss", "session.exited", "")
	if a = view("grandkid"); a.str("effective_controller.party") != "human:chief" {
		t.Fatalf("dead controller: %s", a.raw)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestSuperviseRefusesBadInput: problem+json, nothing applied.
func TestSuperviseRefusesBadInput(t *testing.T) {
	e := newEnv(t)
	long := strings.Repeat("a", 200)
	for name, tc := range map[string]struct {
		path, scope, body string
		status            int
	}{
		"bad role":         {"/v1/sessions/kid/supervise", supScope, `{"role":"driver"}`, 400},
		"bad scope":        {"/v1/sessions/kid/supervise", supScope, `{"role":"observer","scope":"all"}`, 400},
		"no body":          {"/v1/sessions/kid/supervise", supScope, ``, 400},
		"unknown field":    {"/v1/sessions/kid/supervise", supScope, `{"role":"observer","x":1}`, 400},
		"not json":         {"/v1/sessions/kid/supervise", supScope, `{"role":`, 400},
		"200 chars":        {"/v1/sessions/" + long + "/supervise", supScope, `{"role":"observer"}`, 400},
		"newline":          {"/v1/sessions/a%0Ab/supervise", supScope, `{"role":"observer"}`, 400},
		"self":             {"/v1/sessions/w1/supervise", supScope, `{"role":"controller"}`, 400},
		"missing scope":    {"/v1/sessions/kid/supervise", "inbox", `{"role":"observer"}`, 403},
		"view 200 chars":   {"/v1/sessions/" + long + "/supervision", supScope, "", 400},
		"view missing scp": {"/v1/sessions/kid/supervision", "inbox", "", 403},
	} {
		t.Run(name, func(t *testing.T) {
			method := "POST"
			if strings.HasSuffix(tc.path, "/supervision") {
				method = "GET"
			}
			e.do(method, tc.path, "session:w1", tc.scope, tc.body).want(t, tc.status)
		})
	}
	if edges, _ := e.sup.Get(e.ctx, tws, "kid"); len(edges) != 0 {
		t.Fatalf("refused requests wrote %v", edges)
	}
}

// TestMessagesUnderLeaseModes: enforce refuses a control message from a
// non-holder (403 naming the holder, nothing journaled); warn delivers it,
// flagged, and the answer names the holder.
func TestMessagesUnderLeaseModes(t *testing.T) {
	e := newEnv(t)
	const push = "events:push"
	msgs := func() int { return len(e.events("message.sent")) }
	e.do("POST", "/v1/sessions/kid/supervise", "session:w1", supScope, `{"role":"controller"}`).want(t, 200)

	// off: anyone's control message goes through unflagged.
	a := e.do("POST", "/v1/sessions/kid/messages", "session:w2", push, `{"text":"stop","intent":"control"}`).want(t, 202)
	if a.str("id") == "" || a.str("seq") == "" || a.str("warning") != "" {
		t.Fatalf("off: %s", a.raw)
	}

	e.do("PUT", "/v1/workspace/supervision", "human:admin", "admin", `{"lease_mode":"enforce"}`).want(t, 200)
	a = e.do("POST", "/v1/sessions/kid/messages", "session:w2", push, `{"text":"stop","intent":"control"}`).want(t, 403)
	if a.str("type") != problemBase+"not_controller" || a.str("holder") != "session:w1" {
		t.Fatalf("enforce: %s", a.raw)
	}
	if n := msgs(); n != 1 {
		t.Fatalf("%d messages journaled, want the refused one left out", n)
	}
	e.do("POST", "/v1/sessions/kid/messages", "session:w2", push, `{"text":"fyi","intent":"info"}`).want(t, 202)
	e.do("POST", "/v1/sessions/kid/messages", "session:w1", push, `{"text":"go","intent":"control"}`).want(t, 202)
	// Nobody holds orphan's lease: take it first.
	a = e.do("POST", "/v1/sessions/orphan/messages", "session:w1", push, `{"text":"go","intent":"control"}`).want(t, 403)
	if a.str("holder") != "" {
		t.Fatalf("no holder: %s", a.raw)
	}

	e.do("PUT", "/v1/workspace/supervision", "human:admin", "admin", `{"lease_mode":"warn"}`).want(t, 200)
	a = e.do("POST", "/v1/sessions/kid/messages", "session:w2", push, `{"text":"halt now\nplease","intent":"control","blocker":true}`).want(t, 202)
	if a.str("warning") != "not_controller" || a.str("holder") != "session:w1" {
		t.Fatalf("warn: %s", a.raw)
	}
	if n := msgs(); n != 4 {
		t.Fatalf("%d messages journaled, want 4", n)
	}
	// Routed: the target has each message as its own entry; the flagged
	// one is a critical blocker naming its sender; the sender hears
	// nothing of its own messages.
	got := e.inbox("session:kid")
	if len(got) != 4 {
		t.Fatalf("target has %d entries, want 4", len(got))
	}
	last := got[len(got)-1]
	var ev event.Event
	_ = json.Unmarshal(last.Event, &ev)
	var d map[string]any
	_ = json.Unmarshal(ev.Data, &d)
	if last.Via != inbox.ViaDirect || last.Priority != event.Critical || ev.Source != event.AgentSource(tws, "session:w2") ||
		d["source"] != "session:w2" || d["intent"] != "control" || d["flag"] != "not_controller" || d["holder"] != "session:w1" ||
		d["blocker"] != true || d["text"] != "halt now\nplease" || !strings.HasPrefix(ev.CoalesceKey, "message:session:w2:") {
		t.Fatalf("flagged message: %+v data %v", ev, d)
	}
	if len(e.inbox("session:w2")) != 0 {
		t.Fatal("the sender heard its own message")
	}
}

func TestMessagesRefuseBadInput(t *testing.T) {
	e := newEnv(t)
	for name, tc := range map[string]struct {
		sub, scope, path, body string
		status                 int
	}{
		"no text":       {"session:w1", "events:push", "/v1/sessions/kid/messages", `{"text":" ","intent":"info"}`, 400},
		"bad intent":    {"session:w1", "events:push", "/v1/sessions/kid/messages", `{"text":"x","intent":"order"}`, 400},
		"no intent":     {"session:w1", "events:push", "/v1/sessions/kid/messages", `{"text":"x"}`, 400},
		"unknown field": {"session:w1", "events:push", "/v1/sessions/kid/messages", `{"text":"x","intent":"info","to":"y"}`, 400},
		"to itself":     {"session:kid", "events:push", "/v1/sessions/kid/messages", `{"text":"x","intent":"info"}`, 400},
		"text too long": {"session:w1", "events:push", "/v1/sessions/kid/messages", `{"text":"` + strings.Repeat("x", maxMessageText+1) + `","intent":"info"}`, 400},
		"bad target":    {"session:w1", "events:push", "/v1/sessions/" + strings.Repeat("k", 129) + "/messages", `{"text":"x","intent":"info"}`, 400},
		"missing scope": {"session:w1", "inbox", "/v1/sessions/kid/messages", `{"text":"x","intent":"info"}`, 403},
	} {
		t.Run(name, func(t *testing.T) {
			e.do("POST", tc.path, tc.sub, tc.scope, tc.body).want(t, tc.status)
		})
	}
	if n := len(e.events("message.sent")); n != 0 {
		t.Fatalf("%d messages journaled by refused requests", n)
	}
}

// TestWorkspaceSettings: GET defaults, PUT merges, a refused PUT names the
// field and applies nothing, admin only.
func TestWorkspaceSettings(t *testing.T) {
	e := newEnv(t)
	get := func() string {
		return string(e.do("GET", "/v1/workspace/supervision", "human:admin", "admin", "").want(t, 200).raw)
	}
	defaults := get()
	if defaults != `{"escalate_after":"2m","escalate_unacked":[],"lease_mode":"off","rate":{"per":"30s","burst":3}}` {
		t.Fatalf("defaults: %s", defaults)
	}
	a := e.do("PUT", "/v1/workspace/supervision", "human:admin", "admin",
		`{"lease_mode":"warn","default_controller":"session:boss","rate":{"burst":5}}`).want(t, 200)
	if a.str("lease_mode") != "warn" || a.str("default_controller") != "session:boss" || a.str("rate.burst") != "5" || a.str("rate.per") != "30s" {
		t.Fatalf("merged: %s", a.raw)
	}
	set := get()
	for body, field := range map[string]string{
		`{"lease_mode":"enforce","escalate_after":"10ms"}`:    "escalate_after",
		`{"lease_mode":"enforce","fallback":{"party":"ops"}}`: "fallback",
		`{"lease_mode":"enforce","quiet":true}`:               "quiet",
		`not json`:                                            "JSON",
	} {
		a := e.do("PUT", "/v1/workspace/supervision", "human:admin", "admin", body).want(t, 400)
		if !strings.Contains(a.str("detail"), field) {
			t.Errorf("%s: detail %q does not name %s", body, a.str("detail"), field)
		}
	}
	if got := get(); got != set {
		t.Fatalf("a refused PUT applied something:\n%s\n%s", got, set)
	}
	e.do("GET", "/v1/workspace/supervision", "session:boss", "supervise inbox", "").want(t, 403)
	e.do("PUT", "/v1/workspace/supervision", "session:boss", "supervise", `{"lease_mode":"off"}`).want(t, 403)
	// Another workspace's settings are its own.
	c := agent.Claims{Workspace: "other", Scope: "admin"}
	c.Subject, c.ExpiresAt = "human:admin", jwtTime(time.Now().Add(time.Hour))
	tok, _ := agent.Mint([]byte(testSecret), c)
	req, _ := http.NewRequest("GET", e.url+"/v1/workspace/supervision", bytes.NewReader(nil))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(raw) != defaults {
		t.Fatalf("workspace other sees %s", raw)
	}
}
