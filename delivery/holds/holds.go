// Package holds decides whether a wake is pushed now or held (docs/design.md §7,
// the order quiet → PAUSED → attended → rate cap → channel), keeps
// what is held, and turns it into one digest when the hold ends.
//
//   - Presence (PUT /v1/presence): attended until a time (the inbox turns
//     attention+ into alert or notice for an attended recipient) and the
//     recipient-side PAUSED hold (paused_until).
//   - Quiet: records per workspace, scope "all" or a party, with an
//     optional until. Quiet holds every wake and alert to its recipients,
//     never a waiter delivery (a session's own subscription on its own
//     subject or linked PR).
//   - Quiet hours: the workspace setting quiet_hours (a daily window in a
//     time zone) holds wakes to human: recipients, never a critical one,
//     until the period ends (supervision.QuietHours.Window).
//   - Rate cap: a token bucket per recipient (workspace setting rate:
//     burst, one token per per); the excess is held for one digest due at
//     the next token.
//
// Held wakes stay in the inbox (the entries are never touched here); only
// their push waits. Every per-recipient write is one Lua script over keys
// under the recipient's inbox hash tag (inbox.Tag); decide.lua and
// drain.lua document their keys. Quiet records live under a per-workspace
// tag.
package holds

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/kind"
)

// Reasons a wake is held (Decision.Reason, the digest's reason).
const (
	ReasonQuiet      = "quiet"
	ReasonQuietHours = "quiet_hours"
	ReasonPaused     = "paused"
	ReasonRate       = "rate"
)

// ScopeAll is the quiet scope of every recipient of a workspace.
const ScopeAll = "all"

var (
	//go:embed holds_decide.lua
	holdsDecideLua string
	//go:embed decide.lua
	decideLua string
	//go:embed deliver_decide.lua
	deliverDecideLua string
	//go:embed drain.lua
	drainLua string

	decideScript        = keyspace.NewScript("delivery/holds/decide.lua", holdsDecideLua, decideLua)
	deliverDecideScript = keyspace.NewScript("delivery/holds/deliver_decide.lua", inbox.DeliverFuncLua, holdsDecideLua, deliverDecideLua)
	drainScript         = keyspace.NewScript("delivery/holds/drain.lua", drainLua)
)

// ErrInvalid wraps the error of a call with bad input; nothing was written.
var ErrInvalid = kind.New(kind.Invalid, "holds: invalid input")

// MaxQuietRecords bounds the quiet records of one workspace (one per
// scope; a lift deletes its record): a new scope beyond it is refused
// with ErrLimit (docs/design.md §10).
const MaxQuietRecords = 10_000

// ErrLimit is returned by SetQuiet for a new scope in a workspace that
// has MaxQuietRecords already.
var ErrLimit = kind.New(kind.Limit, "holds: quiet record limit reached")

// setQuietScript puts a quiet record.
// Its KEYS, ARGV and reply are in set_quiet.lua.
//
//go:embed set_quiet.lua
var setQuietLua string

var setQuietScript = keyspace.NewScript("delivery/holds/set_quiet.lua", setQuietLua)

// Store keeps presence, quiet records and held wakes.
type Store struct {
	rdb    redis.UniversalClient
	prefix string
}

// New returns the store on rdb under prefix (default keyspace.DefaultPrefix).
func New(rdb redis.UniversalClient, prefix string) *Store {
	if prefix == "" {
		prefix = keyspace.DefaultPrefix
	}
	return &Store{rdb: rdb, prefix: prefix}
}

// Key layout (besides the scripts' keys, all under the recipient's tag):
//
//	<prefix>:<inbox tag>:presence        string  Presence JSON, expiring when neither attended nor paused is left
//	<prefix>:{<prefix>:hq:<ws>}:quiet    hash    scope ("all" or a party) → Quiet JSON
//	<prefix>:{<prefix>:hq:<ws>}:held     set     parties with quiet-held wakes (what lifting "all" visits)
func (s *Store) rkey(ws, party, suffix string) string {
	return keyspace.Recipient(s.prefix, ws, party) + ":" + suffix
}
func (s *Store) quietKey(ws string) string {
	return keyspace.Quiet(s.prefix, ws) + ":quiet"
}
func (s *Store) heldKey(ws string) string { return keyspace.Quiet(s.prefix, ws) + ":held" }

