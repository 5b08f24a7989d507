// Package escalate keeps the per-recipient state of escalation (docs/design.md §8)
// and decides the climb: which unacked entries escalate, and to whom.
//
// An entry that may escalate is armed by the inbox itself, in the same
// atomic step as its delivery: its coalesce key goes into the recipient's
// escalation due index (inbox.EscalationKey), scored by the ms its check
// is due — escalate_after after it was created or raised, or after its
// escalated copy arrived. A re-run of the routing is a duplicate delivery
// and arms nothing; an ack takes the entry out. So the state costs one
// sorted-set member per armed entry (about 134 bytes, measured by
// inbox.TestMemoryPerEntry), and the timer is one Asynq task per
// recipient, at its earliest due, not one per entry (workers/tasks).
//
// A check is decided in Go (liveness, endpoints and supervision edges live
// in other hash slots) and made crash-safe by a claim: before it acts, the
// check records its decision (reason, target, level, the event) under the
// entry's coalesce key, unless the entry's due moved meanwhile (an ack, a
// raise); a re-run replays the recorded claim instead of deciding again,
// and every effect is keyed by the fact — the escalated copy is
// deduplicated per (target, event), the journaled wakegate.escalated has
// the id escalated/<level>/<from>/<source>/<id> — so a re-run escalates
// nothing twice. Done removes the entry from the index (only at the due it
// was checked for) and its claim: later timers never see it again.
//
// Keys, all under the recipient's inbox hash tag (inbox.Tag), so every
// script runs in one cluster slot:
//
//	<prefix>:<tag>:x   zset  coalesce key → due ms (inbox.EscalationKey; armed by the inbox)
//	<prefix>:<tag>:xc  hash  coalesce key → Claim JSON, while a check acts
//	<prefix>:<tag>:xd  set   coalesce keys whose push was dead-lettered, until checked
//
// The climb itself (Decide, Ladder, Next) is pure and in climb.go.
package escalate

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/providers/event"
)

// Store reads and writes the escalation state of recipients. It is safe
// for concurrent use.
type Store struct {
	rdb    redis.UniversalClient
	prefix string
}

// New returns the store on rdb under prefix (WAKEGATE_REDIS_PREFIX,
// default keyspace.DefaultPrefix).
func New(rdb redis.UniversalClient, prefix string) *Store {
	if prefix == "" {
		prefix = keyspace.DefaultPrefix
	}
	return &Store{rdb: rdb, prefix: prefix}
}

type keys struct{ due, claims, dead string }

func (s *Store) keysOf(ws, party string) keys {
	base := keyspace.Recipient(s.prefix, ws, party)
	return keys{due: inbox.EscalationKey(s.prefix, ws, party), claims: base + ":xc", dead: base + ":xd"}
}

func checkRecipient(ws, party string) error {
	if !event.ValidWorkspace(ws) {
		return fmt.Errorf("escalate: workspace %q", ws)
	}
	if _, err := event.ParseParty(party); err != nil {
		return fmt.Errorf("escalate: %w", err)
	}
	return nil
}

// Claim is the decision a check records before it acts.
type Claim struct {
	Due    int64  `json:"due"`  // the due ms it was decided for
	Reason string `json:"why"`  // a Reason constant
	To     string `json:"to"`   // the target party; "" when nobody is left (undeliverable)
	Rung   string `json:"rung"` // the target's Rung.String
	Level  int    `json:"level"`
	// Path is every party the entry passed, the original recipient first
	// and the party escalating it last.
	Path     []string        `json:"path"`
	Seq      int64           `json:"seq"`                // the entry's seq when decided
	Event    json.RawMessage `json:"event"`              // the headline event escalated
	Settings json.RawMessage `json:"settings,omitempty"` // the entry's settings snapshot
}

// Pending is one entry whose check is due.
type Pending struct {
	CK           string
	Due          int64  // ms
	DeadLettered bool   // a push of it was dead-lettered
	Claim        *Claim // a decision recorded by an earlier run, to replay
}

// dueScript lists the entries of one recipient due by a time.
// Its KEYS, ARGV and reply are in due.lua.
//
//go:embed due.lua
var dueLua string

var dueScript = keyspace.NewScript("delivery/escalate/due.lua", dueLua)

