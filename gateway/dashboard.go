package gateway

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/wakegate/wakegate/delivery/dashboard"
	"github.com/wakegate/wakegate/delivery/holds"
	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/providers/agent"
	"github.com/wakegate/wakegate/providers/event"
)

// The supervision dashboard at /ui/ (docs/design.md §10, §11): server-rendered
// html/template pages over package dashboard's reader, live by long-poll
// with htmx (vendored, embedded). Its only writes are a person's own acks
// and quiet, behind a CSRF token.

//go:embed ui/templates/*.html ui/static/*
var uiFiles embed.FS

const (
	uiPath      = "/ui"
	uiCookie    = "wakegate_ui"
	uiLiveWait  = 25 * time.Second       // the server's wait of one live poll
	uiCoalesce  = 250 * time.Millisecond // a burst of changes renders once
	uiMaxForm   = 16 << 10               // bytes of a form body
	uiMaxCookie = 8 << 10                // bytes of a token exchanged for the cookie
)

var uiTemplates = template.Must(template.New("ui").Funcs(template.FuncMap{
	"ago":    uiAgo,
	"short":  func(s string) string { return s[:min(len(s), 7)] },
	"vq":     url.QueryEscape,
	"clock":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04Z") },
	"label":  func(s dashboard.Status) string { return s.Label() },
	"json":   func(b []byte) string { return string(b) },
	"paused": func(n *dashboard.Node, now time.Time) bool { return n.Paused(now) },
	"node":   func(n *dashboard.Node, now time.Time, nest bool) uiNode { return uiNode{N: n, Now: now, Nest: nest} },
}).ParseFS(uiFiles, "ui/templates/*.html"))

// uiNode is a session row in the template: nested under its parent, or
// flat in a filtered list.
type uiNode struct {
	N    *dashboard.Node
	Now  time.Time
	Nest bool
}

// uiViewer is who looks: the operator (every workspace, no writes) or a
// person (a human: party, their own workspace).
type uiViewer struct {
	Operator  bool
	Workspace string // a person's own
	Party     string // a person's human: party; "" for the operator
	inbox     bool   // the person's token has scope inbox: acks and quiet
	cookie    string // the session cookie's value, when signed in by cookie
}

func (s *Server) dashboardRoutes(r *gin.Engine) {
	if s.deps.Dashboard == nil {
		return
	}
	s.uiKey = uiCSRFKey(s.cfg.TokenSecret)
	r.GET(uiPath, func(c *gin.Context) { c.Redirect(http.StatusMovedPermanently, uiPath+"/") })
	g := r.Group(uiPath, uiHeaders)
	static, _ := fs.Sub(uiFiles, "ui/static")
	g.GET("/static/*file", func(c *gin.Context) {
		c.Header("Cache-Control", "public, max-age=86400")
		c.FileFromFS(strings.TrimPrefix(c.Param("file"), "/"), http.FS(static))
	})
	g.GET("/login", s.uiLoginForm)
	g.POST("/login", s.uiLogin)
	g.GET("/operator", s.uiOperator)
	g.POST("/logout", s.uiLogout)
	g.GET("/", s.uiPage)
	g.GET("/live", s.uiLive)
	g.POST("/ack", s.uiAck)
	g.POST("/quiet", s.uiQuiet)
}

// uiCSRFKey keys the CSRF tokens: derived from the token secret, so every
// gateway replica accepts every other's; a random one when there is none.
func uiCSRFKey(secret []byte) []byte {
	if len(secret) == 0 {
		k := make([]byte, 32)
		_, _ = rand.Read(k)
		return k
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("wakegate dashboard csrf"))
	return m.Sum(nil)
}

func (s *Server) csrfToken(cookie string) string {
	m := hmac.New(sha256.New, s.uiKey)
	m.Write([]byte(cookie))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// uiHeaders keeps the pages out of frames and caches and scripts to the
// embedded ones.
func uiHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	if !strings.HasPrefix(c.Request.URL.Path, uiPath+"/static/") {
		h.Set("Cache-Control", "no-store")
	}
	c.Next()
}