func checkRecipient(ws, party string) error {
	if !event.ValidWorkspace(ws) {
		return fmt.Errorf("%w: workspace %q", ErrInvalid, ws)
	}
	if _, err := event.ParseParty(party); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// Presence is a recipient's presence (PUT /v1/presence).
type Presence struct {
	AttendedUntil time.Time `json:"attended_until,omitzero"`
	PausedUntil   time.Time `json:"paused_until,omitzero"`
	Reason        string    `json:"reason,omitempty"`
	SetAt         time.Time `json:"set_at,omitzero"`
}

// Attended reports whether the recipient is attended at now.
func (p Presence) Attended(now time.Time) bool { return p.AttendedUntil.After(now) }

// Paused reports whether the recipient stands down (PAUSED) at now.
func (p Presence) Paused(now time.Time) bool { return p.PausedUntil.After(now) }

// SetPresence replaces a recipient's presence; it expires when neither
// its attended nor its paused time is left.
func (s *Store) SetPresence(ctx context.Context, ws, party string, p Presence, now time.Time) error {
	if err := checkRecipient(ws, party); err != nil {
		return err
	}
	end := p.AttendedUntil
	if p.PausedUntil.After(end) {
		end = p.PausedUntil
	}
	k := s.rkey(ws, party, "presence")
	if !end.After(now) {
		return s.rdb.Del(ctx, k).Err()
	}
	b, _ := json.Marshal(p)
	return s.rdb.Set(ctx, k, b, end.Sub(now)).Err()
}

// GetPresence returns a recipient's presence (zero when none is set).
func (s *Store) GetPresence(ctx context.Context, ws, party string) (Presence, error) {
	var p Presence
	if err := checkRecipient(ws, party); err != nil {
		return p, err
	}
	b, err := s.rdb.Get(ctx, s.rkey(ws, party, "presence")).Bytes()
	if errors.Is(err, redis.Nil) {
		return p, nil
	}
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return Presence{}, fmt.Errorf("stored presence of %s: %w", party, err)
	}
	return p, nil
}

// Quiet is one quiet record (PUT /v1/quiet).
type Quiet struct {
	Scope  string    `json:"scope"` // "all" or a party
	Reason string    `json:"reason,omitempty"`
	Until  time.Time `json:"until,omitzero"` // zero: until lifted
	By     string    `json:"by"`
	At     time.Time `json:"at"`
}

func (q Quiet) live(now time.Time) bool { return q.Until.IsZero() || q.Until.After(now) }

// SetQuiet puts (or replaces) the quiet record of its scope; a new scope
// past MaxQuietRecords is refused with ErrLimit.
func (s *Store) SetQuiet(ctx context.Context, ws string, q Quiet) error {
	if !event.ValidWorkspace(ws) {
		return fmt.Errorf("%w: workspace %q", ErrInvalid, ws)
	}
	if q.Scope != ScopeAll {
		if err := checkRecipient(ws, q.Scope); err != nil {
			return err
		}
	}
	b, _ := json.Marshal(q)
	n, err := setQuietScript.Run(ctx, s.rdb, []string{s.quietKey(ws)}, q.Scope, b, MaxQuietRecords).Int()
	if err != nil {
		return fmt.Errorf("set quiet: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: a workspace holds at most %d quiet records; lift one first", ErrLimit, MaxQuietRecords)
	}
	return nil
}

// QuietRecords lists a workspace's live quiet records, by scope.
func (s *Store) QuietRecords(ctx context.Context, ws string, now time.Time) ([]Quiet, error) {
	m, err := s.rdb.HGetAll(ctx, s.quietKey(ws)).Result()
	if err != nil {
		return nil, err
	}
	out := []Quiet{}
	for _, v := range m {
		var q Quiet
		if json.Unmarshal([]byte(v), &q) == nil && q.live(now) {
			out = append(out, q)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Scope < out[j].Scope })
	return out, nil
}

// GetQuiet returns the record of one scope, nil when none (an expired one
// is still returned: its until has passed and its lift is due).
func (s *Store) GetQuiet(ctx context.Context, ws, scope string) (*Quiet, error) {
	v, err := s.rdb.HGet(ctx, s.quietKey(ws), scope).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var q Quiet
	if err := json.Unmarshal([]byte(v), &q); err != nil {
		return nil, err
	}
	return &q, nil
}

// DeleteQuiet removes the record of one scope; false when there was none.
func (s *Store) DeleteQuiet(ctx context.Context, ws, scope string) (bool, error) {
	n, err := s.rdb.HDel(ctx, s.quietKey(ws), scope).Result()
	return n > 0, err
}

