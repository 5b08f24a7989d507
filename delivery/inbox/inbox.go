// Package inbox keeps wakegate's durable per-recipient inboxes (docs/design.md §7):
// dedup on (recipient, event), one entry per (recipient, coalesce key)
// while unacked, folding with a new seq per update, the highest-priority
// headline, the wake decision of every update (kinds and the wake-again
// rule), acknowledgement through a seq or by seqs, and the Pub/Sub
// notification long-polls are served from.
//
// Every write for one recipient is one Lua script over keys that share the
// recipient's hash tag (Tag), so it is atomic, runs in one cluster slot and
// never half-applies; everything lives in Redis, so unacked entries survive
// restarts and acked ones never come back. keys.go and inbox.lua document
// the layout. An unacked entry of one event costs about 920 bytes of Redis
// memory beyond its event copy, indexes, dedup marker and escalation timer
// index included (TestMemoryPerEntry); folds add a dedup marker (≈ 200
// bytes) per event and up to 64 folded ids.
//
// Escalation (docs/design.md §8): a delivery with EscalateAt arms its entry in
// the recipient's escalation due index (EscalationKey) in the same atomic
// step, so a crash never leaves an entry delivered but unarmed, and a
// re-run (a duplicate) never re-arms one; Ack disarms. Package escalate
// drains the index. An escalated copy (Delivery.Escalation) is marked on
// the entry ("escalated" in its JSON).
//
// Wake decisions (docs/design.md §7): info is a digest; attention+ wakes an
// unattended recipient, and an attended one when its type's attended kind
// is alert (else it is a notice); a delivery in ModeInbox never wakes. A
// fold wakes again only when its priority rose above the entry's, the event
// is terminal, its attended kind is alert, or its type differs from the one
// that last woke the entry; an attention+ fold that does not is a notice.
// Each seq records whether it decided a wake, and each entry the seq of its
// latest waking update, which WakeAfter answers from.
//
// Holds (quiet, PAUSED, the rate cap) are not applied here yet. The
// package imports the event contract only; it must not import the gateway,
// the router or the workers.
package inbox

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/kind"
)

var (
	//go:embed inbox.lua
	inboxLua string
	//go:embed inbox_deliver.lua
	inboxDeliverLua string
	//go:embed deliver.lua
	deliverLua string
	//go:embed list.lua
	listLua string
	//go:embed ack.lua
	ackLua string
	//go:embed pushed.lua
	pushedLua string

	// DeliverFuncLua defines inbox_deliver(KEYS, ARGV) (inbox.lua and
	// inbox_deliver.lua), for a script that delivers and then goes on in
	// the same atomic step (package holds: the holds decision);
	// DeliveryCall gives its KEYS and ARGV, ParseDelivery reads its reply.
	DeliverFuncLua = keyspace.Join(inboxLua, inboxDeliverLua)

	deliverScript = keyspace.NewScript("delivery/inbox/deliver.lua", inboxLua, inboxDeliverLua, deliverLua)
	listScript    = keyspace.NewScript("delivery/inbox/list.lua", inboxLua, listLua)
	ackScript     = keyspace.NewScript("delivery/inbox/ack.lua", inboxLua, ackLua)
	pushedScript  = keyspace.NewScript("delivery/inbox/pushed.lua", inboxLua, pushedLua)
)

// ErrBeyondLast is returned by Ack for a seq beyond the inbox's last
// assigned seq; nothing was acked.
var ErrBeyondLast = kind.New(kind.Invalid, "seq beyond the inbox's last")

// ErrInvalid is wrapped by the error of a call with bad input (a party or
// workspace that breaks the grammar, a malformed event, an unknown via or
// mode, a negative seq); nothing was written.
var ErrInvalid = kind.New(kind.Invalid, "inbox: invalid input")

// Config fixes the inboxes' key prefix and retention.
type Config struct {
	// Prefix starts every key and channel (WAKEGATE_REDIS_PREFIX).
	// Default keyspace.DefaultPrefix.
	Prefix string
	// Retention is how long a dedup marker keeps a second delivery of the
	// same event out. Default 72h.
	Retention time.Duration
}

// Inbox reads and writes the inboxes of every recipient. It is safe for
// concurrent use.
type Inbox struct {
	rdb redis.UniversalClient
	cfg Config
}

