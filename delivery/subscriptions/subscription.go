// Package subscriptions stores a workspace's subscriptions (docs/design.md §6) and
// matches events against them through indexes (docs/design.md §5): the cost of
// matching one event depends on the subscriptions that could match it,
// never on the ones that cannot.
//
// # Grammar
//
// A subscription has up to four filters, of which at least one is present;
// a filter with several values matches when any value does, and an event
// matches a subscription when every filter present matches (types AND
// subjects AND session AND labels AND min_priority):
//
//   - types: an exact dotted type ("github.pull_request.ready") or a prefix
//     glob "prefix.*" ("github.*", "github.pull_request.*"), which matches
//     every type that starts with "prefix." (so "github.pull_request.*"
//     does not match "github.pull_request_review.submitted");
//   - subjects: an exact subject ("session:<id>", "github:<org>/<repo>#<n>",
//     "github:<org>/<repo>@<sha>", "github:<org>/<repo>") or the globs
//     "github:<org>/<repo>#*", every pull request and issue of a
//     repository, and "github:<org>/<repo>@*", every commit of it (a
//     deployment status is about its sha);
//   - session: {"id": "<session id>", "scope": "self"|"subtree"} — events
//     about that session, or (subtree) about it and every descendant, by
//     the event's lineage, resolved when the event is routed;
//   - labels: events about a session carrying any of these labels
//     (session.spawned data.labels), passed to Match by the router.
//
// min_priority (info, attention, critical; default info) drops events
// below it; delivery is wake (default) or inbox; until is
// "subject_terminal" (only with exactly one exact subject), "never" or an
// RFC 3339 time.
//
// # Storage
//
// Every key of a workspace's subscriptions is under one hash tag, so one
// script reads the union of index sets (T = <prefix>:{sub:<workspace>}):
//
//	T:subs                 hash  id → subscription JSON
//	T:ixof                 hash  id → JSON array of every set key the id is in
//	T:own:<owner party>    set   ids the party created
//	T:ix:type:<type>       set   ids filtered by that exact type
//	T:ix:tpre:<prefix>     set   ids filtered by "<prefix>.*"
//	T:ix:subj:<subject>    set   ids filtered by that exact subject
//	T:ix:spre:<org/repo#>  set   ids filtered by "github:<org/repo>#*" (key ends "github:<org>/<repo>#";
//	                             "@" for "github:<org/repo>@*")
//	T:ix:self:<session>    set   ids filtered by {"id": session, "scope": "self"}
//	T:ix:tree:<session>    set   ids filtered by {"id": session, "scope": "subtree"}
//	T:ix:label:<label>     set   ids filtered by that label
//	T:term:<subject>       set   ids with until subject_terminal on that subject
//
// plus one global sorted set, <prefix>:sub:expiry ("<workspace>/<id>"
// scored by the until time in ms), that Sweep reads.
//
// Since every filter must match, a subscription is indexed under ONE of its
// filters only — the most selective one it has (exact subjects, then
// session self, session subtree, labels, subject globs, types) — under each
// value of that filter. Match derives the index keys from what the event
// carries (its type and every dotted prefix of it, its subject and its
// "github:<org>/<repo>#" or "@" part, its session and every ancestor in its
// lineage, the session's labels), unions them in one script call, and
// checks every filter in Go. A subscription can only be a candidate for an
// event that already matches one of its filters.
package subscriptions

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/kind"
)

// Errors. Every error Parse or Create returns for bad input wraps ErrInvalid
// (answer 400) or ErrUntil (answer 422) with a message naming the field.
var (
	ErrInvalid  = kind.New(kind.Invalid, "invalid subscription")
	ErrUntil    = kind.New(kind.Unprocessable, "invalid until")
	ErrNotFound = kind.New(kind.NotFound, "no such subscription")
)

// Until values besides an RFC 3339 time.
const (
	UntilSubjectTerminal = "subject_terminal"
	UntilNever           = "never"
)

// Delivery modes.
const (
	DeliveryWake  = "wake"  // entries wake by the rules of docs/design.md §7
	DeliveryInbox = "inbox" // entries only, never a wake
)

// Session filter scopes.
const (
	ScopeSelf    = "self"
	ScopeSubtree = "subtree"
)

// MaxValues caps the values of one filter.
const MaxValues = 32