// IsQuiet reports whether a live quiet record covers party.
func (s *Store) IsQuiet(ctx context.Context, ws, party string, now time.Time) (bool, error) {
	vs, err := s.rdb.HMGet(ctx, s.quietKey(ws), party, ScopeAll).Result()
	if err != nil {
		return false, err
	}
	for _, v := range vs {
		str, ok := v.(string)
		if !ok {
			continue
		}
		var q Quiet
		if json.Unmarshal([]byte(str), &q) == nil && q.live(now) {
			return true, nil
		}
	}
	return false, nil
}

// State is what the holds decision reads about one recipient before a
// delivery: its presence and whether a live quiet record covers it.
type State struct {
	Presence Presence
	Quiet    bool
}

// Lookup reads the State of each of parties in one round trip (the
// router reads it once per event for all its recipients).
func (s *Store) Lookup(ctx context.Context, ws string, parties []string, now time.Time) (map[string]State, error) {
	p := s.rdb.Pipeline()
	read := s.QueueLookup(ctx, p, ws, parties, now)
	_, _ = p.Exec(ctx) // each command's error is read by read
	return read()
}

// QueueLookup queues Lookup's reads on p (a pipeline, so that a caller
// reads several things in one round trip); the func it returns answers as
// Lookup once p has run.
func (s *Store) QueueLookup(ctx context.Context, p redis.Pipeliner, ws string, parties []string, now time.Time) func() (map[string]State, error) {
	for _, party := range parties {
		if err := checkRecipient(ws, party); err != nil {
			return func() (map[string]State, error) { return nil, err }
		}
	}
	gets := make([]*redis.StringCmd, len(parties))
	for i, party := range parties {
		gets[i] = p.Get(ctx, s.rkey(ws, party, "presence"))
	}
	quiet := p.HMGet(ctx, s.quietKey(ws), append([]string{ScopeAll}, parties...)...)
	return func() (map[string]State, error) {
		if err := quiet.Err(); err != nil {
			return nil, err
		}
		live := func(v any) bool {
			str, ok := v.(string)
			var q Quiet
			return ok && json.Unmarshal([]byte(str), &q) == nil && q.live(now)
		}
		qs := quiet.Val()
		out := make(map[string]State, len(parties))
		for i, party := range parties {
			st := State{Quiet: live(qs[0]) || live(qs[i+1])}
			b, err := gets[i].Bytes()
			switch {
			case errors.Is(err, redis.Nil):
			case err != nil:
				return nil, err
			default:
				if err := json.Unmarshal(b, &st.Presence); err != nil {
					return nil, fmt.Errorf("stored presence of %s: %w", party, err)
				}
			}
			out[party] = st
		}
		return out, nil
	}
}

// QuietHeldParties lists the parties with quiet-held wakes.
func (s *Store) QuietHeldParties(ctx context.Context, ws string) ([]string, error) {
	ps, err := s.rdb.SMembers(ctx, s.heldKey(ws)).Result()
	sort.Strings(ps)
	return ps, err
}

// Request is one inbox update that decided a wake, for Decide.
type Request struct {
	Workspace, Party string
	Result           inbox.Result
	Event            *event.Event
	// Waiter: the update reached a session through its own subscription on
	// its own subject or linked PR — quiet never holds it.
	Waiter   bool
	Settings supervision.Settings
	Presence Presence
	// Quiet is whether a live quiet record covers the recipient, as
	// Lookup read it; nil: Decide reads it itself.
	Quiet *bool
	Now   time.Time
	// ItemTail is ItemTail(Event, Now, …) when the caller has it already
	// (one event delivered to several parties at one Now); "" builds it.
	ItemTail string
}

// Decision is what Decide decided.
type Decision struct {
	Push   bool      // push it now
	Reason string    // held: ReasonQuiet, ReasonQuietHours, ReasonPaused or ReasonRate
	Due    time.Time // held for the rate cap: the next token (the digest's slot); quiet hours: the period's end; PAUSED: its end
}

// Item is one held wake, as a digest lists it.
type Item struct {
	Seq      int64           `json:"seq"`
	Kind     string          `json:"kind"` // right after seq: see itemTail
	ID       string          `json:"id"`
	Type     string          `json:"type"`
	Subject  string          `json:"subject"`
	Summary  string          `json:"summary,omitempty"`
	Priority event.Priority  `json:"priority"`
	At       time.Time       `json:"at"`
	Merged   bool            `json:"merged,omitempty"`
	Event    json.RawMessage `json:"event"`
}

