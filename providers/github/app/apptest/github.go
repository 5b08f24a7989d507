// Package apptest is a fake GitHub REST API for the App side's tests: it
// speaks the real endpoints' shapes — App webhook deliveries newest first
// with the cursor in the Link header, 202 on redeliver, installation
// lookups and tokens, pull requests listed with page links, branch
// protection and rules for a branch — and checks the App JWT of every App
// request and the installation token of every repository request, failing
// the test on one that GitHub would refuse.
package apptest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// AppID is the fake App's id.
const AppID = "4242"

var (
	keyOnce sync.Once
	key     *rsa.PrivateKey
	keyPEM  []byte
)

// Key returns the App's private key and its PKCS#1 PEM (one per test
// binary: generating RSA keys is slow under -race).
func Key() (*rsa.PrivateKey, []byte) {
	keyOnce.Do(func() {
		var err error
		key, err = rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		keyPEM = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	})
	return key, keyPEM
}

// Delivery is one attempt of an App webhook delivery.
type Delivery struct {
	ID          int64
	GUID        string
	DeliveredAt time.Time
	StatusCode  int // 0: no answer (timeout, connection failed)
	Redelivery  bool
	Event       string
	Action      string
}

// PR is a pull request as the fake serves it.
type PR struct {
	Repo      string // "org/repo", as GitHub spells it
	Number    int
	State     string // open | closed
	Merged    bool
	Title     string
	Author    string
	Head      string // sha
	Base      string // branch
	CreatedAt time.Time
	UpdatedAt time.Time
	ClosedAt  time.Time // zero while open
}

// GitHub is the fake API. Its methods are safe for concurrent use.
type GitHub struct {
	URL string

	t   testing.TB
	pub *rsa.PublicKey
	srv *httptest.Server

	mu sync.Mutex
	// PageSize caps per_page of the deliveries list (GitHub caps at 100);
	// tests lower it to page through a few deliveries.
	pageSize     int
	deliveries   []Delivery
	nextID       int64
	redelivered  map[int64]int
	redeliverAns func(d Delivery) int // what POST .../attempts answers; default 202
	attemptCode  func(d Delivery) int // the status of the attempt a redelivery makes; default 202
	installs     map[string]int64     // lower-case repo → installation
	tokenTTL     time.Duration
	tokens       map[string]tokenInfo
	jwts         []string
	pulls        map[string]map[int]PR // lower-case repo → number → PR
	protection   map[string]*protection
	rules        map[string][][]string // repo@branch → per ruleset, required contexts
	fail         map[string]int        // route → status to answer instead
	calls        map[string]int
}

type tokenInfo struct {
	installation int64
	expires      time.Time
}

type protection struct{ contexts, checks []string }

// New starts a fake API, closed when the test ends.
func New(t testing.TB) *GitHub {
	t.Helper()
	k, _ := Key()
	g := &GitHub{t: t, pub: &k.PublicKey, pageSize: 100, nextID: 1000,
		redelivered: map[int64]int{}, installs: map[string]int64{}, tokenTTL: time.Hour,
		tokens: map[string]tokenInfo{}, pulls: map[string]map[int]PR{}, protection: map[string]*protection{},
		rules: map[string][][]string{}, fail: map[string]int{}, calls: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /app/hook/deliveries", g.app("list_deliveries", g.listDeliveries))
	mux.HandleFunc("POST /app/hook/deliveries/{id}/attempts", g.app("redeliver", g.redeliver))
	mux.HandleFunc("GET /repos/{owner}/{repo}/installation", g.app("installation", g.installation))
	mux.HandleFunc("POST /app/installations/{id}/access_tokens", g.app("access_token", g.accessToken))
	mux.HandleFunc("GET /repos/{owner}/{repo}/pulls", g.repo("list_pulls", g.listPulls))
	mux.HandleFunc("GET /repos/{owner}/{repo}/pulls/{number}", g.repo("get_pull", g.getPull))
	mux.HandleFunc("GET /repos/{owner}/{repo}/branches/{branch}/protection", g.repo("protection", g.getProtection))
	mux.HandleFunc("GET /repos/{owner}/{repo}/rules/branches/{branch}", g.repo("rules", g.getRules))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("fake GitHub: unexpected %s %s", r.Method, r.URL)
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
	})
	g.srv = httptest.NewServer(mux)
	g.URL = g.srv.URL + "/"
	t.Cleanup(g.srv.Close)
	return g
}

