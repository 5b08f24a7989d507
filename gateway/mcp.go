package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wakegate/wakegate/delivery/holds"
	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/event"
)

// The MCP endpoint (docs/design.md §10 "/mcp: each tool needs the scope
// of its REST route"): the agent API as Model Context Protocol tools over
// streamable HTTP, for agents that speak MCP.
//
// Each tool runs its REST twin's route in process, on the caller's own
// bearer token, through the same router: authentication, scopes,
// validation, error messages, rate limits and body bounds are the REST
// API's, stated once. A tool adds only what a model needs on top: compact
// text, and the REST answer as structured content.
//
// The transport is stateless: every POST carries its token and is served
// on its own, so there is no MCP session that another token could use, and
// any gateway replica serves any request.

// mcpMaxBody bounds the body of a /mcp request (one JSON-RPC message or a
// small batch; a message's text is at most 16 KiB).
const mcpMaxBody = 1 << 20

// mcpDefaultWait is inbox_wait's wait when none is given.
const mcpDefaultWait = 30

// mcpInstructions is what a client shows its model at initialize.
const mcpInstructions = `wakegate keeps your durable inbox and your supervision of other sessions.
Loop: inbox_wait (after = the "next" of your last read) → act on what woke you → inbox_ack through_seq.
Subscribe to what you wait for (a PR: subjects ["github:org/repo#12"]); supervise the sessions you drive; message_send to talk to one.
After a restart or a compaction, call supervision_brief first.`

// mcpRoutes mounts /mcp: the token is verified per HTTP request, and the
// sighting recorded, by authenticate, like every /v1 route.
func (s *Server) mcpRoutes(r *gin.Engine) {
	t := &mcpTools{s: s}
	t.routes = sync.OnceValue(t.registered)
	// The SDK logs every stateless request's session at info: keep its
	// warnings and errors only.
	log := slog.New(minLevel{s.log.With("component", "mcp").Handler(), slog.LevelWarn})
	srv := mcp.NewServer(&mcp.Implementation{Name: "wakegate", Version: "v1"}, &mcp.ServerOptions{
		Instructions: mcpInstructions,
		Logger:       log,
		// Tools only, and no list-changed notifications: a stateless
		// server has no stream to send them on.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	t.register(srv)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true,
		// The SDK refuses a loopback connection with a non-loopback Host
		// (DNS rebinding against unauthenticated local servers). Every
		// request here needs a bearer token a rebinding page does not
		// have, and a gateway behind a local reverse proxy sees exactly
		// such requests.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        mcpMaxBody,
		Logger:                     log,
	})
	r.Any("/mcp", s.authenticate, func(c *gin.Context) {
		// The tools' REST calls carry this request's id: their log lines
		// join the /mcp request's.
		c.Request.Header.Set("X-Request-Id", c.GetString(requestIDKey))
		// The SDK runs a call on a context detached from its request (it
		// keeps the values): the call's REST request ends with it.
		ctx := c.Request.Context()
		h.ServeHTTP(c.Writer, c.Request.WithContext(context.WithValue(ctx, mcpRequestKey{}, ctx)))
	})
}

// mcpRequestKey holds the context of the /mcp request a call came in on.
type mcpRequestKey struct{}

// minLevel passes on the records of its handler at min or above.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(attrs), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}

// mcpTools are the tools of /mcp.
type mcpTools struct {
	s *Server
	// routes are the REST routes the router has ("METHOD pattern"),
	// read once at the first call, after every route is registered.
	routes func() map[string]bool
}

func (t *mcpTools) registered() map[string]bool {
	out := map[string]bool{}
	if e, ok := t.s.handler.(*gin.Engine); ok {
		for _, r := range e.Routes() {
			out[r.Method+" "+r.Path] = true
		}
	}
	return out
}

// restRoute is the REST twin of a tool: its method and route pattern, and
// what the tool is called when the gateway does not serve the route.
type restRoute struct {
	method, pattern, what string
}

var (
	routeInbox        = restRoute{http.MethodGet, "/v1/inbox", "the inbox"}
	routeAck          = restRoute{http.MethodPost, "/v1/inbox/ack", "the inbox"}
	routeBrief        = restRoute{http.MethodGet, "/v1/brief", "the brief"}
	routeSubscribe    = restRoute{http.MethodPost, "/v1/subscriptions", "subscriptions"}
	routeSubs         = restRoute{http.MethodGet, "/v1/subscriptions", "subscriptions"}
	routeUnsubscribe  = restRoute{http.MethodDelete, "/v1/subscriptions/:id", "subscriptions"}
	routeSupervise    = restRoute{http.MethodPost, "/v1/sessions/:id/supervise", "supervision"}
	routeUnsupervise  = restRoute{http.MethodDelete, "/v1/sessions/:id/supervise", "supervision"}
	routeSupervision  = restRoute{http.MethodGet, "/v1/sessions/:id/supervision", "supervision"}
	routeMessage      = restRoute{http.MethodPost, "/v1/sessions/:id/messages", "messages"}
	routeEvents       = restRoute{http.MethodGet, "/v1/events", "the journal"}
	routeHealth       = restRoute{http.MethodGet, "/v1/health/supervision", "health"}
	routeQuietOn      = restRoute{http.MethodPut, "/v1/quiet", "quiet"}
	routeQuietOff     = restRoute{http.MethodDelete, "/v1/quiet", "quiet"}
	routeQuietRecords = restRoute{http.MethodGet, "/v1/quiet", "quiet"}
)