// Subscription is a party's standing request to hear about events.
type Subscription struct {
	ID          string         `json:"id"`
	Workspace   string         `json:"workspace"`
	Owner       string         `json:"owner"` // the party that created it, and who receives
	Types       []string       `json:"types,omitempty"`
	Subjects    []string       `json:"subjects,omitempty"`
	Session     *SessionFilter `json:"session,omitempty"`
	Labels      []string       `json:"labels,omitempty"`
	MinPriority string         `json:"min_priority"` // info (default) | attention | critical
	Delivery    string         `json:"delivery"`     // wake (default) | inbox
	Until       string         `json:"until,omitempty"`
	CreatedAt   time.Time      `json:"created_at"`
}

// SessionFilter selects events about one session, or its subtree.
type SessionFilter struct {
	ID    string `json:"id"`
	Scope string `json:"scope"` // self (default) | subtree
}

// request is the body of POST /v1/subscriptions: the fields a client sets.
type request struct {
	Types       []string       `json:"types"`
	Subjects    []string       `json:"subjects"`
	Session     *SessionFilter `json:"session"`
	Labels      []string       `json:"labels"`
	MinPriority string         `json:"min_priority"`
	Delivery    string         `json:"delivery"`
	Until       string         `json:"until"`
}

// Parse reads and validates the body of POST /v1/subscriptions. Unknown
// fields are refused. The result has no ID, Workspace, Owner or CreatedAt:
// Create sets them.
func Parse(body []byte) (Subscription, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var r request
	if err := dec.Decode(&r); err != nil {
		return Subscription{}, fmt.Errorf("%w: body: %s", ErrInvalid, jsonProblem(err))
	}
	if dec.More() {
		return Subscription{}, fmt.Errorf("%w: body: one JSON object expected", ErrInvalid)
	}
	sub := Subscription{Types: r.Types, Subjects: r.Subjects, Session: r.Session, Labels: r.Labels,
		MinPriority: r.MinPriority, Delivery: r.Delivery, Until: r.Until}
	if err := normalize(&sub); err != nil {
		return Subscription{}, err
	}
	return sub, nil
}

func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		if te.Field != "" {
			return fmt.Sprintf("%s must be %s", te.Field, te.Type)
		}
		return "a JSON object expected"
	case errors.As(err, &se):
		return "malformed JSON"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

var (
	// typePrefixRe is the part before ".*" of a type glob.
	typePrefixRe = regexp.MustCompile(`^[a-z0-9_]+(\.[a-z0-9_]+)*$`)
	// subjectRe is an exact subject of the github: family.
	githubSubjectRe = regexp.MustCompile(`^github:([A-Za-z0-9._-]{1,128})/([A-Za-z0-9._-]{1,128})(#[1-9][0-9]{0,18}|@[0-9a-fA-F]{7,64})?$`)
	// githubGlobRe is a subject glob: every PR and issue of a repository
	// ("#*"), or every commit of it ("@*", what deployments and checks of
	// no known PR are about).
	githubGlobRe = regexp.MustCompile(`^github:[A-Za-z0-9._-]{1,128}/[A-Za-z0-9._-]{1,128}[#@]\*$`)
)

// normalize validates sub's filters, fills defaults and removes duplicate
// values. It is shared by Parse and Create.
func normalize(sub *Subscription) error {
	var err error
	if sub.Types, err = values("types", sub.Types, checkType); err != nil {
		return err
	}
	if sub.Subjects, err = values("subjects", sub.Subjects, checkSubject); err != nil {
		return err
	}
	if sub.Labels, err = values("labels", sub.Labels, func(l string) error {
		if !event.ValidID(l) {
			return errors.New("must match ^[A-Za-z0-9._-]{1,128}$")
		}
		return nil
	}); err != nil {
		return err
	}
	if f := sub.Session; f != nil {
		if !event.ValidID(f.ID) {
			return fmt.Errorf("%w: session.id %q must be a session id matching ^[A-Za-z0-9._-]{1,128}$", ErrInvalid, f.ID)
		}
		switch f.Scope {
		case "":
			f.Scope = ScopeSelf
		case ScopeSelf, ScopeSubtree:
		default:
			return fmt.Errorf("%w: session.scope %q must be self or subtree", ErrInvalid, f.Scope)
		}
	}
	if len(sub.Types) == 0 && len(sub.Subjects) == 0 && sub.Session == nil && len(sub.Labels) == 0 {
		return fmt.Errorf("%w: at least one filter is needed: types, subjects, session or labels", ErrInvalid)
	}
	switch sub.MinPriority {
	case "":
		sub.MinPriority = string(event.Info)
	case string(event.Info), string(event.Attention), string(event.Critical):
	default:
		return fmt.Errorf("%w: min_priority %q must be info, attention or critical", ErrInvalid, sub.MinPriority)
	}
	switch sub.Delivery {
	case "":
		sub.Delivery = DeliveryWake
	case DeliveryWake, DeliveryInbox:
	default:
		return fmt.Errorf("%w: delivery %q must be wake or inbox", ErrInvalid, sub.Delivery)
	}
	switch sub.Until {
	case "", UntilNever:
	case UntilSubjectTerminal:
		if len(sub.Subjects) != 1 || isGlob(sub.Subjects[0]) {
			return fmt.Errorf("%w: until subject_terminal needs exactly one exact subject (no wildcard)", ErrUntil)
		}
	default:
		t, err := time.Parse(time.RFC3339Nano, sub.Until)
		if err != nil {
			return fmt.Errorf("%w: until %q must be subject_terminal, never or an RFC 3339 time", ErrInvalid, sub.Until)
		}
		sub.Until = t.UTC().Format(time.RFC3339Nano)
	}
	return nil
}

