package derive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/github"
)

// ErrUnderivable is wrapped by Redeliver's error for a stored delivery
// that cannot be derived (its payload does not normalize, or the tracker
// refuses the fact): nothing was written.
var ErrUnderivable = errors.New("delivery cannot be derived")

// Redeliverer re-derives stored raw deliveries on an operator's request
// (POST /admin/deliveries/{guid}/redeliver, docs/design.md §11), synchronously:
// the same normalization and tracker script as the deriver, so, as every
// derivation is idempotent on fact ids, only what is missing is journaled
// — a repair after a crash or a fixed bug. Each request is recorded in the
// journal as one internal wakegate.redelivered event naming who asked and
// what was produced, whose fact id carries the request id: a retried
// request (the same X-Request-Id) finds it and answers it again, doing
// nothing twice.
type Redeliverer struct {
	store   *ingest.Store
	tracker *tracker.Tracker
	j       *journal.Journal
	now     func() time.Time
}

// NewRedeliverer returns a redeliverer deriving into tr, which journals
// into j.
func NewRedeliverer(store *ingest.Store, tr *tracker.Tracker, j *journal.Journal) *Redeliverer {
	return &Redeliverer{store: store, tracker: tr, j: j, now: time.Now}
}

// Request is one operator's redelivery of a stored delivery.
type Request struct {
	GUID      string
	Hooks     []string // the dedup scopes to look under (ingest.Store.Stored)
	By        string   // who asked: the token's subject
	RequestID string   // the request's id: the record's fact id
}

// Produced is one event a redelivery journaled.
type Produced struct {
	Seq     string `json:"seq"`
	ID      string `json:"id"`
	Type    string `json:"type"`
	Subject string `json:"subject,omitempty"`
}

// Redelivery is what a redelivery did; it is also the data of its
// wakegate.redelivered record (without journaled and duplicate).
type Redelivery struct {
	GUID      string `json:"guid"`
	Hook      string `json:"hook"`
	Event     string `json:"event"` // X-GitHub-Event
	Repo      string `json:"repo,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	// Status is "derived", or "ignored" for a delivery nothing is derived
	// from (Reason says why: not mapped to a workspace, an event or
	// action wakegate does not journal).
	Status   string     `json:"status"`
	Reason   string     `json:"reason,omitempty"`
	Produced []Produced `json:"produced"` // empty: everything was there already
	By       string     `json:"by"`
	// RequestID is the request's id (X-Request-Id).
	RequestID string `json:"request_id"`
	// Journaled is the seq of the wakegate.redelivered record; "" for a
	// delivery of no workspace (it has no journal to be recorded in).
	Journaled string `json:"journaled,omitempty"`
	// Duplicate: this request id had been answered; nothing was done again
	// and this is what the first request did.
	Duplicate bool `json:"duplicate,omitempty"`
}

// Redeliver re-derives the stored delivery req.GUID. A delivery not
// stored (unknown, or expired with the retention) is an error wrapping
// ingest.ErrNotFound; one that cannot be derived wraps ErrUnderivable.
func (r *Redeliverer) Redeliver(ctx context.Context, req Request) (*Redelivery, error) {
	raw, err := r.store.Stored(ctx, req.GUID, req.Hooks...)
	if err != nil {
		return nil, err
	}
	out := &Redelivery{GUID: raw.GUID, Hook: raw.Hook, Event: raw.Event, Repo: raw.Repo, Workspace: raw.Workspace,
		Produced: []Produced{}, By: req.By, RequestID: req.RequestID}
	var fact *github.Fact
	if raw.Ignored != "" {
		out.Status, out.Reason = "ignored", raw.Ignored
	} else {
		if fact, err = normalize(raw); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnderivable, err) //nolint:errorlint // the cause is told, not wrapped: callers act on ErrUnderivable alone
		}
		if fact.Ignored != "" {
			out.Status, out.Reason = "ignored", fact.Ignored
		}
	}
	if raw.Workspace == "" {
		return out, nil // no workspace: nothing derived, nowhere to record it
	}
	rec := &event.Event{SpecVersion: event.SpecVersion, ID: "redelivered/delivery/" + raw.GUID + "/" + req.RequestID,
		Source: event.ServerSource(raw.Workspace), Type: event.TypeWakegateRedelivered, Subject: recordSubject(raw, fact),
		DataContentType: "application/json", Workspace: raw.Workspace, Priority: event.Internal}
	if prev, err := r.j.Recorded(ctx, rec.Workspace, rec.Subject, rec.Source, rec.ID); err != nil || prev != nil {
		if err != nil {
			return nil, err
		}
		return answered(prev)
	}
	if out.Status == "" {
		res, err := r.tracker.Apply(ctx, raw.Workspace, raw.GUID, fact, r.now())
		if errors.Is(err, tracker.ErrInvalidFact) {
			return nil, fmt.Errorf("%w: %v", ErrUnderivable, err) //nolint:errorlint // as above: not an invalid input of the caller's
		}
		if err != nil {
			return nil, err
		}
		out.Status = "derived"
		for _, seq := range res.Seqs {
			p := Produced{Seq: seq}
			if e, err := r.j.Get(ctx, seq); err != nil {
				return nil, err
			} else if e != nil {
				p.ID, p.Type, p.Subject = e.ID, e.Type, e.Subject
			}
			out.Produced = append(out.Produced, p)
		}
	}
	rec.Time = r.now().UTC()
	rec.Summary = fmt.Sprintf("%s redelivered GitHub delivery %s (%s): %s", req.By, raw.GUID, raw.Event, producedText(out))
	if rec.Data, err = json.Marshal(out); err != nil {
		return nil, fmt.Errorf("encode redelivery of %s: %w", raw.GUID, err)
	}
	seq, added, err := r.j.Append(ctx, rec)
	if err != nil {
		return nil, err
	}
	if !added { // the same request, concurrently: its record stands
		if prev, err := r.j.Get(ctx, seq); err != nil || prev != nil {
			if err != nil {
				return nil, err
			}
			return answered(prev)
		}
	}
	out.Journaled = seq
	return out, nil
}

// answered is the answer a record of an earlier request with the same id
// keeps.
func answered(prev *event.Event) (*Redelivery, error) {
	var out Redelivery
	if err := json.Unmarshal(prev.Data, &out); err != nil {
		return nil, fmt.Errorf("redelivery record %s: %w", prev.Seq, err)
	}
	out.Journaled, out.Duplicate = prev.Seq, true
	return &out, nil
}

// recordSubject is the subject a delivery's redelivery record is
// journaled about, fixed by the stored delivery alone (a retried request
// must find it): the fact's subject, else its commit's, else its
// repository's.
func recordSubject(raw *ingest.Delivery, f *github.Fact) string {
	switch {
	case f != nil && f.Subject != "":
		return f.Subject
	case f != nil && f.Check != nil && f.Check.SHA != "" && f.Repo != "":
		return event.ShaSubject(f.Repo, f.Check.SHA)
	case raw.Repo != "":
		return "github:" + raw.Repo
	}
	return "github:"
}

func producedText(r *Redelivery) string {
	switch {
	case r.Status == "ignored":
		return "ignored (" + r.Reason + ")"
	case len(r.Produced) == 0:
		return "nothing was missing"
	case len(r.Produced) == 1:
		return "1 event produced"
	}
	return fmt.Sprintf("%d events produced", len(r.Produced))
}
