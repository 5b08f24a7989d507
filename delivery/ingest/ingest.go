// Package ingest is the commit point (docs/design.md §1): what the gateway writes
// to Redis, in one atomic single-slot script, before it answers 2xx.
//
// A GitHub delivery is committed as its raw body (compressed), its dedup
// markers and an ingest record; normalizing it, the PR tracker and the
// journal appends are derivations that package workers/derive runs, and
// re-runs after a crash from the ingest record. An agent's events are
// their own raw input: the commit journals them directly, idempotent on
// (source, id), and applies them to the pushing session's registry record
// in the same script.
package ingest

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/klauspost/compress/zstd"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/keyspace"
	"github.com/wakegate/wakegate/providers/kind"
)

// Store commits inputs.
type Store struct {
	rdb redis.UniversalClient
	j   *journal.Journal
}

// New returns a store committing into the journal j's Redis layout.
func New(rdb redis.UniversalClient, j *journal.Journal) *Store {
	return &Store{rdb: rdb, j: j}
}

// Shards is the number of ingest shards (the same as journal shards).
func (s *Store) Shards() int { return s.j.Config().Shards }

// Tag is the hash tag of an ingest shard.
func (s *Store) Tag(shard int) string { return s.Keys(shard).Tag() }

// Keys are the keys of an ingest shard (docs/design.md §14).
func (s *Store) Keys(shard int) keyspace.IngestShard {
	return keyspace.Ingest(s.j.Config().Prefix, shard)
}

// StreamKey is the stream of ingest records of a shard.
func (s *Store) StreamKey(shard int) string { return s.Keys(shard).Stream() }

func (s *Store) shardOf(repo string) int {
	h := fnv.New32a()
	h.Write([]byte(repo))
	return int(h.Sum32() % uint32(s.Shards()))
}

// Delivery is a verified GitHub webhook delivery.
type Delivery struct {
	GUID        string
	Event       string // X-GitHub-Event
	Hook        string // App id (installation target id) or hook id: the dedup scope
	ContentType string // media type the body was sent with
	Repo        string // "org/repo", "" if the payload names none
	Workspace   string // "" when the repository maps to none
	Ignored     string // why nothing will be journaled; "" = derive it
	Body        []byte // the raw body exactly as signed
	Received    time.Time
	Replay      bool // an operator's redelivery: passes dedup, marked in the journal
	// Fact is the delivery's normalized fact (github.EncodeFact), when the
	// gateway has it: the ingest record carries it, and the deriver folds
	// it in without reading the raw body again. nil: derive from the body.
	Fact []byte

	buf *[]byte // Body's pooled buffer (Raws), for Release
}

// Outcome of a commit.
type Outcome int

// Outcomes of CommitDelivery.
const (
	Committed     Outcome = iota
	DuplicateGUID         // (hook, guid) already committed
	DuplicateBody         // the same body for the same repository, under a fresh guid
)

// commitDeliveryScript is the GitHub commit point.
// Its KEYS, ARGV and reply are in commit_delivery.lua.
//
//go:embed commit_delivery.lua
var commitDeliveryLua string

var commitDeliveryScript = keyspace.NewScript("delivery/ingest/commit_delivery.lua", commitDeliveryLua)

// CommitDelivery commits a verified delivery. Only Committed means this
// call wrote it; the duplicates wrote nothing.
func (s *Store) CommitDelivery(ctx context.Context, d *Delivery) (Outcome, error) {
	buf := recPool.Get().(*[]byte)
	defer recPool.Put(buf)
	rec, err := encodeRaw(d, (*buf)[:0])
	if err != nil {
		return 0, err
	}
	if cap(rec) <= maxPooledRec {
		*buf = rec[:0] // keep the grown buffer; go-redis has written rec once Run returns
	}
	shard := s.shardOf(d.Repo)
	tag := s.Tag(shard)
	h := sha256.New()
	h.Write([]byte(d.Repo + "\x00"))
	h.Write(d.Body)
	sum := h.Sum(nil)
	keys := []string{
		keyspace.IngestShard(tag).Dedup(d.Hook, d.GUID),
		keyspace.IngestShard(tag).Body(hex.EncodeToString(sum)),
		rawKey(tag, d.GUID, d.Hook),
		s.StreamKey(shard),
	}
	cfg := s.j.Config()
	derive, fact := "0", []byte(nil)
	if d.Ignored == "" {
		derive, fact = "1", d.Fact
	}
	replay := "0"
	if d.Replay {
		replay = "1"
	}
	res, err := commitDeliveryScript.Run(ctx, s.rdb, keys,
		int64(cfg.Retention/time.Second), rec, replay, d.GUID, d.Hook, derive, maxLen(cfg), fact, d.Workspace).Slice()
	if err != nil {
		return 0, fmt.Errorf("commit delivery %s: %w", d.GUID, err)
	}
	code, _ := res[0].(int64)
	return Outcome(code), nil
}

