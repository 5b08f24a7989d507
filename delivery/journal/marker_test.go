package journal_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"math/bits"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
)

// markerOf is where journal.lua keeps (source, id)'s marker of the period
// starting at start when the period holds n markers (docs/design.md §2,
// "The dedup window").
func markerOf(j *journal.Journal, shard int, start, n int64, source, id string) (key, field string) {
	_, member, m := journal.MarkerMember(source, id)
	return j.Keys(shard).Marks().Bucket(start, journal.LinearBucket(m, n, journal.MarkFill)), member
}

// markerValue is a marker's value for the stream id ms-0 in the period
// starting at start: the check (sha1 hex digits 21–28) · 10^9 + the
// milliseconds after start.
func markerValue(h string, start, ms int64) string {
	check, _ := strconv.ParseInt(h[20:28], 16, 64)
	return strconv.FormatInt(check*1_000_000_000+ms-start*1000, 10)
}

// previousMarkerOf is where the previous version kept (source, id)'s
// marker of the period starting at start: main's layout, still read.
func previousMarkerOf(j *journal.Journal, shard int, start int64, source, id string) (key, field string) {
	h := hex.EncodeToString(func() []byte { s := sha1.Sum([]byte(source + "\x00" + id)); return s[:] }())
	return j.Keys(shard).Markers(start, h[:2]), h[2:22]
}

// TestDedupMarkers: an append leaves its (source, id) marker as a field of
// the first bucket of its period, counted by the period's count (no key
// of its own), which live at least the retention and at most a period
// more; a second append of the pair, Lookup and Find all answer the first
// entry.
func TestDedupMarkers(t *testing.T) {
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	const retention = 72 * time.Hour
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 4, Retention: retention})
	e := ev("ws", "session:s", "m-1")
	seq, added, err := j.Append(ctx, e)
	if err != nil || !added {
		t.Fatalf("append: %v %v", added, err)
	}
	shard, sid, _ := journal.ParseSeq(seq)
	if n, _ := rdb.Exists(ctx, j.LegacyDedupKey(shard, e.Source, e.ID)).Result(); n != 0 {
		t.Fatal("the append wrote a marker key of its own")
	}
	tm, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	period := int64(retention/time.Second) / 2
	start := tm.Unix() - tm.Unix()%period
	key, field := markerOf(j, shard, start, 1, e.Source, e.ID)
	v, err := rdb.HGet(ctx, key, field).Result()
	if err != nil {
		t.Fatalf("no marker in %s: %v", key, err)
	}
	ms, _ := strconv.ParseInt(strings.TrimSuffix(sid, "-0"), 10, 64)
	h, _, _ := journal.MarkerMember(e.Source, e.ID)
	if want := markerValue(h, start, ms); v != want {
		t.Errorf("marker value %q for stream id %s in the period of %d, want %s: its check · 10^9 + the ms after the start", v, sid, start, want)
	}
	count := j.Keys(shard).Marks().Count(start)
	if n, err := rdb.Get(ctx, count).Result(); err != nil || n != "1" {
		t.Errorf("the period's count = %q %v, want 1", n, err)
	}
	for _, k := range []string{key, count} {
		ttl, err := rdb.TTL(ctx, k).Result()
		if err != nil || ttl < retention-time.Minute || ttl > retention+time.Duration(period)*time.Second {
			t.Errorf("%s expires in %v, want between the retention and a period (%ds) more", k, ttl, period)
		}
	}
	again, added, err := j.Append(ctx, e)
	if err != nil || added || again != seq {
		t.Fatalf("append again: %s %v %v, want %s not added", again, added, err, seq)
	}
	if got, err := j.Lookup(ctx, "ws", "session:s", e.Source, e.ID); err != nil || got != seq {
		t.Fatalf("Lookup = %q %v, want %s", got, err, seq)
	}
	if got, err := j.Find(ctx, e.Source, e.ID); err != nil || len(got) != 1 || got[0].Seq != seq {
		t.Fatalf("Find = %+v %v", got, err)
	}
	if err := j.ForgetMarker(ctx, shard, e.Source, e.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := j.Lookup(ctx, "ws", "session:s", e.Source, e.ID); got != "" {
		t.Fatalf("Lookup after ForgetMarker = %q", got)
	}
	// a marker of the same member whose check is another's is another
	// (source, id)'s: it does not dedup
	other := ev("ws", "session:s", "m-other")
	oh, om, _ := journal.MarkerMember(other.Source, other.ID)
	oc, _ := strconv.ParseInt(oh[20:28], 16, 64)
	if err := rdb.HSet(ctx, j.Keys(j.ShardOf("ws", "session:s")).Marks().Bucket(start, 0), om, strconv.FormatInt((oc^1)*1_000_000_000+5, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	if _, added, err := j.Append(ctx, other); err != nil || !added {
		t.Errorf("a marker with another's check dedups: added %v %v", added, err)
	}
}

// TestDedupMarkerBuckets: 10,000 appends in one period grow its hashes
// by linear hashing to 1 + 10,000/32 buckets, each split as the count
// passes a multiple of the fill: every pair appended is found again (by
// an append, Lookup), in the bucket LinearBucket names; 10,000 pairs never
// appended are not found; every bucket stays a listpack, within Redis 7's
// default hash-max-listpack-entries (128) whatever the server's setting.
func TestDedupMarkerBuckets(t *testing.T) {
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 1})
	const n = 10000
	seqs := make([]string, n)
	for i := range n {
		seq, added, err := j.Append(ctx, ev("ws", "session:s", "lh-"+strconv.Itoa(i)))
		if err != nil || !added {
			t.Fatalf("append %d: %v %v", i, added, err)
		}
		seqs[i] = seq
	}
	start := redistest.MarkerPeriod(t, rdb, j.Config().Retention)
	for _, k := range redistest.MarkerBuckets(t, rdb, string(j.Keys(0).Marks().Count(start)), n, journal.MarkFill, true) {
		if ttl := rdb.TTL(ctx, k).Val(); ttl < j.Config().Retention {
			t.Errorf("%s expires in %v", k, ttl)
		}
	}
	for i := range n {
		e := ev("ws", "session:s", "lh-"+strconv.Itoa(i))
		key, field := markerOf(j, 0, start, n, e.Source, e.ID)
		if ok, _ := rdb.HExists(ctx, key, field).Result(); !ok {
			t.Fatalf("marker %d is not in %s", i, key)
		}
		if i%10 == 0 {
			if again, added, err := j.Append(ctx, e); err != nil || added || again != seqs[i] {
				t.Fatalf("append %d again: %s %v %v, want %s", i, again, added, err, seqs[i])
			}
		} else if got, err := j.Lookup(ctx, "ws", "session:s", e.Source, e.ID); err != nil || got != seqs[i] {
			t.Fatalf("Lookup %d = %q %v, want %s", i, got, err, seqs[i])
		}
		if got, err := j.Lookup(ctx, "ws", "session:s", e.Source, "never-"+strconv.Itoa(i)); err != nil || got != "" {
			t.Fatalf("Lookup of a pair never appended = %q %v", got, err)
		}
	}
}