// uiAuth is who the request comes from (docs/design.md §10): a bearer
// token (the operator scope, or a human: party; an agent session's → 403),
// HTTP Basic with user operator and the operator password, or the
// session cookie. Without any: a page asks to sign in (303 to the login
// form), anything else answers 401.
func (s *Server) uiAuth(c *gin.Context) (*uiViewer, bool) {
	if tok, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer "); ok {
		claims, err := s.deps.Verifier.Verify(strings.TrimSpace(tok))
		if err != nil {
			abort(c, newProblem(http.StatusUnauthorized, "unauthenticated", err.Error()))
			return nil, false
		}
		return s.uiViewerOf(c, claims, "")
	}
	if user, pass, ok := c.Request.BasicAuth(); ok {
		if !s.operatorLoginAllowed(c) {
			return nil, false
		}
		if s.operatorPassword(user, pass) {
			return &uiViewer{Operator: true}, true
		}
		s.operatorLoginFailed(c)
		s.uiChallenge(c)
		abort(c, newProblem(http.StatusUnauthorized, "unauthenticated", "wrong operator user or password"))
		return nil, false
	}
	if ck, err := c.Cookie(uiCookie); err == nil && ck != "" {
		if claims, err := s.deps.Verifier.Verify(ck); err == nil {
			return s.uiViewerOf(c, claims, ck)
		}
		s.clearUICookie(c) // expired or from an old key: sign in again
	}
	if c.Request.Method == http.MethodGet && c.FullPath() == uiPath+"/" {
		c.Redirect(http.StatusSeeOther, uiPath+"/login")
		c.Abort()
		return nil, false
	}
	abort(c, newProblem(http.StatusUnauthorized, "unauthenticated", "sign in at "+uiPath+"/login"))
	return nil, false
}

// uiViewerOf admits a token's holder: the operator, or a person; an agent
// session → 403.
func (s *Server) uiViewerOf(c *gin.Context, claims *agent.Claims, cookie string) (*uiViewer, bool) {
	party := string(claims.Party())
	switch {
	case claims.Has("operator") && cookie == "":
		return &uiViewer{Operator: true}, true
	case strings.HasPrefix(party, "human:"):
		if err := s.deps.Sessions.Seen(c.Request.Context(), claims.Workspace, party, s.cfg.Now()); err != nil {
			s.log.Debug("record sighting", "err", err)
		}
		return &uiViewer{Workspace: claims.Workspace, Party: party, inbox: claims.Has("inbox"), cookie: cookie}, true
	}
	abort(c, newProblem(http.StatusForbidden, "forbidden", "the dashboard is for people: an agent session's token cannot open it"))
	return nil, false
}

func (s *Server) operatorPassword(user, pass string) bool {
	if len(s.cfg.OperatorPassword) == 0 {
		return false
	}
	got, want := sha256.Sum256([]byte(pass)), sha256.Sum256(s.cfg.OperatorPassword)
	okPass := subtle.ConstantTimeCompare(got[:], want[:]) == 1
	okUser := subtle.ConstantTimeCompare([]byte(user), []byte("operator")) == 1
	return okPass && okUser
}

func (s *Server) uiChallenge(c *gin.Context) {
	if len(s.cfg.OperatorPassword) > 0 {
		c.Header("WWW-Authenticate", `Basic realm="wakegate dashboard", charset="UTF-8"`)
	}
}

// uiWorkspace is the workspace a request looks at: a person's own (asking
// for another → 403), or for the operator ?ws= (default: the first known).
func (s *Server) uiWorkspace(c *gin.Context, v *uiViewer) (string, []string, bool) {
	want := c.Query("ws")
	if want != "" && !event.ValidWorkspace(want) {
		abort(c, newProblem(http.StatusBadRequest, "malformed", "ws is not a valid workspace name"))
		return "", nil, false
	}
	if !v.Operator {
		if want != "" && want != v.Workspace {
			abort(c, newProblem(http.StatusForbidden, "forbidden", "a person sees only their own workspace"))
			return "", nil, false
		}
		return v.Workspace, nil, true
	}
	all, err := s.deps.Dashboard.Workspaces(c.Request.Context())
	if err != nil {
		s.fail(c, "dashboard", err)
		return "", nil, false
	}
	if want == "" {
		want = "default"
		if len(all) > 0 {
			want = all[0]
		}
	}
	return want, all, true
}

