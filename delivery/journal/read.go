package journal

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/kind"
)

// ErrBadCursor is returned for a cursor or seq this journal did not issue.
var ErrBadCursor = kind.New(kind.Invalid, "bad cursor")

// ErrUndecodable is wrapped by the error of an entry that cannot be
// decoded. Readers skip such an entry (docs/design.md §4): it never fails
// a read.
var ErrUndecodable = errors.New("undecodable journal entry")

func jsonMarshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// FormatSeq renders a shard and stream id as the opaque seq of an event.
func FormatSeq(shard int, streamID string) string {
	return strconv.Itoa(shard) + "-" + streamID
}

// ParseSeq splits a seq into its shard and stream id.
func ParseSeq(seq string) (shard int, streamID string, err error) {
	s, id, ok := strings.Cut(seq, "-")
	if !ok {
		return 0, "", fmt.Errorf("seq %q: %w", seq, ErrBadCursor)
	}
	shard, err = strconv.Atoi(s)
	if err != nil || shard < 0 {
		return 0, "", fmt.Errorf("seq %q: %w", seq, ErrBadCursor)
	}
	if _, _, err := splitStreamID(id); err != nil {
		return 0, "", fmt.Errorf("seq %q: %w", seq, ErrBadCursor)
	}
	return shard, id, nil
}

func splitStreamID(id string) (ms, n uint64, err error) {
	a, b, ok := strings.Cut(id, "-")
	if !ok {
		return 0, 0, ErrBadCursor
	}
	if ms, err = strconv.ParseUint(a, 10, 64); err != nil {
		return 0, 0, ErrBadCursor
	}
	if n, err = strconv.ParseUint(b, 10, 64); err != nil {
		return 0, 0, ErrBadCursor
	}
	return ms, n, nil
}

// Cursor is a position in every shard: the last stream id read per shard
// ("" = before the oldest retained entry).
type Cursor []string

// String encodes the cursor as an opaque URL-safe token.
func (c Cursor) String() string {
	buf := make([]byte, 0, 1+len(c)*12)
	buf = binary.AppendUvarint(buf, uint64(len(c)))
	for _, id := range c {
		ms, n, err := splitStreamID(id)
		if err != nil { // "" (start): encoded as 0-0
			ms, n = 0, 0
		}
		buf = binary.AppendUvarint(buf, ms)
		buf = binary.AppendUvarint(buf, n)
	}
	return base64.RawURLEncoding.EncodeToString(buf)
}

// ParseCursor decodes a cursor issued by Cursor.String for a journal of
// shards shards; "" is the start of the journal.
func ParseCursor(s string, shards int) (Cursor, error) {
	c := make(Cursor, shards)
	if s == "" {
		return c, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("cursor: %w", ErrBadCursor)
	}
	r := bytes.NewReader(raw)
	n, err := binary.ReadUvarint(r)
	if err != nil || n != uint64(shards) {
		return nil, fmt.Errorf("cursor: %w", ErrBadCursor)
	}
	for i := range c {
		ms, err1 := binary.ReadUvarint(r)
		seq, err2 := binary.ReadUvarint(r)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("cursor: %w", ErrBadCursor)
		}
		if ms != 0 || seq != 0 {
			c[i] = fmt.Sprintf("%d-%d", ms, seq)
		}
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("cursor: %w", ErrBadCursor)
	}
	return c, nil
}

// Filter selects the events a reader may see and asked for. Allow is
// required: it is the reader's scope (workspace and, for a session token,
// its subtree); Types and Subjects are the query's filters.
type Filter struct {
	Workspace string
	Types     []string // exact, or "prefix.*"
	Subjects  []string // exact, or "github:org/repo#*"
	Allow     func(e *event.Event) bool
}

func (f *Filter) match(e *event.Event) bool {
	if e.Workspace != f.Workspace {
		return false
	}
	if len(f.Types) > 0 && !anyMatch(f.Types, e.Type, ".*") {
		return false
	}
	if len(f.Subjects) > 0 && !anyMatch(f.Subjects, e.Subject, "*") {
		return false
	}
	return f.Allow == nil || f.Allow(e)
}

func anyMatch(patterns []string, s, wildcard string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, wildcard); ok {
			if strings.HasPrefix(s, prefix+wildcard[:len(wildcard)-1]) {
				return true
			}
		} else if p == s {
			return true
		}
	}
	return false
}