// TestLinearBucket: among B = 1 + n/fill buckets every member has one in
// [0, B); when B grows by one only members of bucket s = B − 2^L move, all
// to the new bucket B (so a split reads and rewrites one bucket).
func TestLinearBucket(t *testing.T) {
	const fill = 4
	ms := make([]uint64, 2000)
	for i := range ms {
		ms[i] = uint64(i)*0x9E3779B97F4A7C15>>12 + uint64(i)
	}
	for n := int64(0); n < 40*fill; n++ {
		B := 1 + n/fill
		B2 := 1 + (n+1)/fill
		p := int64(1) << (bits.Len64(uint64(B)) - 1)
		for _, m := range ms {
			b := journal.LinearBucket(m, n, fill)
			if b < 0 || b >= B {
				t.Fatalf("n %d: member %d in bucket %d of %d", n, m, b, B)
			}
			b2 := journal.LinearBucket(m, n+1, fill)
			if b2 == b {
				continue
			}
			if B2 != B+1 || b != B-p || b2 != B {
				t.Fatalf("n %d → %d: member %d moved from bucket %d to %d (B %d → %d)", n, n+1, m, b, b2, B, B2)
			}
		}
	}
}

// TestDedupMarkersOfEarlierPeriods: a marker two periods old (the oldest
// a period may still hold) is honoured, by appends (the agent commit's and
// the tracker's use the same Lua) and readers, whatever form its value
// has and whichever level; one three periods old is past the window and
// is not looked for.
func TestDedupMarkersOfEarlierPeriods(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		const retention = 2 * time.Hour // periods of an hour
		j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 2, Retention: retention})
		tm, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		now := tm.Unix()
		cur := now - now%3600
		for _, c := range []struct {
			id      string
			periods int64
			count   int64 // the period's count: 100 makes 4 buckets
			ms      int64 // the value: the ms after the period's start; -1: value
			value   string
			want    string // the stream id found; "" = appended anew
		}{
			{"old-1", 2, 1, 5, "", strconv.FormatInt((cur-2*3600)*1000+5, 10) + "-0"},
			{"old-2", 1, 1, -1, "1700000000000-3", "1700000000000-3"},
			{"old-4", 1, 100, 7, "", strconv.FormatInt((cur-3600)*1000+7, 10) + "-0"},
			{"old-5", 2, 32<<26 + 777*32, 11, "", strconv.FormatInt((cur-2*3600)*1000+11, 10) + "-0"}, // 2^26 buckets and more
			{"old-3", 3, 1, 5, "", ""},
		} {
			e := ev("ws", "session:s", c.id)
			shard := j.ShardOf(e.Workspace, e.Subject)
			start := cur - c.periods*3600
			h, field, _ := journal.MarkerMember(e.Source, e.ID)
			if c.ms >= 0 {
				c.value = markerValue(h, 0, c.ms)
			}
			key, _ := markerOf(j, shard, start, c.count, e.Source, e.ID)
			ms := j.Keys(shard).Marks()
			if err := rdb.HSet(ctx, key, field, c.value).Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.IncrBy(ctx, ms.Count(start), c.count).Err(); err != nil {
				t.Fatal(err)
			}
			seq, added, err := j.Append(ctx, e)
			if err != nil {
				t.Fatal(err)
			}
			if c.want == "" {
				if !added {
					t.Errorf("%s: a marker %d periods old still dedups", c.id, c.periods)
				}
				continue
			}
			if want := journal.FormatSeq(shard, c.want); added || seq != want {
				t.Errorf("%s: append = %s added %v, want %s from the marker %d periods old", c.id, seq, added, want, c.periods)
			}
			if got, _ := j.Lookup(ctx, "ws", "session:s", e.Source, e.ID); got != journal.FormatSeq(shard, c.want) {
				t.Errorf("%s: Lookup = %q", c.id, got)
			}
		}
	})
}

