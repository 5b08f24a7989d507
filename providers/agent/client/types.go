package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/wakegate/wakegate/providers/event"
)

// The shapes below are the gateway's answers (docs/api.md); fields a
// client does not act on are kept as raw JSON or left out.

// PushResult answers a push: the events committed, with their journal
// positions, and the ids that were already committed (a retry).
type PushResult struct {
	Accepted   []Accepted `json:"accepted"`
	Duplicates []string   `json:"duplicates"`
}

// Accepted is one committed event.
type Accepted struct {
	ID  string `json:"id"`
	Seq string `json:"seq,omitempty"`
}

// EventsPage is a page of the journal; Next is the cursor to read on from.
type EventsPage struct {
	Events []event.Event `json:"events"`
	Next   string        `json:"next"`
}

// Entry is an inbox entry (docs/design.md §7): one per (recipient, coalesce key)
// while unacked; Seq is strictly increasing per recipient.
type Entry struct {
	Seq         int64          `json:"seq"`
	Type        string         `json:"type"`
	Subject     string         `json:"subject"`
	CoalesceKey string         `json:"coalesce_key"`
	Count       int            `json:"count"`
	Priority    event.Priority `json:"priority"`
	// Kind is what the latest update decided: wake, alert, notice or digest.
	Kind        string          `json:"kind"`
	Summary     string          `json:"summary"`
	FirstAt     time.Time       `json:"first_at"`
	LastAt      time.Time       `json:"last_at"`
	Event       *event.Event    `json:"event"`  // the headline event
	Latest      *event.Event    `json:"latest"` // the newest event folded in
	FoldedIDs   []string        `json:"folded_ids"`
	Via         string          `json:"via"`
	Redelivered bool            `json:"redelivered,omitempty"`
	Waiter      bool            `json:"waiter,omitempty"`
	Escalated   *Escalation     `json:"escalated,omitempty"`
	Wake        bool            `json:"wake"`
	WakeSeq     int64           `json:"wake_seq,omitempty"`
	Settings    json.RawMessage `json:"settings,omitempty"`
}

// Escalation marks an entry that reached its party by escalation (§8).
type Escalation struct {
	Level  int      `json:"level"`
	From   string   `json:"from"`
	Path   []string `json:"path"`
	Rung   string   `json:"rung"`
	Reason string   `json:"reason"`
}

// InboxPage is a page of an inbox; Next is the seq to long-poll after.
type InboxPage struct {
	Entries []Entry `json:"entries"`
	Next    int64   `json:"next"`
}

// Edge is a supervision edge: a controller lease or an observer.
type Edge struct {
	Session string `json:"session_id"`
	Role    string `json:"role"`
	Holder  string `json:"holder"`
	Scope   string `json:"scope"`
	Epoch   int64  `json:"epoch"`
}

// SupervisionView answers GET /v1/sessions/{id}/supervision.
type SupervisionView struct {
	Session             string `json:"session_id"`
	Edges               []Edge `json:"edges"`
	Inherited           []Edge `json:"inherited"`
	EffectiveController struct {
		Party    string `json:"party"`
		Resolved string `json:"resolved"` // own | ancestor:<id> | workspace_default | none
	} `json:"effective_controller"`
}

// SessionFilter selects events about one session, or its subtree.
type SessionFilter struct {
	ID    string `json:"id"`
	Scope string `json:"scope,omitempty"` // self (default) | subtree
}

// SubscriptionRequest is the body of POST /v1/subscriptions: every filter
// optional, at least one present.
type SubscriptionRequest struct {
	Types       []string       `json:"types,omitempty"`
	Subjects    []string       `json:"subjects,omitempty"`
	Session     *SessionFilter `json:"session,omitempty"`
	Labels      []string       `json:"labels,omitempty"`
	MinPriority string         `json:"min_priority,omitempty"` // info (default) | attention | critical
	Delivery    string         `json:"delivery,omitempty"`     // wake (default) | inbox
	Until       string         `json:"until,omitempty"`        // subject_terminal | never | RFC 3339
}