// decisionTTL is how long a decision is remembered for a re-run of the
// routing.
const decisionTTL = 72 * time.Hour

// Decide is the holds decision for one inbox update that decided a wake:
// quiet (unless a waiter delivery) → quiet hours → PAUSED → rate cap.
// Attended is the inbox's part (an attended recipient's notice never
// reaches here). A held wake is recorded for its digest; a re-run for the
// same seq answers the original decision and records nothing.
//
// Quiet hours are a form of quiet (docs/design.md §7), so they sit in quiet's
// place, right after an explicit quiet and before PAUSED: a wake that both
// hold waits for the explicit quiet's lift (one digest, on the human's
// word), one that only quiet hours hold waits for the period's end. They
// apply to human: recipients only — a session is a machine, and a worker
// parked on its PR must still be resumed at night — and never to a
// critical event, which reaches the human at once (the rate cap still
// applies to it). The window is read from r.Settings, the settings the
// router snapshotted for this update.
func (s *Store) Decide(ctx context.Context, r Request) (Decision, error) {
	if err := checkRecipient(r.Workspace, r.Party); err != nil {
		return Decision{}, err
	}
	if !r.Result.Wake || r.Result.Seq <= 0 {
		return Decision{}, nil
	}
	keys, a, err := s.prepare(ctx, r)
	if err != nil {
		return Decision{}, err
	}
	it, err := itemOf(r.Event, r.Result, r.Now, "")
	if err != nil {
		return Decision{}, err
	}
	item := it.appendJSON(nil)
	out, err := decideScript.Run(ctx, s.rdb, keys, r.Result.Seq, a.reason, a.now, a.per, a.burst, string(item), a.ttl, a.due).Text()
	if err != nil {
		return Decision{}, fmt.Errorf("holds decision for %s: %w", r.Party, err)
	}
	return s.decision(ctx, r, out)
}

// DeliverAndDecide is box.Deliver(ctx, d, r.Now) and, when that decides a
// wake, Decide for it (r.Result is the delivery's), in one script call.
//
// Its errors for bad input are Deliver's (inbox.ErrInvalid) first.
func (s *Store) DeliverAndDecide(ctx context.Context, box *inbox.Inbox, d inbox.Delivery, r Request) (inbox.Result, Decision, error) {
	dkeys, dargs, err := box.DeliveryCall(d, r.Now)
	if err != nil {
		return inbox.Result{}, Decision{}, err
	}
	if err := checkRecipient(r.Workspace, r.Party); err != nil {
		return inbox.Result{}, Decision{}, err
	}
	hkeys, a, err := s.prepare(ctx, r)
	if err != nil {
		return inbox.Result{}, Decision{}, err
	}
	tail := r.ItemTail
	if tail == "" {
		if tail, err = ItemTail(r.Event, r.Now, ""); err != nil {
			return inbox.Result{}, Decision{}, err
		}
	}
	res, err := deliverDecideScript.Run(ctx, s.rdb, append(dkeys, hkeys...),
		append(dargs, a.reason, a.now, a.per, a.burst, tail, a.ttl, a.due)...).Slice()
	if err != nil {
		return inbox.Result{}, Decision{}, fmt.Errorf("deliver %s to %s: %w", d.Event.ID, d.Party, err)
	}
	got, err := inbox.ParseDelivery(res)
	if err != nil || !got.Wake {
		return got, Decision{}, err
	}
	out, _ := res[len(res)-1].(string)
	if len(res) != 7 || out == "" {
		return got, Decision{}, fmt.Errorf("holds decision for %s: script answered %v", r.Party, res)
	}
	r.Result = got
	dec, err := s.decision(ctx, r, out)
	return got, dec, err
}

// decideArgs are decide.lua's arguments other than the seq and the item.
type decideArgs struct {
	reason          string
	now, per, burst int64
	ttl, due        int64
}

