package gateway

import (
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/dashboard"
	"github.com/wakegate/wakegate/delivery/holds"
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

const uiPassword = "operator-password-1234"

// fakeIndex is the health sweep's index of sessions and PRs, kept by hand.
type fakeIndex struct {
	mu       sync.Mutex
	sessions map[string][]string
}

func (f *fakeIndex) add(ws string, ids ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sessions[ws] = append(f.sessions[ws], ids...)
}

func (f *fakeIndex) Workspaces(context.Context, int) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for ws := range f.sessions {
		out = append(out, ws)
	}
	slices.Sort(out)
	return out, nil
}

func (f *fakeIndex) Sessions(_ context.Context, ws string, offset, limit int) ([]redis.Z, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	all := f.sessions[ws]
	var out []redis.Z
	for i := offset; i < min(len(all), offset+limit); i++ {
		out = append(out, redis.Z{Member: all[i], Score: float64(time.Now().UnixMilli())})
	}
	return out, int64(len(all)), nil
}

func (f *fakeIndex) PullRequests(context.Context, string, int, int) ([]string, int64, error) {
	return nil, 0, nil
}

// uiEnv is env with the dashboard served, its notifiers running.
type uiEnv struct {
	*env
	idx   *fakeIndex
	holds *holds.Store
}

