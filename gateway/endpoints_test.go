package gateway

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/delivery/holds"
	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/outbound"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/agent"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/workers/tasks"
)

// epEnv is a gateway with push endpoints and dead letters on real Redis,
// and (with a pusher) an Asynq server working the push queue.
type epEnv struct {
	t      *testing.T
	url    string
	prefix string
	box    *inbox.Inbox
	p      *tasks.Pusher
	holds  *holds.Store
}

type lookup map[string]string // host → address

func (l lookup) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	a, ok := l[host]
	if !ok {
		return nil, &netErr{host}
	}
	return []netip.Addr{netip.MustParseAddr(a)}, nil
}

type netErr struct{ host string }

func (e *netErr) Error() string { return "no such host " + e.host }

func newEpEnv(t *testing.T, guard *outbound.Guard, schedule []time.Duration) *epEnv {
	t.Helper()
	rdb, prefix := redistest.New(t)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 4})
	v, err := agent.NewVerifier(agent.VerifierConfig{HS256Secret: []byte(testSecret)})
	if err != nil {
		t.Fatal(err)
	}
	e := &epEnv{t: t, prefix: prefix, box: inbox.New(rdb, inbox.Config{Prefix: prefix})}
	endpoints := outbound.NewEndpoints(rdb, prefix, guard)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e.p = tasks.New(rdb, asynq.NewClientFromRedisClient(rdb), e.box, endpoints, log, prometheus.NewRegistry(),
		tasks.Config{Prefix: prefix, Schedule: schedule, Guard: guard})
	mux := asynq.NewServeMux()
	mux.Handle(tasks.TypeDeliver, e.p)
	e.holds = holds.New(rdb, prefix)
	rel := tasks.NewReleaser(e.p, e.holds, nil)
	mux.Handle(tasks.TypeRelease, rel)
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Concurrency: 4, Queues: queueMap(e.p.Queues()),
		DelayedTaskCheckInterval: 100 * time.Millisecond, TaskCheckInterval: 50 * time.Millisecond,
		RetryDelayFunc: e.p.RetryDelay, IsFailure: tasks.IsFailure, LogLevel: asynq.FatalLevel})
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Shutdown()
		for _, q := range e.p.Queues() {
			_ = asynq.NewInspectorFromRedisClient(rdb).DeleteQueue(q, true)
			redistest.Flush(rdb, "asynq:{"+q+"}") // the stats DeleteQueue leaves
		}
	})
	s, err := New(Config{WebhookSecrets: [][]byte{[]byte(testSecret)}}, Deps{
		Log: log, Redis: rdb, Journal: j, Ingest: ingest.New(rdb, j), Sessions: sessions.New(rdb, j, time.Minute),
		Linker: tracker.New(rdb, j, tracker.Config{}), Verifier: v, Inbox: e.box,
		Endpoints: endpoints, DeadLetters: e.p, Holds: e.holds, Releaser: rel,
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	e.url = hs.URL
	return e
}

type epAnswer struct {
	status int
	ctype  string
	body   map[string]any
	raw    string
}

// do sends a request with a token of workspace ws for sub with scope; an
// empty sub sends no token.
func (e *epEnv) do(method, path, ws, sub, scope, body string) epAnswer {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if sub != "" {
		c := agent.Claims{Workspace: ws, Scope: scope}
		c.Subject = sub
		c.ExpiresAt = jwtTime(time.Now().Add(time.Hour))
		tok, err := agent.Mint([]byte(testSecret), c)
		if err != nil {
			e.t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := epAnswer{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

func (a epAnswer) want(t *testing.T, what string, status int) epAnswer {
	t.Helper()
	if a.status != status {
		t.Fatalf("%s: status %d, want %d: %s", what, a.status, status, a.raw)
	}
	if status >= 400 && a.ctype != "application/problem+json" {
		t.Fatalf("%s: content type %q, want application/problem+json", what, a.ctype)
	}
	return a
}

func (a epAnswer) str(k string) string { s, _ := a.body[k].(string); return s }

func TestEndpointsAPI(t *testing.T) {
	guard := &outbound.Guard{Resolver: lookup{"hooks.example": "93.184.215.14", "internal.example": "127.0.0.1"}}
	e := newEpEnv(t, guard, nil)
	const path = "/v1/endpoints/session:a"
	put := func(body string) epAnswer { return e.do(http.MethodPut, path, tws, "session:a", "inbox", body) }

	created := put(`{"url": "https://hooks.example/a"}`).want(t, "create", http.StatusCreated)
	secret := created.str("secret")
	if _, err := outbound.ParseSecret(secret); err != nil || created.str("party") != "session:a" ||
		created.str("url") != "https://hooks.example/a" || created.str("format") != "standard" {
		t.Fatalf("create: %s", created.raw)
	}
	got := e.do(http.MethodGet, path, tws, "session:a", "inbox", "").want(t, "get", http.StatusOK)
	if got.str("secret") == secret || !strings.HasPrefix(got.str("secret"), "whsec_****") || strings.Contains(got.raw, secret[6:]) {
		t.Fatalf("GET shows the secret: %s", got.raw)
	}
	kept := put(`{"url": "https://hooks.example/b", "format": "slack"}`).want(t, "update", http.StatusOK)
	if kept.str("secret") == secret || kept.str("format") != "slack" {
		t.Fatalf("update without a secret: %s", kept.raw)
	}
	rotated := put(`{"url": "https://hooks.example/b", "secret": "rotate"}`).want(t, "rotate", http.StatusOK)
	if s := rotated.str("secret"); s == secret || !strings.HasPrefix(s, "whsec_") || strings.Contains(s, "****") {
		t.Fatalf("rotate: %s", rotated.raw)
	}

	// Authorization: its own with inbox, another's with admin.
	e.do(http.MethodPut, "/v1/endpoints/session:b", tws, "session:a", "inbox", `{"url": "https://hooks.example/"}`).
		want(t, "another party's endpoint", http.StatusForbidden)
	e.do(http.MethodGet, path, tws, "session:a", "events:read", "").want(t, "no inbox scope", http.StatusForbidden)
	e.do(http.MethodGet, path, tws, "", "", "").want(t, "no token", http.StatusUnauthorized)
	e.do(http.MethodPut, "/v1/endpoints/human:ops", tws, "human:admin", "admin", `{"url": "https://hooks.example/ops"}`).
		want(t, "admin sets a human's", http.StatusCreated)
	e.do(http.MethodGet, path, "beta", "session:a", "inbox", "").want(t, "another workspace", http.StatusNotFound)

	// Bad input: 400, nothing changed.
	for _, body := range []string{
		`not json`, `{"url": "https://hooks.example/", "colour": "red"}`, `{"format": "slack"}`,
		`{"url": "https://hooks.example/", "format": "xml"}`, `{"url": "https://hooks.example/", "secret": "hunter2"}`,
		`{"url": "ftp://hooks.example/"}`, `{"url": "https://nx.example/"}`, `{"url": 7}`,
	} {
		a := put(body).want(t, body, http.StatusBadRequest)
		if !strings.HasSuffix(a.str("type"), "/malformed") {
			t.Fatalf("%s: %s", body, a.raw)
		}
	}
	for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/", "http://[::1]:8080/",
		"https://internal.example/hook", "http://[::ffff:10.0.0.1]/"} {
		a := put(`{"url": "`+u+`"}`).want(t, u, http.StatusBadRequest)
		if !strings.HasSuffix(a.str("type"), "/endpoint-refused") || !strings.Contains(a.str("detail"), "refused") {
			t.Fatalf("%s: %s", u, a.raw)
		}
	}
	// A name's refusal never says what it resolved to: no oracle of
	// internal DNS for an inbox token.
	if a := put(`{"url": "https://internal.example/hook"}`); strings.Contains(a.raw, "127.0.0.1") ||
		!strings.Contains(a.str("detail"), "internal.example resolves to a refused address class") {
		t.Fatalf("refusal of a name resolving to loopback: %s", a.raw)
	}
	if a := e.do(http.MethodGet, path, tws, "session:a", "inbox", ""); a.str("url") != "https://hooks.example/b" {
		t.Fatalf("a refused PUT changed the endpoint: %s", a.raw)
	}
	e.do(http.MethodPut, "/v1/endpoints/robot:x", tws, "human:admin", "admin", `{"url": "https://hooks.example/"}`).
		want(t, "bad party", http.StatusBadRequest)

	e.do(http.MethodGet, "/v1/endpoints/human:none", tws, "human:admin", "admin", "").want(t, "get none", http.StatusNotFound)
	e.do(http.MethodDelete, "/v1/endpoints/human:none", tws, "human:admin", "admin", "").want(t, "delete none", http.StatusNotFound)
	e.do(http.MethodDelete, path, tws, "session:a", "inbox", "").want(t, "delete", http.StatusNoContent)
	e.do(http.MethodGet, path, tws, "session:a", "inbox", "").want(t, "get deleted", http.StatusNotFound)
}

// TestDeadLettersAPI: a push whose every attempt failed is listed by GET
// /admin/dead-letters; POST …/redeliver sends it again, same webhook-id
// and body, and its 2xx acks the human's entry and clears the record.
func TestDeadLettersAPI(t *testing.T) {
	e := newEpEnv(t, &outbound.Guard{AllowPrivate: true}, []time.Duration{time.Second})
	var mu sync.Mutex
	healthy := false
	var seen []*http.Request
	var bodies []string
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		seen, bodies = append(seen, r), append(bodies, string(b))
		if healthy {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.WriteHeader(http.StatusBadGateway)
	}))
	t.Cleanup(rc.Close)
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(seen) }
	ep := e.do(http.MethodPut, "/v1/endpoints/human:ops", tws, "human:admin", "admin", `{"url": "`+rc.URL+`/hook"}`).
		want(t, "endpoint", http.StatusCreated)

	ev := &event.Event{SpecVersion: event.SpecVersion, ID: "1", Source: event.AgentSource(tws, "session:w"),
		Type: "session.crashed", Subject: "session:w", Time: time.Now().UTC(), Workspace: tws, SessionID: "w",
		Priority: event.Critical, Summary: "w crashed"}
	ctx := context.Background()
	res, err := e.box.Deliver(ctx, inbox.Delivery{Workspace: tws, Party: "human:ops", Event: ev, Via: inbox.ViaFallback}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.p.Enqueue(ctx, tws, "human:ops", res, ev); err != nil {
		t.Fatal(err)
	}
	id := outbound.WebhookID(e.prefix, tws, "human:ops", res.Seq)
	var list epAnswer
	deadline := time.Now().Add(15 * time.Second)
	for {
		list = e.do(http.MethodGet, "/admin/dead-letters", tws, "human:root", "operator", "").want(t, "list", http.StatusOK)
		if list.body["total"] == float64(1) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no dead letter: %s", list.raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
	dl, _ := list.body["dead_letters"].([]any)
	d, _ := dl[0].(map[string]any)
	if d["id"] != id || d["party"] != "human:ops" || d["attempts"] != float64(2) || d["last_status"] != float64(502) {
		t.Fatalf("dead letter %s", list.raw)
	}
	if b, _ := d["body"].(map[string]any); b["webhook_id"] != id || b["kind"] != "wake" {
		t.Fatalf("dead letter body %s", list.raw)
	}
	e.do(http.MethodGet, "/admin/dead-letters", tws, "human:admin", "admin", "").want(t, "admin is not operator", http.StatusForbidden)
	e.do(http.MethodGet, "/admin/dead-letters", "", "", "", "").want(t, "no token", http.StatusUnauthorized)
	e.do(http.MethodGet, "/admin/dead-letters?limit=0", tws, "human:root", "operator", "").want(t, "bad limit", http.StatusBadRequest)
	e.do(http.MethodPost, "/admin/dead-letters/msg_nope/redeliver", tws, "human:root", "operator", "").want(t, "unknown", http.StatusNotFound)

	mu.Lock()
	healthy = true
	mu.Unlock()
	before := count()
	e.do(http.MethodPost, "/admin/dead-letters/"+id+"/redeliver", tws, "human:root", "operator", "").want(t, "redeliver", http.StatusAccepted)
	deadline = time.Now().Add(10 * time.Second)
	for count() == before {
		if time.Now().After(deadline) {
			t.Fatal("no redelivery")
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	last, lastBody, firstBody := seen[len(seen)-1], bodies[len(bodies)-1], bodies[0]
	mu.Unlock()
	if last.Header.Get("webhook-id") != id || lastBody != firstBody {
		t.Fatalf("redelivered %q %s, want %s and the first body", last.Header.Get("webhook-id"), lastBody, id)
	}
	if err := outbound.Verify(ep.str("secret"), last.Header, []byte(lastBody), time.Now(), 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		l := e.do(http.MethodGet, "/admin/dead-letters", tws, "human:root", "operator", "")
		es, _, _ := e.box.List(ctx, tws, "human:ops", 0, false, 10)
		if l.body["total"] == float64(0) && len(es) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the redelivery: %s; entries %+v", l.raw, es)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// queueMap gives every queue priority 1, as the worker's server does.
func queueMap(queues []string) map[string]int {
	m := map[string]int{}
	for _, q := range queues {
		m[q] = 1
	}
	return m
}
