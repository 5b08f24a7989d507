package gateway_test

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/integration/stack"
	"github.com/wakegate/wakegate/providers/agent"
	"github.com/wakegate/wakegate/providers/github/app"
	"github.com/wakegate/wakegate/providers/github/app/apptest"
)

const (
	opSecret   = "monitor-test-secret"
	opPassword = "correct horse battery staple"
)

// operatorEnv is the gateway as serve assembles it (package stack),
// so its route list is the binary's.
func operatorEnv(t *testing.T) (url string, routes gin.RoutesInfo) {
	t.Helper()
	rdb, prefix := redistest.New(t)
	// Every optional part on, so every route is registered: the GitHub
	// App (its admin route) against a fake API that is never reached.
	_, key := apptest.Key()
	st, err := stack.New(rdb, stack.Config{Prefix: prefix, Shards: 4,
		GitHubApp: app.Config{AppID: apptest.AppID, PrivateKey: key, APIURL: "http://127.0.0.1:1/"}},
		slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	v, err := agent.NewVerifier(agent.VerifierConfig{HS256Secret: []byte(opSecret)})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := st.Gateway(gateway.Config{WebhookSecrets: [][]byte{[]byte("s")}, TokenSecret: []byte(opSecret),
		OperatorPassword: []byte(opPassword)}, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	engine, ok := gw.Handler().(*gin.Engine)
	if !ok {
		t.Fatalf("the gateway's handler is a %T, not the gin engine", gw.Handler())
	}
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(srv.Close)
	return srv.URL, engine.Routes()
}

func opToken(t *testing.T, sub, scope string) string {
	t.Helper()
	c := agent.Claims{Workspace: "default", Scope: scope}
	c.Subject = sub
	c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(time.Hour))
	tok, err := agent.Mint([]byte(opSecret), c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func request(t *testing.T, method, url string, set func(*http.Request)) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if set != nil {
		set(req)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func bearer(tok string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
}

// TestOperatorRoutesRefuseOthers walks the router's own route list: every
// /admin and /monitor route refuses a request without credentials (401)
// and an admin token (403), so a route added later cannot be forgotten.
func TestOperatorRoutesRefuseOthers(t *testing.T) {
	url, routes := operatorEnv(t)
	admin := opToken(t, "human:alice", "admin inbox subscribe supervise events:push events:read")
	checked := map[string]bool{}
	for _, rt := range routes {
		if !strings.HasPrefix(rt.Path, "/admin") && !strings.HasPrefix(rt.Path, "/monitor/") {
			continue
		}
		path := strings.NewReplacer(":id", "x", ":guid", "x", "*rest", "").Replace(rt.Path)
		if status, _, body := request(t, rt.Method, url+path, nil); status != http.StatusUnauthorized {
			t.Errorf("%s %s without credentials: %d %s, want 401", rt.Method, rt.Path, status, body)
		}
		if status, _, body := request(t, rt.Method, url+path, bearer(admin)); status != http.StatusForbidden {
			t.Errorf("%s %s with an admin token: %d %s, want 403", rt.Method, rt.Path, status, body)
		}
		checked[rt.Path] = true
	}
	for _, want := range []string{"/admin/dead-letters", "/admin/github/redeliver-failed", "/monitor/*rest",
		"/admin/deliveries/:guid/redeliver", "/admin/events/:id/redeliver"} {
		if !checked[want] {
			t.Errorf("the route list lacks %s (checked %v): is every optional part on in operatorEnv?", want, checked)
		}
	}
}

func TestMonitor(t *testing.T) {
	url, _ := operatorEnv(t)
	operator := opToken(t, "human:ops", "operator")

	status, h, _ := request(t, http.MethodGet, url+"/monitor/", nil)
	if status != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Basic ") {
		t.Fatalf("no credentials: %d, WWW-Authenticate %q; want 401 with a Basic challenge", status, h.Get("WWW-Authenticate"))
	}
	status, _, _ = request(t, http.MethodGet, url+"/monitor/", func(r *http.Request) { r.SetBasicAuth("ops", "wrong") })
	if status != http.StatusUnauthorized {
		t.Fatalf("wrong password: %d, want 401", status)
	}
	for name, set := range map[string]func(*http.Request){
		"operator token":    bearer(operator),
		"operator password": func(r *http.Request) { r.SetBasicAuth("operator", opPassword) },
	} {
		status, h, body := request(t, http.MethodGet, url+"/monitor/", set)
		if status != http.StatusOK || !strings.Contains(h.Get("Content-Type"), "text/html") || !strings.Contains(body, "<html") {
			t.Fatalf("%s: %d %s %.200s; want the UI", name, status, h.Get("Content-Type"), body)
		}
		// The UI's API answers too (read-only monitor of the push queue).
		status, _, body = request(t, http.MethodGet, url+"/monitor/api/queues", set)
		if status != http.StatusOK || !strings.Contains(body, "queues") {
			t.Fatalf("%s: /monitor/api/queues %d %.200s", name, status, body)
		}
	}
	// Read-only: a write through the monitor's API is refused.
	status, _, _ = request(t, http.MethodDelete, url+"/monitor/api/queues/wg:push", bearer(operator))
	if status < 400 {
		t.Fatalf("DELETE a queue through the read-only monitor: %d", status)
	}
}

// TestOperatorLoginThrottled (docs/design.md §10): wrong operator passwords
// from one address are answered 401 up to a burst, then 429 with
// Retry-After — the right password included, unseen — while another
// address still gets in; the failures are counted.
func TestOperatorLoginThrottled(t *testing.T) {
	// The monitor and the dashboard take the same password: both are
	// throttled, from one bucket per address.
	for _, path := range []string{"/monitor/", "/ui/"} {
		t.Run(strings.Trim(path, "/"), func(t *testing.T) { testLoginThrottled(t, path) })
	}
}

func testLoginThrottled(t *testing.T, path string) {
	url, _ := operatorEnv(t)
	wrong := func(r *http.Request) { r.SetBasicAuth("operator", "not the password") }
	right := func(r *http.Request) { r.SetBasicAuth("operator", opPassword) }
	var status int
	var h http.Header
	tries := 0
	for ; tries < 100; tries++ {
		if status, h, _ = request(t, http.MethodGet, url+path, wrong); status != http.StatusUnauthorized {
			break
		}
	}
	if status != http.StatusTooManyRequests || h.Get("Retry-After") == "" || h.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("after %d wrong passwords: %d (Retry-After %q), want 429 problem+json with Retry-After", tries, status, h.Get("Retry-After"))
	}
	if tries > 20 {
		t.Fatalf("%d wrong passwords answered before the throttle", tries)
	}
	if status, _, _ := request(t, http.MethodGet, url+path, right); status != http.StatusTooManyRequests {
		t.Fatalf("the right password from a throttled address: %d, want 429", status)
	}
	spoof := func(r *http.Request) {
		wrong(r)
		r.Header.Set("X-Forwarded-For", "203.0.113.9")
		r.Header.Set("X-Real-IP", "203.0.113.9")
	}
	if status, _, _ := request(t, http.MethodGet, url+path, spoof); status != http.StatusTooManyRequests {
		t.Fatalf("a throttled address naming another in X-Forwarded-For: %d, want 429 (the address is the TCP peer's)", status)
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	other := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	req, _ := http.NewRequest(http.MethodGet, url+path, nil)
	right(req)
	resp, err := other.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the right password from another address: %d, want 200", resp.StatusCode)
	}
	_, _, metrics := request(t, http.MethodGet, url+"/metrics", nil)
	if !strings.Contains(metrics, `wakegate_gateway_operator_logins_refused_total{outcome="failed"} `+strconv.Itoa(tries)) ||
		!strings.Contains(metrics, `wakegate_gateway_operator_logins_refused_total{outcome="throttled"} 3`) {
		t.Fatalf("login metrics after %d failures and 3 throttled: %s", tries, grepLines(metrics, "operator_logins"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Basic auth on the monitor is user operator and the operator password
// (docs/design.md §10): the right password under another user name is
// refused.
func TestMonitorBasicUserIsOperator(t *testing.T) {
	url, _ := operatorEnv(t)
	for user, want := range map[string]int{"operator": http.StatusOK, "ops": http.StatusUnauthorized,
		"": http.StatusUnauthorized, "Operator": http.StatusUnauthorized} {
		if status, _, body := request(t, http.MethodGet, url+"/monitor/", func(r *http.Request) { r.SetBasicAuth(user, opPassword) }); status != want {
			t.Errorf("user %q with the operator password: %d %.200s, want %d", user, status, body, want)
		}
	}
}