// TestPreviousLayoutMarkersHonoured: markers main's code wrote (fields
// h[3..22] of "<j>:em:<start>:<h[1..2]>", value the milliseconds after
// start or the whole stream id) dedup appends and answer Lookup and Find
// in a shard whose journal had entries at its first lookup, for a
// retention after that lookup (the shard's "<j>:mkepoch"), and not after.
func TestPreviousLayoutMarkersHonoured(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		const retention = 2 * time.Hour
		j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 1, Retention: retention})
		body, _ := journal.Marshal(ev("ws", "session:s", "before"))
		sid, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: j.StreamKey(0), Values: []any{"e", body, "w", "ws"}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		tm, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		now := tm.Unix()
		cur := now - now%3600
		for i, c := range []struct {
			periods int64
			value   string
			want    string
		}{
			{0, "12", strconv.FormatInt(cur*1000+12, 10) + "-0"},
			{2, "5", strconv.FormatInt((cur-2*3600)*1000+5, 10) + "-0"},
			{1, sid, sid},
		} {
			e := ev("ws", "session:s", "prev-"+strconv.Itoa(i))
			key, field := previousMarkerOf(j, 0, cur-c.periods*3600, e.Source, e.ID)
			if err := rdb.HSet(ctx, key, field, c.value).Err(); err != nil {
				t.Fatal(err)
			}
			want := journal.FormatSeq(0, c.want)
			seq, added, err := j.Append(ctx, e)
			if err != nil || added || seq != want {
				t.Errorf("append under main's marker %d periods old = %s added %v %v, want %s", c.periods, seq, added, err, want)
			}
			if got, err := j.Lookup(ctx, "ws", "session:s", e.Source, e.ID); err != nil || got != want {
				t.Errorf("Lookup = %q %v, want %s", got, err, want)
			}
			if c.want == sid {
				if got, err := j.Find(ctx, e.Source, e.ID); err != nil || len(got) != 1 || got[0].Seq != want {
					t.Errorf("Find = %+v %v", got, err)
				}
			}
		}
		if v, _ := rdb.Get(ctx, j.Keys(0).MarksEpoch()).Int64(); v < now-5 || v > now+5 {
			t.Errorf("the shard's marks epoch = %d, want now (%d)", v, now)
		}
		// a retention after the epoch, main's hashes are no longer read
		if err := rdb.Set(ctx, j.Keys(0).MarksEpoch(), now-int64(retention/time.Second)-60, 0).Err(); err != nil {
			t.Fatal(err)
		}
		e := ev("ws", "session:s", "prev-late")
		key, field := previousMarkerOf(j, 0, cur, e.Source, e.ID)
		if err := rdb.HSet(ctx, key, field, "3").Err(); err != nil {
			t.Fatal(err)
		}
		if _, added, err := j.Append(ctx, e); err != nil || !added {
			t.Errorf("a retention past the epoch, main's marker still dedups: added %v %v", added, err)
		}
	})
}

