// Package journal is wakegate's durable record of events: N fixed Redis
// Stream shards, each chosen by hash of an event's shard key (the subject;
// for GitHub subjects, the repository), with retention by age and size,
// idempotent appends keyed by the event's (source, id), and reads across
// shards through opaque composite cursors.
//
// Appends happen inside Lua scripts (AppendLua is included by the scripts
// of the ingest commit point and the PR tracker), so that what a script
// derives and what it journals are one atomic step in one cluster slot.
package journal

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/bits"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/providers/event"
)

// Config fixes the journal's layout and retention.
type Config struct {
	Prefix    string        // key prefix, WAKEGATE_REDIS_PREFIX; default keyspace.DefaultPrefix
	Shards    int           // number of shards; default 16; never change it on a live deployment
	Retention time.Duration // how long entries and dedup markers live; default 72h
	MaxLen    int64         // approximate total entries kept across shards; default 10,000,000
	// Undecodable is told, once per entry per process, of an entry a
	// reader skipped because it cannot be decoded (docs/design.md §4): the
	// caller counts it and logs its seq. Default: a log line on
	// slog.Default(). The reason never quotes the entry (it may carry
	// event data).
	Undecodable func(seq, reason string)
}

func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = keyspace.DefaultPrefix
	}
	if c.Shards <= 0 {
		c.Shards = 16
	}
	if c.Retention <= 0 {
		c.Retention = 72 * time.Hour
	}
	if c.MaxLen <= 0 {
		c.MaxLen = 10_000_000
	}
	if c.Undecodable == nil {
		c.Undecodable = func(seq, reason string) {
			slog.Warn("journal: skipped an undecodable entry", "seq", seq, "reason", reason)
		}
	}
	return c
}

// Journal reads and appends the sharded journal.
type Journal struct {
	rdb redis.UniversalClient
	cfg Config

	mu      sync.Mutex
	skipped map[string]struct{} // seqs of undecodable entries already reported
}

// New returns a journal on rdb.
func New(rdb redis.UniversalClient, cfg Config) *Journal {
	return &Journal{rdb: rdb, cfg: cfg.withDefaults()}
}

// skip reports an undecodable entry once per process (at most 10,000 kept
// in mind; past that it starts afresh).
func (j *Journal) skip(seq string, err error) {
	j.mu.Lock()
	_, seen := j.skipped[seq]
	if !seen {
		if j.skipped == nil || len(j.skipped) >= 10_000 {
			j.skipped = map[string]struct{}{}
		}
		j.skipped[seq] = struct{}{}
	}
	j.mu.Unlock()
	if !seen {
		reason := "not a JSON event"
		if errors.Is(err, event.ErrTooDeep) {
			reason = fmt.Sprintf("nests deeper than %d levels", event.MaxDepth)
		}
		j.cfg.Undecodable(seq, reason)
	}
}

// Config returns the journal's effective configuration.
func (j *Journal) Config() Config { return j.cfg }

// Shard returns the shard of a shard key (event.ShardKey).
func (j *Journal) Shard(shardKey string) int {
	h := fnv.New32a()
	h.Write([]byte(shardKey))
	return int(h.Sum32() % uint32(j.cfg.Shards))
}

// ShardOf returns the shard an event of this workspace and subject goes to.
func (j *Journal) ShardOf(workspace, subject string) int {
	return j.Shard(event.ShardKey(workspace, subject))
}

// Tag is the hash tag shared by every key of a shard: the stream, its
// dedup markers, and the state derived with it (PR trackers, sessions).
func (j *Journal) Tag(shard int) string { return j.Keys(shard).Tag() }

// Keys are the keys of a shard (docs/design.md §14).
func (j *Journal) Keys(shard int) keyspace.Shard { return keyspace.JournalShard(j.cfg.Prefix, shard) }

// StreamKey is the stream of a shard.
func (j *Journal) StreamKey(shard int) string { return j.Keys(shard).Journal() }