// SetPageSize caps per_page of the deliveries list.
func (g *GitHub) SetPageSize(n int) { g.mu.Lock(); g.pageSize = n; g.mu.Unlock() }

// SetTokenTTL sets how long installation tokens it issues live.
func (g *GitHub) SetTokenTTL(d time.Duration) { g.mu.Lock(); g.tokenTTL = d; g.mu.Unlock() }

// Fail makes a route answer status (0: answer normally again). Routes:
// list_deliveries, redeliver, installation, access_token, list_pulls,
// get_pull, protection, rules.
func (g *GitHub) Fail(route string, status int) { g.mu.Lock(); g.fail[route] = status; g.mu.Unlock() }

// Calls is how many requests a route has answered (failures included).
func (g *GitHub) Calls(route string) int { g.mu.Lock(); defer g.mu.Unlock(); return g.calls[route] }

// AddDelivery records an attempt; a zero ID takes the next one (ids grow
// with time, as GitHub's do). It returns the id.
func (g *GitHub) AddDelivery(d Delivery) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if d.ID == 0 {
		g.nextID++
		d.ID = g.nextID
	}
	if d.Event == "" {
		d.Event = "pull_request"
	}
	g.deliveries = append(g.deliveries, d)
	return d.ID
}

// OnRedeliver sets what POST /app/hook/deliveries/{id}/attempts answers
// (default 202) and the status of the attempt a successful one makes
// (default 202, what wakegate answers a delivery it takes); nil keeps the
// default.
func (g *GitHub) OnRedeliver(answer, attempt func(d Delivery) int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.redeliverAns, g.attemptCode = answer, attempt
}

// Redelivered returns how many redelivery requests each delivery id got.
func (g *GitHub) Redelivered() map[int64]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[int64]int, len(g.redelivered))
	for k, v := range g.redelivered {
		out[k] = v
	}
	return out
}

// Install installs the App on repo.
func (g *GitHub) Install(repo string, installation int64) {
	g.mu.Lock()
	g.installs[strings.ToLower(repo)] = installation
	g.mu.Unlock()
}

// SetPR adds or replaces a pull request.
func (g *GitHub) SetPR(pr PR) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := strings.ToLower(pr.Repo)
	if g.pulls[k] == nil {
		g.pulls[k] = map[int]PR{}
	}
	g.pulls[k][pr.Number] = pr
}

// SetProtection sets a branch's classic protection: required contexts
// (the deprecated list) and checks; call with both nil to unprotect.
func (g *GitHub) SetProtection(repo, branch string, contexts, checks []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := strings.ToLower(repo) + "@" + branch
	if contexts == nil && checks == nil {
		delete(g.protection, k)
		return
	}
	g.protection[k] = &protection{contexts: contexts, checks: checks}
}

// SetRulesets sets the required_status_checks of each ruleset applying to
// a branch (one slice per ruleset).
func (g *GitHub) SetRulesets(repo, branch string, rulesets ...[]string) {
	g.mu.Lock()
	g.rules[strings.ToLower(repo)+"@"+branch] = rulesets
	g.mu.Unlock()
}

// Credentials returns every JWT it was sent and every token it issued, so
// a test can check none of them was logged.
func (g *GitHub) Credentials() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := slices.Clone(g.jwts)
	for tok := range g.tokens {
		out = append(out, tok)
	}
	return out
}