func newUIEnv(t *testing.T) *uiEnv {
	t.Helper()
	rdb, prefix := redistest.New(t)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 4})
	reg := sessions.New(rdb, j, time.Minute)
	e := &env{t: t, ctx: context.Background(), rdb: rdb, j: j, reg: reg, store: ingest.New(rdb, j),
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
	idx := &fakeIndex{sessions: map[string][]string{}}
	hs := holds.New(rdb, prefix)
	reader := dashboard.New(dashboard.Deps{Redis: rdb, Sessions: reg, Sup: e.sup, Inbox: e.box, Index: idx,
		PRs: tracker.New(rdb, j, tracker.Config{}), Quiet: hs}, dashboard.Config{})
	s, err := New(Config{WebhookSecrets: [][]byte{[]byte(testSecret)}, OperatorPassword: []byte(uiPassword),
		TokenSecret: []byte(testSecret)}, Deps{
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Redis: rdb, Journal: j, Ingest: e.store,
		Sessions: reg, Linker: tracker.New(rdb, j, tracker.Config{}), Verifier: v,
		Subs: e.subs, Sup: e.sup, Inbox: e.box, Holds: hs, Releaser: fakeReleaser{hs}, Dashboard: reader,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.runNotifiers(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	srv := newHTTPServer(t, s)
	e.url = srv
	return &uiEnv{env: e, idx: idx, holds: hs}
}

// fakeReleaser lifts quiet by deleting it (package workers/tasks would
// also release its digest).
type fakeReleaser struct{ hs *holds.Store }

func (f fakeReleaser) LiftQuiet(ctx context.Context, ws, scope string) ([]holds.Digest, bool, error) {
	ok, err := f.hs.DeleteQuiet(ctx, ws, scope)
	return nil, ok, err
}
func (fakeReleaser) ScheduleQuietEnd(context.Context, string, string, time.Time) error { return nil }
func (fakeReleaser) Schedule(context.Context, string, string, string, time.Time) error { return nil }

// browser is an HTTP client with a cookie jar that does not follow
// redirects.
func browser(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 40 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type uiAnswer struct {
	status int
	header http.Header
	body   string
}

func uiDo(t *testing.T, c *http.Client, method, u string, form url.Values, set func(*http.Request)) uiAnswer {
	t.Helper()
	var rd io.Reader
	if form != nil {
		rd = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, u, rd)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if set != nil {
		set(req)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return uiAnswer{resp.StatusCode, resp.Header, string(b)}
}

func basic(user, pass string) func(*http.Request) {
	return func(r *http.Request) { r.SetBasicAuth(user, pass) }
}

func (e *uiEnv) tokenIn(ws, sub, scope string) string {
	c := agent.Claims{Workspace: ws, Scope: scope}
	c.Subject = sub
	c.ExpiresAt = jwtTime(time.Now().Add(time.Hour))
	tok, err := agent.Mint([]byte(testSecret), c)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// signIn exchanges alice's human: token for the cookie and returns the
// page's CSRF token.
func (e *uiEnv) signIn(t *testing.T, c *http.Client) string {
	t.Helper()
	a := uiDo(t, c, "POST", e.url+"/ui/login", url.Values{"token": {e.token("human:alice", "inbox")}}, nil)
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/ui/" {
		t.Fatalf("login: %d %v %s", a.status, a.header, a.body)
	}
	ck := a.header.Get("Set-Cookie")
	for _, want := range []string{"wakegate_ui=", "HttpOnly", "SameSite=Strict", "Path=/ui/"} {
		if !strings.Contains(ck, want) {
			t.Fatalf("cookie %q lacks %s", ck, want)
		}
	}
	page := uiDo(t, c, "GET", e.url+"/ui/", nil, nil)
	if page.status != 200 {
		t.Fatalf("page after login: %d %s", page.status, page.body)
	}
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page.body)
	if m == nil {
		t.Fatalf("no CSRF token on the page:\n%s", page.body)
	}
	return m[1]
}

// /ui/ refuses who may not look (docs/design.md §10): nobody → sign in,
// an agent session → 403, a wrong password → 401, a person → only their
// own workspace, the operator → every workspace; the writes refuse a
// missing or wrong CSRF token, a foreign Origin, the operator and another
// workspace.
func TestDashboardRefusals(t *testing.T) {
	e := newUIEnv(t)
	e.idx.add(tws, "mine")
	e.idx.add("other", "theirs-secret")
	e.push("session:mine", "mine", "session.spawned", "")
	anon := browser(t)

	check := func(name string, a uiAnswer, status int) {
		t.Helper()
		if a.status != status {
			t.Errorf("%s: %d, want %d: %.300s", name, a.status, status, a.body)
		}
	}
	a := uiDo(t, anon, "GET", e.url+"/ui/", nil, nil)
	check("no credentials, page", a, http.StatusSeeOther)
	if a.header.Get("Location") != "/ui/login" {
		t.Errorf("no credentials: Location %q, want the login page", a.header.Get("Location"))
	}
	check("no credentials, live", uiDo(t, anon, "GET", e.url+"/ui/live", nil, nil), http.StatusUnauthorized)
	check("no credentials, ack", uiDo(t, anon, "POST", e.url+"/ui/ack", url.Values{"seq": {"1"}}, nil), http.StatusUnauthorized)
	check("login form", uiDo(t, anon, "GET", e.url+"/ui/login", nil, nil), http.StatusOK)

	agentTok := e.token("session:mine", "inbox events:push")
	check("agent session token", uiDo(t, anon, "GET", e.url+"/ui/", nil, uiBearer(agentTok)), http.StatusForbidden)
	check("agent session token, live", uiDo(t, anon, "GET", e.url+"/ui/live", nil, uiBearer(agentTok)), http.StatusForbidden)
	a = uiDo(t, anon, "POST", e.url+"/ui/login", url.Values{"token": {agentTok}}, nil)
	check("agent session token on the login form", a, http.StatusForbidden)
	if a.header.Get("Set-Cookie") != "" {
		t.Errorf("an agent's login set a cookie: %s", a.header.Get("Set-Cookie"))
	}
	check("forged token", uiDo(t, anon, "GET", e.url+"/ui/", nil, uiBearer(agentTok+"x")), http.StatusUnauthorized)
	check("forged token on the login form", uiDo(t, anon, "POST", e.url+"/ui/login", url.Values{"token": {"ey.x.y"}}, nil), http.StatusUnauthorized)
	check("forged cookie", uiDo(t, anon, "GET", e.url+"/ui/live", nil, func(r *http.Request) {
		r.AddCookie(&http.Cookie{Name: uiCookie, Value: e.token("human:alice", "inbox") + "x"})
	}), http.StatusUnauthorized)
	check("wrong operator password", uiDo(t, anon, "GET", e.url+"/ui/", nil, basic("operator", "nope-nope-nope")), http.StatusUnauthorized)
	check("wrong operator user", uiDo(t, anon, "GET", e.url+"/ui/", nil, basic("admin", uiPassword)), http.StatusUnauthorized)

	// The operator sees every workspace; reads only.
	a = uiDo(t, anon, "GET", e.url+"/ui/?ws=other", nil, basic("operator", uiPassword))
	check("operator, other workspace", a, http.StatusOK)
	if !strings.Contains(a.body, "theirs-secret") {
		t.Errorf("the operator's page of workspace other lacks its session:\n%.500s", a.body)
	}
	check("operator token", uiDo(t, anon, "GET", e.url+"/ui/?ws=other", nil, uiBearer(e.tokenIn("ops", "human:root", "operator"))), http.StatusOK)
	check("operator ack", uiDo(t, anon, "POST", e.url+"/ui/ack", url.Values{"seq": {"1"}}, basic("operator", uiPassword)), http.StatusForbidden)

	// A person: their own workspace only, by cookie or bearer.
	alice := browser(t)
	csrf := e.signIn(t, alice)
	a = uiDo(t, alice, "GET", e.url+"/ui/", nil, nil)
	if !strings.Contains(a.body, "mine") || strings.Contains(a.body, "theirs-secret") {
		t.Errorf("alice's page shows another workspace or not her own:\n%.500s", a.body)
	}
	check("person, other workspace", uiDo(t, alice, "GET", e.url+"/ui/?ws=other", nil, nil), http.StatusForbidden)
	check("person, other workspace, live", uiDo(t, alice, "GET", e.url+"/ui/live?ws=other", nil, nil), http.StatusForbidden)
	check("person bearer, other workspace", uiDo(t, anon, "GET", e.url+"/ui/?ws=other", nil, uiBearer(e.token("human:alice", "inbox"))), http.StatusForbidden)
	check("other workspace's person", uiDo(t, anon, "GET", e.url+"/ui/?ws="+tws, nil, uiBearer(e.tokenIn("other", "human:bob", "inbox"))), http.StatusForbidden)
	check("bad workspace name", uiDo(t, alice, "GET", e.url+"/ui/?ws=a%20b", nil, nil), http.StatusBadRequest)

	// CSRF on the writes.
	check("ack without CSRF token", uiDo(t, alice, "POST", e.url+"/ui/ack", url.Values{"seq": {"1"}}, nil), http.StatusForbidden)
	check("ack with a wrong CSRF token", uiDo(t, alice, "POST", e.url+"/ui/ack",
		url.Values{"seq": {"1"}, "csrf": {base64.RawURLEncoding.EncodeToString(make([]byte, 32))}}, nil), http.StatusForbidden)
	check("ack from another origin", uiDo(t, alice, "POST", e.url+"/ui/ack", url.Values{"seq": {"1"}, "csrf": {csrf}},
		func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }), http.StatusForbidden)
	check("ack in another workspace", uiDo(t, alice, "POST", e.url+"/ui/ack", url.Values{"seq": {"1"}, "csrf": {csrf}, "ws": {"other"}}, nil), http.StatusForbidden)
	check("quiet without CSRF token", uiDo(t, alice, "POST", e.url+"/ui/quiet", url.Values{"action": {"on"}}, nil), http.StatusForbidden)
	check("another person's CSRF token", uiDo(t, alice, "POST", e.url+"/ui/ack", url.Values{"seq": {"1"},
		"csrf": {(&Server{uiKey: uiCSRFKey([]byte(testSecret))}).csrfToken(e.token("human:carol", "inbox"))}}, nil), http.StatusForbidden)
	check("ack by a person without scope inbox", uiDo(t, anon, "POST", e.url+"/ui/ack", url.Values{"seq": {"1"}},
		uiBearer(e.token("human:alice", "events:read"))), http.StatusForbidden)
	check("ack of nothing", uiDo(t, alice, "POST", e.url+"/ui/ack", url.Values{"seq": {"99"}, "csrf": {csrf}}, nil), http.StatusBadRequest)

	for _, h := range []string{"Content-Security-Policy", "X-Frame-Options"} {
		if a.header.Get(h) == "" {
			t.Errorf("page lacks %s", h)
		}
	}
}

// The fleet page: the tree of who spawned whom with liveness, leases and
// the effective controller; the counts; a permission request, then its
// ack and quiet, as a person does them.
func TestDashboardFleetInboxAndWrites(t *testing.T) {
	e := newUIEnv(t)
	e.idx.add(tws, "root", "kid", "grandkid", "gone")
	e.push("session:root", "root", "session.spawned", "")
	e.push("session:kid", "kid", "session.spawned", `{"parent":"root"}`)
	e.parent("kid", "root")
	e.parent("grandkid", "kid")
	e.push("session:root", "root", "session.turn_started", "")
	e.push("session:gone", "gone", "session.exited", "")
	if _, _, err := e.sup.Supervise(e.ctx, tws, "root", "human:alice", supervision.Controller, supervision.ScopeSubtree, false, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := e.reg.Seen(e.ctx, tws, "session:kid", time.Now()); err != nil {
		t.Fatal(err)
	}
	e.push("session:kid", "kid", "session.permission_requested", `{"tool":"Bash"}`)
	e.events("session.permission_requested")

	alice := browser(t)
	csrf := e.signIn(t, alice)
	page := uiDo(t, alice, "GET", e.url+"/ui/", nil, nil).body
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?s)data-session="root".*<ul>.*data-session="kid".*<ul>.*data-session="grandkid"`), // nested
		regexp.MustCompile(`(?s)data-session="kid" data-status="approval" data-liveness="live"`),
		regexp.MustCompile(`(?s)data-session="root" data-status="working"`),
		regexp.MustCompile(`(?s)data-session="gone" data-status="dead" data-liveness="dead"`),
		regexp.MustCompile(`(?s)data-session="grandkid".*?controller <span class="ctl">human:alice</span> \(ancestor:root\)`),
		regexp.MustCompile(`data-count="approval"><span class="n">1</span>`),
		regexp.MustCompile(`data-count="dead"><span class="n">1</span>`),
		regexp.MustCompile(`data-count="needing"><span class="n">1</span>`),
		regexp.MustCompile(`data-type="session.permission_requested" data-subject="session:kid"`),
		regexp.MustCompile(`permission requested`),
	} {
		if !want.MatchString(page) {
			t.Errorf("page lacks %s", want)
		}
	}
	// The filter link lists the sessions in that state.
	f := uiDo(t, alice, "GET", e.url+"/ui/?filter=approval", nil, nil).body
	if !strings.Contains(f, `data-session="kid"`) || strings.Contains(f, `data-session="root"`) {
		t.Errorf("filter approval does not list exactly kid:\n%.800s", f)
	}

	// Ack, as htmx sends it: the answer re-renders without the entry.
	seq := regexp.MustCompile(`data-seq="(\d+)" data-type="session.permission_requested"`).FindStringSubmatch(page)
	if seq == nil {
		t.Fatal("no entry seq on the page")
	}
	a := uiDo(t, alice, "POST", e.url+"/ui/ack", url.Values{"seq": {seq[1]}, "csrf": {csrf}},
		func(r *http.Request) { r.Header.Set("HX-Request", "true"); r.Header.Set("Origin", e.url) })
	if a.status != 200 || strings.Contains(a.body, `data-seq="`+seq[1]+`"`) || !strings.Contains(a.body, `hx-swap-oob="true" id="inbox"`) {
		t.Fatalf("ack: %d %.600s", a.status, a.body)
	}
	if n := len(e.inbox("human:alice")); n != 0 {
		t.Fatalf("%d entries unacked after the ack", n)
	}

	// Quiet on for an hour, then off: a plain form post is redirected back.
	a = uiDo(t, alice, "POST", e.url+"/ui/quiet", url.Values{"action": {"on"}, "for": {"1h"}, "csrf": {csrf}}, nil)
	if a.status != http.StatusSeeOther {
		t.Fatalf("quiet on: %d %s", a.status, a.body)
	}
	qs, _ := e.holds.QuietRecords(e.ctx, tws, time.Now())
	if len(qs) != 1 || qs[0].Scope != "human:alice" || time.Until(qs[0].Until) < 59*time.Minute {
		t.Fatalf("quiet records %+v", qs)
	}
	if p := uiDo(t, alice, "GET", e.url+"/ui/", nil, nil).body; !strings.Contains(p, "Quiet is <strong>on</strong>") {
		t.Errorf("page does not say quiet is on")
	}
	if a := uiDo(t, alice, "POST", e.url+"/ui/quiet", url.Values{"action": {"on"}, "for": {"1y"}, "csrf": {csrf}}, nil); a.status != 400 {
		t.Errorf("quiet for 1y: %d", a.status)
	}
	uiDo(t, alice, "POST", e.url+"/ui/quiet", url.Values{"action": {"off"}, "csrf": {csrf}}, nil)
	if qs, _ := e.holds.QuietRecords(e.ctx, tws, time.Now()); len(qs) != 0 {
		t.Fatalf("quiet still on: %+v", qs)
	}
}

// The live poll waits while nothing changes, and answers with the new
// state as soon as something does, without a reload.
func TestDashboardLive(t *testing.T) {
	e := newUIEnv(t)
	e.idx.add(tws, "kid")
	if _, _, err := e.sup.Supervise(e.ctx, tws, "kid", "human:alice", supervision.Controller, supervision.ScopeSelf, false, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	e.push("session:kid", "kid", "session.turn_started", "")
	alice := browser(t)
	e.signIn(t, alice)
	page := uiDo(t, alice, "GET", e.url+"/ui/", nil, nil).body
	m := regexp.MustCompile(`hx-get="(/ui/live\?[^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no live poller on the page")
	}
	live := e.url + strings.ReplaceAll(m[1], "&amp;", "&")

	type result struct {
		a    uiAnswer
		took time.Duration
	}
	got := make(chan result, 1)
	start := time.Now()
	go func() {
		a := uiDo(t, alice, "GET", live, nil, nil)
		got <- result{a, time.Since(start)}
	}()
	select {
	case r := <-got:
		t.Fatalf("the live poll answered at once, with nothing changed: %d %.300s", r.a.status, r.a.body)
	case <-time.After(time.Second):
	}
	e.push("session:kid", "kid", "session.permission_requested", "")
	e.events("session.permission_requested")
	select {
	case r := <-got:
		if r.a.status != 200 || !strings.Contains(r.a.body, `data-session="kid" data-status="approval"`) ||
			!strings.Contains(r.a.body, `data-type="session.permission_requested"`) {
			t.Fatalf("live answer: %d %.800s", r.a.status, r.a.body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the live poll did not answer within 10s of the change")
	}
	// A poll with a version that has moved answers at once.
	stale := regexp.MustCompile(`v=[^&"]*`).ReplaceAllString(live, "v=old")
	t0 := time.Now()
	if a := uiDo(t, alice, "GET", stale, nil, nil); a.status != 200 || time.Since(t0) > 5*time.Second || !strings.Contains(a.body, "data-session=\"kid\"") {
		t.Fatalf("stale poll: %d after %v", a.status, time.Since(t0))
	}
}

// The reader cannot run work: its package imports no worker, router or
// push code (docs/design.md §11).
func TestDashboardReaderImportsNoWorker(t *testing.T) {
	deps := goListDeps(t, "../delivery/dashboard")
	for _, d := range deps {
		if strings.Contains(d, "/workers/") || strings.HasSuffix(d, "/delivery/outbound") || strings.HasSuffix(d, "/delivery/escalate") ||
			strings.HasSuffix(d, "/gateway") {
			t.Errorf("package dashboard depends on %s", d)
		}
	}
	if !slices.Contains(deps, "github.com/wakegate/wakegate/delivery/inbox") {
		t.Fatalf("go list found no dependencies: %v", deps)
	}
}

var _ = event.SessionSubject

func newHTTPServer(t *testing.T, s *Server) string {
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// goListDeps lists the packages dir's package depends on.
func goListDeps(t *testing.T, dir string) []string {
	t.Helper()
	goBin := "go"
	if _, err := exec.LookPath(goBin); err != nil {
		goBin = "/usr/local/go/bin/go"
	}
	out, err := exec.Command(goBin, "list", "-deps", dir).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", dir, err)
	}
	return strings.Fields(string(out))
}

func uiBearer(tok string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
}