// rest serves target (the route's path with its parameters, and a query)
// on the route's REST handler, as the caller, and decodes the JSON answer
// into out (nil: none expected). A refusal is returned as the tool error
// the REST problem states.
func (t *mcpTools) rest(ctx context.Context, req *mcp.CallToolRequest, rt restRoute, target string, body, out any) error {
	if !t.routes()[rt.method+" "+rt.pattern] {
		return fmt.Errorf("%s is not available on this gateway", rt.what)
	}
	if hc, ok := ctx.Value(mcpRequestKey{}).(context.Context); ok {
		// A client that hangs up ends its call (a 60 s wait included).
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(hc, cancel)()
	}
	if req.Extra == nil || req.Extra.Header == nil {
		return errors.New("unauthenticated: no HTTP request carried this call")
	}
	rd := io.Reader(http.NoBody)
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode the request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	hr, err := http.NewRequestWithContext(ctx, rt.method, target, rd)
	if err != nil {
		return fmt.Errorf("build the request: %w", err)
	}
	hr.Header.Set("Authorization", req.Extra.Header.Get("Authorization"))
	hr.Header.Set("X-Request-Id", req.Extra.Header.Get("X-Request-Id"))
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	w := &restAnswer{header: http.Header{}}
	t.s.handler.ServeHTTP(w, hr)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if w.status >= http.StatusBadRequest {
		return problemError(w.status, w.header, w.body.Bytes())
	}
	if out != nil {
		if err := json.Unmarshal(w.body.Bytes(), out); err != nil {
			t.s.log.Error("decode a rest answer for mcp", "route", rt.pattern, "err", err)
			return errors.New("internal error")
		}
	}
	return nil
}

// restAnswer records what a REST handler answers.
type restAnswer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *restAnswer) Header() http.Header { return w.header }

func (w *restAnswer) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *restAnswer) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// problemError is the tool error of a REST problem: its detail, which
// names the missing scope or the lease holder where the REST answer does,
// and when to retry a rate-limited call.
func problemError(status int, header http.Header, body []byte) error {
	var p problem
	if err := json.Unmarshal(body, &p); err != nil || p.Detail == "" {
		return fmt.Errorf("%s (HTTP %d)", strings.ToLower(http.StatusText(status)), status)
	}
	msg := p.Detail
	if p.Holder != "" && !strings.Contains(msg, p.Holder) {
		msg += " (holder " + p.Holder + ")"
	}
	if ra := header.Get("Retry-After"); status == http.StatusTooManyRequests && ra != "" {
		msg += "; retry after " + ra + "s"
	}
	return errors.New(msg)
}

// sessionPath is /v1/sessions/<id>/<rest>, or the REST route's answer to
// an id it would refuse (one with a slash would not even reach it).
func sessionPath(id, rest string) (string, error) {
	if !event.ValidID(id) {
		return "", errors.New(sessionIDProblem().Detail)
	}
	return "/v1/sessions/" + url.PathEscape(id) + "/" + rest, nil
}

func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

func textResult(lines ...string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(lines, "\n")}}}
}

// schemaOptions infer schemas of the REST answers: a json.RawMessage (a
// CloudEvent, its data, settings) is any JSON value, not bytes; an event
// is a CloudEvent in the JSON format, whose extension attributes are its
// own (docs/design.md §2), not a closed set of fields.
var schemaOptions = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.RawMessage](): {},
	reflect.TypeFor[event.Event](): {Type: "object", Description: "a CloudEvent 1.0 in the JSON format",
		Required: []string{"specversion", "id", "source", "type"}},
}}

func mustSchema[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](schemaOptions)
	if err != nil {
		panic(fmt.Sprintf("mcp: schema of %T: %v", *new(T), err))
	}
	return s
}

// addTool adds a tool whose output schema is inferred from Out with
// schemaOptions.
func addTool[In, Out any](srv *mcp.Server, tool *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	tool.OutputSchema = mustSchema[Out]()
	mcp.AddTool(srv, tool, h)
}

func readOnly() *mcp.ToolAnnotations {
	closed := false
	return &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &closed}
}