// CheckAppJWT verifies an App JWT as GitHub does: RS256 signed by pub, iss
// the App id, integer iat and exp, iat back-dated (about 60 s), exp in the
// future and at most 10 minutes ahead of now.
func CheckAppJWT(tok string, pub *rsa.PublicKey, appID string, now time.Time) error {
	parsed, err := jwt.Parse(tok, func(*jwt.Token) (any, error) { return pub, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithoutClaimsValidation())
	if err != nil {
		return fmt.Errorf("jwt: %w", err)
	}
	parts := strings.Split(tok, ".")
	raw, err := jwt.NewParser().DecodeSegment(parts[1])
	if err != nil {
		return fmt.Errorf("jwt payload: %w", err)
	}
	var claims map[string]json.RawMessage
	if err := json.Unmarshal(raw, &claims); err != nil {
		return fmt.Errorf("jwt payload: %w", err)
	}
	integer := func(name string) (int64, error) {
		v, ok := claims[name]
		if !ok {
			return 0, fmt.Errorf("jwt: no %s", name)
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("jwt: %s is %s, not an integer", name, v)
		}
		return n, nil
	}
	iat, err := integer("iat")
	if err != nil {
		return err
	}
	exp, err := integer("exp")
	if err != nil {
		return err
	}
	if iss, _ := parsed.Claims.GetIssuer(); iss != appID {
		return fmt.Errorf("jwt: iss %q, want %q", iss, appID)
	}
	n := now.Unix()
	switch {
	case n-iat < 50 || n-iat > 120:
		return fmt.Errorf("jwt: iat %d s before now, want back-dated about 60 s", n-iat)
	case exp <= n:
		return fmt.Errorf("jwt: expired %d s ago", n-exp)
	case exp-n > 600:
		return fmt.Errorf("jwt: exp %d s ahead, GitHub allows at most 600", exp-n)
	}
	return nil
}

// app wraps an App endpoint: it must carry a valid App JWT.
func (g *GitHub) app(route string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			g.t.Errorf("fake GitHub: %s %s without an App JWT", r.Method, r.URL.Path)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "A JSON web token could not be decoded"})
			return
		}
		g.mu.Lock()
		g.jwts = append(g.jwts, tok)
		g.mu.Unlock()
		if err := CheckAppJWT(tok, g.pub, AppID, time.Now()); err != nil {
			g.t.Errorf("fake GitHub: %s %s: %v", r.Method, r.URL.Path, err)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"message": err.Error()})
			return
		}
		g.serve(route, h, w, r)
	}
}

// repo wraps a repository endpoint: it must carry a live installation
// token of an installation on that repository.
func (g *GitHub) repo(route string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "token ")
		if !ok {
			tok, ok = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		}
		repo := strings.ToLower(r.PathValue("owner") + "/" + r.PathValue("repo"))
		g.mu.Lock()
		info, issued := g.tokens[tok]
		inst := g.installs[repo]
		g.mu.Unlock()
		switch {
		case !ok || !issued:
			g.t.Errorf("fake GitHub: %s %s without an installation token it issued", r.Method, r.URL.Path)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials"})
			return
		case time.Now().After(info.expires):
			g.t.Errorf("fake GitHub: %s %s with an expired installation token", r.Method, r.URL.Path)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials"})
			return
		case info.installation != inst:
			g.t.Errorf("fake GitHub: %s %s with a token of installation %d, the repository's is %d", r.Method, r.URL.Path, info.installation, inst)
			writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
			return
		}
		g.serve(route, h, w, r)
	}
}

func (g *GitHub) serve(route string, h http.HandlerFunc, w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.calls[route]++
	status := g.fail[route]
	g.mu.Unlock()
	if status != 0 {
		writeJSON(w, status, map[string]string{"message": "injected failure"})
		return
	}
	h(w, r)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func ts(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

// listDeliveries is GET /app/hook/deliveries?per_page=&cursor=: newest
// first; the next page's cursor is in the Link header.
func (g *GitHub) listDeliveries(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	all := slices.Clone(g.deliveries)
	size := g.pageSize
	g.mu.Unlock()
	if n, err := strconv.Atoi(r.URL.Query().Get("per_page")); err == nil && n > 0 && n < size {
		size = n
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID > all[j].ID })
	start := 0
	if c := r.URL.Query().Get("cursor"); c != "" {
		after, err := strconv.ParseInt(strings.TrimPrefix(c, "v1_"), 10, 64)
		if err != nil || !strings.HasPrefix(c, "v1_") {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "Invalid cursor"})
			return
		}
		for start < len(all) && all[start].ID >= after {
			start++
		}
	}
	end := min(start+size, len(all))
	page := all[start:end]
	if end < len(all) {
		q := url.Values{"per_page": {strconv.Itoa(size)}, "cursor": {"v1_" + strconv.FormatInt(page[len(page)-1].ID, 10)}}
		w.Header().Set("Link", fmt.Sprintf(`<%sapp/hook/deliveries?%s>; rel="next"`, g.URL, q.Encode()))
	}
	out := make([]map[string]any, 0, len(page))
	for _, d := range page {
		status := "OK"
		switch {
		case d.StatusCode == 0:
			status = "timed out"
		case d.StatusCode >= 400:
			status = "Invalid HTTP Response: " + strconv.Itoa(d.StatusCode)
		}
		out = append(out, map[string]any{
			"id": d.ID, "guid": d.GUID, "delivered_at": ts(d.DeliveredAt), "redelivery": d.Redelivery,
			"duration": 0.27, "status": status, "status_code": d.StatusCode, "event": d.Event, "action": d.Action,
			"installation_id": 1, "repository_id": 186853002, "throttled_at": nil,
		})
	}
	writeJSON(w, http.StatusOK, out)
}

