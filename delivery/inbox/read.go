package inbox

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/providers/event"
)

// Page sizes of List (docs/design.md §7 `limit`).
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// List returns a recipient's unacked entries in ascending seq: every one
// without after (hasAfter false), else those with seq > after; at most
// limit (≤ 0: DefaultLimit; capped at MaxLimit). next is the highest seq
// returned or, when none is, after (with after) or the last seq assigned
// (without), so a reader long-polls from it.
func (b *Inbox) List(ctx context.Context, workspace, party string, after int64, hasAfter bool, limit int) (entries []Entry, next int64, err error) {
	entries, next, _, err = b.list(ctx, workspace, party, after, hasAfter, limit, false)
	return entries, next, err
}

// ListWoken is the long-poll's read: what List returns, but only once an
// unacked entry after the cursor decided a wake (woke; see WakeAfter) —
// else no entries — in one round trip.
func (b *Inbox) ListWoken(ctx context.Context, workspace, party string, after int64, hasAfter bool, limit int) (entries []Entry, next int64, woke bool, err error) {
	return b.list(ctx, workspace, party, after, hasAfter, limit, true)
}

func (b *Inbox) list(ctx context.Context, workspace, party string, after int64, hasAfter bool, limit int, onlyWoken bool) (entries []Entry, next int64, woke bool, err error) {
	if err := checkRecipient(workspace, party); err != nil {
		return nil, 0, false, err
	}
	if after < 0 {
		return nil, 0, false, invalid("after %d", after)
	}
	if !hasAfter {
		after = 0
	}
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	k := b.keysOf(workspace, party)
	only := "0"
	if onlyWoken {
		only = "1"
	}
	res, err := listScript.Run(ctx, b.rdb, []string{k.last, k.entries, k.unacked, k.wakes}, after, limit, only).Slice()
	if err != nil {
		return nil, 0, false, fmt.Errorf("list inbox of %s: %w", party, err)
	}
	last, _ := res[0].(int64)
	w, _ := res[1].(int64)
	next = last
	if hasAfter {
		next = after
	}
	for i := 2; i+2 < len(res); i += 3 {
		seq, _ := res[i].(int64)
		ck, _ := res[i+1].(string)
		raw, _ := res[i+2].(string)
		e, err := parseEntry(seq, ck, raw)
		if err != nil {
			return nil, 0, false, fmt.Errorf("list inbox of %s: %w", party, err)
		}
		entries = append(entries, e)
		next = seq
	}
	return entries, next, w == 1, nil
}

// meta is an entry's meta JSON (inbox.lua documents the short names).
type meta struct {
	HeadRank    int             `json:"hp"`
	Rank        int             `json:"p"`
	Count       int             `json:"n"`
	Kind        string          `json:"k"`
	Wake        bool            `json:"w"`
	WakeSeq     string          `json:"ws"`
	WakeType    string          `json:"wy"`
	FirstAt     int64           `json:"f"`
	LastAt      int64           `json:"l"`
	IDs         []string        `json:"i"`
	Via         string          `json:"v"`
	Redelivered bool            `json:"r"`
	Waiter      bool            `json:"wa"`
	Armed       bool            `json:"xa"`
	Escalated   *escalationMeta `json:"x"`
}

var ranks = [...]event.Priority{event.Info, event.Attention, event.Critical}