func writes(idempotent bool) *mcp.ToolAnnotations {
	closed, destructive := false, false
	return &mcp.ToolAnnotations{IdempotentHint: idempotent, DestructiveHint: &destructive, OpenWorldHint: &closed}
}

func (t *mcpTools) register(srv *mcp.Server) {
	addTool(srv, &mcp.Tool{Name: "inbox_list", Annotations: readOnly(),
		Description: "List your unacked inbox entries, oldest first (all of them, or those after a seq); act on them, then inbox_ack."},
		t.inboxList)
	addTool(srv, &mcp.Tool{Name: "inbox_wait", Annotations: readOnly(),
		Description: "Block until an inbox entry after `after` wakes you, or until wait_seconds (at most 60, default 30) pass: then timed_out is true (text \"no new entries within 30s\")."},
		t.inboxWait)
	addTool(srv, &mcp.Tool{Name: "inbox_ack", Annotations: writes(true),
		Description: "Acknowledge the inbox entries you have handled: through_seq N (every entry up to seq N) or seqs [..]."},
		t.inboxAck)
	addTool(srv, &mcp.Tool{Name: "subscribe", Annotations: writes(false),
		Description: "Subscribe to events by type, subject, session or label (your PR: subjects [\"github:org/repo#12\"]) so they reach your inbox and wake you."},
		t.subscribe)
	addTool(srv, &mcp.Tool{Name: "unsubscribe", Annotations: writes(true),
		Description: "Delete one of your subscriptions by its id."},
		t.unsubscribe)
	addTool(srv, &mcp.Tool{Name: "subscription_list", Annotations: readOnly(),
		Description: "List your live subscriptions, a page at a time (after = the next of the previous page)."},
		t.subscriptionList)
	addTool(srv, &mcp.Tool{Name: "supervise", Annotations: writes(true),
		Description: "Take a session's controller lease (or observe it), for it alone or its subtree; a lease another party holds is refused naming the holder unless takeover."},
		t.supervise)
	addTool(srv, &mcp.Tool{Name: "unsupervise", Annotations: writes(true),
		Description: "Release your controller lease (default) or observer edge on a session."},
		t.unsupervise)
	addTool(srv, &mcp.Tool{Name: "supervision_get", Annotations: readOnly(),
		Description: "Show who supervises a session: its own edges, the subtree edges it inherits, and its effective controller."},
		t.supervisionGet)
	addTool(srv, &mcp.Tool{Name: "message_send", Annotations: writes(false),
		Description: "Send a message to a session's inbox: intent control (instructions to act on) or info."},
		t.messageSend)
	addTool(srv, &mcp.Tool{Name: "events_read", Annotations: readOnly(),
		Description: "Read the journal after a cursor (filter by types and subjects), waiting up to wait_seconds (at most 60) when there is nothing yet."},
		t.eventsRead)
	addTool(srv, &mcp.Tool{Name: "supervision_brief", Annotations: readOnly(),
		Description: "Re-brief yourself from state (after a restart or a compaction): leases, subscriptions, unacked entries, open decisions and open subjects."},
		t.brief)
	addTool(srv, &mcp.Tool{Name: "supervision_health", Annotations: readOnly(),
		Description: "Check the workspace's supervision invariants (unsupervised sessions, entries that reached nobody, unread inboxes…); needs the admin scope."},
		t.health)
	quietIn := mustSchema[quietInput]()
	quietIn.Properties["action"].Enum = []any{"on", "off", "status"}
	addTool(srv, &mcp.Tool{Name: "quiet", Annotations: writes(true), InputSchema: quietIn,
		Description: "Hold wakes and pushes (entries stay in inboxes): on for scope self|all|<party> with reason and until, off (releases one digest), or status."},
		t.quiet)
}

// Inbox.