// values checks each value of a filter and drops duplicates; an empty list
// is no filter.
func values(field string, vs []string, check func(string) error) ([]string, error) {
	if len(vs) == 0 {
		return nil, nil
	}
	if len(vs) > MaxValues {
		return nil, fmt.Errorf("%w: %s: at most %d values", ErrInvalid, field, MaxValues)
	}
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		if err := check(v); err != nil {
			return nil, fmt.Errorf("%w: %s: %q %w", ErrInvalid, field, v, err)
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out, nil
}

func checkType(t string) error {
	if p, ok := strings.CutSuffix(t, ".*"); ok {
		if len(p) > 126 || !typePrefixRe.MatchString(p) {
			return errors.New(`is not a type glob: a dotted prefix followed by ".*", e.g. "github.pull_request.*"`)
		}
		return nil
	}
	if !event.ValidType(t) {
		return errors.New(`is not a type: want an exact dotted type such as "github.pull_request.ready" or a glob "prefix.*"`)
	}
	return nil
}

func checkSubject(s string) error {
	if id, ok := strings.CutPrefix(s, "session:"); ok {
		if !event.ValidID(id) {
			return errors.New("is not a subject: session:<id> with id matching ^[A-Za-z0-9._-]{1,128}$")
		}
		return nil
	}
	if githubSubjectRe.MatchString(s) || githubGlobRe.MatchString(s) {
		return nil
	}
	return errors.New(`is not a subject: want session:<id>, github:<org>/<repo>#<n>, github:<org>/<repo>@<sha> or the globs github:<org>/<repo>#* and github:<org>/<repo>@*`)
}

func isGlob(v string) bool { return strings.HasSuffix(v, "*") }

// Matches reports whether e matches every filter of the subscription:
// types AND subjects AND session AND labels AND min_priority, and the
// subscription has not expired at now. sessionLabels are the labels of the
// session e is about.
func (s *Subscription) Matches(e *event.Event, sessionLabels []string, now time.Time) bool {
	if s.expired(now) {
		return false
	}
	if len(s.Types) > 0 && !slices.ContainsFunc(s.Types, func(t string) bool { return typeMatches(t, e.Type) }) {
		return false
	}
	if len(s.Subjects) > 0 && !slices.ContainsFunc(s.Subjects, func(p string) bool { return subjectMatches(p, e.Subject) }) {
		return false
	}
	if f := s.Session; f != nil {
		if e.SessionID == "" {
			return false
		}
		if e.SessionID != f.ID && (f.Scope != ScopeSubtree || !slices.Contains(e.Lineage, f.ID)) {
			return false
		}
	}
	if len(s.Labels) > 0 && (e.SessionID == "" || !slices.ContainsFunc(s.Labels, func(l string) bool { return slices.Contains(sessionLabels, l) })) {
		return false
	}
	p := e.Priority
	if p == "" {
		p = event.DefaultPriority(e.Type, e.Data)
	}
	return p.Rank() >= event.Priority(s.MinPriority).Rank() && p.Rank() >= 0
}

func typeMatches(pattern, typ string) bool {
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return len(typ) > len(p) && strings.HasPrefix(typ, p)
	}
	return pattern == typ
}

func subjectMatches(pattern, subject string) bool {
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return len(subject) > len(p) && strings.HasPrefix(subject, p)
	}
	return pattern == subject
}

// UntilTime returns the time an "until: <RFC 3339>" subscription ends, or
// the zero time.
func (s *Subscription) UntilTime() time.Time {
	switch s.Until {
	case "", UntilNever, UntilSubjectTerminal:
		return time.Time{}
	}
	t, _ := time.Parse(time.RFC3339Nano, s.Until)
	return t
}

func (s *Subscription) expired(now time.Time) bool {
	t := s.UntilTime()
	return !t.IsZero() && !now.Before(t)
}
