package route

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/providers/event"
)

// ErrNotRoutable is returned by Redeliver for an internal event
// (wakegate.*): those are never routed.
var ErrNotRoutable = errors.New("internal events are never routed")

// ErrInProgress is returned by Redeliver while another request with the
// same id redelivers the same event (a client's retry racing its first
// attempt).
var ErrInProgress = errors.New("a redelivery with this request id is in progress")

// RedeliverRequest is an operator's redelivery of a journaled event
// (POST /admin/events/{id}/redeliver, docs/design.md §11).
type RedeliverRequest struct {
	// Party, when set, is the only party the event goes to: with the way
	// it reaches it when the router resolves it as a recipient now, else
	// direct. Empty: every recipient the router resolves now.
	Party string
	By    string // who asked: the token's subject
	// RequestID is the request's id (X-Request-Id): with the event and
	// the party, the fact id of the redelivery's record.
	RequestID string
}

// Redelivered is one delivery a redelivery made.
type Redelivered struct {
	Party    string `json:"party"`
	Via      string `json:"via"`
	InboxSeq int64  `json:"inbox_seq"`
	Kind     string `json:"kind"`          // what the update decided: wake, alert, notice or digest
	Wake     bool   `json:"wake"`          // it decided a wake: pushed to an endpoint unless a hold keeps it
	New      bool   `json:"new,omitempty"` // a new entry (the earlier one was acked), not a fold into an unacked one
}

// Redelivery is what a redelivery did; it is also the data of its
// wakegate.redelivered record (without journaled and duplicate).
type Redelivery struct {
	Source    string        `json:"source"`
	ID        string        `json:"id"`
	Seq       string        `json:"seq"` // the event's journal seq
	Type      string        `json:"type"`
	Subject   string        `json:"subject,omitempty"`
	Workspace string        `json:"workspace"`
	Party     string        `json:"party,omitempty"` // the one party asked for
	Delivered []Redelivered `json:"delivered"`       // empty: nobody to deliver to now
	By        string        `json:"by"`
	RequestID string        `json:"request_id"`
	// Journaled is the seq of the wakegate.redelivered record.
	Journaled string `json:"journaled,omitempty"`
	// Duplicate: this request had been answered; nothing was delivered
	// again and this is what the first request did.
	Duplicate bool `json:"duplicate,omitempty"`
}

// claimTTL bounds how long a redelivery that crashed before recording
// itself keeps a retry of its request out.
const claimTTL = 30 * time.Second

// Redeliver delivers the journaled event e (Seq set) again, as an
// operator asks: to the recipients the router resolves now (subscribers,
// supervisors, the fallback; Handle's resolution) or to req.Party alone,
// each as an inbox redelivery — it passes the inbox's dedup, lands as a
// new update (a new entry when the earlier one was acked) marked
// redelivered, and may wake whatever the wake-again rule says — with the
// holds, pushes and escalation of any delivery. It does not apply seed
// 003's pause marker (a deliberate redelivery is not an alarm), and
// changes no other state: no default controller, no subscription closed,
// no undeliverable fault.
//
// It then journals one internal wakegate.redelivered event about e's
// subject naming who asked and what was delivered, whose fact id is
// derived from the request id, the event and the party: a retried request
// finds it and gets the first answer again (Duplicate), delivering
// nothing twice. A retry arriving while the first attempt still runs gets
// ErrInProgress.
func (r *Router) Redeliver(ctx context.Context, e *event.Event, req RedeliverRequest) (*Redelivery, error) {
	if e.Priority == event.Internal || event.Lookup(e.Type).Priority == event.Internal {
		return nil, ErrNotRoutable
	}
	shard, _, err := journal.ParseSeq(e.Seq)
	if err != nil {
		return nil, fmt.Errorf("redeliver %s: %w", e.ID, err)
	}
	sum := sha1.Sum([]byte(e.Source + "\x00" + e.ID + "\x00" + req.Party))
	rec := &event.Event{SpecVersion: event.SpecVersion,
		ID:     "redelivered/event/" + hex.EncodeToString(sum[:8]) + "/" + req.RequestID,
		Source: event.ServerSource(e.Workspace), Type: event.TypeWakegateRedelivered, Subject: e.Subject,
		DataContentType: "application/json", Workspace: e.Workspace, Priority: event.Internal}
	// Claim the request, then look for its record: a request that finds
	// the claim taken, or the record there, does nothing again.
	claim := r.j.Keys(r.j.ShardOf(rec.Workspace, rec.Subject)).RedeliveryClaim(rec.Source, rec.ID)
	claimed, err := r.rdb.SetNX(ctx, claim, req.By, claimTTL).Result()
	if err != nil {
		return nil, fmt.Errorf("redeliver %s: %w", e.ID, err)
	}
	if claimed {
		defer r.rdb.Del(context.WithoutCancel(ctx), claim)
	}
	if prev, err := r.j.Recorded(ctx, rec.Workspace, rec.Subject, rec.Source, rec.ID); err != nil || prev != nil {
		if err != nil {
			return nil, err
		}
		return redeliveryOf(prev)
	}
	if !claimed {
		return nil, ErrInProgress
	}

	now := r.now()
	d, v, err := r.route(ctx, e, now)
	if err != nil {
		return nil, err
	}
	e, to := v.event, d.to
	if req.Party != "" {
		rc, ok := to[req.Party]
		if !ok {
			rc = recipient{via: inbox.ViaDirect}
		}
		to = map[string]recipient{req.Party: rc}
	}
	results := make(map[string]*inbox.Result, len(to))
	for party, rc := range to {
		rc.redelivered = &inbox.Result{}
		results[party] = rc.redelivered
		to[party] = rc
	}
	if err := r.deliverAll(ctx, shard, e, to, v, now); err != nil {
		return nil, err
	}
	out := &Redelivery{Source: e.Source, ID: e.ID, Seq: e.Seq, Type: e.Type, Subject: e.Subject, Workspace: e.Workspace,
		Party: req.Party, Delivered: []Redelivered{}, By: req.By, RequestID: req.RequestID}
	for party, res := range results {
		out.Delivered = append(out.Delivered, Redelivered{Party: party, Via: to[party].via, InboxSeq: res.Seq,
			Kind: res.Kind, Wake: res.Wake, New: res.New})
	}
	slices.SortFunc(out.Delivered, func(a, b Redelivered) int { return strings.Compare(a.Party, b.Party) })

	rec.Time = now.UTC()
	whom := fmt.Sprintf("%d parties", len(out.Delivered))
	if len(out.Delivered) == 1 {
		whom = out.Delivered[0].Party
	}
	rec.Summary = fmt.Sprintf("%s redelivered %s about %s to %s", req.By, e.Type, e.Subject, whom)
	if rec.Data, err = json.Marshal(out); err != nil {
		return nil, fmt.Errorf("encode redelivery of %s: %w", e.ID, err)
	}
	seq, _, err := r.j.Append(ctx, rec)
	if err != nil {
		return nil, fmt.Errorf("record redelivery of %s: %w", e.ID, err)
	}
	out.Journaled = seq
	return out, nil
}

// redeliveryOf is the answer an earlier request's record keeps.
func redeliveryOf(prev *event.Event) (*Redelivery, error) {
	var out Redelivery
	if err := json.Unmarshal(prev.Data, &out); err != nil {
		return nil, fmt.Errorf("redelivery record %s: %w", prev.Seq, err)
	}
	out.Journaled, out.Duplicate = prev.Seq, true
	return &out, nil
}
