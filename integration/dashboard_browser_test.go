package integration

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath finds Debian's headless Chromium. In CI (CI=true, set by
// .ci/run's caller) a missing browser fails the test; elsewhere it skips.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed: .ci/run installs it (apt-get install chromium)")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium); CI fails here instead of skipping")
	return ""
}

// TestDashboardInBrowser drives headless Chromium against a real serve on
// the real Redis: a person signs in with a human: token, sees the spawned
// tree with liveness, watches a permission request arrive without a
// reload, acks it and watches it leave, and sees a PR turn ready; an agent
// session's token and no credentials are refused.
func TestDashboardInBrowser(t *testing.T) {
	chrome := chromiumPath(t)
	const repo = "Codertocat/Hello-World"
	s := newStack(t, map[string]string{
		"WAKEGATE_OPERATOR_PASSWORD": "operator-password-for-ui",
		"WAKEGATE_REQUIRED_CHECKS":   repo + "=Octocoders-linter",
	})
	p := s.start("serve", "serve", nil)
	c := s.client(p)
	base := "http://" + p.Addr
	const ws = "default"

	alice := s.token(t, "human:alice", ws, "inbox supervise")
	root := s.token(t, "session:root", ws, "events:push inbox")
	kid := s.token(t, "session:kid", ws, "events:push inbox")
	pushOK := func(tok string, body []byte) {
		t.Helper()
		if r := c.mustPush(t, tok, ctEvent, body); r.Status/100 != 2 {
			t.Fatalf("push: %s", r)
		}
	}
	pushOK(root, ce("r1", "session.spawned", nil))
	pushOK(kid, ce("k1", "session.spawned", map[string]any{"data": map[string]any{"parent": "root"}}))
	pushOK(kid, ce("k2", "session.turn_started", nil))
	// Alice takes over kid (root drove it since the spawn).
	for _, id := range []string{"root", "kid"} {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/sessions/"+id+"/supervise",
			strings.NewReader(`{"role":"controller","scope":"subtree","takeover":true}`))
		req.Header.Set("Authorization", "Bearer "+alice)
		req.Header.Set("Content-Type", "application/json")
		if r, err := c.do(req); err != nil || r.Status != 200 {
			t.Fatalf("alice supervises %s: %v %v", id, err, r)
		}
	}

	// The refusals, as a browser without credentials and as an agent.
	noRedirect := &http.Client{Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for name, tc := range map[string]struct {
		set    func(*http.Request)
		status int
	}{
		"no credentials":        {func(*http.Request) {}, http.StatusSeeOther},
		"agent session token":   {func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+kid) }, http.StatusForbidden},
		"wrong operator secret": {func(r *http.Request) { r.SetBasicAuth("operator", "wrong-password-x") }, http.StatusUnauthorized},
	} {
		r, _ := http.NewRequest(http.MethodGet, base+"/ui/", nil)
		tc.set(r)
		resp, err := noRedirect.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %d, want %d", name, resp.StatusCode, tc.status)
		}
	}
	r, _ := http.NewRequest(http.MethodPost, base+"/ui/login", strings.NewReader(url.Values{"token": {kid}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := noRedirect.Do(r)
	if err == nil {
		resp.Body.Close()
	}
	if err != nil || resp.StatusCode != http.StatusForbidden || resp.Header.Get("Set-Cookie") != "" {
		t.Fatalf("an agent's token on the login form: %v %v", err, resp)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	// The first Run starts the browser and must not carry a timeout.
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			dctx, dcancel := context.WithTimeout(bctx, 5*time.Second)
			defer dcancel()
			html, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
			t.Fatalf("%s: %v\npage:\n%s", what, err, html)
		}
	}
	eval := func(what, js string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }

	// Without a cookie the page sends the browser to sign in.
	do("open /ui/ signed out", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(css(`#token`)))
	if loc := eval("location", `location.pathname`); loc != "/ui/login" {
		t.Fatalf("signed out, /ui/ landed on %s", loc)
	}
	do("sign in", chromedp.SendKeys(css(`#token`), alice), chromedp.Submit(css(`#token`)),
		chromedp.WaitVisible(css(`#fleet`)))

	// The spawned tree with liveness: kid nested under root, both live.
	do("see the tree", chromedp.WaitVisible(css(`li[data-session="root"] li[data-session="kid"][data-liveness="live"]`)))
	// Mark this page: a reload would lose the mark.
	eval("mark the page", `document.body.dataset.mark = "kept"`)

	// A permission request arrives without a reload.
	pushOK(kid, ce("k3", "session.permission_requested", map[string]any{"data": map[string]any{"tool": "Bash"}}))
	entry := `li.entry[data-type="session.permission_requested"][data-subject="session:kid"]`
	do("watch the request arrive", chromedp.WaitVisible(css(entry)),
		chromedp.WaitVisible(css(`li[data-session="kid"][data-status="approval"]`)))
	if eval("mark", `document.body.dataset.mark || ""`) != "kept" {
		t.Fatal("the page was reloaded to show the request")
	}
	if n := eval("count", `document.querySelector('a[data-count="approval"] .n').textContent`); n != "1" {
		t.Errorf("waiting for approval: %q, want 1", n)
	}

	// Screenshots for the docs when asked (WAKEGATE_UI_SCREENSHOT=dir).
	shoot := func(name string, width, height int64) {
		dir := os.Getenv("WAKEGATE_UI_SCREENSHOT")
		if dir == "" {
			return
		}
		do("viewport", chromedp.EmulateViewport(width, height), chromedp.Sleep(300*time.Millisecond))
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A PR: opened, then its required check passes at head → ready.
	if r := c.mustWebhook(t, "pull_request", newGUID(), fixture(t, "octokit/pull_request/opened.payload.json")); r.Status/100 != 2 {
		t.Fatalf("opened: %s", r)
	}
	prRow := `tr.pr[data-pr="github:` + repo + `#2"]`
	do("see the PR waiting", chromedp.WaitVisible(css(prRow+`[data-ready="false"]`)))
	shoot("dashboard-390.png", 390, 844)
	shoot("dashboard.png", 1280, 900)
	if r := c.mustWebhook(t, "check_run", newGUID(), fixture(t, "octokit/check_run/completed.payload.json")); r.Status/100 != 2 {
		t.Fatalf("check_run: %s", r)
	}
	do("see the PR turn ready", chromedp.WaitVisible(css(prRow+`[data-ready="true"]`)))

	// Ack it: the entry leaves, by keyboard (focus the button, press Enter).
	// The live update that showed the PR ready replaced the inbox section;
	// htmx takes over its forms once it has processed them (until then a
	// form posts the plain way and the page reloads, as it would without
	// JavaScript), so wait for that first.
	processed := `!!(document.querySelector('` + entry + ` form') || {})['htmx-internal-data']?.initHash`
	for deadline := time.Now().Add(10 * time.Second); eval("htmx processed the ack form", `String(`+processed+`)`) != "true"; {
		if time.Now().After(deadline) {
			t.Fatal("htmx never processed the ack form")
		}
		time.Sleep(50 * time.Millisecond)
	}
	do("ack by keyboard", chromedp.Focus(css(entry+` button[aria-label^="Ack entry"]`)),
		chromedp.KeyEvent("\r"), chromedp.WaitNotPresent(css(entry)))
	if eval("mark", `document.body.dataset.mark || ""`) != "kept" {
		t.Fatal("the page was reloaded by the ack")
	}
	if r := c.get(t, "/v1/inbox", alice); bytes.Contains(r.Body, []byte("permission_requested")) {
		t.Fatalf("alice's inbox still holds the request: %s", r.Body)
	}
}