func (s *Server) uiLoginForm(c *gin.Context) {
	s.uiRender(c, http.StatusOK, "login", gin.H{"HasOperator": len(s.cfg.OperatorPassword) > 0})
}

// uiLogin exchanges a human: token for the session cookie (HttpOnly,
// SameSite=Strict, Secure behind TLS), valid while the token is.
func (s *Server) uiLogin(c *gin.Context) {
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, uiMaxForm)
	tok := strings.TrimSpace(c.PostForm("token"))
	fail := func(status int, msg string) {
		s.uiRender(c, status, "login", gin.H{"Error": msg, "HasOperator": len(s.cfg.OperatorPassword) > 0})
	}
	if tok == "" || len(tok) > uiMaxCookie {
		fail(http.StatusBadRequest, "paste a token that starts with ey…")
		return
	}
	claims, err := s.deps.Verifier.Verify(tok)
	if err != nil {
		fail(http.StatusUnauthorized, "that token is not valid here (expired, or from another deployment)")
		return
	}
	if !strings.HasPrefix(string(claims.Party()), "human:") {
		fail(http.StatusForbidden, "only a person's human: token signs in here; the operator uses the operator password")
		return
	}
	maxAge := 12 * 3600
	if claims.ExpiresAt != nil {
		maxAge = min(maxAge, int(time.Until(claims.ExpiresAt.Time)/time.Second))
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: uiCookie, Value: tok, Path: uiPath + "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: uiSecure(c)})
	c.Redirect(http.StatusSeeOther, uiPath+"/")
}

func uiSecure(c *gin.Context) bool {
	return c.Request.TLS != nil || strings.EqualFold(c.GetHeader("X-Forwarded-Proto"), "https")
}

func (s *Server) clearUICookie(c *gin.Context) {
	http.SetCookie(c.Writer, &http.Cookie{Name: uiCookie, Value: "", Path: uiPath + "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: uiSecure(c)})
}

// uiOperator asks a browser for the operator password.
func (s *Server) uiOperator(c *gin.Context) {
	if user, pass, ok := c.Request.BasicAuth(); ok {
		if !s.operatorLoginAllowed(c) {
			return
		}
		if s.operatorPassword(user, pass) {
			c.Redirect(http.StatusSeeOther, uiPath+"/")
			return
		}
		s.operatorLoginFailed(c)
	}
	s.uiChallenge(c)
	s.uiRender(c, http.StatusUnauthorized, "login", gin.H{"Error": "operator sign-in needs user operator and the operator password",
		"HasOperator": len(s.cfg.OperatorPassword) > 0})
}

func (s *Server) uiLogout(c *gin.Context) {
	v, ok := s.uiAuth(c)
	if !ok {
		return
	}
	if !s.uiCSRF(c, v) {
		return
	}
	s.clearUICookie(c)
	c.Redirect(http.StatusSeeOther, uiPath+"/login")
}

// uiCSRF checks a write: a person signed in by cookie must send the form's
// token, and a browser's Origin must be this host. A bearer token is not
// ambient, so needs neither.
func (s *Server) uiCSRF(c *gin.Context, v *uiViewer) bool {
	if v.cookie == "" {
		return true
	}
	if o := c.GetHeader("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != c.Request.Host {
			abort(c, newProblem(http.StatusForbidden, "csrf", "cross-origin write refused"))
			return false
		}
	}
	got := c.PostForm("csrf")
	if got == "" {
		got = c.GetHeader("X-CSRF-Token")
	}
	want := s.csrfToken(v.cookie)
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		abort(c, newProblem(http.StatusForbidden, "csrf", "missing or wrong CSRF token; reload the page"))
		return false
	}
	return true
}

