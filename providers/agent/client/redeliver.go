package client

import (
	"context"
	"net/http"
	"net/url"
)

// The operators' redeliveries (docs/design.md §11, scope operator). Each call
// sends one X-Request-Id on every attempt: the gateway keys the
// redelivery's record by it, so a retry after a lost answer gets the first
// answer again (Duplicate) and nothing is done twice.

// ProducedEvent is an event a delivery's redelivery journaled.
type ProducedEvent struct {
	Seq     string `json:"seq"`
	ID      string `json:"id"`
	Type    string `json:"type"`
	Subject string `json:"subject,omitempty"`
}

// DeliveryRedelivery is what re-deriving a stored GitHub delivery did.
type DeliveryRedelivery struct {
	GUID      string `json:"guid"`
	Hook      string `json:"hook"`
	Event     string `json:"event"` // X-GitHub-Event
	Repo      string `json:"repo,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	// Status is "derived", or "ignored" (Reason says why) for a delivery
	// nothing is derived from.
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Produced are the events journaled now: what was missing. Empty when
	// everything was there already.
	Produced  []ProducedEvent `json:"produced"`
	By        string          `json:"by"`
	RequestID string          `json:"request_id"`
	Journaled string          `json:"journaled,omitempty"` // seq of the wakegate.redelivered record
	Duplicate bool            `json:"duplicate,omitempty"` // the answer to an earlier attempt of this request
}

// RedeliverDelivery re-derives the stored GitHub delivery guid (POST
// /admin/deliveries/{guid}/redeliver): only what is missing from the
// journal is produced. hook is the scope it was stored under (its
// X-GitHub-Hook-Installation-Target-ID); "" lets the gateway look under
// its GitHub App's id and under none. An unknown or expired delivery is
// a 404 *Error.
func (c *Client) RedeliverDelivery(ctx context.Context, guid, hook string) (*DeliveryRedelivery, error) {
	v := url.Values{}
	if hook != "" {
		v.Set("hook", hook)
	}
	var out DeliveryRedelivery
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/admin/deliveries/" + url.PathEscape(guid) + "/redeliver",
		query: v, idempotent: true, header: requestID()}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// EventRedeliveryRequest names a journaled event to deliver again.
type EventRedeliveryRequest struct {
	ID     string // the event's id
	Source string // its CloudEvents source (required)
	// Party, when set, is the only party it goes to; else every recipient
	// the router resolves now.
	Party string
	// Subject picks one event when the (source, id) was journaled about
	// several subjects (the gateway answers 409 otherwise).
	Subject string
}

// Redelivered is one delivery an event's redelivery made.
type Redelivered struct {
	Party    string `json:"party"`
	Via      string `json:"via"`
	InboxSeq int64  `json:"inbox_seq"`
	Kind     string `json:"kind"`
	Wake     bool   `json:"wake"`
	New      bool   `json:"new,omitempty"` // a new entry rather than a fold into an unacked one
}

// EventRedelivery is what redelivering a journaled event did.
type EventRedelivery struct {
	Source    string        `json:"source"`
	ID        string        `json:"id"`
	Seq       string        `json:"seq"`
	Type      string        `json:"type"`
	Subject   string        `json:"subject,omitempty"`
	Workspace string        `json:"workspace"`
	Party     string        `json:"party,omitempty"`
	Delivered []Redelivered `json:"delivered"` // empty: nobody to deliver to now
	By        string        `json:"by"`
	RequestID string        `json:"request_id"`
	Journaled string        `json:"journaled,omitempty"`
	Duplicate bool          `json:"duplicate,omitempty"`
}

// RedeliverEvent delivers a journaled event again (POST
// /admin/events/{id}/redeliver), bypassing the inboxes' dedup: each
// recipient gets a new update marked redelivered, and its wake is pushed
// as any other. An event not journaled (or no longer retained) is a 404
// *Error.
func (c *Client) RedeliverEvent(ctx context.Context, r EventRedeliveryRequest) (*EventRedelivery, error) {
	v := url.Values{}
	v.Set("source", r.Source)
	if r.Party != "" {
		v.Set("party", r.Party)
	}
	if r.Subject != "" {
		v.Set("subject", r.Subject)
	}
	var out EventRedelivery
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/admin/events/" + url.PathEscape(r.ID) + "/redeliver",
		query: v, idempotent: true, header: requestID()}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// requestID is a fresh X-Request-Id for every attempt of one call.
func requestID() http.Header {
	return http.Header{"X-Request-Id": {NewID()}}
}