// New returns the inboxes on rdb.
func New(rdb redis.UniversalClient, cfg Config) *Inbox {
	cfg.Prefix = prefixOr(cfg.Prefix)
	if cfg.Retention <= 0 {
		cfg.Retention = 72 * time.Hour
	}
	return &Inbox{rdb: rdb, cfg: cfg}
}

// Why an event reached a recipient (Delivery.Via).
const (
	ViaSubscription = "subscription"
	ViaController   = "controller"
	ViaObserver     = "observer"
	ViaFallback     = "fallback"
	ViaDirect       = "direct"
	ViaTakeover     = "takeover"
	ViaEscalation   = "escalation" // an escalated copy (docs/design.md §8): Delivery.Escalation says from whom
)

// Delivery modes (Delivery.Mode).
const (
	ModeWake  = "wake"  // the default: an update may wake its recipient
	ModeInbox = "inbox" // a subscription with delivery=inbox: entries only, never a wake
)

// Kinds: what one update decides for its recipient (Entry.Kind).
const (
	KindWake   = "wake"   // wakes an unattended recipient
	KindAlert  = "alert"  // wakes an attended recipient too
	KindNotice = "notice" // rides the recipient's next read; no wake
	KindDigest = "digest" // visible on the next read; wakes nobody
)

// Delivery is one event reaching one recipient.
type Delivery struct {
	Workspace string
	Party     string       // session:<id> or human:<channel>
	Event     *event.Event // the journaled event (Seq set); its JSON is stored
	// EventJSON is Event.MarshalJSON() when the caller has it already (one
	// event delivered to several parties is encoded once); "" encodes it
	// here.
	EventJSON string
	// Via is why it reached this party: one of the Via constants.
	Via string
	// Mode is ModeWake (also "") or ModeInbox. An update delivered in
	// ModeInbox is kind digest and never wakes, whatever its priority.
	Mode string
	// Waiter marks a delivery that reached a session through its own
	// subscription on its own subject or linked PR. It is recorded on the
	// entry (Entry.Waiter) for the holds of a later issue (quiet never
	// holds it) and changes nothing else yet.
	Waiter bool
	// Attended is the recipient's presence: attention+ then takes the
	// type's attended kind (alert wakes, notice rides the next read).
	Attended bool
	// Settings is the workspace settings snapshot stored on a new entry
	// (docs/design.md §6); a fold keeps the entry's. Nil stores none.
	Settings json.RawMessage
	// SettingsCompact says Settings is compact JSON already (json.Marshal's
	// output): it is stored as it is, not compacted (and checked) again.
	SettingsCompact bool
	// Redelivery is an operator's redelivery: it passes dedup, may wake
	// whatever the wake-again rule says, and marks the entry redelivered.
	Redelivery bool
	// EscalateAt, when set, is when this update's escalation check is due
	// (docs/design.md §8; the caller decides whether the update may escalate at
	// all). It arms the entry — puts it in the recipient's EscalationKey —
	// when the update creates the entry, raises its priority, is an
	// escalated copy, or the entry was never armed; any other fold leaves
	// the entry's timer as it was. Zero: this update arms nothing.
	EscalateAt time.Time
	// Escalation makes this delivery an escalated copy (Via
	// ViaEscalation): it is deduplicated apart from the event itself
	// (the party may have the event already and still gets its
	// escalation once), always wakes (an alert for an attended party),
	// and marks the entry Escalated.
	Escalation *Escalation
}

// Escalation marks an entry that reached its party by escalation (docs/design.md
// §8); it is the entry's "escalated" in JSON.
type Escalation struct {
	// Level is the step: 1 for the first party above the original
	// recipient, 2 for the next, and so on.
	Level int `json:"level"`
	// From is the party the entry was escalated from.
	From string `json:"from"`
	// Path is every party the entry passed before this one, the original
	// recipient first (From is the last).
	Path []string `json:"path"`
	// Rung is where this party stands above the subject:
	// "controller:<session id>" (the holder of that session's controller
	// lease), "default" (the workspace default controller) or "fallback"
	// (the human fallback).
	Rung string `json:"rung"`
	// Reason is why it climbed: dead, unreached, dead_letter or unacked.
	Reason string `json:"reason"`
}

// escalationMeta is Escalation as an entry's meta stores it (inbox.lua).
type escalationMeta struct {
	Level  int      `json:"l"`
	Path   []string `json:"p"`
	Rung   string   `json:"r"`
	Reason string   `json:"why"`
}