// uiView is what a page renders.
type uiView struct {
	V          *uiViewer
	Workspace  string
	Workspaces []string
	Filter     dashboard.Status
	Statuses   []dashboard.Status
	Now        time.Time
	Fleet      *dashboard.Fleet
	Matching   []*dashboard.Node // with a filter: the sessions in that state
	Inbox      *dashboard.Inbox
	PRs        *dashboard.PullRequests
	Health     *dashboard.HealthReport
	CSRF       string
	Version    string
	Query      string // the page's query, for the live poll
	Notice     string
}

// uiBuild reads everything a page shows; the queries are bounded by the
// page's ?limit= and ?offset= (sessions) and ?prs= (PRs).
func (s *Server) uiBuild(c *gin.Context, v *uiViewer) (*uiView, bool) {
	ws, all, ok := s.uiWorkspace(c, v)
	if !ok {
		return nil, false
	}
	offset, p := intParam(c, "offset", 0, 0, 1<<30)
	if p == nil {
		var limit, prs int
		if limit, p = intParam(c, "limit", dashboard.DefaultSessions, 1, dashboard.MaxSessions); p == nil {
			if prs, p = intParam(c, "prs", dashboard.DefaultPRs, 1, dashboard.MaxPRs); p == nil {
				return s.uiRead(c, v, ws, all, offset, limit, prs)
			}
		}
	}
	abort(c, p)
	return nil, false
}

func (s *Server) uiRead(c *gin.Context, v *uiViewer, ws string, all []string, offset, limit, prs int) (*uiView, bool) {
	ctx, now := c.Request.Context(), s.cfg.Now()
	view := &uiView{V: v, Workspace: ws, Workspaces: all, Statuses: dashboard.Statuses, Now: now}
	if f := dashboard.Status(c.Query("filter")); f != "" {
		if !validStatus(f) {
			abort(c, newProblem(http.StatusBadRequest, "malformed", "filter is not a session state"))
			return nil, false
		}
		view.Filter = f
	}
	q := url.Values{"ws": {ws}}
	for _, k := range []string{"filter", "offset", "limit", "prs"} {
		if x := c.Query(k); x != "" {
			q.Set(k, x)
		}
	}
	view.Query = q.Encode()
	version, err := s.uiVersion(ctx, ws, v.Party)
	if err != nil {
		s.fail(c, "dashboard", err)
		return nil, false
	}
	view.Version = version
	// The health report first: it files what the journal gained into the
	// index the fleet and PRs are listed from.
	if view.Health, err = s.deps.Dashboard.Health(ctx, ws, now); err != nil {
		s.fail(c, "dashboard", err)
		return nil, false
	}
	if v.Party != "" {
		if view.Inbox, err = s.deps.Dashboard.Inbox(ctx, ws, v.Party, dashboard.MaxInbox, now); err != nil {
			s.fail(c, "dashboard", err)
			return nil, false
		}
		view.CSRF = s.csrfToken(v.cookie)
	}
	if view.Fleet, err = s.deps.Dashboard.Fleet(ctx, ws, offset, limit, view.Inbox.Blockers(), now); err != nil {
		s.fail(c, "dashboard", err)
		return nil, false
	}
	if view.Filter != "" {
		var walk func([]*dashboard.Node)
		walk = func(ns []*dashboard.Node) {
			for _, n := range ns {
				if n.Status == view.Filter {
					view.Matching = append(view.Matching, n)
				}
				walk(n.Children)
			}
		}
		walk(view.Fleet.Roots)
	}
	if view.PRs, err = s.deps.Dashboard.PullRequests(ctx, ws, 0, prs, now); err != nil {
		s.fail(c, "dashboard", err)
		return nil, false
	}
	return view, true
}

func validStatus(f dashboard.Status) bool {
	for _, s := range append(dashboard.Statuses, dashboard.Unknown) {
		if f == s {
			return true
		}
	}
	return false
}