func maxLen(cfg journal.Config) int64 {
	n := cfg.MaxLen / int64(cfg.Shards)
	if n < 1000 {
		n = 1000
	}
	return n
}

func rawKey(tag, guid, hook string) string { return keyspace.IngestShard(tag).Raw(guid, hook) }

// Trim drops ingest records older than the retention: their raw
// deliveries have expired with them. Run it periodically from one worker.
func (s *Store) Trim(ctx context.Context, now time.Time) error {
	minID := fmt.Sprintf("%d-0", now.Add(-s.j.Config().Retention).UnixMilli())
	var errs []error
	for shard := range s.Shards() {
		if err := s.rdb.XTrimMinIDApprox(ctx, s.StreamKey(shard), minID, 0).Err(); err != nil {
			errs = append(errs, fmt.Errorf("trim ingest shard %d: %w", shard, err))
		}
	}
	return errors.Join(errs...)
}

// Record is an ingest record: a committed delivery waiting to be derived.
type Record struct {
	Shard     int
	ID        string // stream id
	GUID      string
	Hook      string
	Replay    bool
	Workspace string // set with Fact
	Fact      []byte // the normalized fact committed with the delivery; nil: derive it from the raw body
}

// ParseRecord reads an ingest stream entry of shard.
func ParseRecord(shard int, m redis.XMessage) Record {
	g, _ := m.Values["g"].(string)
	h, _ := m.Values["h"].(string)
	r, _ := m.Values["r"].(string)
	rec := Record{Shard: shard, ID: m.ID, GUID: g, Hook: h, Replay: r == "1"}
	if f, _ := m.Values["f"].(string); f != "" {
		rec.Workspace, _ = m.Values["w"].(string)
		rec.Fact = []byte(f)
	}
	return rec
}

// ErrNotFound is returned for a raw delivery that is not (or no longer) kept.
var ErrNotFound = kind.New(kind.NotFound, "not found")

// Raws returns the committed deliveries of ingest records of one shard,
// in one round trip (their keys share the shard's slot). A record whose
// raw delivery is no longer kept gets an error wrapping ErrNotFound.
func (s *Store) Raws(ctx context.Context, shard int, recs []Record) ([]*Delivery, []error, error) {
	keys := make([]string, len(recs))
	for i, rec := range recs {
		keys[i] = rawKey(s.Tag(shard), rec.GUID, rec.Hook)
	}
	vals, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("raw deliveries of ingest shard %d: %w", shard, err)
	}
	out := make([]*Delivery, len(recs))
	errs := make([]error, len(recs))
	for i, v := range vals {
		str, ok := v.(string)
		if !ok {
			errs[i] = fmt.Errorf("raw delivery %s: %w", recs[i].GUID, ErrNotFound)
			continue
		}
		// decodeRaw only reads the record: no copy of the string
		d, err := decodeRaw(unsafe.Slice(unsafe.StringData(str), len(str)))
		if err != nil {
			errs[i] = fmt.Errorf("raw delivery %s: %w", recs[i].GUID, err)
			continue
		}
		d.Replay = recs[i].Replay
		out[i] = d
	}
	return out, errs, nil
}