func entryLine(e inbox.Entry) string {
	parts := []string{"#" + strconv.FormatInt(e.Seq, 10), e.Kind, string(e.Priority), e.Type}
	if e.Subject != "" {
		parts = append(parts, e.Subject)
	}
	line := strings.Join(parts, " ") + " — " + oneLine(e.Summary)
	if e.Count > 1 {
		line += fmt.Sprintf(" (%d events)", e.Count)
	}
	return line
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func entryLines(head string, entries []inbox.Entry) []string {
	lines := make([]string, 0, len(entries)+1)
	lines = append(lines, head)
	for _, e := range entries {
		lines = append(lines, entryLine(e))
	}
	return lines
}

type inboxListInput struct {
	After *int64 `json:"after,omitempty" jsonschema:"only entries with a seq above this (the next of your last read); omit for every unacked entry"`
	Limit *int   `json:"limit,omitempty" jsonschema:"at most this many entries (default 100, at most 1000)"`
}

// inboxPage is GET /v1/inbox's answer.
type inboxPage struct {
	Entries []inbox.Entry `json:"entries"`
	Next    int64         `json:"next"`
}

func inboxQueryOf(after *int64, limit *int) url.Values {
	q := url.Values{}
	if after != nil {
		q.Set("after", strconv.FormatInt(*after, 10))
	}
	if limit != nil {
		q.Set("limit", strconv.Itoa(*limit))
	}
	return q
}

func (t *mcpTools) inboxList(ctx context.Context, req *mcp.CallToolRequest, in inboxListInput) (*mcp.CallToolResult, inboxPage, error) {
	var out inboxPage
	if err := t.rest(ctx, req, routeInbox, withQuery(routeInbox.pattern, inboxQueryOf(in.After, in.Limit)), nil, &out); err != nil {
		return nil, out, err
	}
	head := fmt.Sprintf("%d unacked entries; next %d", len(out.Entries), out.Next)
	if len(out.Entries) == 0 {
		head = fmt.Sprintf("no unacked entries; next %d", out.Next)
	}
	return textResult(entryLines(head, out.Entries)...), out, nil
}

type inboxWaitInput struct {
	After       *int64 `json:"after,omitempty" jsonschema:"wait for entries with a seq above this (the next of your last read); omit to return at once when any unacked entry has woken you"`
	WaitSeconds *int   `json:"wait_seconds,omitempty" jsonschema:"how long to wait, in seconds: at most 60 (default 30)"`
	Limit       *int   `json:"limit,omitempty" jsonschema:"at most this many entries (default 100, at most 1000)"`
}

// inboxWaitOutput is GET /v1/inbox?wait='s answer, and whether the wait
// ended in silence.
type inboxWaitOutput struct {
	Entries []inbox.Entry `json:"entries"`
	Next    int64         `json:"next"`
	// TimedOut is true when nothing woke the caller within the wait; the
	// entries are then those that need no action now (info folds).
	TimedOut bool `json:"timed_out" jsonschema:"true when nothing woke you within the wait: entries then need no action now"`
}

func (t *mcpTools) inboxWait(ctx context.Context, req *mcp.CallToolRequest, in inboxWaitInput) (*mcp.CallToolResult, inboxWaitOutput, error) {
	wait := mcpDefaultWait
	if in.WaitSeconds != nil {
		wait = *in.WaitSeconds
	}
	q := inboxQueryOf(in.After, in.Limit)
	q.Set("wait", strconv.Itoa(wait)+"s")
	var page inboxPage
	if err := t.rest(ctx, req, routeInbox, withQuery(routeInbox.pattern, q), nil, &page); err != nil {
		return nil, inboxWaitOutput{}, err
	}
	out := inboxWaitOutput{Entries: page.Entries, Next: page.Next, TimedOut: true}
	var after int64
	if in.After != nil {
		after = *in.After
	}
	// The poll ends early only for an entry that decided a wake after the
	// cursor (docs/design.md §7); at its deadline it answers with what is there.
	for _, e := range page.Entries {
		if e.WakeSeq > after {
			out.TimedOut = false
		}
	}
	switch {
	case !out.TimedOut:
		return textResult(entryLines(fmt.Sprintf("%d entries; next %d", len(out.Entries), out.Next), out.Entries)...), out, nil
	case len(out.Entries) == 0:
		return textResult(fmt.Sprintf("no new entries within %ds; next %d", wait, out.Next)), out, nil
	}
	head := fmt.Sprintf("nothing woke you within %ds; %d entries need no action now; next %d", wait, len(out.Entries), out.Next)
	return textResult(entryLines(head, out.Entries)...), out, nil
}

type inboxAckInput struct {
	ThroughSeq *int64  `json:"through_seq,omitempty" jsonschema:"acknowledge every entry up to this seq"`
	Seqs       []int64 `json:"seqs,omitempty" jsonschema:"acknowledge these seqs only"`
}

type inboxAckOutput struct {
	Acked int `json:"acked"`
}

func (t *mcpTools) inboxAck(ctx context.Context, req *mcp.CallToolRequest, in inboxAckInput) (*mcp.CallToolResult, inboxAckOutput, error) {
	var out inboxAckOutput
	if err := t.rest(ctx, req, routeAck, routeAck.pattern, in, &out); err != nil {
		return nil, out, err
	}
	return textResult(fmt.Sprintf("acked %d entries", out.Acked)), out, nil
}

// Subscriptions.

type subscribeInput struct {
	Types       []string                `json:"types,omitempty" jsonschema:"event types, exact or prefix.* (github.pull_request.*)"`
	Subjects    []string                `json:"subjects,omitempty" jsonschema:"subjects, exact (github:org/repo#12, session:abc) or github:org/repo#* or github:org/repo@*"`
	Session     *subscribeSessionFilter `json:"session,omitempty" jsonschema:"events about this session, or its subtree"`
	Labels      []string                `json:"labels,omitempty" jsonschema:"events about sessions with one of these labels"`
	MinPriority string                  `json:"min_priority,omitempty" jsonschema:"info (default), attention or critical"`
	Delivery    string                  `json:"delivery,omitempty" jsonschema:"wake (default) or inbox (entries only, never a wake)"`
	Until       string                  `json:"until,omitempty" jsonschema:"subject_terminal (with one exact subject), never, or an RFC 3339 time"`
}

type subscribeSessionFilter struct {
	ID    string `json:"id,omitempty" jsonschema:"the session id"`
	Scope string `json:"scope,omitempty" jsonschema:"self (default) or subtree"`
}

func subscriptionLine(s subscriptions.Subscription) string {
	parts := []string{s.ID}
	if len(s.Types) > 0 {
		parts = append(parts, "types="+strings.Join(s.Types, ","))
	}
	if len(s.Subjects) > 0 {
		parts = append(parts, "subjects="+strings.Join(s.Subjects, ","))
	}
	if s.Session != nil {
		parts = append(parts, "session="+s.Session.ID+"/"+s.Session.Scope)
	}
	if len(s.Labels) > 0 {
		parts = append(parts, "labels="+strings.Join(s.Labels, ","))
	}
	parts = append(parts, "min_priority="+s.MinPriority, "delivery="+s.Delivery)
	if s.Until != "" {
		parts = append(parts, "until="+s.Until)
	}
	return strings.Join(parts, " ")
}

func (t *mcpTools) subscribe(ctx context.Context, req *mcp.CallToolRequest, in subscribeInput) (*mcp.CallToolResult, createdSubscription, error) {
	var out createdSubscription
	if err := t.rest(ctx, req, routeSubscribe, routeSubscribe.pattern, in, &out); err != nil {
		return nil, out, err
	}
	text := "subscribed: " + subscriptionLine(out.Subscription)
	if out.Closed {
		text += "\nthe subject had already ended: its terminal event is in your inbox, and the subscription is closed"
	}
	return textResult(text), out, nil
}

type unsubscribeInput struct {
	ID string `json:"id" jsonschema:"the subscription's id"`
}

type unsubscribeOutput struct {
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
}

func (t *mcpTools) unsubscribe(ctx context.Context, req *mcp.CallToolRequest, in unsubscribeInput) (*mcp.CallToolResult, unsubscribeOutput, error) {
	if in.ID == "" || strings.Contains(in.ID, "/") { // no route carries it: none of the caller's has it
		return nil, unsubscribeOutput{}, subscriptions.ErrNotFound
	}
	if err := t.rest(ctx, req, routeUnsubscribe, "/v1/subscriptions/"+url.PathEscape(in.ID), nil, nil); err != nil {
		return nil, unsubscribeOutput{}, err
	}
	return textResult("unsubscribed " + in.ID), unsubscribeOutput{ID: in.ID, Deleted: true}, nil
}

type subscriptionList struct {
	Subscriptions []subscriptions.Subscription `json:"subscriptions"`
	Next          string                       `json:"next"`
}

type subscriptionListInput struct {
	After string `json:"after,omitempty" jsonschema:"the next of the previous page; omit for the first"`
	Limit *int   `json:"limit,omitempty" jsonschema:"at most this many subscriptions (default 100, at most 1000)"`
}

func (t *mcpTools) subscriptionList(ctx context.Context, req *mcp.CallToolRequest, in subscriptionListInput) (*mcp.CallToolResult, subscriptionList, error) {
	q := url.Values{}
	if in.After != "" {
		q.Set("after", in.After)
	}
	if in.Limit != nil {
		q.Set("limit", strconv.Itoa(*in.Limit))
	}
	var out subscriptionList
	if err := t.rest(ctx, req, routeSubs, withQuery(routeSubs.pattern, q), nil, &out); err != nil {
		return nil, out, err
	}
	head := fmt.Sprintf("%d subscriptions", len(out.Subscriptions))
	if out.Next != "" {
		head += "; more after " + out.Next
	}
	lines := []string{head}
	for _, s := range out.Subscriptions {
		lines = append(lines, subscriptionLine(s))
	}
	return textResult(lines...), out, nil
}

// Supervision and messages.

type superviseInput struct {
	SessionID string `json:"session_id" jsonschema:"the session to supervise"`
	Role      string `json:"role,omitempty" jsonschema:"controller (drives it; one holder) or observer (hears it)"`
	Scope     string `json:"scope,omitempty" jsonschema:"self or subtree (the session and every session it spawns)"`
	Takeover  bool   `json:"takeover,omitempty" jsonschema:"take a controller lease another party holds (an ancestor, a human or admin only)"`
}

func edgeLine(e supervision.Edge) string {
	line := fmt.Sprintf("%s of %s: %s (scope %s", e.Role, e.Session, e.Holder, e.Scope)
	if e.Role == supervision.Controller {
		line += fmt.Sprintf(", epoch %d", e.Epoch)
	}
	return line + ")"
}

func (t *mcpTools) supervise(ctx context.Context, req *mcp.CallToolRequest, in superviseInput) (*mcp.CallToolResult, supervision.Edge, error) {
	var out supervision.Edge
	path, err := sessionPath(in.SessionID, "supervise")
	if err != nil {
		return nil, out, err
	}
	body := struct {
		Role     string `json:"role"`
		Scope    string `json:"scope,omitempty"`
		Takeover bool   `json:"takeover,omitempty"`
	}{in.Role, in.Scope, in.Takeover}
	if err := t.rest(ctx, req, routeSupervise, path, body, &out); err != nil {
		return nil, out, err
	}
	return textResult(edgeLine(out)), out, nil
}

type unsuperviseInput struct {
	SessionID string `json:"session_id" jsonschema:"the session"`
	Role      string `json:"role,omitempty" jsonschema:"controller (default) or observer"`
}

type unsuperviseOutput struct {
	SessionID string `json:"session_id"`
	Role      string `json:"role"`
	Released  bool   `json:"released"`
}

func (t *mcpTools) unsupervise(ctx context.Context, req *mcp.CallToolRequest, in unsuperviseInput) (*mcp.CallToolResult, unsuperviseOutput, error) {
	path, err := sessionPath(in.SessionID, "supervise")
	if err != nil {
		return nil, unsuperviseOutput{}, err
	}
	q := url.Values{}
	if in.Role != "" {
		q.Set("role", in.Role)
	}
	if err := t.rest(ctx, req, routeUnsupervise, withQuery(path, q), nil, nil); err != nil {
		return nil, unsuperviseOutput{}, err
	}
	role := in.Role
	if role == "" {
		role = supervision.Controller
	}
	out := unsuperviseOutput{SessionID: in.SessionID, Role: role, Released: true}
	return textResult(fmt.Sprintf("released %s of %s", role, in.SessionID)), out, nil
}

type sessionInput struct {
	SessionID string `json:"session_id" jsonschema:"the session"`
}

// supervisionView is GET /v1/sessions/{id}/supervision's answer.
type supervisionView struct {
	SessionID           string                 `json:"session_id"`
	Edges               []supervision.Edge     `json:"edges"`
	Inherited           []supervision.Edge     `json:"inherited"`
	EffectiveController supervision.Resolution `json:"effective_controller"`
}

func (t *mcpTools) supervisionGet(ctx context.Context, req *mcp.CallToolRequest, in sessionInput) (*mcp.CallToolResult, supervisionView, error) {
	var out supervisionView
	path, err := sessionPath(in.SessionID, "supervision")
	if err != nil {
		return nil, out, err
	}
	if err := t.rest(ctx, req, routeSupervision, path, nil, &out); err != nil {
		return nil, out, err
	}
	ec := out.EffectiveController
	head := fmt.Sprintf("%s: effective controller %s (%s)", out.SessionID, ec.Party, ec.Resolved)
	if ec.Party == "" {
		head = fmt.Sprintf("%s: no effective controller (%s)", out.SessionID, ec.Resolved)
	}
	lines := []string{head}
	for _, e := range out.Edges {
		lines = append(lines, "own: "+edgeLine(e))
	}
	for _, e := range out.Inherited {
		lines = append(lines, "inherited: "+edgeLine(e))
	}
	return textResult(lines...), out, nil
}

type messageInput struct {
	SessionID string `json:"session_id" jsonschema:"the session to message"`
	Text      string `json:"text" jsonschema:"the message (at most 16 KiB); its first line is the summary"`
	Intent    string `json:"intent" jsonschema:"control (instructions to act on) or info"`
	Blocker   bool   `json:"blocker,omitempty" jsonschema:"the sender is blocked until the target acts"`
}

// messageSent is POST /v1/sessions/{id}/messages' answer.
type messageSent struct {
	ID      string `json:"id"`
	Seq     string `json:"seq"`
	Warning string `json:"warning,omitempty"`
	Holder  string `json:"holder,omitempty"`
}

func (t *mcpTools) messageSend(ctx context.Context, req *mcp.CallToolRequest, in messageInput) (*mcp.CallToolResult, messageSent, error) {
	var out messageSent
	path, err := sessionPath(in.SessionID, "messages")
	if err != nil {
		return nil, out, err
	}
	body := message{Text: in.Text, Intent: in.Intent, Blocker: in.Blocker}
	if err := t.rest(ctx, req, routeMessage, path, body, &out); err != nil {
		return nil, out, err
	}
	text := fmt.Sprintf("sent to %s (event %s)", in.SessionID, out.ID)
	if out.Warning != "" {
		text += fmt.Sprintf("; warning %s: %s holds the controller lease", out.Warning, out.Holder)
	}
	return textResult(text), out, nil
}

// The journal.

type eventsInput struct {
	After       string   `json:"after,omitempty" jsonschema:"the next cursor of your last read; omit to start at the oldest retained event"`
	Types       []string `json:"types,omitempty" jsonschema:"only these types, exact or prefix.*"`
	Subjects    []string `json:"subjects,omitempty" jsonschema:"only these subjects, exact or github:org/repo#*"`
	Limit       *int     `json:"limit,omitempty" jsonschema:"at most this many events (default 100, at most 1000)"`
	WaitSeconds *int     `json:"wait_seconds,omitempty" jsonschema:"when there is nothing yet, wait this long for an event (at most 60 seconds)"`
}

// eventsPage is GET /v1/events' answer.
type eventsPage struct {
	Events []*event.Event `json:"events"`
	Next   string         `json:"next"`
}

func (t *mcpTools) eventsRead(ctx context.Context, req *mcp.CallToolRequest, in eventsInput) (*mcp.CallToolResult, eventsPage, error) {
	q := url.Values{}
	if in.After != "" {
		q.Set("after", in.After)
	}
	if len(in.Types) > 0 {
		q.Set("types", strings.Join(in.Types, ","))
	}
	if len(in.Subjects) > 0 {
		q.Set("subjects", strings.Join(in.Subjects, ","))
	}
	if in.Limit != nil {
		q.Set("limit", strconv.Itoa(*in.Limit))
	}
	if in.WaitSeconds != nil {
		q.Set("wait", strconv.Itoa(*in.WaitSeconds)+"s")
	}
	var out eventsPage
	if err := t.rest(ctx, req, routeEvents, withQuery(routeEvents.pattern, q), nil, &out); err != nil {
		return nil, out, err
	}
	lines := []string{fmt.Sprintf("%d events; next %s", len(out.Events), out.Next)}
	for _, e := range out.Events {
		parts := []string{e.Seq, string(e.Priority), e.Type}
		if e.Subject != "" {
			parts = append(parts, e.Subject)
		}
		lines = append(lines, strings.Join(parts, " ")+" — "+oneLine(e.Summary))
	}
	return textResult(lines...), out, nil
}

// The brief and health.

type briefInput struct {
	Limit *int `json:"limit,omitempty" jsonschema:"list at most this many unacked entries, highest priority first (default and at most 1000); all are counted"`
}

// briefView is GET /v1/brief's answer.
type briefView struct {
	Party         string                       `json:"party"`
	Workspace     string                       `json:"workspace"`
	Leases        []supervision.Edge           `json:"leases"`
	Subscriptions []subscriptions.Subscription `json:"subscriptions"`
	Unacked       []inbox.Entry                `json:"unacked"`
	UnackedCount  int                          `json:"unacked_count"`
	OpenDecisions []openDecision               `json:"open_decisions"`
	OpenSubjects  []openSubject                `json:"open_subjects"`
	InboxNext     int64                        `json:"inbox_next"`
	Cursor        string                       `json:"cursor"`
}

func (t *mcpTools) brief(ctx context.Context, req *mcp.CallToolRequest, in briefInput) (*mcp.CallToolResult, briefView, error) {
	var out briefView
	q := url.Values{}
	if in.Limit != nil {
		q.Set("limit", strconv.Itoa(*in.Limit))
	}
	if err := t.rest(ctx, req, routeBrief, withQuery(routeBrief.pattern, q), nil, &out); err != nil {
		return nil, out, err
	}
	lines := []string{fmt.Sprintf("brief of %s in %s: %d unacked entries; inbox next %d; journal cursor %s",
		out.Party, out.Workspace, out.UnackedCount, out.InboxNext, out.Cursor)}
	for _, e := range out.Leases {
		lines = append(lines, "lease: "+edgeLine(e))
	}
	for _, s := range out.Subscriptions {
		lines = append(lines, "subscription: "+subscriptionLine(s))
	}
	for _, d := range out.OpenDecisions {
		line := fmt.Sprintf("open decision: %s %s", d.Session, d.Type)
		if !d.Since.IsZero() {
			line += " since " + d.Since.UTC().Format(time.RFC3339)
		}
		lines = append(lines, line)
	}
	for _, o := range out.OpenSubjects {
		line := "open subject: " + o.Subject
		if o.State != "" {
			line += " " + o.State
		}
		if o.Liveness != "" {
			line += " (" + o.Liveness + ")"
		}
		if o.Latest != nil {
			line += fmt.Sprintf("; latest #%d %s %s — %s", o.Latest.Seq, o.Latest.Priority, o.Latest.Type, oneLine(o.Latest.Summary))
		}
		lines = append(lines, line)
	}
	if len(out.Unacked) > 0 {
		lines = append(lines, "unacked, highest priority first:")
		for _, e := range out.Unacked {
			lines = append(lines, entryLine(e))
		}
	}
	return textResult(lines...), out, nil
}

func (t *mcpTools) health(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, map[string]any, error) {
	var out map[string]any
	if err := t.rest(ctx, req, routeHealth, routeHealth.pattern, nil, &out); err != nil {
		return nil, nil, err
	}
	return textResult(healthText(out)...), out, nil
}

// healthText is a health report as a few lines a person reads: the
// verdict, then each invariant that does not hold with its count (the
// report itself is the structured content).
func healthText(report map[string]any) []string {
	b, _ := json.Marshal(report)
	var r struct {
		Workspace  string `json:"workspace"`
		OK         bool   `json:"ok"`
		Behind     bool   `json:"behind"`
		Invariants []struct {
			ID    string `json:"id"`
			Name  string `json:"name"`
			OK    bool   `json:"ok"`
			Count int64  `json:"count"`
			Unit  string `json:"unit"`
		} `json:"invariants"`
	}
	if json.Unmarshal(b, &r) != nil {
		return []string{"supervision health: see the structured content"}
	}
	var broken []string
	for _, inv := range r.Invariants {
		if !inv.OK {
			broken = append(broken, fmt.Sprintf("- %s %s: %d %s", inv.ID, inv.Name, inv.Count, inv.Unit))
		}
	}
	head := fmt.Sprintf("workspace %s: every supervision invariant holds", r.Workspace)
	if !r.OK || len(broken) > 0 {
		head = fmt.Sprintf("workspace %s: %d of %d supervision invariants do not hold", r.Workspace, len(broken), len(r.Invariants))
	}
	lines := append([]string{head}, broken...)
	if r.Behind {
		lines = append(lines, "(the check stopped at its bounds: counts may be short until the sweep catches up)")
	}
	return lines
}

// Quiet.

type quietInput struct {
	Action string `json:"action" jsonschema:"on, off or status"`
	Scope  string `json:"scope,omitempty" jsonschema:"on and off: self (default), all, or a party (all and another party need admin or a human caller)"`
	Reason string `json:"reason,omitempty" jsonschema:"on: why, shown with the quiet"`
	Until  string `json:"until,omitempty" jsonschema:"on: an RFC 3339 time it ends (required, at most 24h away, for all or another party)"`
}

// quietOutput is the REST answer of the action: the record set (on), the
// live records (status), or the scope lifted and its digests (off).
type quietOutput struct {
	Action  string         `json:"action"`
	Quiet   []holds.Quiet  `json:"quiet,omitempty"`
	Scope   string         `json:"scope,omitempty"`
	Digests []holds.Digest `json:"digests,omitempty"`
}

func quietLine(q holds.Quiet) string {
	line := "quiet for " + q.Scope
	if !q.Until.IsZero() {
		line += " until " + q.Until.UTC().Format(time.RFC3339)
	}
	line += " by " + q.By
	if q.Reason != "" {
		line += " — " + oneLine(q.Reason)
	}
	return line
}

func (t *mcpTools) quiet(ctx context.Context, req *mcp.CallToolRequest, in quietInput) (*mcp.CallToolResult, quietOutput, error) {
	out := quietOutput{Action: in.Action}
	switch in.Action {
	case "on":
		body := struct {
			Scope  string `json:"scope,omitempty"`
			Reason string `json:"reason,omitempty"`
			Until  string `json:"until,omitempty"`
		}{in.Scope, in.Reason, in.Until}
		var q holds.Quiet
		if err := t.rest(ctx, req, routeQuietOn, routeQuietOn.pattern, body, &q); err != nil {
			return nil, quietOutput{}, err
		}
		out.Quiet = []holds.Quiet{q}
		return textResult(quietLine(q)), out, nil
	case "off":
		q := url.Values{}
		if in.Scope != "" {
			q.Set("scope", in.Scope)
		}
		if err := t.rest(ctx, req, routeQuietOff, withQuery(routeQuietOff.pattern, q), nil, &out); err != nil {
			return nil, quietOutput{}, err
		}
		out.Action = in.Action
		lines := []string{fmt.Sprintf("quiet lifted for %s; %d digests released", out.Scope, len(out.Digests))}
		for _, d := range out.Digests {
			lines = append(lines, d.Party+": "+oneLine(d.Text))
		}
		return textResult(lines...), out, nil
	case "status":
		if err := t.rest(ctx, req, routeQuietRecords, routeQuietRecords.pattern, nil, &out); err != nil {
			return nil, quietOutput{}, err
		}
		out.Action = in.Action
		if len(out.Quiet) == 0 {
			return textResult("no quiet in force"), out, nil
		}
		lines := make([]string, 0, len(out.Quiet))
		for _, q := range out.Quiet {
			lines = append(lines, quietLine(q))
		}
		return textResult(lines...), out, nil
	}
	return nil, quietOutput{}, errors.New(`action must be "on", "off" or "status"`)
}
