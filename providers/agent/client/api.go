package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/wakegate/wakegate/providers/event"
)

// ClientSource is the source Push puts on events that have none; the
// gateway replaces every agent event's source with //wakegate/<ws>/<sub>.
const ClientSource = "wakegate-client"

// Push commits one event (POST /v1/events). It fills what e lacks, in
// place — specversion, source, a random id and the current time — so
// pushing the same e again is the same fact: the gateway keeps the id
// verbatim and answers a repeat as a duplicate. Retries after a transport
// error or a 429/502/503/504 send the same bytes.
func (c *Client) Push(ctx context.Context, e *event.Event) (*PushResult, error) {
	fill(e)
	body, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("wakegate: encode event %s: %w", e.ID, err)
	}
	return c.push(ctx, body, "application/cloudevents+json")
}

// PushBatch commits up to 100 events at once, all or nothing (a refused
// batch commits none: *Error with per-event Errors). Each event is filled
// in place as Push does.
func (c *Client) PushBatch(ctx context.Context, events []*event.Event) (*PushResult, error) {
	if len(events) == 0 {
		return &PushResult{Accepted: []Accepted{}, Duplicates: []string{}}, nil
	}
	for _, e := range events {
		fill(e)
	}
	body, err := json.Marshal(events)
	if err != nil {
		return nil, fmt.Errorf("wakegate: encode batch: %w", err)
	}
	return c.push(ctx, body, "application/cloudevents-batch+json")
}