// Result is what one Deliver did. A duplicate carries the original
// delivery's Seq, New, Wake and Kind (so a re-run after a crash re-derives
// the same side effects), with Duplicate set.
type Result struct {
	Seq       int64  // the seq the update took
	Duplicate bool   // the event had already reached this recipient: nothing changed
	New       bool   // it created an entry (else it folded into one)
	Wake      bool   // this update decided a wake or alert
	Kind      string // what it decided: a Kind constant
	// Armed: this update armed the entry's escalation (Delivery.EscalateAt);
	// false on a duplicate.
	Armed bool
}

// Entry is one unacked entry as a reader sees it (docs/design.md §7).
type Entry struct {
	Seq         int64  `json:"seq"`
	Type        string `json:"type"`    // headline type
	Subject     string `json:"subject"` // headline subject
	CoalesceKey string `json:"coalesce_key"`
	Count       int    `json:"count"` // events folded in
	// Priority is the highest priority folded in.
	Priority event.Priority `json:"priority"`
	// Kind is what the latest update decided: wake, alert, notice or
	// digest. An attention+ update that the wake-again rule keeps from
	// waking is a notice.
	Kind    string    `json:"kind"`
	Summary string    `json:"summary"` // headline summary
	FirstAt time.Time `json:"first_at"`
	LastAt  time.Time `json:"last_at"`
	// Event is the headline: the highest-priority event folded in, the
	// newest among equals.
	Event json.RawMessage `json:"event"`
	// Latest is the newest event folded in.
	Latest json.RawMessage `json:"latest"`
	// FoldedIDs are the ids of the last 64 events folded in, oldest first.
	FoldedIDs   []string        `json:"folded_ids"`
	Via         string          `json:"via"` // of the latest update
	Redelivered bool            `json:"redelivered,omitempty"`
	Waiter      bool            `json:"waiter,omitempty"`
	Settings    json.RawMessage `json:"settings,omitempty"`
	// Escalated is set on an entry that reached this party by escalation
	// (docs/design.md §8), even when later updates reached it otherwise.
	Escalated *Escalation `json:"escalated,omitempty"`
	// Armed tells whether an update armed the entry's escalation
	// (Delivery.EscalateAt); package escalate reads it.
	Armed bool `json:"-"`
	// Wake tells whether this seq decided a wake or alert.
	Wake bool `json:"wake"`
	// WakeSeq is the seq of the entry's latest update that decided a wake,
	// or 0 when none did. A reader whose cursor is below it has not seen
	// that wake, even when later updates (info folds) moved the entry on.
	WakeSeq int64 `json:"wake_seq,omitempty"`
}

// AttendedKind is the vocabulary's "attended →" kind of an event, refined
// by its data the way the vocabulary says: a merged close and a blocker
// message are alerts.
func AttendedKind(e *event.Event) event.Kind {
	k := event.Lookup(e.Type).Kind
	var d struct {
		Merged  bool `json:"merged"`
		Blocker bool `json:"blocker"`
	}
	// Only a PR's close and a message read their data here.
	if len(e.Data) > 0 && (e.Type == event.TypeGitHubPullRequestClosed || e.Type == event.TypeMessageSent) {
		_ = json.Unmarshal(e.Data, &d) // data that is not an object refines nothing
	}
	switch {
	case e.Type == event.TypeGitHubPullRequestClosed && d.Merged,
		e.Type == event.TypeMessageSent && d.Blocker:
		return event.KindAlert
	}
	return k
}

// Kind is what an update decides on its own, before the wake-again rule
// of a fold (docs/design.md §7 "Kinds"): info → digest; in ModeInbox → digest;
// attention+ → wake for an unattended recipient, and for an attended one
// the type's attended kind: alert → alert, anything else → notice.
// The router may call it to know whether a delivery would wake.
func Kind(p event.Priority, attendedKind event.Kind, attended bool, mode string) string {
	switch {
	case p.Rank() < event.Attention.Rank(), mode == ModeInbox:
		return KindDigest
	case !attended:
		return KindWake
	case attendedKind == event.KindAlert:
		return KindAlert
	}
	return KindNotice
}