// prepare decides what the script does not: quiet (unless a waiter
// delivery), quiet hours and PAUSED (the reason, "" for none, and a due
// it knows), and the rate; it returns decide.lua's KEYS and the rest of
// its arguments.
func (s *Store) prepare(ctx context.Context, r Request) ([]string, decideArgs, error) {
	reason := ""
	if !r.Waiter {
		q := r.Quiet != nil && *r.Quiet
		if r.Quiet == nil {
			var err error
			if q, err = s.IsQuiet(ctx, r.Workspace, r.Party, r.Now); err != nil {
				return nil, decideArgs{}, err
			}
		}
		if q {
			reason = ReasonQuiet
		}
	}
	var due time.Time
	if reason == "" && strings.HasPrefix(r.Party, "human:") && priorityOf(r.Event) != event.Critical {
		if end, in := r.Settings.QuietHours.Window(r.Now); in {
			reason, due = ReasonQuietHours, end
		}
	}
	if reason == "" && r.Presence.Paused(r.Now) {
		reason = ReasonPaused
	}
	per, burst := time.Duration(r.Settings.Rate.Per), r.Settings.Rate.Burst
	if per <= 0 {
		per = 30 * time.Second
	}
	if burst <= 0 {
		burst = 3
	}
	list := reason
	if list == "" {
		list = ReasonRate
	}
	a := decideArgs{reason: reason, now: r.Now.UnixMilli(), per: per.Milliseconds(), burst: int64(burst), ttl: int64(decisionTTL / time.Second)}
	if !due.IsZero() {
		a.due = due.UnixMilli()
	}
	keys := []string{s.rkey(r.Workspace, r.Party, "hold:dec"), s.rkey(r.Workspace, r.Party, "hold:rate"),
		s.rkey(r.Workspace, r.Party, "hold:q:"+list), s.rkey(r.Workspace, r.Party, "hold:due")}
	return keys, a, nil
}

// decision reads decide.lua's outcome.
func (s *Store) decision(ctx context.Context, r Request, out string) (Decision, error) {
	switch {
	case out == "push":
		return Decision{Push: true}, nil
	case out == "held:"+ReasonQuiet:
		if err := s.rdb.SAdd(ctx, s.heldKey(r.Workspace), r.Party).Err(); err != nil {
			return Decision{}, err
		}
		return Decision{Reason: ReasonQuiet}, nil
	case out == "held:"+ReasonPaused:
		return Decision{Reason: ReasonPaused, Due: r.Presence.PausedUntil}, nil
	case strings.HasPrefix(out, "held:rate:"):
		ms, _ := strconv.ParseInt(strings.TrimPrefix(out, "held:rate:"), 10, 64)
		return Decision{Reason: ReasonRate, Due: time.UnixMilli(ms)}, nil
	case strings.HasPrefix(out, "held:"+ReasonQuietHours+":"):
		ms, _ := strconv.ParseInt(strings.TrimPrefix(out, "held:"+ReasonQuietHours+":"), 10, 64)
		return Decision{Reason: ReasonQuietHours, Due: time.UnixMilli(ms)}, nil
	}
	return Decision{}, fmt.Errorf("holds decision for %s: script answered %q", r.Party, out)
}

func priorityOf(e *event.Event) event.Priority {
	if e == nil {
		return ""
	}
	if e.Priority == "" {
		return event.DefaultPriority(e.Type, e.Data)
	}
	return e.Priority
}

// itemOf is e's held item; eventJSON is e.MarshalJSON() when the caller
// has it ("": encoded here).
func itemOf(e *event.Event, res inbox.Result, now time.Time, eventJSON string) (Item, error) {
	p := priorityOf(e)
	var d struct {
		Merged bool `json:"merged"`
	}
	if bytes.Contains(e.Data, []byte(`"merged"`)) { // only a closed PR's data says it
		_ = json.Unmarshal(e.Data, &d)
	}
	if eventJSON == "" {
		b, err := e.MarshalJSON()
		if err != nil {
			return Item{}, fmt.Errorf("held item of %s: %w", e.ID, err)
		}
		eventJSON = string(b)
	}
	return Item{Seq: res.Seq, ID: e.ID, Type: e.Type, Subject: e.Subject, Summary: e.Summary, Priority: p,
		Kind: res.Kind, At: now.UTC(), Merged: d.Merged, Event: json.RawMessage(eventJSON)}, nil
}

// appendJSON appends the item's JSON: json.Marshal's, but for the event,
// which it writes as it is (the event's own MarshalJSON, compact),
// without reflection (TestItemJSON).
func (it *Item) appendJSON(b []byte) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, it.Seq, 10)
	b = append(b, `,"kind":`...)
	b = event.AppendString(b, it.Kind, true)
	b = append(b, ',')
	return it.appendTail(b)
}