// LegacyDedupKey is (source, id)'s dedup marker as the version before the
// period hashes wrote it, one key each (wg_eid): honoured until it expires.
func (j *Journal) LegacyDedupKey(shard int, source, id string) string {
	return j.Keys(shard).Eid(source, id)
}

// period is how long one period of dedup markers takes appends: half the
// retention, whole seconds (wg_config).
func (j *Journal) period() int64 {
	ttl := int64(j.cfg.Retention / time.Second)
	return max((ttl+1)/2, 1)
}

// MarkerMember is the hex sha1 of (source, id), its member in the
// shard's marker set (docs/design.md §2 "The dedup window"; wg_key,
// wg_mk_member) and the member's number.
func MarkerMember(source, id string) (hexSum, member string, m uint64) {
	sum := sha1.Sum([]byte(source + "\x00" + id))
	h := hex.EncodeToString(sum[:])
	m, _ = strconv.ParseUint(h[7:20], 16, 64)
	return h, strconv.FormatUint(m, 10), m
}

// MarkFill and BodyMarkFill are the markers a bucket of a period holds on
// average (marks.lua's WG_MK_FILL_HASH and WG_MK_FILL_SET): the journal's
// hashes and the ingest's sets.
const (
	MarkFill     = 32
	BodyMarkFill = 128
)

// LinearBucket is the bucket of member number m in a period holding n
// markers, fill a bucket on average: linear hashing over
// B = 1 + n/fill buckets (marks.lua's wg_mk_bucket; docs/design.md §2).
func LinearBucket(m uint64, n, fill int64) int64 {
	B := uint64(1 + n/fill)
	p := uint64(1) << (bits.Len64(B) - 1)
	b := m % p
	if b < B-p {
		b = m % (2 * p)
	}
	return int64(b)
}

// seenLua answers (source, id)'s stream id: see seen.lua.
//
//go:embed seen.lua
var seenLua string

var seenScript = keyspace.NewScript("delivery/journal/seen.lua", marksLua, journalLua, seenLua)

// lookup answers the stream id (source, id) was journaled under in shard
// while its marker lives, else "" (the same lookup as an append's).
func (j *Journal) lookup(ctx context.Context, shard int, source, id string) (string, error) {
	args := append(j.AppendArgs(), j.Tag(shard), source, id)
	v, err := seenScript.Run(ctx, j.rdb, []string{j.StreamKey(shard)}, args...).Text()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, err
}

// ForgetMarker deletes (source, id)'s dedup marker in shard, for tests
// that lose an entry on purpose: from its bucket in each period that may
// hold it (one more on each side for this process's clock), from the
// previous version's hashes, and the key of the version before.
func (j *Journal) ForgetMarker(ctx context.Context, shard int, source, id string) error {
	h, member, m := MarkerMember(source, id)
	p := j.period()
	now := time.Now().Unix()
	cur := now - now%p
	ks := j.Keys(shard)
	pipe := j.rdb.Pipeline()
	for k := int64(-1); k <= 3; k++ {
		start := cur - k*p
		n, err := j.rdb.Get(ctx, ks.Marks().Count(start)).Int64()
		if err == nil {
			pipe.HDel(ctx, ks.Marks().Bucket(start, LinearBucket(m, n, MarkFill)), member)
		} else if !errors.Is(err, redis.Nil) {
			return err
		}
		pipe.HDel(ctx, ks.Markers(start, h[:2]), h[2:22])
	}
	pipe.Del(ctx, j.LegacyDedupKey(shard, source, id))
	_, err := pipe.Exec(ctx)
	return err
}

// NotifyChannel is the Pub/Sub channel appends publish to, per workspace.
func (j *Journal) NotifyChannel(workspace string) string {
	return keyspace.JournalNotify(j.cfg.Prefix) + workspace
}