// update is the JSON deliver.lua decodes from ARGV[1].
type update struct {
	CK         string `json:"ck"`
	Type       string `json:"type"`
	ID         string `json:"id"`
	Rank       int    `json:"rank"`
	Kind       string `json:"kind"`
	Terminal   bool   `json:"terminal"`
	Alert      bool   `json:"alert"`
	Via        string `json:"via"`
	Now        int64  `json:"now"`
	TTL        int64  `json:"ttl"`
	Redelivery bool   `json:"redelivery"`
	Waiter     bool   `json:"waiter"`
	Channel    string `json:"channel"`
	Esc        int64  `json:"esc"` // EscalateAt in ms, 0 for none
	// X is an escalated copy's mark; absent (never null: Lua would
	// read cjson.null as a value) otherwise.
	X *escalationMeta `json:"x,omitempty"`
}

var vias = map[string]bool{ViaSubscription: true, ViaController: true, ViaObserver: true,
	ViaFallback: true, ViaDirect: true, ViaTakeover: true, ViaEscalation: true}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// checkRecipient validates a workspace and party.
func checkRecipient(workspace, party string) error {
	if !event.ValidWorkspace(workspace) {
		return invalid("workspace %q", workspace)
	}
	if _, err := event.ParseParty(party); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// prepare validates a delivery and builds the script's arguments: the
// update, the event JSON and the settings JSON.
func (b *Inbox) prepare(d Delivery, now time.Time) (update, string, string, error) {
	if err := checkRecipient(d.Workspace, d.Party); err != nil {
		return update{}, "", "", err
	}
	e := d.Event
	switch {
	case e == nil:
		return update{}, "", "", invalid("no event")
	case !event.ValidType(e.Type):
		return update{}, "", "", invalid("event type %q", e.Type)
	case e.ID == "" || e.Source == "":
		return update{}, "", "", invalid("event %q without source or id", e.Type)
	case e.Workspace != d.Workspace:
		return update{}, "", "", invalid("event of workspace %q delivered in %q", e.Workspace, d.Workspace)
	case !vias[d.Via]:
		return update{}, "", "", invalid("via %q", d.Via)
	case d.Mode != "" && d.Mode != ModeWake && d.Mode != ModeInbox:
		return update{}, "", "", invalid("mode %q", d.Mode)
	case (d.Via == ViaEscalation) != (d.Escalation != nil):
		return update{}, "", "", invalid("an escalated copy is via %s with its Escalation, nothing else", ViaEscalation)
	case d.Escalation != nil && (d.Escalation.Level < 1 || len(d.Escalation.Path) == 0 || d.Escalation.From != d.Escalation.Path[len(d.Escalation.Path)-1]):
		return update{}, "", "", invalid("escalation %+v: level ≥ 1 and a path ending at from", *d.Escalation)
	}
	p := e.Priority
	if p == "" {
		p = event.DefaultPriority(e.Type, e.Data)
	}
	if p.Rank() < 0 {
		return update{}, "", "", invalid("event %s of priority %q is never delivered", e.Type, p)
	}
	body := d.EventJSON
	if body == "" {
		b, err := e.MarshalJSON()
		if err != nil {
			return update{}, "", "", invalid("encode event %s: %v", e.ID, err)
		}
		body = string(b)
	}
	var settings string
	if d.Settings != nil && d.SettingsCompact {
		settings = string(d.Settings)
	} else if d.Settings != nil {
		var buf bytes.Buffer
		if err := json.Compact(&buf, d.Settings); err != nil {
			return update{}, "", "", invalid("settings: %v", err)
		}
		settings = buf.String()
	}
	if strings.IndexByte(body, '\n') >= 0 || strings.IndexByte(settings, '\n') >= 0 {
		return update{}, "", "", invalid("event %s: JSON with a raw newline", e.ID) // compact JSON never has one
	}
	ck := CoalesceKey(e)
	ak := AttendedKind(e)
	u := update{
		CK:         ck,
		Type:       e.Type,
		ID:         e.ID,
		Rank:       p.Rank(),
		Kind:       Kind(p, ak, d.Attended, d.Mode),
		Terminal:   e.Terminal || event.Lookup(e.Type).Terminal,
		Alert:      ak == event.KindAlert,
		Via:        d.Via,
		Now:        now.UnixMilli(),
		TTL:        max(int64(b.cfg.Retention/time.Second), 1),
		Redelivery: d.Redelivery,
		Waiter:     d.Waiter,
		Channel:    NotifyChannel(b.cfg.Prefix, d.Workspace, d.Party),
	}
	if !d.EscalateAt.IsZero() {
		u.Esc = max(d.EscalateAt.UnixMilli(), 1)
	}
	if x := d.Escalation; x != nil {
		u.X = &escalationMeta{Level: x.Level, Path: x.Path, Rung: x.Rung, Reason: x.Reason}
		// An escalation is a page: it wakes, and an attended party gets
		// it as an alert, whatever the type's attended kind.
		if p.Rank() >= event.Attention.Rank() && d.Mode != ModeInbox {
			u.Kind = KindWake
			if d.Attended {
				u.Kind = KindAlert
			}
		}
	}
	return u, body, settings, nil
}

// CoalesceKey is the key an event's entry coalesces on in every inbox:
// its coalescekey, else its subject, else its own identity.
func CoalesceKey(e *event.Event) string {
	switch {
	case e.CoalesceKey != "":
		return e.CoalesceKey
	case e.Subject != "":
		return e.Subject
	}
	return "id:" + e.Key() // nothing to coalesce on: its own entry
}

// Deliver puts one event into one recipient's inbox: dedup on the event's
// (source, id), a new entry or a fold into the unacked entry of its
// coalesce key (the event's coalescekey, else its subject), a new seq, and
// the wake decision. It publishes "wake" or "update" on the recipient's
// NotifyChannel. Bad input returns an error wrapping ErrInvalid and writes
// nothing; the script is one atomic step, so nothing ever half-applies.
func (b *Inbox) Deliver(ctx context.Context, d Delivery, now time.Time) (Result, error) {
	keys, args, err := b.DeliveryCall(d, now)
	if err != nil {
		return Result{}, err
	}
	res, err := deliverScript.Run(ctx, b.rdb, keys, args...).Slice()
	if err != nil {
		return Result{}, fmt.Errorf("deliver %s to %s: %w", d.Event.ID, d.Party, err)
	}
	return ParseDelivery(res)
}

// DeliveryCall returns the KEYS and ARGV of deliver.lua for d (six keys,
// three arguments), for a script that runs inbox_deliver (DeliverFuncLua)
// with them first. Its errors are Deliver's.
func (b *Inbox) DeliveryCall(d Delivery, now time.Time) ([]string, []any, error) {
	u, body, settings, err := b.prepare(d, now)
	if err != nil {
		return nil, nil, err
	}
	arg, err := json.Marshal(u)
	if err != nil {
		return nil, nil, fmt.Errorf("encode delivery of %s: %w", u.ID, err)
	}
	k := b.keysOf(d.Workspace, d.Party)
	marker := k.marker(d.Event.Source, d.Event.ID)
	if d.Escalation != nil {
		marker = k.escalatedMarker(d.Event.Source, d.Event.ID)
	}
	return []string{k.last, k.entries, k.unacked, k.wakes, marker, k.esc}, []any{arg, body, settings}, nil
}

// ParseDelivery reads the reply of inbox_deliver: its first six values.
func ParseDelivery(res []any) (Result, error) {
	if len(res) < 6 {
		return Result{}, fmt.Errorf("deliver: script answered %v", res)
	}
	seq, _ := res[0].(int64)
	dup, _ := res[1].(int64)
	isNew, _ := res[2].(int64)
	wake, _ := res[3].(int64)
	kind, _ := res[4].(string)
	armed, _ := res[5].(int64)
	return Result{Seq: seq, Duplicate: dup == 1, New: isNew == 1, Wake: wake == 1, Kind: kind, Armed: armed == 1}, nil
}

// NotifyPattern is the pattern of every recipient's NotifyChannel: one
// PSUBSCRIBE per gateway process, fanned out in memory.
func (b *Inbox) NotifyPattern() string { return notifyPrefix(b.cfg.Prefix) + "*" }

// ParseChannel returns the recipient a NotifyChannel names, ok false for
// a channel that is not one of this prefix's.
func (b *Inbox) ParseChannel(channel string) (workspace, party string, ok bool) {
	rest, ok := strings.CutPrefix(channel, notifyPrefix(b.cfg.Prefix))
	if !ok {
		return "", "", false
	}
	workspace, party, ok = strings.Cut(rest, ":") // workspace ids have no ':'
	return workspace, party, ok && checkRecipient(workspace, party) == nil
}
