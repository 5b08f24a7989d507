package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/redis/go-redis/v9"
)

// RecordOnly commits a batch's record and applies none of it: a gateway
// that stopped right after its commit point.
func (s *Store) RecordOnly(ctx context.Context, workspace, pusher string, items []Item, now time.Time) error {
	calls, err := s.commitCalls(workspace, pusher, items, now)
	if err != nil {
		return err
	}
	rec, _ := json.Marshal(batchRecord{Calls: calls})
	return s.rdb.XAdd(ctx, &redis.XAddArgs{Stream: s.batchKey(calls[0].Shard), Values: []any{"b", rec}}).Err()
}

// The v1 raw record format, as written before the shared-object store
// (docs/design.md §14): kept here so that tests read records written by
// the previous code.
var zencV1, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false))

// zencDict1 compresses as v2 records and their objects were: with
// dictionary 0x57470001.
var zencDict1, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false),
	zstd.WithEncoderDict(githubDict1))

// encodeObjectDict1 is an object as v2's writers stored it.
func encodeObjectDict1(data []byte) []byte { return zencDict1.EncodeAll(data, nil) }

// encodeRawV1 renders a delivery as v1 did: uvarint(len(meta)) · meta JSON · zstd(body).
func encodeRawV1(d *Delivery) []byte {
	meta, _ := json.Marshal(rawMeta{d.GUID, d.Event, d.Hook, d.ContentType, d.Repo, d.Workspace, d.Ignored, d.Received.UnixMilli()})
	out := binary.AppendUvarint(nil, uint64(len(meta)))
	out = append(out, meta...)
	return zencV1.EncodeAll(d.Body, out)
}

// commitV1Script is the v1 commit script, as it was.
var commitV1Script = redis.NewScript(`
local ttl = tonumber(ARGV[1])
if ARGV[3] ~= '1' then
  local seen = redis.call('MGET', KEYS[1], KEYS[2])
  if seen[1] then return {1, ''} end
  if seen[2] then return {2, seen[2]} end
end
redis.call('SET', KEYS[3], ARGV[2], 'EX', ttl, 'NX')
local id = ''
if ARGV[6] == '1' then
  id = redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[7], '*', 'g', ARGV[4], 'h', ARGV[5], 'r', ARGV[3])
end
redis.call('SET', KEYS[1], '1', 'EX', ttl)
redis.call('SET', KEYS[2], ARGV[4], 'EX', ttl, 'NX')
return {0, id}
`)

// CommitV1 commits a delivery as the previous code did: a v1 raw record,
// its GUID marker and its body marker, and an ingest record without a fact.
func (s *Store) CommitV1(ctx context.Context, d *Delivery) (Outcome, error) {
	shard := s.shardOf(d.Repo)
	tag := s.Tag(shard)
	h := sha256.New()
	h.Write([]byte(d.Repo + "\x00"))
	h.Write(d.Body)
	keys := []string{tag + ":dd:" + d.Hook + ":" + d.GUID, tag + ":bh:" + hex.EncodeToString(h.Sum(nil)),
		rawKey(tag, d.GUID, d.Hook), s.StreamKey(shard)}
	cfg := s.j.Config()
	res, err := commitV1Script.Run(ctx, s.rdb, keys, int64(cfg.Retention/time.Second), encodeRawV1(d), "0", d.GUID, d.Hook,
		"1", maxLen(cfg)).Slice()
	if err != nil {
		return 0, err
	}
	code, _ := res[0].(int64)
	return Outcome(code), nil
}

// ObjectKeys returns the keys of the shared objects a body's record references in shard.
func (s *Store) ObjectKeys(shard int, body []byte) []string {
	_, objs, _, _ := encodeRaw(&Delivery{Body: body}, nil) // the objects, then their list
	var out []string
	for _, o := range objs {
		out = append(out, objKey(s.Tag(shard), o.hex()))
	}
	return out
}

// ShardOf is the ingest shard of a repository.
func (s *Store) ShardOf(repo string) int { return s.shardOf(repo) }

// commitV2Script is what the v2 commit script wrote for the dedup, as it
// was: the raw record, the ingest record and the body marker
// "<in>:bm:<sha256(repo, body)[:16]>" (no shared objects: a test of the
// markers only).
var commitV2Script = redis.NewScript(`
local ttl = tonumber(ARGV[1])
local seen = redis.call('MGET', KEYS[1], KEYS[2])
if seen[1] then return {1, ''} end
if seen[2] then return {2, ''} end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ttl, 'NX')
local id = redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], '*', 'g', ARGV[4], 'h', ARGV[5], 'r', '0')
redis.call('SET', KEYS[2], '1', 'EX', ttl, 'NX')
return {0, id}
`)

// CommitV2Markers commits a delivery's dedup as the v2 code did (its raw
// record is written whole, without objects: not to be read back).
func (s *Store) CommitV2Markers(ctx context.Context, d *Delivery) (Outcome, error) {
	shard := s.shardOf(d.Repo)
	tag := s.Tag(shard)
	h := sha256.New()
	h.Write([]byte(d.Repo + "\x00"))
	h.Write(d.Body)
	keys := []string{rawKey(tag, d.GUID, d.Hook), tag + ":bm:" + hex.EncodeToString(h.Sum(nil)[:16]), s.StreamKey(shard)}
	cfg := s.j.Config()
	res, err := commitV2Script.Run(ctx, s.rdb, keys, int64(cfg.Retention/time.Second), d.Body, maxLen(cfg), d.GUID, d.Hook).Slice()
	if err != nil {
		return 0, err
	}
	code, _ := res[0].(int64)
	return Outcome(code), nil
}

// LegacyMarkers reports whether a commit into shard now looks for the
// body markers of before.
func (s *Store) LegacyMarkers(shard int, now time.Time) bool {
	return s.legacyMarkers(shard, now.UnixMilli())
}

// LegacyMarkerSlack is legacyMarkerSlack.
const LegacyMarkerSlack = legacyMarkerSlack

// AgeKnown makes the object TTLs this process gave look d older.
func (s *Store) AgeKnown(d time.Duration) {
	s.known.mu.Lock()
	for k, t := range s.known.m {
		s.known.m[k] = t - d
	}
	s.known.mu.Unlock()
}

// ObjectRefresh is objectRefresh.
const ObjectRefresh = objectRefresh

// BodyMark is the hex of the hash naming d's body in its body marker (and
// in the previous version's key "<in>:bs:<hex>").
func BodyMark(d *Delivery) string {
	_, _, mark, err := encodeRaw(d, nil)
	if err != nil {
		panic(err)
	}
	return hex.EncodeToString(mark[:])
}

// BodyMarkNumber is the member of d's body marker in the shard's body
// marks (bodyMarkNumber).
func BodyMarkNumber(d *Delivery) uint64 {
	_, _, mark, err := encodeRaw(d, nil)
	if err != nil {
		panic(err)
	}
	return bodyMarkNumber(mark[:])
}

// LegacyBodyMarkers reports whether a commit into shard now reads the
// previous version's key per body marker.
func (s *Store) LegacyBodyMarkers(shard int, now time.Time) bool {
	return s.legacyBodyMarkers(shard, now.UnixMilli())
}