// AppendArgs are the values every script that appends passes in ARGV so
// the shared Lua function knows its retention: see AppendLua.
func (j *Journal) AppendArgs() []any {
	perShard := j.cfg.MaxLen / int64(j.cfg.Shards)
	if perShard < 1000 {
		perShard = 1000
	}
	return []any{int64(j.cfg.Retention / time.Second), perShard, keyspace.JournalNotify(j.cfg.Prefix)}
}

// AppendLua defines wg_config, wg_append and wg_terminal (journal.lua
// documents them), included first by every script that journals:
// marks.lua, then journal.lua.
var AppendLua = keyspace.Join(marksLua, journalLua)

//go:embed journal.lua
var journalLua string

// MarksLua defines the period sets of markers (marks.lua documents them):
// the journal's dedup markers and the ingest's body markers.
var MarksLua = marksLua

//go:embed marks.lua
var marksLua string

// appendLua journals one event idempotently: see append.lua.
//
//go:embed append.lua
var appendLua string

var appendScript = keyspace.NewScript("delivery/journal/append.lua", marksLua, journalLua, appendLua)

// Append journals e once per (source, id) and returns its seq and whether
// this call appended it. e.Seq is ignored; e is not modified.
func (j *Journal) Append(ctx context.Context, e *event.Event) (seq string, added bool, err error) {
	shard := j.ShardOf(e.Workspace, e.Subject)
	body, err := Marshal(e)
	if err != nil {
		return "", false, err
	}
	args := append(j.AppendArgs(), j.Tag(shard), body, e.Workspace, e.Source, e.ID)
	if e.Terminal {
		args = append(args, e.Subject, e.Type, e.Time.UTC().Format(time.RFC3339Nano), e.Summary)
	}
	res, err := appendScript.Run(ctx, j.rdb, []string{j.StreamKey(shard)}, args...).Slice()
	if err != nil {
		return "", false, fmt.Errorf("journal append %s: %w", e.ID, err)
	}
	sid, _ := res[0].(string)
	n, _ := res[1].(int64)
	return FormatSeq(shard, sid), n == 1, nil
}

// Marshal encodes an event as stored in the journal: without seq, which is
// the entry's position and is set when read.
func Marshal(e *event.Event) (string, error) {
	c := *e
	c.Seq = ""
	b, err := jsonMarshal(&c)
	if err != nil {
		return "", fmt.Errorf("encode event %s: %w", e.ID, err)
	}
	return string(b), nil
}

// Trim drops entries older than the retention from every shard. Dedup
// markers expire by themselves, a hash of them at a time. Run it
// periodically from one worker.
func (j *Journal) Trim(ctx context.Context, now time.Time) error {
	minID := fmt.Sprintf("%d-0", now.Add(-j.cfg.Retention).UnixMilli())
	var errs []error
	for s := range j.cfg.Shards {
		if err := j.rdb.XTrimMinIDApprox(ctx, j.StreamKey(s), minID, 0).Err(); err != nil {
			errs = append(errs, fmt.Errorf("trim shard %d: %w", s, err))
		}
	}
	return errors.Join(errs...)
}

// Terminal is the compact record of a subject that has ended.
type Terminal struct {
	Type    string `json:"type"`
	Time    string `json:"time"`
	Summary string `json:"summary,omitempty"`
	Seq     string `json:"seq"`
}

// TerminalOf returns the terminal record of a subject, or nil while it
// has not ended (or ended more than 30 days ago).
func (j *Journal) TerminalOf(ctx context.Context, workspace, subject string) (*Terminal, error) {
	shard := j.ShardOf(workspace, subject)
	h, err := j.rdb.HGetAll(ctx, j.Keys(shard).Term(workspace, subject)).Result()
	if err != nil {
		return nil, fmt.Errorf("terminal record of %s: %w", subject, err)
	}
	if len(h) == 0 {
		return nil, nil
	}
	return &Terminal{Type: h["type"], Time: h["time"], Summary: h["summary"], Seq: FormatSeq(shard, h["sid"])}, nil
}