// TestLegacyMarkersHonoured: a marker the previous version wrote (one key
// per (source, id), "<tag>:eid:<sha1 hex>") still dedups appends and
// answers Lookup and Find until it expires.
func TestLegacyMarkersHonoured(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 4})
		e := ev("ws", "session:s", "legacy-1")
		shard := j.ShardOf(e.Workspace, e.Subject)
		body, _ := journal.Marshal(e)
		sid, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: j.StreamKey(shard), Values: []any{"e", body, "w", "ws"}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.Set(ctx, j.LegacyDedupKey(shard, e.Source, e.ID), sid, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		want := journal.FormatSeq(shard, sid)
		seq, added, err := j.Append(ctx, e)
		if err != nil || added || seq != want {
			t.Fatalf("append under a legacy marker = %s added %v %v, want %s", seq, added, err, want)
		}
		if got, err := j.Lookup(ctx, "ws", "session:s", e.Source, e.ID); err != nil || got != want {
			t.Fatalf("Lookup = %q %v", got, err)
		}
		if got, err := j.Find(ctx, e.Source, e.ID); err != nil || len(got) != 1 || got[0].Seq != want {
			t.Fatalf("Find = %+v %v", got, err)
		}
		if n, _ := rdb.XLen(ctx, j.StreamKey(shard)).Result(); n != 1 {
			t.Fatalf("%d entries, want the legacy one only", n)
		}
	})
}

// TestLegacyMarkersEpoch: the shard's marker epoch says whether markers of
// the previous version may be there: a shard whose journal was empty at
// its first lookup has none ("0"), one that had entries honours them for
// a retention after its epoch, and not after.
func TestLegacyMarkersEpoch(t *testing.T) {
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	const retention = 2 * time.Hour
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 1, Retention: retention})
	first := ev("ws", "session:s", "first")
	if _, added, err := j.Append(ctx, first); err != nil || !added {
		t.Fatalf("append: %v %v", added, err)
	}
	epochKey := j.Keys(0).MarkerEpoch()
	if v, err := rdb.Get(ctx, epochKey).Result(); err != nil || v != "0" {
		t.Fatalf("epoch of a shard that had no entry = %q %v, want 0", v, err)
	}
	legacy := func(id string) (added bool) {
		t.Helper()
		e := ev("ws", "session:s", id)
		if err := rdb.Set(ctx, j.LegacyDedupKey(0, e.Source, e.ID), "1700000000000-0", time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		_, added, err := j.Append(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		return added
	}
	if !legacy("after-empty") {
		t.Error("a shard empty at its epoch honoured a legacy marker")
	}
	now := time.Now().Unix()
	for _, c := range []struct {
		epoch int64
		added bool
	}{
		{now - 60, false}, // within a retention of the epoch: honoured
		{now - int64(retention/time.Second) - 60, true}, // a retention past it: not read
	} {
		if err := rdb.Set(ctx, epochKey, c.epoch, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if got := legacy("epoch-" + strconv.FormatInt(c.epoch, 10)); got != c.added {
			t.Errorf("epoch %d s ago: appended %v, want %v", now-c.epoch, got, c.added)
		}
	}
	if err := rdb.Del(ctx, epochKey).Err(); err != nil {
		t.Fatal(err)
	}
	if legacy("no-epoch") {
		t.Error("a shard with entries and no epoch yet did not honour a legacy marker")
	}
	if v, _ := rdb.Get(ctx, epochKey).Int64(); v < now-5 {
		t.Errorf("epoch of a shard with entries = %d, want now (%d)", v, now)
	}
}