// parseEntry decodes a stored entry (inbox.lua documents the format).
func parseEntry(seq int64, ck, raw string) (Entry, error) {
	parts := strings.SplitN(raw, "\n", 4)
	if len(parts) != 4 {
		return Entry{}, fmt.Errorf("entry %d: %d parts", seq, len(parts))
	}
	var m meta
	if err := json.Unmarshal([]byte(parts[0]), &m); err != nil {
		return Entry{}, fmt.Errorf("entry %d: %w", seq, err)
	}
	if m.Rank < 0 || m.Rank >= len(ranks) {
		return Entry{}, fmt.Errorf("entry %d: priority rank %d", seq, m.Rank)
	}
	headJSON := []byte(parts[1]) // one copy: Event keeps it
	head, err := headlineOf(headJSON)
	if err != nil {
		return Entry{}, fmt.Errorf("entry %d: headline: %w", seq, err)
	}
	e := Entry{
		Seq:         seq,
		CoalesceKey: ck,
		Type:        head.Type,
		Subject:     head.Subject,
		Count:       m.Count,
		Priority:    ranks[m.Rank],
		Kind:        m.Kind,
		Summary:     head.Summary,
		FirstAt:     time.UnixMilli(m.FirstAt).UTC(),
		LastAt:      time.UnixMilli(m.LastAt).UTC(),
		Event:       json.RawMessage(event.Canonical(headJSON)),
		FoldedIDs:   m.IDs,
		Via:         m.Via,
		Redelivered: m.Redelivered,
		Waiter:      m.Waiter,
		Wake:        m.Wake,
		Armed:       m.Armed,
	}
	if x := m.Escalated; x != nil && len(x.Path) > 0 {
		e.Escalated = &Escalation{Level: x.Level, From: x.Path[len(x.Path)-1], Path: x.Path, Rung: x.Rung, Reason: x.Reason}
	}
	e.Latest = e.Event
	if parts[2] != "" {
		e.Latest = json.RawMessage(event.Canonical([]byte(parts[2])))
	}
	if parts[3] != "" {
		e.Settings = json.RawMessage(parts[3])
	}
	if m.WakeSeq != "" {
		var err error
		if e.WakeSeq, err = strconv.ParseInt(m.WakeSeq, 10, 64); err != nil {
			return Entry{}, fmt.Errorf("entry %d: wake seq: %w", seq, err)
		}
	}
	return e, nil
}

// Ack acknowledges entries of a recipient: with through > 0 every unacked
// entry with seq <= through, and exactly the entries whose current seq is
// in seqs. An entry that has taken a newer seq (a fold its reader has not
// seen) is not acknowledged by its old seq. It returns how many entries it
// acked; a through or seq beyond the inbox's last assigned seq returns
// ErrBeyondLast and acks nothing. Acked entries never come back.
func (b *Inbox) Ack(ctx context.Context, workspace, party string, through int64, seqs []int64) (acked int, err error) {
	if err := checkRecipient(workspace, party); err != nil {
		return 0, err
	}
	if through < 0 {
		return 0, invalid("through %d", through)
	}
	args := make([]any, 0, len(seqs)+1)
	args = append(args, through)
	for _, s := range seqs {
		if s <= 0 {
			return 0, invalid("seq %d", s)
		}
		args = append(args, s)
	}
	if through == 0 && len(seqs) == 0 {
		return 0, nil
	}
	k := b.keysOf(workspace, party)
	n, err := ackScript.Run(ctx, b.rdb, []string{k.last, k.entries, k.unacked, k.wakes, k.esc}, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("ack inbox of %s: %w", party, err)
	}
	if n < 0 {
		return 0, ErrBeyondLast
	}
	return n, nil
}

// getScript reads one entry with the seq it has now.
// Its KEYS, ARGV and reply are in get.lua.
//
//go:embed get.lua
var getLua string

var getScript = keyspace.NewScript("delivery/inbox/get.lua", getLua)

// Get returns a recipient's unacked entry of a coalesce key, nil when
// there is none (never delivered, or acked).
func (b *Inbox) Get(ctx context.Context, workspace, party, ck string) (*Entry, error) {
	if err := checkRecipient(workspace, party); err != nil {
		return nil, err
	}
	k := b.keysOf(workspace, party)
	res, err := getScript.Run(ctx, b.rdb, []string{k.entries, k.unacked}, ck).Slice()
	if err != nil {
		return nil, fmt.Errorf("entry %q of %s: %w", ck, party, err)
	}
	if len(res) != 2 {
		return nil, nil
	}
	seq, _ := res[0].(int64)
	raw, _ := res[1].(string)
	e, err := parseEntry(seq, ck, raw)
	if err != nil {
		return nil, fmt.Errorf("entry %q of %s: %w", ck, party, err)
	}
	return &e, nil
}