// appendTail appends the item's JSON after its seq and kind, without the
// opening brace.
func (it *Item) appendTail(b []byte) []byte {
	b = append(b, `"id":`...)
	b = event.AppendString(b, it.ID, true)
	b = append(b, `,"type":`...)
	b = event.AppendString(b, it.Type, true)
	b = append(b, `,"subject":`...)
	b = event.AppendString(b, it.Subject, true)
	if it.Summary != "" {
		b = append(b, `,"summary":`...)
		b = event.AppendString(b, it.Summary, true)
	}
	b = append(b, `,"priority":`...)
	b = event.AppendString(b, string(it.Priority), true)
	b = append(b, `,"at":"`...)
	b = it.At.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if it.Merged {
		b = append(b, `,"merged":true`...)
	}
	b = append(b, `,"event":`...)
	b = append(b, it.Event...)
	return append(b, '}')
}

// ItemTail is the JSON of e's held item after its seq and kind, without
// the opening brace: deliver_decide.lua prepends the two, which the
// delivery decides (Item lists them first). eventJSON is e.MarshalJSON()
// when the caller has it ("": encoded here). It is the same for every
// party e is delivered to at now, so a caller delivering e to several
// builds it once (Request.ItemTail).
func ItemTail(e *event.Event, now time.Time, eventJSON string) (string, error) {
	it, err := itemOf(e, inbox.Result{}, now, eventJSON)
	if err != nil {
		return "", err
	}
	return string(it.appendTail(nil)), nil
}

// Batch is what one release took for a digest.
type Batch struct {
	ID    string `json:"id"`
	Items []Item `json:"items"`
}

// NotDueError is Take's answer when what is held for a reason is due
// later than now: something was held for a later end (quiet hours made
// longer while they held), whose own release takes it all.
type NotDueError struct{ Due time.Time }

func (e *NotDueError) Error() string {
	return "held wakes are due at " + e.Due.UTC().Format(time.RFC3339)
}

// Take moves a recipient's held items of one reason into a draining
// record for a digest and returns it; nil when nothing is held, a
// *NotDueError when they are due later. A record left by a crash is
// answered first, with its original id. For the rate cap the digest takes
// the token it was due at. Call Done once the digest push is enqueued.
func (s *Store) Take(ctx context.Context, ws, party, reason, id string, rate supervision.Rate, now time.Time) (*Batch, error) {
	if err := checkRecipient(ws, party); err != nil {
		return nil, err
	}
	take := "0"
	if reason == ReasonRate {
		take = "1"
	}
	per, burst := time.Duration(rate.Per), rate.Burst
	if per <= 0 {
		per = 30 * time.Second
	}
	if burst <= 0 {
		burst = 3
	}
	v, err := drainScript.Run(ctx, s.rdb, []string{s.rkey(ws, party, "hold:q:"+reason), s.rkey(ws, party, "hold:dr:"+reason),
		s.rkey(ws, party, "hold:rate"), s.rkey(ws, party, "hold:due")}, id, now.UnixMilli(), per.Milliseconds(), burst, take, reason).Text()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("take held %s wakes of %s: %w", reason, party, err)
	}
	if ms, later := strings.CutPrefix(v, "later:"); later {
		n, _ := strconv.ParseInt(ms, 10, 64)
		return nil, &NotDueError{Due: time.UnixMilli(n)}
	}
	var b Batch
	if err := json.Unmarshal([]byte(v), &b); err != nil {
		return nil, fmt.Errorf("draining record of %s: %w", party, err)
	}
	return &b, nil
}

// Done forgets a draining record once its digest is enqueued; for quiet,
// the party leaves the held index when nothing new was held meanwhile.
func (s *Store) Done(ctx context.Context, ws, party, reason string) error {
	if err := s.rdb.Del(ctx, s.rkey(ws, party, "hold:dr:"+reason)).Err(); err != nil {
		return err
	}
	if reason == ReasonQuiet {
		n, err := s.rdb.LLen(ctx, s.rkey(ws, party, "hold:q:"+reason)).Result()
		if err != nil || n > 0 {
			return err
		}
		return s.rdb.SRem(ctx, s.heldKey(ws), party).Err()
	}
	return nil
}

// Held returns the items a recipient has held for one reason (tests,
// diagnostics).
func (s *Store) Held(ctx context.Context, ws, party, reason string) ([]Item, error) {
	vs, err := s.rdb.LRange(ctx, s.rkey(ws, party, "hold:q:"+reason), 0, -1).Result()
	if err != nil {
		return nil, err
	}
	out := make([]Item, 0, len(vs))
	for _, v := range vs {
		var it Item
		if err := json.Unmarshal([]byte(v), &it); err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, nil
}
