package app

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	gh "github.com/google/go-github/v66/github"
)

// DefaultAPIURL is GitHub's REST API (WAKEGATE_GITHUB_API_URL's default).
const DefaultAPIURL = "https://api.github.com/"

// ErrNotInstalled is wrapped by Client.Repo's error when the App is not
// installed on the repository (GitHub answers 404).
var ErrNotInstalled = errors.New("github app: not installed on the repository")

// Config identifies the App.
type Config struct {
	// AppID is the App's numeric id (WAKEGATE_GITHUB_APP_ID), the iss of
	// its JWTs. Required.
	AppID string
	// PrivateKey is the App's PEM private key, PKCS#1 (as GitHub hands it
	// out) or PKCS#8 (WAKEGATE_GITHUB_APP_PRIVATE_KEY). Required.
	PrivateKey []byte
	// APIURL is the REST API base, used as given (GitHub Enterprise:
	// https://HOST/api/v3/; tests: an httptest server). Default
	// DefaultAPIURL.
	APIURL string
	// Transport carries the requests; default http.DefaultTransport.
	Transport http.RoundTripper
	// Timeout bounds one request; default 30s.
	Timeout time.Duration
	// Now is the clock JWTs are issued by and tokens expire by; default
	// time.Now.
	Now func() time.Time
}

// ParseKey parses an App private key. The error never quotes the key.
func ParseKey(pem []byte) (*rsa.PrivateKey, error) {
	key, err := jwt.ParseRSAPrivateKeyFromPEM(pem)
	if err != nil {
		return nil, errors.New("github app private key: not an RSA private key in PEM (PKCS#1 or PKCS#8)")
	}
	return key, nil
}

// Client reaches GitHub as the App: App endpoints with a JWT signed per
// request, repositories with installation tokens. It is safe for
// concurrent use.
type Client struct {
	appID string
	base  *url.URL
	now   func() time.Time
	http  *http.Client // unauthenticated: the transports below wrap it
	app   *gh.Client   // App JWT on every request

	// tokenSlack is how long before its expiry a token is replaced.
	tokenSlack time.Duration
	// installTTL is how long a repository's installation id is cached.
	installTTL time.Duration

	mu       sync.Mutex
	installs map[string]installation // lower-case "org/repo" → installation
	tokens   map[int64]token         // installation id → token
	repos    map[int64]*gh.Client    // installation id → client using its token
}

type installation struct {
	id      int64
	fetched time.Time
}

type token struct {
	value   string
	expires time.Time
}

// NewClient returns a client for the App cfg describes.
func NewClient(cfg Config) (*Client, error) {
	if _, err := strconv.ParseInt(cfg.AppID, 10, 64); err != nil {
		return nil, fmt.Errorf("github app id %q: want the App's numeric id", cfg.AppID)
	}
	key, err := ParseKey(cfg.PrivateKey)
	if err != nil {
		return nil, err
	}
	if cfg.APIURL == "" {
		cfg.APIURL = DefaultAPIURL
	}
	base, err := url.Parse(cfg.APIURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("github api url %q: want an absolute http(s) URL", cfg.APIURL)
	}
	if !strings.HasSuffix(base.Path, "/") {
		base.Path += "/"
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Client{
		appID: cfg.AppID, base: base, now: cfg.Now,
		http:       &http.Client{Transport: cfg.Transport, Timeout: cfg.Timeout},
		tokenSlack: 5 * time.Minute, installTTL: time.Hour,
		installs: map[string]installation{}, tokens: map[int64]token{}, repos: map[int64]*gh.Client{},
	}
	c.app = c.newGitHub(&jwtTransport{key: key, appID: cfg.AppID, now: cfg.Now, next: cfg.Transport})
	return c, nil
}

// newGitHub is a go-github client on the API base through rt.
func (c *Client) newGitHub(rt http.RoundTripper) *gh.Client {
	g := gh.NewClient(&http.Client{Transport: rt, Timeout: c.http.Timeout})
	u := *c.base
	g.BaseURL = &u
	g.UserAgent = "wakegate"
	return g
}

// App is the client for App endpoints (/app/...): every request carries a
// fresh App JWT.
func (c *Client) App() *gh.Client { return c.app }

// Repo returns a client authenticated for repo ("org/repo") with its
// installation's token. The installation is looked up once an hour
// (GET /repos/{owner}/{repo}/installation); a repository the App is not
// installed on returns an error wrapping ErrNotInstalled.
func (c *Client) Repo(ctx context.Context, repo string) (*gh.Client, error) {
	id, err := c.installationOf(ctx, repo)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.repos[id]
	if g == nil {
		g = c.newGitHub(&tokenTransport{c: c, installation: id, next: c.http.Transport})
		c.repos[id] = g
	}
	return g, nil
}

func (c *Client) installationOf(ctx context.Context, repo string) (int64, error) {
	owner, name, ok := SplitRepo(repo)
	if !ok {
		return 0, fmt.Errorf("repository %q: want org/repo", repo)
	}
	k := strings.ToLower(repo)
	c.mu.Lock()
	in, found := c.installs[k]
	c.mu.Unlock()
	if found && c.now().Sub(in.fetched) < c.installTTL {
		return in.id, nil
	}
	inst, resp, err := c.app.Apps.FindRepositoryInstallation(ctx, owner, name)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return 0, fmt.Errorf("%s: %w", repo, ErrNotInstalled)
		}
		return 0, fmt.Errorf("installation of %s: %w", repo, err)
	}
	if inst.GetID() == 0 {
		return 0, fmt.Errorf("installation of %s: no id in the answer", repo)
	}
	c.mu.Lock()
	c.installs[k] = installation{id: inst.GetID(), fetched: c.now()}
	c.mu.Unlock()
	return inst.GetID(), nil
}

// token returns a token of installation id, minting one (POST
// /app/installations/{id}/access_tokens) when none is cached or the cached
// one expires within tokenSlack. Two callers racing may both mint: GitHub
// allows it, and the later one is kept.
func (c *Client) token(ctx context.Context, id int64) (string, error) {
	c.mu.Lock()
	t, ok := c.tokens[id]
	c.mu.Unlock()
	if ok && c.now().Add(c.tokenSlack).Before(t.expires) {
		return t.value, nil
	}
	it, _, err := c.app.Apps.CreateInstallationToken(ctx, id, nil)
	if err != nil {
		return "", fmt.Errorf("installation token of %d: %w", id, err)
	}
	if it.GetToken() == "" {
		return "", fmt.Errorf("installation token of %d: empty answer", id)
	}
	t = token{value: it.GetToken(), expires: it.GetExpiresAt().Time}
	if t.expires.IsZero() {
		t.expires = c.now().Add(time.Hour) // GitHub's documented lifetime
	}
	c.mu.Lock()
	c.tokens[id] = t
	c.mu.Unlock()
	return t.value, nil
}

// tokenTransport authenticates each request with its installation's token.
type tokenTransport struct {
	c            *Client
	installation int64
	next         http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t *tokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := t.c.token(req.Context(), t.installation)
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "token "+tok)
	return t.next.RoundTrip(r)
}

// SplitRepo splits "org/repo".
func SplitRepo(repo string) (owner, name string, ok bool) {
	owner, name, ok = strings.Cut(repo, "/")
	return owner, name, ok && owner != "" && name != "" && !strings.Contains(name, "/")
}