func (c *Client) push(ctx context.Context, body []byte, contentType string) (*PushResult, error) {
	var out PushResult
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/events", body: body, contentType: contentType, idempotent: true}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

func fill(e *event.Event) {
	if e.SpecVersion == "" {
		e.SpecVersion = event.SpecVersion
	}
	if e.Source == "" {
		e.Source = ClientSource
	}
	if e.ID == "" {
		e.ID = NewID()
	}
	if e.Time.IsZero() {
		e.Time = time.Now().UTC().Truncate(time.Microsecond)
	}
}

// EventsQuery reads the journal (GET /v1/events).
type EventsQuery struct {
	After    string   // a cursor from EventsPage.Next; empty: the oldest retained event
	Types    []string // exact or prefix.*
	Subjects []string // exact or github:org/repo#*
	Limit    int      // ≤ 1000; 0: the gateway's default (100)
	Wait     time.Duration
}

// Events reads a page of the journal, long-polling up to q.Wait (≤ 60 s)
// when there is nothing after the cursor yet.
func (c *Client) Events(ctx context.Context, q EventsQuery) (*EventsPage, error) {
	v := url.Values{}
	if q.After != "" {
		v.Set("after", q.After)
	}
	if len(q.Types) > 0 {
		v.Set("types", strings.Join(q.Types, ","))
	}
	if len(q.Subjects) > 0 {
		v.Set("subjects", strings.Join(q.Subjects, ","))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	wait := waitParam(v, q.Wait)
	var out EventsPage
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/events", query: v, wait: wait, idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// InboxQuery reads an inbox (GET /v1/inbox).
type InboxQuery struct {
	// After is the seq to read after (InboxPage.Next); 0 reads every
	// unacked entry, and its Next is then the last seq assigned.
	After int64
	Limit int           // ≤ 1000; 0: the gateway's default (100)
	Wait  time.Duration // ≤ 60 s: return as soon as an entry decides a wake
	Party string        // another party's inbox (scope operator)
	// MinPriority, with Wait, also ends the wait on any entry at this
	// priority or above, whatever its update decided (an explicit wait).
	MinPriority event.Priority
}

// Inbox reads the caller's unacked entries. With Wait it returns at once
// when an entry after the cursor decided a wake or alert, else as soon as
// one does, else at the wait's end with whatever is there — an info fold
// never ends it.
func (c *Client) Inbox(ctx context.Context, q InboxQuery) (*InboxPage, error) {
	v := url.Values{}
	if q.After > 0 {
		v.Set("after", strconv.FormatInt(q.After, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Party != "" {
		v.Set("party", q.Party)
	}
	if q.MinPriority != "" {
		v.Set("min_priority", string(q.MinPriority))
	}
	wait := waitParam(v, q.Wait)
	var out InboxPage
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/inbox", query: v, wait: wait, idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AckThrough acknowledges every entry up to seq (POST /v1/inbox/ack
// {"through_seq"}) and returns how many it acked. An entry updated after
// seq took a new seq and stays unacked.
func (c *Client) AckThrough(ctx context.Context, seq int64) (int, error) {
	return c.ack(ctx, map[string]any{"through_seq": seq})
}

// AckSeqs acknowledges exactly these entries.
func (c *Client) AckSeqs(ctx context.Context, seqs ...int64) (int, error) {
	if len(seqs) == 0 {
		return 0, nil
	}
	return c.ack(ctx, map[string]any{"seqs": seqs})
}

func (c *Client) ack(ctx context.Context, req map[string]any) (int, error) {
	body, _ := json.Marshal(req)
	var out struct {
		Acked int `json:"acked"`
	}
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/inbox/ack", body: body, idempotent: true}, &out); err != nil {
		return 0, err
	}
	return out.Acked, nil
}

// Brief reads the caller's brief (GET /v1/brief).
func (c *Client) Brief(ctx context.Context) (*Brief, error) {
	var out Brief
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/brief", idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Subscribe creates a subscription owned by the caller (POST
// /v1/subscriptions). It is not retried: each call creates one.
func (c *Client) Subscribe(ctx context.Context, req SubscriptionRequest) (*Subscription, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var out Subscription
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/subscriptions", body: body}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Subscriptions lists the caller's live subscriptions, every page of
// them (a party has at most WAKEGATE_MAX_SUBSCRIPTIONS).
func (c *Client) Subscriptions(ctx context.Context) ([]Subscription, error) {
	var all []Subscription
	after := ""
	for range 10_000 {
		var out struct {
			Subscriptions []Subscription `json:"subscriptions"`
			Next          string         `json:"next"`
		}
		q := url.Values{"limit": {"1000"}}
		if after != "" {
			q.Set("after", after)
		}
		if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/subscriptions", query: q, idempotent: true}, &out); err != nil {
			return nil, err
		}
		all = append(all, out.Subscriptions...)
		if out.Next == "" || out.Next == after {
			break
		}
		after = out.Next
	}
	if all == nil {
		all = []Subscription{}
	}
	return all, nil
}

// Unsubscribe deletes one of the caller's subscriptions (404 when it is
// not the caller's, or gone).
func (c *Client) Unsubscribe(ctx context.Context, id string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: "/v1/subscriptions/" + url.PathEscape(id)}, nil)
	return err
}

// Supervise takes a controller lease or becomes an observer of a session
// (POST /v1/sessions/{id}/supervise). A lease held by a live party is a
// 409 *Error naming Holder and Epoch.
func (c *Client) Supervise(ctx context.Context, session, role, scope string, takeover bool) (*Edge, error) {
	body, _ := json.Marshal(map[string]any{"role": role, "scope": scope, "takeover": takeover})
	var out Edge
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/sessions/" + url.PathEscape(session) + "/supervise",
		body: body, idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Release gives up the caller's edge of a role (controller when empty).
func (c *Client) Release(ctx context.Context, session, role string) error {
	v := url.Values{}
	if role != "" {
		v.Set("role", role)
	}
	_, err := c.do(ctx, call{method: http.MethodDelete, path: "/v1/sessions/" + url.PathEscape(session) + "/supervise", query: v}, nil)
	return err
}

// Supervision reads a session's edges and its effective controller.
func (c *Client) Supervision(ctx context.Context, session string) (*SupervisionView, error) {
	var out SupervisionView
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/sessions/" + url.PathEscape(session) + "/supervision", idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SendMessage journals message.sent to a session (POST
// /v1/sessions/{id}/messages). It is not retried: the gateway gives each
// message its own id.
func (c *Client) SendMessage(ctx context.Context, session string, m Message) (*MessageResult, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var out MessageResult
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/sessions/" + url.PathEscape(session) + "/messages", body: body}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetPresence replaces the caller's presence (PUT /v1/presence).
func (c *Client) SetPresence(ctx context.Context, p PresenceRequest) (*Presence, error) {
	req := map[string]any{"attended": p.Attended}
	if p.For > 0 {
		req["for"] = p.For.String()
	}
	if !p.PausedUntil.IsZero() {
		req["paused_until"] = p.PausedUntil.UTC().Format(time.RFC3339Nano)
	}
	if p.Reason != "" {
		req["reason"] = p.Reason
	}
	body, _ := json.Marshal(req)
	var out Presence
	if _, err := c.do(ctx, call{method: http.MethodPut, path: "/v1/presence", body: body, idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetPresence reads the caller's presence.
func (c *Client) GetPresence(ctx context.Context) (*Presence, error) {
	var out Presence
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/presence", idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// QuietOn sets quiet (PUT /v1/quiet). Quiet for another party or all
// needs admin or a human: caller and an until at most 24 h away.
func (c *Client) QuietOn(ctx context.Context, q QuietRequest) (*Quiet, error) {
	req := map[string]any{}
	if q.Scope != "" {
		req["scope"] = q.Scope
	}
	if q.Reason != "" {
		req["reason"] = q.Reason
	}
	if !q.Until.IsZero() {
		req["until"] = q.Until.UTC().Format(time.RFC3339Nano)
	}
	body, _ := json.Marshal(req)
	var out Quiet
	if _, err := c.do(ctx, call{method: http.MethodPut, path: "/v1/quiet", body: body, idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// QuietOff lifts quiet of a scope (self when empty) and returns the
// digests it released; no such quiet is a 404 *Error.
func (c *Client) QuietOff(ctx context.Context, scope string) (*QuietLifted, error) {
	v := url.Values{}
	if scope != "" {
		v.Set("scope", scope)
	}
	var out QuietLifted
	if _, err := c.do(ctx, call{method: http.MethodDelete, path: "/v1/quiet", query: v}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// QuietStatus lists the workspace's live quiet records.
func (c *Client) QuietStatus(ctx context.Context) ([]Quiet, error) {
	var out struct {
		Quiet []Quiet `json:"quiet"`
	}
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/quiet", idempotent: true}, &out); err != nil {
		return nil, err
	}
	return out.Quiet, nil
}

// ErrNoHealthRoute is returned (wrapping the 404 *Error) by Health when
// the gateway does not serve GET /v1/health/supervision.
var ErrNoHealthRoute = errors.New("this gateway does not serve GET /v1/health/supervision")

// Health runs the supervision health check (GET /v1/health/supervision,
// scope admin).
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var out Health
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/health/supervision", idempotent: true}, &out); err != nil {
		if StatusOf(err) == http.StatusNotFound {
			return nil, fmt.Errorf("%w: %w", ErrNoHealthRoute, err)
		}
		return nil, err
	}
	return &out, nil
}

// ChildToken mints a token for a child session (POST
// /v1/sessions/{child}/token, scope spawn): for a new session, which a
// session caller becomes the parent and controller of, or re-issued for one
// in the caller's own subtree; any other existing session → 403.
func (c *Client) ChildToken(ctx context.Context, child string, req ChildTokenRequest) (*ChildToken, error) {
	r := map[string]string{}
	if req.Scope != "" {
		r["scope"] = req.Scope
	}
	if req.TTL > 0 {
		r["ttl"] = req.TTL.String()
	}
	body, _ := json.Marshal(r)
	var out ChildToken
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/sessions/" + url.PathEscape(child) + "/token",
		body: body, idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