// CoalesceKeyAt returns the coalesce key of the unacked entry whose current
// seq is seq, "" when none is (acked, or folded into a newer seq since).
func (b *Inbox) CoalesceKeyAt(ctx context.Context, workspace, party string, seq int64) (string, error) {
	if err := checkRecipient(workspace, party); err != nil {
		return "", err
	}
	s := strconv.FormatInt(seq, 10)
	cks, err := b.rdb.ZRangeByScore(ctx, b.keysOf(workspace, party).unacked, &redis.ZRangeBy{Min: s, Max: s, Count: 1}).Result()
	if err != nil || len(cks) == 0 {
		return "", err
	}
	return cks[0], nil
}

// WakeAfter reports whether the recipient has an unacked entry whose latest
// waking update has a seq > after (any unacked entry that ever woke,
// without after): the long-poll's "return at once" test. An info fold moves
// an entry to a new seq that did not decide a wake, but the wake it carries
// still counts for a reader whose cursor is below it.
func (b *Inbox) WakeAfter(ctx context.Context, workspace, party string, after int64, hasAfter bool) (bool, error) {
	_, _, woke, err := b.list(ctx, workspace, party, after, hasAfter, 1, true)
	return woke, err
}

// Last returns the last seq assigned in a recipient's inbox, 0 before the
// first delivery.
func (b *Inbox) Last(ctx context.Context, workspace, party string) (int64, error) {
	if err := checkRecipient(workspace, party); err != nil {
		return 0, err
	}
	n, err := b.rdb.Get(ctx, b.keysOf(workspace, party).last).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("last seq of %s: %w", party, err)
	}
	return n, nil
}

// Pushed records that the push of the wake at seq of the entry ck got its
// 2xx from a party that acks by its endpoint (docs/design.md §7): the party is
// caught up with what the push carried. The entry is acked when it is
// still at seq. When it has folded since, what folded in was never sent:
// an attention+ fold that the wake-again rule kept a notice decides a wake
// now, and Pushed returns its Result (Wake set, a new Seq) for the caller
// to push; otherwise (the fold woke by itself, or was info) it returns a
// zero Result. acked tells whether the entry was acked.
func (b *Inbox) Pushed(ctx context.Context, workspace, party, ck string, seq int64, now time.Time) (rewake Result, acked bool, err error) {
	if err := checkRecipient(workspace, party); err != nil {
		return Result{}, false, err
	}
	if ck == "" || seq <= 0 {
		return Result{}, false, invalid("pushed entry %q at seq %d", ck, seq)
	}
	k := b.keysOf(workspace, party)
	res, err := pushedScript.Run(ctx, b.rdb, []string{k.last, k.entries, k.unacked, k.wakes, k.esc},
		ck, seq, now.UnixMilli(), NotifyChannel(b.cfg.Prefix, workspace, party)).Int64Slice()
	if err != nil {
		return Result{}, false, fmt.Errorf("pushed entry of %s: %w", party, err)
	}
	if len(res) != 2 {
		return Result{}, false, fmt.Errorf("pushed entry of %s: script answered %v", party, res)
	}
	if res[1] > 0 {
		return Result{Seq: res[1], Wake: true, Kind: KindWake}, false, nil
	}
	return Result{}, res[0] == 1, nil
}

// headline is what an entry shows of its headline event.
type headline struct {
	Type    string `json:"type"`
	Subject string `json:"subject"`
	Summary string `json:"summary"`
}

// headlineOf reads the type, subject and summary of a stored event's JSON
// by walking its top-level members (event.Members) and decoding only
// those three: a long-poll answer reads every entry it returns, and a
// full decode of each event (its data included) was most of the cost.
// What the walk cannot read (not an object, a value that is not a
// string) is decoded as before, which answers the same or the error.
func headlineOf(raw []byte) (headline, error) {
	var h headline
	str := func(val []byte, into *string) error {
		if len(val) >= 2 && val[0] == '"' && bytes.IndexByte(val, '\\') < 0 {
			*into = string(val[1 : len(val)-1])
			return nil
		}
		return json.Unmarshal(val, into)
	}
	err := event.Members(raw, func(name string, val []byte) error {
		switch name {
		case "type":
			return str(val, &h.Type)
		case "subject":
			return str(val, &h.Subject)
		case "summary":
			return str(val, &h.Summary)
		}
		return nil
	})
	if err != nil {
		h = headline{}
		err = json.Unmarshal(raw, &h)
	}
	return h, err
}
