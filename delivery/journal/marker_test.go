package journal_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
)

// markerOf is where journal.lua keeps (source, id)'s marker of the period
// starting at start (docs/design.md §2, "The dedup window").
func markerOf(j *journal.Journal, shard int, start int64, source, id string) (key, field string) {
	h := hex.EncodeToString(func() []byte { s := sha1.Sum([]byte(source + "\x00" + id)); return s[:] }())
	return j.Keys(shard).Markers(start, h[:2]), h[2:22]
}

// TestDedupMarkers: an append leaves its (source, id) marker as a field of
// the hash of its period (no key of its own), which lives at least the
// retention and at most a period more; a second append of the pair, Lookup
// and Find all answer the first entry.
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
	key, field := markerOf(j, shard, start, e.Source, e.ID)
	v, err := rdb.HGet(ctx, key, field).Result()
	if err != nil {
		t.Fatalf("no marker in %s: %v", key, err)
	}
	ms, _ := strconv.ParseInt(strings.TrimSuffix(sid, "-0"), 10, 64)
	if v != strconv.FormatInt(ms-start*1000, 10) {
		t.Errorf("marker value %q for stream id %s in the period of %d", v, sid, start)
	}
	ttl, err := rdb.TTL(ctx, key).Result()
	if err != nil || ttl < retention-time.Minute || ttl > retention+time.Duration(period)*time.Second {
		t.Errorf("the markers' hash expires in %v, want between the retention and a period (%ds) more", ttl, period)
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
}

// TestDedupMarkersOfEarlierPeriods: a marker two periods old (the oldest
// a hash may still hold) is honoured, by appends (the agent commit's and
// the tracker's use the same Lua) and readers, whatever form its value
// has; one three periods old is past the window and is not looked for.
func TestDedupMarkersOfEarlierPeriods(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		const retention = 2 * time.Hour // periods of an hour
		j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 2, Retention: retention})
		now := time.Now().Unix()
		cur := now - now%3600
		for _, c := range []struct {
			id      string
			periods int64
			value   string
			want    string // the stream id found; "" = appended anew
		}{
			{"old-1", 2, "5", strconv.FormatInt((cur-2*3600)*1000+5, 10) + "-0"},
			{"old-2", 1, "1700000000000-3", "1700000000000-3"},
			{"old-3", 3, "5", ""},
		} {
			e := ev("ws", "session:s", c.id)
			shard := j.ShardOf(e.Workspace, e.Subject)
			key, field := markerOf(j, shard, cur-c.periods*3600, e.Source, e.ID)
			if err := rdb.HSet(ctx, key, field, c.value).Err(); err != nil {
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
