// Package client speaks wakegate's HTTP API (docs/design.md §4–§9) for agents,
// harness hooks, the CLI and tests: one typed place for every /v1 call.
//
// It depends on the standard library and the repository's event types
// only (package providers/event), so a harness can embed it without
// pulling the server in. Errors the gateway answers (RFC 9457
// problem+json) come back as *Error, which callers inspect with
// errors.As or StatusOf.
package client

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Defaults of New.
const (
	// DefaultTimeout bounds one attempt of a call (connection to the end of
	// the answer); a long-poll's wait is added to it.
	DefaultTimeout = 15 * time.Second
	// DefaultRetries is how many times an idempotent call is tried again
	// after a transport error, 429, 502, 503 or 504.
	DefaultRetries = 2
	// MaxWait is the longest long-poll the gateway serves; longer waits are
	// clamped to it.
	MaxWait = 60 * time.Second
)

// maxBackoff caps the pause between retries, Retry-After included.
const maxBackoff = 5 * time.Second

// Client calls one wakegate gateway with one token. It is safe for
// concurrent use.
type Client struct {
	base    *url.URL
	token   string
	hc      *http.Client
	timeout time.Duration
	retries int
	agent   string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient replaces the HTTP client (its Timeout, if any, also
// bounds long-polls: leave it zero and use WithTimeout).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithTimeout bounds one attempt of a call; a long-poll's wait is added
// to it. Default DefaultTimeout.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithRetries sets how many times an idempotent call is tried again after
// a transport error or a 429, 502, 503 or 504 (0: never). Default
// DefaultRetries. Retries stop at the context's deadline.
func WithRetries(n int) Option { return func(c *Client) { c.retries = max(n, 0) } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.agent = ua } }

// New returns a client of the gateway at baseURL (such as
// "http://127.0.0.1:8080") that authenticates with token (a wakegate JWT;
// empty sends no Authorization header).
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("wakegate: base URL %q must be http(s)://host[:port]", baseURL)
	}
	c := &Client{base: u, token: token, timeout: DefaultTimeout, retries: DefaultRetries, agent: "wakegate-client/1"}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = defaultHTTPClient()
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	return c, nil
}

// defaultHTTPClient bounds what a hung network can cost: dialing and TLS
// take at most 5 s each; a whole attempt is bounded by its context (the
// client's timeout plus any long-poll wait), so http.Client.Timeout stays
// zero. Redirects are not followed: the API never redirects, and one
// would drop a POST's body.
func defaultHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = 5 * time.Second
	t.MaxIdleConnsPerHost = 8
	return &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// Error is an answer of the gateway that is not a success: an RFC 9457
// problem (type, title, status, detail) and the extension members
// wakegate sets. An answer that is not problem+json (a proxy's error
// page) has only Status, Title (the status text) and a short Detail.
type Error struct {
	Method, Path string // of the request

	Status   int          `json:"status"`
	Type     string       `json:"type"`
	Title    string       `json:"title"`
	Detail   string       `json:"detail,omitempty"`
	Instance string       `json:"instance,omitempty"` // the request id
	Holder   string       `json:"holder,omitempty"`   // a lease or link holder (409, not_controller)
	Epoch    int64        `json:"epoch,omitempty"`
	Errors   []EventError `json:"errors,omitempty"` // a refused push's per-event errors
	// RetryAfter is the answer's Retry-After (429, 503), zero when absent.
	RetryAfter time.Duration `json:"-"`
}