// Subscription is a live subscription. Closed is set on a create whose
// subject had already ended: its terminal event was delivered and the
// subscription is gone.
type Subscription struct {
	ID          string         `json:"id"`
	Workspace   string         `json:"workspace"`
	Owner       string         `json:"owner"`
	Types       []string       `json:"types,omitempty"`
	Subjects    []string       `json:"subjects,omitempty"`
	Session     *SessionFilter `json:"session,omitempty"`
	Labels      []string       `json:"labels,omitempty"`
	MinPriority string         `json:"min_priority"`
	Delivery    string         `json:"delivery"`
	Until       string         `json:"until,omitempty"`
	CreatedAt   time.Time      `json:"created_at"`
	Closed      bool           `json:"closed,omitempty"`
}

// Brief answers GET /v1/brief: what a supervisor reads after a restart or
// a compaction, from state alone.
type Brief struct {
	Party         string         `json:"party"`
	Workspace     string         `json:"workspace"`
	Leases        []Edge         `json:"leases"`
	Subscriptions []Subscription `json:"subscriptions"`
	Unacked       []Entry        `json:"unacked"` // highest priority first
	UnackedCount  int            `json:"unacked_count"`
	OpenDecisions []struct {
		Session string    `json:"session"`
		Type    string    `json:"type"`
		Since   time.Time `json:"since,omitzero"`
	} `json:"open_decisions"`
	OpenSubjects []struct {
		Subject  string `json:"subject"`
		State    string `json:"state,omitempty"`
		Liveness string `json:"liveness,omitempty"`
		Latest   *struct {
			Seq      int64          `json:"seq"`
			Type     string         `json:"type"`
			Priority event.Priority `json:"priority"`
			Summary  string         `json:"summary,omitempty"`
			At       time.Time      `json:"at"`
		} `json:"latest,omitempty"`
	} `json:"open_subjects"`
	InboxNext int64  `json:"inbox_next"`
	Cursor    string `json:"cursor"` // the journal's end when the brief was read
}

// Message is the body of POST /v1/sessions/{id}/messages.
type Message struct {
	Text    string `json:"text"`
	Intent  string `json:"intent"` // control | info
	Blocker bool   `json:"blocker,omitempty"`
}

// MessageResult answers a message; Warning ("not_controller") and Holder
// are set when lease mode warn flagged it.
type MessageResult struct {
	ID      string `json:"id"`
	Seq     string `json:"seq"`
	Warning string `json:"warning,omitempty"`
	Holder  string `json:"holder,omitempty"`
}

// PresenceRequest is the body of PUT /v1/presence. A PUT replaces the
// whole presence.
type PresenceRequest struct {
	Attended    bool          // attended for For (the gateway's default when zero)
	For         time.Duration // 1 s–24 h
	PausedUntil time.Time     // PAUSED until then (zero: not paused)
	Reason      string
}

// Presence answers PUT and GET /v1/presence.
type Presence struct {
	Party         string     `json:"party"`
	Attended      bool       `json:"attended"`
	AttendedUntil *time.Time `json:"attended_until,omitempty"`
	Paused        bool       `json:"paused"`
	PausedUntil   *time.Time `json:"paused_until,omitempty"`
	Reason        string     `json:"reason,omitempty"`
}

// QuietRequest is the body of PUT /v1/quiet.
type QuietRequest struct {
	Scope  string    // self (default) | all | a party
	Reason string    //
	Until  time.Time // zero: until lifted (self only; others need ≤ 24 h)
}

// Quiet is a live quiet record.
type Quiet struct {
	Scope  string    `json:"scope"` // "all" or a party
	Reason string    `json:"reason,omitempty"`
	Until  time.Time `json:"until,omitzero"`
	By     string    `json:"by"`
	At     time.Time `json:"at"`
}

// QuietLifted answers DELETE /v1/quiet: one digest per recipient released.
type QuietLifted struct {
	Scope   string   `json:"scope"`
	Digests []Digest `json:"digests"`
}