// redeliver is POST /app/hook/deliveries/{id}/attempts: 202, and a new
// attempt under the same GUID.
func (g *GitHub) redeliver(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	g.mu.Lock()
	var orig *Delivery
	for i := range g.deliveries {
		if g.deliveries[i].ID == id {
			orig = &g.deliveries[i]
		}
	}
	if orig == nil {
		g.mu.Unlock()
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	d := *orig
	g.redelivered[id]++
	answer := http.StatusAccepted
	if g.redeliverAns != nil {
		answer = g.redeliverAns(d)
	}
	if answer == http.StatusAccepted {
		code := http.StatusAccepted
		if g.attemptCode != nil {
			code = g.attemptCode(d)
		}
		g.nextID++
		g.deliveries = append(g.deliveries, Delivery{ID: g.nextID, GUID: d.GUID, DeliveredAt: time.Now(), StatusCode: code,
			Redelivery: true, Event: d.Event, Action: d.Action})
	}
	g.mu.Unlock()
	if answer != http.StatusAccepted {
		writeJSON(w, answer, map[string]string{"message": "injected failure"})
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{})
}

// installation is GET /repos/{owner}/{repo}/installation.
func (g *GitHub) installation(w http.ResponseWriter, r *http.Request) {
	repo := strings.ToLower(r.PathValue("owner") + "/" + r.PathValue("repo"))
	g.mu.Lock()
	id, ok := g.installs[repo]
	g.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "app_id": 4242, "target_type": "Organization"})
}

// accessToken is POST /app/installations/{id}/access_tokens: 201.
func (g *GitHub) accessToken(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	var b [16]byte
	_, _ = rand.Read(b[:])
	tok := fmt.Sprintf("ghs_%x", b)
	g.mu.Lock()
	known := false
	for _, v := range g.installs {
		known = known || v == id
	}
	exp := time.Now().Add(g.tokenTTL)
	if known {
		g.tokens[tok] = tokenInfo{installation: id, expires: exp}
	}
	g.mu.Unlock()
	if !known {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"token": tok, "expires_at": ts(exp), "permissions": map[string]string{"pull_requests": "read"}})
}

func prJSON(p PR, full bool, base string) map[string]any {
	head := p.Head
	if head == "" {
		head = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
	}
	branch := p.Base
	if branch == "" {
		branch = "main"
	}
	var mergedAt time.Time
	if p.Merged {
		mergedAt = p.ClosedAt
	}
	m := map[string]any{
		"url": fmt.Sprintf("%srepos/%s/pulls/%d", base, p.Repo, p.Number),
		"id":  100000 + p.Number, "number": p.Number, "state": p.State, "locked": false, "title": p.Title,
		"user": map[string]any{"login": p.Author, "type": "User"},
		"body": nil, "html_url": fmt.Sprintf("https://github.com/%s/pull/%d", p.Repo, p.Number),
		"labels": []any{}, "draft": false,
		"head":       map[string]any{"ref": "feature", "sha": head, "repo": map[string]any{"full_name": p.Repo}},
		"base":       map[string]any{"ref": branch, "sha": "f95f852bd8fca8fcc58a9a2d6c842781e32a215e", "repo": map[string]any{"full_name": p.Repo}},
		"created_at": ts(p.CreatedAt), "updated_at": ts(p.UpdatedAt), "closed_at": ts(p.ClosedAt), "merged_at": ts(mergedAt),
		"merge_commit_sha": nil,
	}
	if full { // GET .../pulls/{n} has merged; the list's "simple" PRs do not
		m["merged"] = p.Merged
		m["mergeable"] = nil
		m["mergeable_state"] = "unknown"
	}
	return m
}