// uiVersion names the state a page was rendered from: the journal's end
// and the person's inbox's last seq. A live poll that finds it moved
// answers at once.
func (s *Server) uiVersion(ctx context.Context, ws, party string) (string, error) {
	end, err := s.journalEnd(ctx)
	if err != nil {
		return "", err
	}
	if party == "" {
		return end, nil
	}
	last, err := s.deps.Inbox.Last(ctx, ws, party)
	if err != nil {
		return "", err
	}
	return end + "|" + strconv.FormatInt(last, 10), nil
}

func (s *Server) uiPage(c *gin.Context) {
	v, ok := s.uiAuth(c)
	if !ok {
		return
	}
	view, ok := s.uiBuild(c, v)
	if !ok {
		return
	}
	s.uiRender(c, http.StatusOK, "page", view)
}

// uiLive is the live long-poll: it answers at once when the page's
// version has moved, else when the workspace's journal or the person's
// inbox changes, else after uiLiveWait with the poller alone. Its answer
// swaps the changed sections in (htmx out-of-band) and re-arms the poll.
func (s *Server) uiLive(c *gin.Context) {
	v, ok := s.uiAuth(c)
	if !ok {
		return
	}
	ws, _, ok := s.uiWorkspace(c, v)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	journalWoken, stopJournal := s.notifier.wait(ws)
	defer stopJournal()
	var inboxWoken <-chan struct{}
	if v.Party != "" && s.inboxes != nil {
		ch, stop := s.inboxes.wait(waiterKey(ws, v.Party))
		defer stop()
		inboxWoken = ch
	}
	version, err := s.uiVersion(ctx, ws, v.Party)
	if err != nil {
		s.fail(c, "dashboard", err)
		return
	}
	if version == c.Query("v") {
		timer := time.NewTimer(uiLiveWait)
		defer timer.Stop()
		select {
		case <-journalWoken:
		case <-inboxWoken:
		case <-timer.C:
			q := c.Request.URL.Query()
			q.Del("v")
			s.uiRender(c, http.StatusOK, "poller", &uiView{V: v, Workspace: ws, Version: version, Query: q.Encode()})
			return
		case <-s.stopping:
			return
		case <-ctx.Done():
			return
		}
		select { // let a burst land, then render once
		case <-time.After(uiCoalesce):
		case <-ctx.Done():
			return
		}
	}
	view, ok := s.uiBuild(c, v)
	if !ok {
		return
	}
	s.uiRender(c, http.StatusOK, "live", view)
}

// uiPerson admits a write: a person (the operator has no inbox of its own
// here) with the CSRF token.
func (s *Server) uiPerson(c *gin.Context) (*uiViewer, bool) {
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, uiMaxForm)
	v, ok := s.uiAuth(c)
	if !ok {
		return nil, false
	}
	if v.Operator {
		abort(c, newProblem(http.StatusForbidden, "forbidden", "the operator reads here; acks and quiet are a person's own"))
		return nil, false
	}
	if !v.inbox {
		abort(c, newProblem(http.StatusForbidden, "forbidden", "token lacks scope inbox"))
		return nil, false
	}
	if ws := c.PostForm("ws"); ws != "" && ws != v.Workspace {
		abort(c, newProblem(http.StatusForbidden, "forbidden", "a person acts only in their own workspace"))
		return nil, false
	}
	if !s.uiCSRF(c, v) {
		return nil, false
	}
	return v, true
}