// Digest is what a lifted hold released for one party, and the line a
// person reads.
type Digest struct {
	Party     string  `json:"party"`
	Reason    string  `json:"reason"`
	WebhookID string  `json:"webhook_id,omitempty"`
	Text      string  `json:"text"`
	Entries   []Entry `json:"digest"`
}

// ChildTokenRequest is the body of POST /v1/sessions/{child}/token; zero
// fields take the caller's scopes and lifetime.
type ChildTokenRequest struct {
	Scope string        // space-separated, a subset of the caller's
	TTL   time.Duration // at most the caller's remaining lifetime
}

// ChildToken is a token minted for a child session.
type ChildToken struct {
	Token     string    `json:"token"`
	Sub       string    `json:"sub"`
	Workspace string    `json:"workspace"`
	Scope     string    `json:"scope"`
	ExpiresAt time.Time `json:"expires_at"`
	Parent    string    `json:"parent,omitempty"`
}

// Health answers GET /v1/health/supervision (docs/design.md §9): the invariants of
// docs/design.md §9 with counts and examples. Raw is the answer as sent, for
// fields this client does not know.
type Health struct {
	Workspace  string
	At         time.Time
	OK         *bool // nil when the report does not say
	Invariants []Invariant
	Raw        json.RawMessage
}

// Invariant is one health check: its id (I1…I7), what it checks, whether
// it holds, how many (of Unit) it counts, some examples, and how many the
// sweep repaired.
type Invariant struct {
	ID       string            `json:"id"`
	Name     string            `json:"name,omitempty"`
	OK       *bool             `json:"ok,omitempty"` // nil when the report does not say: then Count > 0 fails
	Count    int               `json:"count"`
	Unit     string            `json:"unit,omitempty"`
	Examples []json.RawMessage `json:"examples,omitempty"`
	Repaired int               `json:"repaired,omitempty"`
}

// Failing reports whether the invariant is violated: its ok, else a
// non-zero count.
func (i Invariant) Failing() bool {
	if i.OK != nil {
		return !*i.OK
	}
	return i.Count > 0
}

// UnmarshalJSON reads the report tolerantly: "invariants" as a list of
// objects, or as an object keyed by id; "title" or "description" stand in
// for "name".
func (h *Health) UnmarshalJSON(b []byte) error {
	h.Raw = append(json.RawMessage(nil), b...)
	var top struct {
		Workspace  string          `json:"workspace"`
		At         time.Time       `json:"at"`
		OK         *bool           `json:"ok"`
		Invariants json.RawMessage `json:"invariants"`
	}
	if err := json.Unmarshal(b, &top); err != nil {
		return err
	}
	h.Workspace, h.At, h.OK = top.Workspace, top.At, top.OK
	raw := bytes.TrimSpace(top.Invariants)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	type loose struct {
		Invariant
		Title       string `json:"title"`
		Description string `json:"description"`
	}
	fix := func(l loose, id string) Invariant {
		inv := l.Invariant
		if inv.ID == "" {
			inv.ID = id
		}
		if inv.Name == "" {
			inv.Name = l.Title
		}
		if inv.Name == "" {
			inv.Name = l.Description
		}
		return inv
	}
	switch raw[0] {
	case '[':
		var list []loose
		if err := json.Unmarshal(raw, &list); err != nil {
			return fmt.Errorf("health invariants: %w", err)
		}
		for _, l := range list {
			h.Invariants = append(h.Invariants, fix(l, ""))
		}
	case '{':
		var byID map[string]loose
		if err := json.Unmarshal(raw, &byID); err != nil {
			return fmt.Errorf("health invariants: %w", err)
		}
		for id, l := range byID {
			h.Invariants = append(h.Invariants, fix(l, id))
		}
		sort.Slice(h.Invariants, func(i, j int) bool { return h.Invariants[i].ID < h.Invariants[j].ID })
	default:
		return fmt.Errorf("health invariants: a list or an object expected")
	}
	return nil
}