// listPulls is GET /repos/{owner}/{repo}/pulls?state=&sort=&direction=
// &per_page=&page=, with page links.
func (g *GitHub) listPulls(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	repo := strings.ToLower(r.PathValue("owner") + "/" + r.PathValue("repo"))
	g.mu.Lock()
	var prs []PR
	for _, p := range g.pulls[repo] {
		if s := q.Get("state"); s == "all" || s == p.State || (s == "" && p.State == "open") {
			prs = append(prs, p)
		}
	}
	g.mu.Unlock()
	if q.Get("sort") != "updated" || q.Get("direction") != "desc" {
		g.t.Errorf("fake GitHub: pulls listed with sort=%q direction=%q; only updated/desc is served", q.Get("sort"), q.Get("direction"))
	}
	sort.Slice(prs, func(i, j int) bool { return prs[i].UpdatedAt.After(prs[j].UpdatedAt) })
	size, _ := strconv.Atoi(q.Get("per_page"))
	if size <= 0 || size > 100 {
		size = 30
	}
	page, _ := strconv.Atoi(q.Get("page"))
	page = max(page, 1)
	start := min((page-1)*size, len(prs))
	end := min(start+size, len(prs))
	if end < len(prs) {
		next := url.Values{"state": {q.Get("state")}, "sort": {"updated"}, "direction": {"desc"},
			"per_page": {strconv.Itoa(size)}, "page": {strconv.Itoa(page + 1)}}
		w.Header().Set("Link", fmt.Sprintf(`<%srepos/%s/%s/pulls?%s>; rel="next"`, g.URL, r.PathValue("owner"), r.PathValue("repo"), next.Encode()))
	}
	out := make([]map[string]any, 0, end-start)
	for _, p := range prs[start:end] {
		out = append(out, prJSON(p, false, g.URL))
	}
	writeJSON(w, http.StatusOK, out)
}

// getPull is GET /repos/{owner}/{repo}/pulls/{number}.
func (g *GitHub) getPull(w http.ResponseWriter, r *http.Request) {
	repo := strings.ToLower(r.PathValue("owner") + "/" + r.PathValue("repo"))
	n, _ := strconv.Atoi(r.PathValue("number"))
	g.mu.Lock()
	p, ok := g.pulls[repo][n]
	g.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	writeJSON(w, http.StatusOK, prJSON(p, true, g.URL))
}

// getProtection is GET /repos/{owner}/{repo}/branches/{branch}/protection.
func (g *GitHub) getProtection(w http.ResponseWriter, r *http.Request) {
	k := strings.ToLower(r.PathValue("owner")+"/"+r.PathValue("repo")) + "@" + r.PathValue("branch")
	g.mu.Lock()
	p := g.protection[k]
	g.mu.Unlock()
	if p == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Branch not protected",
			"documentation_url": "https://docs.github.com/rest/branches/branch-protection#get-branch-protection"})
		return
	}
	checks := make([]map[string]any, 0, len(p.checks))
	for _, c := range p.checks {
		checks = append(checks, map[string]any{"context": c, "app_id": 15368})
	}
	rsc := map[string]any{"strict": true, "checks": checks}
	if p.contexts != nil {
		rsc["contexts"] = p.contexts
	}
	writeJSON(w, http.StatusOK, map[string]any{"url": r.URL.String(), "required_status_checks": rsc,
		"enforce_admins": map[string]any{"enabled": false}})
}

// getRules is GET /repos/{owner}/{repo}/rules/branches/{branch}: every
// active rule of the rulesets applying to the branch, a few not about
// status checks among them.
func (g *GitHub) getRules(w http.ResponseWriter, r *http.Request) {
	repo := r.PathValue("owner") + "/" + r.PathValue("repo")
	k := strings.ToLower(repo) + "@" + r.PathValue("branch")
	g.mu.Lock()
	sets := g.rules[k]
	g.mu.Unlock()
	out := []map[string]any{{"type": "deletion", "ruleset_source_type": "Repository", "ruleset_source": repo, "ruleset_id": 1}}
	for i, set := range sets {
		checks := make([]map[string]any, 0, len(set))
		for _, c := range set {
			checks = append(checks, map[string]any{"context": c})
		}
		out = append(out, map[string]any{"type": "required_status_checks", "ruleset_source_type": "Organization",
			"ruleset_source": "org", "ruleset_id": 10 + i,
			"parameters": map[string]any{"strict_required_status_checks_policy": false, "do_not_enforce_on_create": false,
				"required_status_checks": checks}})
	}
	out = append(out, map[string]any{"type": "pull_request", "ruleset_source_type": "Repository", "ruleset_source": repo, "ruleset_id": 2,
		"parameters": map[string]any{"required_approving_review_count": 1, "dismiss_stale_reviews_on_push": false,
			"require_code_owner_review": false, "require_last_push_approval": false, "required_review_thread_resolution": false}})
	writeJSON(w, http.StatusOK, out)
}