// EventError says why one event of a refused push was refused.
type EventError struct {
	Index  int    `json:"index"`
	ID     string `json:"id,omitempty"`
	Detail string `json:"detail"`
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("wakegate: %s %s: %d", e.Method, e.Path, e.Status)
	if e.Title != "" {
		msg += " " + e.Title
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	for i, ee := range e.Errors {
		if i == 3 {
			msg += fmt.Sprintf(" (and %d more)", len(e.Errors)-3)
			break
		}
		msg += fmt.Sprintf("; event %d: %s", ee.Index, ee.Detail)
	}
	return msg
}

// Code is the last segment of the problem type, such as "not-found",
// "conflict" or "not_controller"; "" for an answer that was not a problem.
func (e *Error) Code() string {
	if i := strings.LastIndexByte(e.Type, '/'); i >= 0 {
		return e.Type[i+1:]
	}
	return ""
}

// StatusOf returns the HTTP status of an *Error in err's chain, or 0 (a
// transport error, a context error, or nil).
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// Temporary reports whether err is worth trying again later: the
// gateway could not be reached or did not answer in time, or it answered
// 429, 500, 502, 503 or 504.
func Temporary(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var te *TransportError
	if errors.As(err, &te) {
		return true
	}
	switch StatusOf(err) {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// TransportError is a call that got no answer: the gateway could not be
// reached, the connection broke, or the attempt timed out.
type TransportError struct {
	Method, Path string
	Err          error
}

func (e *TransportError) Error() string {
	return fmt.Sprintf("wakegate: %s %s: %v", e.Method, e.Path, e.Err)
}

func (e *TransportError) Unwrap() error { return e.Err }

// call is one API request.
type call struct {
	method, path string
	query        url.Values
	body         []byte // sent as is on every attempt
	contentType  string
	wait         time.Duration // a long-poll's wait: added to the attempt's timeout
	idempotent   bool          // may be retried
	header       http.Header   // sent on every attempt (such as one X-Request-Id for all)
}

// do runs a call, retrying an idempotent one, and decodes a 2xx JSON
// answer into out (when not nil). It returns the answer's status.
func (c *Client) do(ctx context.Context, cl call, out any) (int, error) {
	attempts := 1
	if cl.idempotent {
		attempts += c.retries
	}
	var err error
	for i := range attempts {
		var status int
		var retryAfter time.Duration
		status, retryAfter, err = c.once(ctx, cl, out)
		if err == nil {
			return status, nil
		}
		if i == attempts-1 || ctx.Err() != nil || !retryable(err) {
			break
		}
		pause := retryAfter
		if pause <= 0 {
			pause = backoff(i)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < pause {
			break // no time left for another attempt
		}
		t := time.NewTimer(min(pause, maxBackoff))
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, err
		case <-t.C:
		}
	}
	return 0, err
}

// retryable: what another attempt of an idempotent call may cure (the
// loop stops anyway once the caller's context is done).
func retryable(err error) bool {
	var te *TransportError
	if errors.As(err, &te) {
		return true
	}
	switch StatusOf(err) {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// backoff is the pause before retry i+1: 250 ms doubling, jittered ±20 %.
func backoff(i int) time.Duration {
	d := 250 * time.Millisecond << min(i, 5)
	j := time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
	return min(j, maxBackoff)
}

func (c *Client) once(ctx context.Context, cl call, out any) (status int, retryAfter time.Duration, err error) {
	actx, cancel := context.WithTimeout(ctx, c.timeout+cl.wait)
	defer cancel()
	u := *c.base
	// cl.path is escaped (segments through url.PathEscape): sent as is, so
	// an id holding '/' travels as %2F.
	u.RawPath = c.base.EscapedPath() + cl.path
	if u.Path, err = url.PathUnescape(u.RawPath); err != nil {
		return 0, 0, fmt.Errorf("wakegate: %s %s: %w", cl.method, cl.path, err)
	}
	u.RawQuery = cl.query.Encode()
	var body io.Reader
	if cl.body != nil {
		body = bytes.NewReader(cl.body)
	}
	req, err := http.NewRequestWithContext(actx, cl.method, u.String(), body)
	if err != nil {
		return 0, 0, fmt.Errorf("wakegate: %s %s: %w", cl.method, cl.path, err)
	}
	if cl.body != nil {
		ct := cl.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("User-Agent", c.agent)
	for k, v := range cl.header {
		req.Header[k] = v
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, 0, &TransportError{Method: cl.method, Path: cl.path, Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return 0, 0, &TransportError{Method: cl.method, Path: cl.path, Err: fmt.Errorf("read answer: %w", err)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := decodeProblem(resp, raw)
		e.Method, e.Path = cl.method, cl.path
		return resp.StatusCode, e.RetryAfter, e
	}
	if out != nil && len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, 0, fmt.Errorf("wakegate: %s %s: answer is not the JSON expected: %w", cl.method, cl.path, err)
		}
	}
	return resp.StatusCode, 0, nil
}

// decodeProblem reads an error answer: problem+json when it is one, else
// the status and the first line of the body.
func decodeProblem(resp *http.Response, raw []byte) *Error {
	e := &Error{}
	if json.Unmarshal(raw, e) != nil || e.Type == "" && e.Title == "" {
		e = &Error{}
		line, _, _ := strings.Cut(strings.TrimSpace(string(raw)), "\n")
		if len(line) > 200 {
			line = line[:200] + "…"
		}
		e.Detail = line
	}
	e.Status = resp.StatusCode
	if e.Title == "" {
		e.Title = http.StatusText(resp.StatusCode)
	}
	if v := resp.Header.Get("Retry-After"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			e.RetryAfter = time.Duration(n) * time.Second
		} else if t, err := http.ParseTime(v); err == nil {
			e.RetryAfter = max(time.Until(t), 0)
		}
	}
	return e
}

// waitParam formats a long-poll wait, clamped to MaxWait.
func waitParam(q url.Values, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	d = min(d, MaxWait)
	q.Set("wait", d.String())
	return d
}

// NewID returns a random event id (32 hex digits).
func NewID() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}