// Read returns up to limit events after cursor that pass f, oldest first
// (by time across shards, by position within one), and the cursor to read
// on from. It scans a bounded number of entries per shard per call, so a
// busy neighbour costs a reader at most a few round trips, never a stall.
func (j *Journal) Read(ctx context.Context, after Cursor, f Filter, limit int) ([]*event.Event, Cursor, error) {
	if len(after) != j.cfg.Shards {
		return nil, nil, fmt.Errorf("cursor for %d shards, journal has %d: %w", len(after), j.cfg.Shards, ErrBadCursor)
	}
	scan := int64(limit) * 2
	if scan < 100 {
		scan = 100
	}
	pipe := j.rdb.Pipeline()
	cmds := make([]*redis.XMessageSliceCmd, j.cfg.Shards)
	for s := range j.cfg.Shards {
		start := "-"
		if after[s] != "" {
			start = "(" + after[s]
		}
		cmds[s] = pipe.XRangeN(ctx, j.StreamKey(s), start, "+", scan)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, fmt.Errorf("journal read: %w", err)
	}
	type hit struct {
		shard int
		ms, n uint64
		id    string
		event *event.Event
	}
	var hits []hit
	next := append(Cursor(nil), after...)
	for s, cmd := range cmds {
		msgs, err := cmd.Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, nil, fmt.Errorf("journal read shard %d: %w", s, err)
		}
		for _, m := range msgs {
			e, err := decode(s, m)
			if err != nil { // skipped: one bad entry never fails a read (docs/design.md §4)
				j.skip(FormatSeq(s, m.ID), err)
				continue
			}
			if f.match(e) {
				ms, n, _ := splitStreamID(m.ID)
				hits = append(hits, hit{s, ms, n, m.ID, e})
			}
		}
		if len(msgs) > 0 {
			next[s] = msgs[len(msgs)-1].ID
		}
	}
	sort.SliceStable(hits, func(a, b int) bool {
		if hits[a].ms != hits[b].ms {
			return hits[a].ms < hits[b].ms
		}
		if hits[a].shard != hits[b].shard {
			return hits[a].shard < hits[b].shard
		}
		return hits[a].n < hits[b].n
	})
	if len(hits) > limit {
		// A shard with hits left over resumes after the last of its hits
		// returned (hits of one shard stay in order); the others move on to
		// the end of what was scanned.
		rest := hits[limit:]
		hits = hits[:limit]
		resume := map[int]string{}
		for _, h := range rest {
			resume[h.shard] = after[h.shard]
		}
		for _, h := range hits {
			if _, ok := resume[h.shard]; ok {
				resume[h.shard] = h.id
			}
		}
		for s, id := range resume {
			next[s] = id
		}
	}
	out := make([]*event.Event, len(hits))
	for i, h := range hits {
		out[i] = h.event
	}
	return out, next, nil
}

// Get returns the event at seq, or nil when it is no longer retained or
// cannot be decoded.
func (j *Journal) Get(ctx context.Context, seq string) (*event.Event, error) {
	shard, id, err := ParseSeq(seq)
	if err != nil || shard >= j.cfg.Shards {
		return nil, fmt.Errorf("seq %q: %w", seq, ErrBadCursor)
	}
	msgs, err := j.rdb.XRangeN(ctx, j.StreamKey(shard), id, id, 1).Result()
	if err != nil {
		return nil, fmt.Errorf("journal get %s: %w", seq, err)
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	e, err := decode(shard, msgs[0])
	if err != nil { // read as no longer retained (docs/design.md §4)
		j.skip(seq, err)
		return nil, nil
	}
	return e, nil
}

// Lookup returns the seq under which (source, id) was journaled, or "".
func (j *Journal) Lookup(ctx context.Context, workspace, subject, source, id string) (string, error) {
	shard := j.ShardOf(workspace, subject)
	sid, err := j.lookup(ctx, shard, source, id)
	if err != nil {
		return "", fmt.Errorf("journal lookup: %w", err)
	}
	if sid == "" {
		return "", nil
	}
	return FormatSeq(shard, sid), nil
}

// Decode turns a stream entry of a shard into its event, seq set; an
// entry that cannot be decoded is an error wrapping ErrUndecodable.
//
// It decodes with event.Decode — sonic in its encoding/json-compatible
// mode, from the entry's string (no copy): every router and the health
// feed decode every entry, and encoding/json was 6 % of a worker's CPU
// under bench fleet — with the push path's depth limit.
func decode(shard int, m redis.XMessage) (*event.Event, error) {
	raw, _ := m.Values["e"].(string)
	if len(raw) > 0 && raw[0] == compactMark {
		b, err := expand(raw)
		if err != nil {
			return nil, fmt.Errorf("journal entry %d-%s: %w: %w", shard, m.ID, ErrUndecodable, err)
		}
		raw = unsafe.String(unsafe.SliceData(b), len(b)) // b is never written again
	}
	var e event.Event
	if err := event.Decode(raw, &e); err != nil {
		return nil, fmt.Errorf("journal entry %d-%s: %w: %w", shard, m.ID, ErrUndecodable, err)
	}
	if e.SpecVersion == "" {
		// the compact form the PR tracker writes (docs/design.md §14):
		// what it leaves out is always the same
		e.SpecVersion = event.SpecVersion
		if e.Workspace == "" {
			e.Workspace, _ = m.Values["w"].(string)
		}
		if e.CoalesceKey == "" {
			e.CoalesceKey = e.Subject
		}
		if e.DataContentType == "" {
			e.DataContentType = "application/json"
		}
	}
	e.Seq = FormatSeq(shard, m.ID)
	return &e, nil
}

// Decode is decode for consumers reading streams themselves.
func Decode(shard int, m redis.XMessage) (*event.Event, error) { return decode(shard, m) }
