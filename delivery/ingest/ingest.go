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
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/providers/kind"
)

// Store commits inputs.
type Store struct {
	rdb redis.UniversalClient
	j   *journal.Journal

	known    keySet      // shared objects this process has seen stored (their keys)
	loaded   objectCache // shared objects read back, by hash (immutable)
	epochs   sync.Map    // ingest shard → until when (unix ms) body markers of before (":bh:", ":bm:") are looked for; 0: never
	bkEpochs sync.Map    // ingest shard → until when (unix ms) the previous version's ":bs:" markers are looked for; 0: never
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

var commitDeliveryScript = keyspace.NewScript("delivery/ingest/commit_delivery.lua", journal.MarksLua, commitDeliveryLua)

// CommitDelivery commits a verified delivery. Only Committed means this
// call wrote it; the duplicates wrote nothing.
func (s *Store) CommitDelivery(ctx context.Context, d *Delivery) (Outcome, error) {
	buf := recPool.Get().(*[]byte)
	defer recPool.Put(buf)
	rec, objs, mark, err := encodeRaw(d, (*buf)[:0])
	if err != nil {
		return 0, err
	}
	if cap(rec) <= maxPooledRec {
		*buf = rec[:0] // keep the grown buffer; go-redis has written rec once Run returns
	}
	shard := s.shardOf(d.Repo)
	tag := s.Tag(shard)
	raw := rawKey(tag, d.GUID, d.Hook)
	in := keyspace.IngestShard(tag)
	keys := make([]string, 8, 8+len(objs))
	markHex := hex.EncodeToString(mark[:])
	keys[0], keys[1], keys[2], keys[3], keys[4], keys[5], keys[6], keys[7] = raw, raw, raw, s.StreamKey(shard), raw, raw, in.MarkerEpoch(), in.BodyMarksEpoch()
	now := time.Now().UnixMilli()
	if s.legacyBodyMarkers(shard, now) {
		// the previous version's key per body may still be there
		keys[1] = in.StoredBodyMarker(markHex)
	}
	if s.legacyMarkers(shard, now) {
		// markers of before the stored-form marker may still be there: the
		// body's own SHA-256 names them (docs/design.md §14)
		h := sha256.New()
		h.Write([]byte(d.Repo + "\x00"))
		h.Write(d.Body)
		sum := h.Sum(nil)
		keys[4], keys[5] = in.Body(hex.EncodeToString(sum)), in.BodyMarker(hex.EncodeToString(sum[:16]))
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
	const nargs = 15
	args := make([]any, nargs, nargs+len(objs))
	args[0], args[1], args[2], args[3], args[4] = int64(cfg.Retention/time.Second), rec, replay, d.GUID, d.Hook
	args[5], args[6], args[7], args[8], args[9] = derive, maxLen(cfg), fact, d.Workspace, len(objs)
	args[10], args[11] = now, int64((cfg.Retention+objectSlack)/time.Second)
	member := bodyMarkNumber(mark[:])
	args[12], args[13], args[14] = string(in.BodyMarks()), strconv.FormatUint(member, 10), member&(1<<28-1)
	at := sinceEpoch()
	refreshed := make([]bool, len(objs)) // this commit gives object i its TTL
	for i, o := range objs {
		k := objKey(tag, o.hex())
		keys = append(keys, k)
		switch t, ok := s.known.refreshed(k); {
		case ok && at-t < objectRefresh:
			args = append(args, "") // refreshed lately: only checked
		case ok:
			args = append(args, "+")
			refreshed[i] = true
		default:
			args = append(args, encodeObject(o.data))
			refreshed[i] = true
		}
	}
	for attempt := 0; ; attempt++ {
		res, err := commitDeliveryScript.Run(ctx, s.rdb, keys, args...).Slice()
		if err != nil {
			return 0, fmt.Errorf("commit delivery %s: %w", d.GUID, err)
		}
		if len(res) > 3 {
			s.learnEpoch(&s.epochs, shard, res[2], cfg.Retention)
			s.learnEpoch(&s.bkEpochs, shard, res[3], cfg.Retention)
		}
		code, _ := res[0].(int64)
		if code == 3 && attempt == 0 {
			// an object believed stored has expired (or Redis lost it): send them all
			for i, o := range objs {
				if a, _ := args[nargs+i].(string); a == "" || a == "+" {
					s.known.forget(keys[8+i])
					args[nargs+i] = encodeObject(o.data)
					refreshed[i] = true
				}
			}
			continue
		}
		if code == 3 {
			return 0, fmt.Errorf("commit delivery %s: shared object %v not stored", d.GUID, res[1])
		}
		if code == int64(Committed) {
			for i := range objs {
				if refreshed[i] {
					s.known.add(at, keys[8+i])
				}
			}
		}
		return Outcome(code), nil
	}
}

// A shared object's TTL is the retention and objectSlack, and a process
// that gave it that TTL checks only that it is there for objectRefresh
// after (one EXISTS for all of a record's objects instead of an EXPIRE
// each, none of them a write for the AOF): a record committed then
// expires a retention after, while the object has at least objectSlack −
// objectRefresh more (docs/design.md §14).
const (
	objectSlack   = 24 * time.Hour
	objectRefresh = 12 * time.Hour
)

// bodyMarkNumber is the member of the body marker named by the body hash
// mark (docs/design.md §14; delivery/journal/marks.lua): its first 63
// bits.
func bodyMarkNumber(mark []byte) uint64 { return binary.BigEndian.Uint64(mark) >> 1 }

// legacyMarkers reports whether body markers written before the
// stored-form marker may still be in shard at now (unix ms): until this
// process has heard the shard's marker epoch from a commit, and then for
// a retention and a day after it (docs/design.md §14).
func (s *Store) legacyMarkers(shard int, now int64) bool { return before(&s.epochs, shard, now) }

// legacyBodyMarkers reports the same of the previous version's key per
// body marker ("<in>:bs:"), by the shard's body marks epoch.
func (s *Store) legacyBodyMarkers(shard int, now int64) bool { return before(&s.bkEpochs, shard, now) }

func before(epochs *sync.Map, shard int, now int64) bool {
	v, ok := epochs.Load(shard)
	if !ok {
		return true
	}
	until := v.(int64)
	return until != 0 && now < until
}

// learnEpoch remembers a shard's marker epoch as the commit script
// answered it: "0" (a shard that had no ingest record when its first
// marker of the kind was written: nothing of before to honour), else when
// that was, in unix ms.
func (s *Store) learnEpoch(epochs *sync.Map, shard int, v any, retention time.Duration) {
	str, _ := v.(string)
	ms, err := strconv.ParseInt(str, 10, 64)
	if err != nil {
		return
	}
	until := int64(0)
	if ms > 0 {
		until = ms + (retention + legacyMarkerSlack).Milliseconds()
	}
	epochs.Store(shard, until)
}

// legacyMarkerSlack is how long past a retention after the marker epoch
// the markers of before are still looked for: a marker written by a
// process of the previous version still running at the epoch (processes
// are upgraded together, docs/design.md §14) or under a longer retention.
const legacyMarkerSlack = 24 * time.Hour

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
// in one round trip (their keys share the shard's slot), and one more for
// the shared objects they reference that this process has not read yet.
// A record whose raw delivery is no longer kept gets an error wrapping
// ErrNotFound.
func (s *Store) Raws(ctx context.Context, shard int, recs []Record) ([]*Delivery, []error, error) {
	keys := make([]string, len(recs))
	for i, rec := range recs {
		keys[i] = rawKey(s.Tag(shard), rec.GUID, rec.Hook)
	}
	vals, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("raw deliveries of ingest shard %d: %w", shard, err)
	}
	raws := make([]*rawRecord, len(recs))
	errs := make([]error, len(recs))
	for i, v := range vals {
		str, ok := v.(string)
		if !ok {
			errs[i] = fmt.Errorf("raw delivery %s: %w", recs[i].GUID, ErrNotFound)
			continue
		}
		// decodeRaw only reads the record: no copy of the string
		r, err := decodeRaw(recs[i].GUID, recs[i].Hook, unsafe.Slice(unsafe.StringData(str), len(str)))
		if err != nil {
			errs[i] = fmt.Errorf("raw delivery %s: %w", recs[i].GUID, err)
			continue
		}
		r.d.Replay = recs[i].Replay
		raws[i] = r
	}
	out, err := s.assemble(ctx, s.Tag(shard), raws, errs)
	if err != nil {
		return nil, nil, err
	}
	return out, errs, nil
}

// assemble puts the shared objects back into decoded raw records of the
// ingest shard tag (nil entries are skipped), reading what this process
// does not have yet: the records' object lists in one MGET, then their
// objects in one more. A record whose list or object is not stored gets
// its error in errs.
func (s *Store) assemble(ctx context.Context, tag string, raws []*rawRecord, errs []error) ([]*Delivery, error) {
	objs := map[[objHashLen]byte][]byte{}
	var lists [][objHashLen]byte
	for _, r := range raws {
		if r != nil && r.list != nil {
			lists = append(lists, *r.list)
		}
	}
	if err := s.load(ctx, tag, lists, objs); err != nil {
		return nil, err
	}
	var sums [][objHashLen]byte
	for i, r := range raws {
		if r == nil {
			continue
		}
		if err := r.resolveList(objs); err != nil {
			r.release()
			raws[i], errs[i] = nil, fmt.Errorf("raw delivery %s: %w", r.d.GUID, err)
			continue
		}
		sums = append(sums, r.objs...)
	}
	if err := s.load(ctx, tag, sums, objs); err != nil {
		return nil, err
	}
	out := make([]*Delivery, len(raws))
	for i, r := range raws {
		if r == nil {
			continue
		}
		d, err := r.assemble(objs)
		if err != nil {
			r.release()
			errs[i] = fmt.Errorf("raw delivery %s: %w", r.d.GUID, err)
			continue
		}
		out[i] = d
	}
	return out, nil
}

// load puts the shared objects sums of the ingest shard tag into objs
// (decompressed, by hash): from this process's cache, else in one MGET. An
// object that is not stored, or not what its hash names, is left out.
func (s *Store) load(ctx context.Context, tag string, sums [][objHashLen]byte, objs map[[objHashLen]byte][]byte) error {
	var missing [][objHashLen]byte
	for _, sum := range sums {
		if _, ok := objs[sum]; ok {
			continue
		}
		if data, ok := s.loaded.get(sum); ok {
			objs[sum] = data
		} else {
			objs[sum] = nil
			missing = append(missing, sum)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	keys := make([]string, len(missing))
	for i, sum := range missing {
		keys[i] = objKey(tag, hex.EncodeToString(sum[:]))
	}
	vals, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return fmt.Errorf("shared objects of %s: %w", tag, err)
	}
	for i, v := range vals {
		str, ok := v.(string)
		if !ok {
			delete(objs, missing[i]) // assemble reports it
			continue
		}
		data, err := decodeObject(missing[i], []byte(str))
		if err != nil {
			delete(objs, missing[i])
			continue
		}
		objs[missing[i]] = data
		s.loaded.put(missing[i], data)
	}
	return nil
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

// recPool holds the buffers raw records are rendered into: a record only
// lives until the commit script has been sent.
var recPool = sync.Pool{New: func() any { b := make([]byte, 0, 8<<10); return &b }}

// maxPooledRec bounds the buffers kept in recPool (a 25 MB body would
// otherwise pin megabytes per P).
const maxPooledRec = 256 << 10

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