// Due returns up to limit entries of a recipient due by (at or before)
// by, earliest first, each with its recorded claim and dead-letter mark.
func (s *Store) Due(ctx context.Context, ws, party string, by time.Time, limit int) ([]Pending, error) {
	if err := checkRecipient(ws, party); err != nil {
		return nil, err
	}
	k := s.keysOf(ws, party)
	res, err := dueScript.Run(ctx, s.rdb, []string{k.due, k.claims, k.dead}, by.UnixMilli(), limit).Slice()
	if err != nil {
		return nil, fmt.Errorf("escalations due for %s: %w", party, err)
	}
	var out []Pending
	for i := 0; i+3 < len(res); i += 4 {
		ck, _ := res[i].(string)
		score, _ := res[i+1].(string)
		due, err := strconv.ParseFloat(score, 64)
		if err != nil {
			return nil, fmt.Errorf("escalation of %q for %s: due %q: %w", ck, party, score, err)
		}
		p := Pending{CK: ck, Due: int64(due)}
		if raw, _ := res[i+2].(string); raw != "" {
			var c Claim
			if err := json.Unmarshal([]byte(raw), &c); err != nil {
				return nil, fmt.Errorf("claim of %q for %s: %w", ck, party, err)
			}
			p.Claim = &c
		}
		dl, _ := res[i+3].(int64)
		p.DeadLettered = dl == 1
		out = append(out, p)
	}
	return out, nil
}

// Next returns a recipient's earliest due; ok false when nothing is armed.
func (s *Store) Next(ctx context.Context, ws, party string) (due time.Time, ok bool, err error) {
	if err := checkRecipient(ws, party); err != nil {
		return time.Time{}, false, err
	}
	zs, err := s.rdb.ZRangeWithScores(ctx, s.keysOf(ws, party).due, 0, 0).Result()
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next escalation of %s: %w", party, err)
	}
	if len(zs) == 0 {
		return time.Time{}, false, nil
	}
	return time.UnixMilli(int64(zs[0].Score)), true, nil
}

// claimScript records a check's decision once.
// Its KEYS, ARGV and reply are in claim.lua.
//
//go:embed claim.lua
var claimLua string

var claimScript = keyspace.NewScript("delivery/escalate/claim.lua", claimLua)

// Claim records c as the decision for a recipient's entry ck, due at
// c.Due. It returns the claim to act on (an earlier run's wins), and ok
// false when the entry is no longer due at c.Due (nothing to do now).
func (s *Store) Claim(ctx context.Context, ws, party, ck string, c Claim) (Claim, bool, error) {
	if err := checkRecipient(ws, party); err != nil {
		return Claim{}, false, err
	}
	b, err := json.Marshal(c)
	if err != nil {
		return Claim{}, false, fmt.Errorf("encode claim: %w", err)
	}
	k := s.keysOf(ws, party)
	raw, err := claimScript.Run(ctx, s.rdb, []string{k.due, k.claims}, ck, c.Due, string(b)).Text()
	if err != nil {
		return Claim{}, false, fmt.Errorf("claim escalation of %q for %s: %w", ck, party, err)
	}
	if raw == "" {
		return Claim{}, false, nil
	}
	var got Claim
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		return Claim{}, false, fmt.Errorf("claim of %q for %s: %w", ck, party, err)
	}
	return got, true, nil
}

// doneScript ends the check of one entry.
// Its KEYS, ARGV and reply are in done.lua.
//
//go:embed done.lua
var doneLua string

var doneScript = keyspace.NewScript("delivery/escalate/done.lua", doneLua)

// Done ends the check of a recipient's entry ck made for due: no later
// timer sees it again unless it is re-armed (a raise, a dead letter).
func (s *Store) Done(ctx context.Context, ws, party, ck string, due int64) error {
	if err := checkRecipient(ws, party); err != nil {
		return err
	}
	k := s.keysOf(ws, party)
	if err := doneScript.Run(ctx, s.rdb, []string{k.due, k.claims, k.dead}, ck, due).Err(); err != nil {
		return fmt.Errorf("end escalation check of %q for %s: %w", ck, party, err)
	}
	return nil
}

// deadScript marks entries whose push was dead-lettered to escalate at
// once.
// Its KEYS, ARGV and reply are in dead.lua.
//
//go:embed dead.lua
var deadLua string

var deadScript = keyspace.NewScript("delivery/escalate/dead.lua", deadLua)

// DeadLettered makes the entries cks of a recipient due now, marked as
// dead-lettered (docs/design.md §8: its push was dead-lettered — escalate then,
// at once). The caller schedules the recipient's timer.
func (s *Store) DeadLettered(ctx context.Context, ws, party string, cks []string, now time.Time) error {
	if err := checkRecipient(ws, party); err != nil {
		return err
	}
	if len(cks) == 0 {
		return nil
	}
	k := s.keysOf(ws, party)
	args := make([]any, 0, len(cks)+1)
	args = append(args, now.UnixMilli())
	for _, ck := range cks {
		args = append(args, ck)
	}
	if err := deadScript.Run(ctx, s.rdb, []string{k.due, k.dead}, args...).Err(); err != nil {
		return fmt.Errorf("escalate dead letters of %s: %w", party, err)
	}
	return nil
}