// uiAck acks one entry (seq) or every entry through one (through=1).
func (s *Server) uiAck(c *gin.Context) {
	v, ok := s.uiPerson(c)
	if !ok {
		return
	}
	seq, err := strconv.ParseInt(c.PostForm("seq"), 10, 64)
	if err != nil || seq <= 0 {
		abort(c, newProblem(http.StatusBadRequest, "malformed", "seq must be a positive integer"))
		return
	}
	var through int64
	var seqs []int64
	if c.PostForm("through") == "1" {
		through = seq
	} else {
		seqs = []int64{seq}
	}
	n, err := s.deps.Inbox.Ack(c.Request.Context(), v.Workspace, v.Party, through, seqs)
	switch {
	case errors.Is(err, inbox.ErrBeyondLast), errors.Is(err, inbox.ErrInvalid):
		abort(c, newProblem(http.StatusBadRequest, "malformed", "no such entry; nothing was acked"))
		return
	case err != nil:
		s.fail(c, "ack", err)
		return
	}
	s.uiAfterWrite(c, v, fmt.Sprintf("acked %d", n))
}

// uiQuiet turns the person's quiet on (until a time, or until lifted) or
// off (which releases its digest), as PUT and DELETE /v1/quiet do.
func (s *Server) uiQuiet(c *gin.Context) {
	v, ok := s.uiPerson(c)
	if !ok {
		return
	}
	if s.deps.Holds == nil || s.deps.Releaser == nil {
		abort(c, newProblem(http.StatusNotFound, "not-found", "quiet is not served here"))
		return
	}
	ctx, now := c.Request.Context(), s.cfg.Now()
	switch c.PostForm("action") {
	case "on":
		q := holds.Quiet{Scope: v.Party, Reason: "dashboard", By: v.Party, At: now.UTC()}
		if f := c.PostForm("for"); f != "" {
			d, err := time.ParseDuration(f)
			if err != nil || d < time.Minute || d > 7*24*time.Hour {
				abort(c, newProblem(http.StatusBadRequest, "malformed", "for must be a duration between 1m and 168h"))
				return
			}
			q.Until = now.Add(d).UTC()
		} else if u := c.PostForm("until"); u != "" {
			t, err := time.Parse(time.RFC3339, u)
			if err != nil || !t.After(now) {
				abort(c, newProblem(http.StatusBadRequest, "malformed", "until must be an RFC 3339 time in the future"))
				return
			}
			q.Until = t.UTC()
		}
		if err := s.deps.Holds.SetQuiet(ctx, v.Workspace, q); err != nil {
			s.fail(c, "quiet", err)
			return
		}
		if !q.Until.IsZero() {
			if err := s.deps.Releaser.ScheduleQuietEnd(ctx, v.Workspace, v.Party, q.Until); err != nil {
				s.fail(c, "quiet", err)
				return
			}
		}
		s.uiAfterWrite(c, v, "quiet on")
	case "off":
		if _, _, err := s.deps.Releaser.LiftQuiet(ctx, v.Workspace, v.Party); err != nil {
			s.fail(c, "quiet", err)
			return
		}
		s.uiAfterWrite(c, v, "quiet off")
	default:
		abort(c, newProblem(http.StatusBadRequest, "malformed", `action must be "on" or "off"`))
	}
}

// uiAfterWrite answers a write: htmx gets the refreshed sections, a
// plain form post a redirect back to the page.
func (s *Server) uiAfterWrite(c *gin.Context, v *uiViewer, notice string) {
	if c.GetHeader("HX-Request") != "true" {
		c.Redirect(http.StatusSeeOther, uiPath+"/?ws="+url.QueryEscape(v.Workspace))
		return
	}
	c.Request.URL.RawQuery = url.Values{"ws": {v.Workspace}}.Encode()
	view, ok := s.uiBuild(c, v)
	if !ok {
		return
	}
	view.Notice = notice
	s.uiRender(c, http.StatusOK, "live", view)
}

func (s *Server) uiRender(c *gin.Context, status int, name string, data any) {
	var b bytes.Buffer
	if err := uiTemplates.ExecuteTemplate(&b, name, data); err != nil {
		s.log.Error("dashboard render", "template", name, "err", err)
		abort(c, newProblem(http.StatusInternalServerError, "internal", "the page could not be rendered"))
		return
	}
	c.Data(status, "text/html; charset=utf-8", b.Bytes())
}

// uiAgo says how long ago t was, in a person's units.
func uiAgo(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s ago"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m ago"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h ago"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + "d ago"
}