// rawMeta is what a raw record keeps beside the compressed body.
type rawMeta struct {
	GUID        string `json:"g"`
	Event       string `json:"e"`
	Hook        string `json:"h"`
	ContentType string `json:"c,omitempty"`
	Repo        string `json:"r,omitempty"`
	Workspace   string `json:"w,omitempty"`
	Ignored     string `json:"i,omitempty"`
	Received    int64  `json:"t"`
}

// The raw body is compressed on the request path, before the commit, so
// what is durable at the 2xx is already the compact record (docs/design.md §1).
// SpeedFastest: on octokit's 28 KB pull_request/opened it is 3.2 KB
// against SpeedDefault's 3.1 KB, both in the same allocation class of
// Redis (the raw-memory budget is unchanged), and it costs far less CPU
// under load: its match table is 256 KB, where SpeedDefault's two are
// 1.25 MB and miss the cache between requests. One encoder per P, so
// concurrent requests do not queue for a single encoder. No frame checksum
// (an xxhash of the 28 KB body on both sides, ~3 µs each, and 4 bytes):
// Redis keeps the record intact, and records written with one still
// decode (the checksum is checked when present).
var (
	zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(min(runtime.GOMAXPROCS(0), 16)), zstd.WithEncoderCRC(false))
	zdec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(64<<20))
)

// recPool holds the buffers raw records are rendered into: a record only
// lives until the commit script has been sent.
var recPool = sync.Pool{New: func() any { b := make([]byte, 0, 8<<10); return &b }}

// maxPooledRec bounds the buffers kept in recPool (a 25 MB body would
// otherwise pin megabytes per P).
const maxPooledRec = 256 << 10

// encodeRaw appends to out a delivery rendered as
// uvarint(len(meta)) · meta JSON · zstd(body).
func encodeRaw(d *Delivery, out []byte) ([]byte, error) {
	meta, err := json.Marshal(rawMeta{d.GUID, d.Event, d.Hook, d.ContentType, d.Repo, d.Workspace, d.Ignored, d.Received.UnixMilli()})
	if err != nil {
		return nil, fmt.Errorf("encode delivery %s: %w", d.GUID, err)
	}
	if need := len(meta) + len(d.Body)/6 + 32; cap(out) < need {
		out = make([]byte, 0, need)
	}
	out = binary.AppendUvarint(out, uint64(len(meta)))
	out = append(out, meta...)
	return zenc.EncodeAll(d.Body, out), nil
}

func decodeRaw(v []byte) (*Delivery, error) {
	n, k := binary.Uvarint(v)
	if k <= 0 || uint64(len(v)-k) < n {
		return nil, errors.New("corrupt raw record")
	}
	var m rawMeta
	if err := json.Unmarshal(v[k:k+int(n)], &m); err != nil {
		return nil, fmt.Errorf("corrupt raw record: %w", err)
	}
	buf := bodyPool.Get().(*[]byte)
	body, err := zdec.DecodeAll(v[k+int(n):], (*buf)[:0])
	if err != nil {
		bodyPool.Put(buf)
		return nil, fmt.Errorf("corrupt raw record: %w", err)
	}
	return &Delivery{GUID: m.GUID, Event: m.Event, Hook: m.Hook, ContentType: m.ContentType, Repo: m.Repo,
		Workspace: m.Workspace, Ignored: m.Ignored, Body: body, Received: time.UnixMilli(m.Received).UTC(), buf: buf}, nil
}

// bodyPool holds the buffers Raws decompresses bodies into (Release).
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}

// maxPooledBody bounds the buffers kept in bodyPool.
const maxPooledBody = 1 << 20

// Release hands the bodies of deliveries Raws returned back for reuse: the
// deriver decompresses a batch of 28 KB bodies at a time. Neither the
// bodies nor anything aliasing them may be used afterwards. Releasing is
// optional: a body never released is garbage like any other.
func Release(ds []*Delivery) {
	for _, d := range ds {
		if d == nil || d.buf == nil {
			continue
		}
		if cap(d.Body) <= maxPooledBody {
			*d.buf = d.Body[:0]
			bodyPool.Put(d.buf)
		}
		d.buf, d.Body = nil, nil
	}
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
