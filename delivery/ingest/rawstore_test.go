package ingest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
)

// githubFixtures returns every GitHub payload example of testdata/github
// (relative path → body); none missing.
func githubFixtures(t *testing.T) map[string][]byte {
	t.Helper()
	root := "../../testdata/github"
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = b
		return nil
	})
	if err != nil || len(out) < 50 {
		t.Fatalf("fixtures under %s: %d (%v)", root, len(out), err)
	}
	return out
}

// allRecords reads every ingest record of s.
func allRecords(ctx context.Context, t *testing.T, rdb redis.UniversalClient, s *ingest.Store) map[int][]ingest.Record {
	t.Helper()
	out := map[int][]ingest.Record{}
	for shard := range s.Shards() {
		msgs, err := rdb.XRange(ctx, s.StreamKey(shard), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			out[shard] = append(out[shard], ingest.ParseRecord(shard, m))
		}
	}
	return out
}

// TestRawRoundTripEveryFixture: every GitHub payload example, committed as
// a JSON delivery and as a form-encoded one (its meta — event, content
// type, repository, when received — back as committed too), in the current format (twice
// each: the second commit finds the shared objects stored) and in the
// previous one (v1, written by the previous code's script), comes back
// byte for byte through Raws (the deriver) and Stored (an operator's
// redelivery), read by the process that wrote it and by a fresh one (no
// cached objects) — on real Redis and on the embedded miniredis.
func TestRawRoundTripEveryFixture(t *testing.T) {
	fixtures := githubFixtures(t)
	names := make([]string, 0, len(fixtures))
	for n := range fixtures {
		names = append(names, n)
	}
	sort.Strings(names)
	backends(t, func(t *testing.T, rdb redis.UniversalClient, j *journal.Journal) {
		ctx := context.Background()
		s := ingest.New(rdb, j)
		want := map[string][]byte{} // guid → body
		hookOf := map[string]string{}
		meta := map[string]ingest.Delivery{} // guid → event, content type, repo, received
		for i, name := range names {
			body := fixtures[name]
			form := []byte("payload=" + url.QueryEscape(string(body)))
			repo := fmt.Sprintf("org/repo%d", i%3) // shared objects recur across deliveries of a repository
			for k, v := range []struct {
				ct   string
				body []byte
				v1   bool
			}{{"application/json", body, false}, {"application/json", body, false},
				{"application/x-www-form-urlencoded", form, false}, {"application/json", body, true},
				{"application/x-www-form-urlencoded", form, true}} {
				d := ingest.Delivery{GUID: fmt.Sprintf("g-%d-%d", i, k), Event: strings.SplitN(name, string(filepath.Separator), 3)[1],
					Hook: "42", ContentType: v.ct, Repo: repo, Workspace: "ws", Body: v.body,
					Received: time.UnixMilli(1700000000123 + int64(i)).UTC(), Replay: k == 1}
				var got ingest.Outcome
				var err error
				if v.v1 {
					d.Hook = "41" // another dedup scope: the same body again
					d.Replay = false
					got, err = s.CommitV1(ctx, &d)
				} else {
					got, err = s.CommitDelivery(ctx, &d)
				}
				if err != nil || got != ingest.Committed {
					t.Fatalf("%s #%d: %v %v", name, k, got, err)
				}
				want[d.GUID], hookOf[d.GUID] = v.body, d.Hook
				meta[d.GUID] = ingest.Delivery{Event: d.Event, ContentType: d.ContentType, Repo: d.Repo, Received: d.Received}
			}
		}
		check := func(who string, s *ingest.Store) {
			n := 0
			for shard, recs := range allRecords(ctx, t, rdb, s) {
				ds, errs, err := s.Raws(ctx, shard, recs)
				if err != nil {
					t.Fatal(err)
				}
				for i, d := range ds {
					if errs[i] != nil {
						t.Fatalf("%s: Raws %s: %v", who, recs[i].GUID, errs[i])
					}
					if !bytes.Equal(d.Body, want[recs[i].GUID]) || d.GUID != recs[i].GUID || d.Hook != hookOf[recs[i].GUID] || d.Workspace != "ws" {
						t.Fatalf("%s: Raws %s: body of %d bytes differs from the %d committed (or guid %s hook %s workspace %s)", who, recs[i].GUID,
							len(d.Body), len(want[recs[i].GUID]), d.GUID, d.Hook, d.Workspace)
					}
					if m := meta[recs[i].GUID]; d.Event != m.Event || d.ContentType != m.ContentType || d.Repo != m.Repo || !d.Received.Equal(m.Received) {
						t.Fatalf("%s: Raws %s: event %q, content type %q, repo %q, received %v; committed %q, %q, %q, %v", who, recs[i].GUID,
							d.Event, d.ContentType, d.Repo, d.Received, m.Event, m.ContentType, m.Repo, m.Received)
					}
					n++
				}
				ingest.Release(ds)
			}
			if n != len(want) {
				t.Fatalf("%s: %d records read, %d committed", who, n, len(want))
			}
			for guid, body := range want {
				d, err := s.Stored(ctx, guid, "40", hookOf[guid])
				if err != nil || !bytes.Equal(d.Body, body) {
					t.Fatalf("%s: Stored %s: %v (%d bytes, want %d)", who, guid, err, len(d.Body), len(body))
				}
			}
		}
		check("the writer", s)
		check("a fresh process", ingest.New(rdb, j))
	})
}

// TestRawDedupAcrossFormats: a delivery committed by the previous code is
// still a duplicate for the current one, by GUID and by body.
func TestRawDedupAcrossFormats(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, j *journal.Journal) {
		ctx := context.Background()
		s := ingest.New(rdb, j)
		d := ingest.Delivery{GUID: "g1", Event: "pull_request", Hook: "42", ContentType: "application/json",
			Repo: "Codertocat/Hello-World", Workspace: "default", Body: fixture(t), Received: time.Unix(1700000000, 0)}
		if got, err := s.CommitV1(ctx, &d); err != nil || got != ingest.Committed {
			t.Fatalf("v1 commit: %v %v", got, err)
		}
		if got, err := s.CommitDelivery(ctx, &d); err != nil || got != ingest.DuplicateGUID {
			t.Fatalf("same GUID: %v %v, want DuplicateGUID", got, err)
		}
		if d2 := withGUID(d, "g2"); true {
			if got, err := s.CommitDelivery(ctx, &d2); err != nil || got != ingest.DuplicateBody {
				t.Fatalf("same body: %v %v, want DuplicateBody", got, err)
			}
		}
	})
}

// TestRawObjectGone: a shared object this process believes stored but
// that is gone (expired, or Redis lost it) is sent again: the commit
// succeeds and the body comes back whole.
func TestRawObjectGone(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, j *journal.Journal) {
		ctx := context.Background()
		s := ingest.New(rdb, j)
		body := fixture(t)
		d := ingest.Delivery{GUID: "g1", Event: "pull_request", Hook: "42", ContentType: "application/json",
			Repo: "Codertocat/Hello-World", Workspace: "default", Body: body, Received: time.Unix(1700000000, 0)}
		if got, err := s.CommitDelivery(ctx, &d); err != nil || got != ingest.Committed {
			t.Fatalf("first: %v %v", got, err)
		}
		keys := s.ObjectKeys(s.ShardOf(d.Repo), body)
		if len(keys) < 2 {
			t.Fatalf("pull_request/opened shares %d objects, want the repository and the user at least", len(keys))
		}
		ttl, err := rdb.TTL(ctx, keys[0]).Result()
		if err != nil || ttl < j.Config().Retention-time.Minute {
			t.Fatalf("object TTL %v (%v), want the retention %v", ttl, err, j.Config().Retention)
		}
		if err := rdb.Del(ctx, keys...).Err(); err != nil {
			t.Fatal(err)
		}
		d2 := withBody(withGUID(d, "g2"), append([]byte(" "), body...))
		if got, err := s.CommitDelivery(ctx, &d2); err != nil || got != ingest.Committed {
			t.Fatalf("after the objects went: %v %v", got, err)
		}
		got, err := ingest.New(rdb, j).Stored(ctx, "g2", "42")
		if err != nil || !bytes.Equal(got.Body, d2.Body) {
			t.Fatalf("g2 back: %v", err)
		}
		// g1's record references the same objects, stored again by g2
		got, err = ingest.New(rdb, j).Stored(ctx, "g1", "42")
		if err != nil || !bytes.Equal(got.Body, body) {
			t.Fatalf("g1 back: %v", err)
		}
	})
}

// TestRawObjectListGone: a record whose object list is not stored (Redis
// lost it) reads as not found, for the deriver and for a redelivery,
// never as another body; the other records of the batch still read.
func TestRawObjectListGone(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, j *journal.Journal) {
		ctx := context.Background()
		s := ingest.New(rdb, j)
		body := fixture(t)
		d := ingest.Delivery{GUID: "g1", Event: "pull_request", Hook: "42", ContentType: "application/json",
			Repo: "Codertocat/Hello-World", Workspace: "default", Body: body, Received: time.Unix(1700000000, 0)}
		d2 := ingest.Delivery{GUID: "g2", Event: "ping", Hook: "42", ContentType: "application/json",
			Repo: d.Repo, Workspace: "default", Body: []byte(`{"zen":"x"}`), Received: time.Unix(1700000000, 0)}
		for _, d := range []*ingest.Delivery{&d, &d2} {
			if got, err := s.CommitDelivery(ctx, d); err != nil || got != ingest.Committed {
				t.Fatalf("%s: %v %v", d.GUID, got, err)
			}
		}
		keys := s.ObjectKeys(s.ShardOf(d.Repo), body)
		if err := rdb.Del(ctx, keys[len(keys)-1]).Err(); err != nil { // the list
			t.Fatal(err)
		}
		fresh := ingest.New(rdb, j)
		if _, err := fresh.Stored(ctx, "g1", "42"); !errors.Is(err, ingest.ErrNotFound) {
			t.Fatalf("Stored with the object list gone: %v, want not found", err)
		}
		shard := s.ShardOf(d.Repo)
		recs := allRecords(ctx, t, rdb, s)[shard]
		ds, errs, err := fresh.Raws(ctx, shard, recs)
		if err != nil || len(ds) != 2 {
			t.Fatal(err, len(ds))
		}
		for i, rec := range recs {
			switch rec.GUID {
			case "g1":
				if !errors.Is(errs[i], ingest.ErrNotFound) || ds[i] != nil {
					t.Fatalf("Raws g1 with its object list gone: %v", errs[i])
				}
			default:
				if errs[i] != nil || string(ds[i].Body) != `{"zen":"x"}` {
					t.Fatalf("Raws %s beside it: %v", rec.GUID, errs[i])
				}
			}
		}
	})
}

// TestRawObjectKeepsItsRetention: a commit under a shorter retention (an
// operator lowered it) does not cut the TTL of a shared object that
// records written before, under the longer one, still reference.
func TestRawObjectKeepsItsRetention(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, j *journal.Journal) {
		ctx := context.Background()
		body := fixture(t)
		d := ingest.Delivery{GUID: "g1", Event: "pull_request", Hook: "42", ContentType: "application/json",
			Repo: "Codertocat/Hello-World", Workspace: "default", Body: body, Received: time.Unix(1700000000, 0)}
		long := ingest.New(rdb, j)
		if got, err := long.CommitDelivery(ctx, &d); err != nil || got != ingest.Committed {
			t.Fatalf("first: %v %v", got, err)
		}
		cfg := j.Config()
		cfg.Retention = time.Hour
		short := ingest.New(rdb, journal.New(rdb, cfg))
		d2 := withBody(withGUID(d, "g2"), append([]byte(" "), body...))
		if got, err := short.CommitDelivery(ctx, &d2); err != nil || got != ingest.Committed {
			t.Fatalf("second: %v %v", got, err)
		}
		for _, k := range long.ObjectKeys(long.ShardOf(d.Repo), body) {
			if ttl, err := rdb.TTL(ctx, k).Result(); err != nil || ttl < j.Config().Retention-time.Minute {
				t.Fatalf("object %s TTL %v (%v) after a commit under 1 h, want the %v g1 needs", k, ttl, err, j.Config().Retention)
			}
		}
	})
}

// TestRawDedupAcrossMarkers: a body committed by the v2 code (its marker
// the SHA-256 of the body) is a duplicate for the current code, whose
// marker hashes the stored form, while such markers may be there; a shard
// that had no ingest stream at its first stored-form marker never looks
// for them; and a retention and a day after the epoch they are no longer
// looked for.
func TestRawDedupAcrossMarkers(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, j *journal.Journal) {
		ctx := context.Background()
		d := ingest.Delivery{GUID: "g1", Event: "pull_request", Hook: "42", ContentType: "application/json",
			Repo: "Codertocat/Hello-World", Workspace: "default", Body: fixture(t), Received: time.Unix(1700000000, 0)}
		old := ingest.New(rdb, j)
		if got, err := old.CommitV2Markers(ctx, &d); err != nil || got != ingest.Committed {
			t.Fatalf("v2 commit: %v %v", got, err)
		}
		s := ingest.New(rdb, j)
		shard := s.ShardOf(d.Repo)
		if !s.LegacyMarkers(shard, time.Now()) {
			t.Fatal("a process that has not heard the shard's epoch must look for the markers of before")
		}
		d2 := withGUID(d, "g2")
		if got, err := s.CommitDelivery(ctx, &d2); err != nil || got != ingest.DuplicateBody {
			t.Fatalf("same body after the upgrade: %v %v, want DuplicateBody", got, err)
		}
		// the epoch is now: the v2 markers are looked for a retention (and a day) on
		if !s.LegacyMarkers(shard, time.Now().Add(j.Config().Retention)) {
			t.Fatal("markers of before no longer looked for within the retention after the epoch")
		}
		if s.LegacyMarkers(shard, time.Now().Add(j.Config().Retention+ingest.LegacyMarkerSlack+time.Minute)) {
			t.Fatal("markers of before still looked for past the retention and a day")
		}
		// a body committed by the current code: its own marker
		d3 := withBody(withGUID(d, "g3"), append([]byte(" "), d.Body...))
		if got, err := s.CommitDelivery(ctx, &d3); err != nil || got != ingest.Committed {
			t.Fatalf("a new body: %v %v", got, err)
		}
		d4 := withGUID(d3, "g4")
		if got, err := ingest.New(rdb, j).CommitDelivery(ctx, &d4); err != nil || got != ingest.DuplicateBody {
			t.Fatalf("its replay: %v %v, want DuplicateBody", got, err)
		}
		// an epoch older than a retention and a day: v2 markers are not looked for
		epochKey := s.Tag(shard) + ":bsepoch"
		past := time.Now().Add(-j.Config().Retention - ingest.LegacyMarkerSlack - time.Hour).UnixMilli()
		if err := rdb.Set(ctx, epochKey, fmt.Sprint(past), 0).Err(); err != nil {
			t.Fatal(err)
		}
		d5 := withBody(withGUID(d, "g5"), append([]byte("  "), d.Body...))
		if got, err := old.CommitV2Markers(ctx, &d5); err != nil || got != ingest.Committed {
			t.Fatalf("v2 commit: %v %v", got, err)
		}
		late := ingest.New(rdb, j)
		d6 := withGUID(d5, "g6")
		if got, err := late.CommitDelivery(ctx, &d6); err != nil || got != ingest.DuplicateBody {
			t.Fatalf("first commit of a process (it has not heard the epoch): %v %v, want DuplicateBody", got, err)
		}
		if late.LegacyMarkers(shard, time.Now()) {
			t.Fatal("markers of before looked for past the epoch's retention and a day")
		}
	})
}

// TestBodyMarksAcrossVersions: the body marker is a member of the
// shard's period sets (an intset, no key of its own); a body whose marker
// main's code wrote ("<in>:bs:<hash>", value 1, beside an ingest record)
// is a duplicate for the current code while such keys may be there, that
// is for a retention and a day after the shard's first body mark, and is
// not looked for after.
func TestBodyMarksAcrossVersions(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, j *journal.Journal) {
		ctx := context.Background()
		d := ingest.Delivery{GUID: "g1", Event: "pull_request", Hook: "42", ContentType: "application/json",
			Repo: "Codertocat/Hello-World", Workspace: "default", Body: fixture(t), Received: time.Unix(1700000000, 0)}
		s := ingest.New(rdb, j)
		shard := s.ShardOf(d.Repo)
		in := s.Keys(shard)
		// main's commit: its record in the stream, its marker a key
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: s.StreamKey(shard), Values: []any{"g", "g0", "h", "42", "r", "0"}}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Set(ctx, in.StoredBodyMarker(ingest.BodyMark(&d)), "1", time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		if got, err := s.CommitDelivery(ctx, &d); err != nil || got != ingest.DuplicateBody {
			t.Fatalf("a body main's code marked: %v %v, want DuplicateBody", got, err)
		}
		if !s.LegacyBodyMarkers(shard, time.Now().Add(j.Config().Retention)) {
			t.Fatal("main's body markers no longer looked for within the retention after the epoch")
		}
		if s.LegacyBodyMarkers(shard, time.Now().Add(j.Config().Retention+ingest.LegacyMarkerSlack+time.Minute)) {
			t.Fatal("main's body markers still looked for past the retention and a day")
		}
		// a body the current code commits: a member of the period's set
		d2 := withBody(withGUID(d, "g2"), append([]byte(" "), d.Body...))
		if got, err := s.CommitDelivery(ctx, &d2); err != nil || got != ingest.Committed {
			t.Fatalf("a new body: %v %v", got, err)
		}
		mark := ingest.BodyMark(&d2)
		if n, _ := rdb.Exists(ctx, in.StoredBodyMarker(mark)).Result(); n != 0 {
			t.Fatal("the commit wrote a body marker key of its own")
		}
		start := redistest.MarkerPeriod(t, rdb, j.Config().Retention)
		member := ingest.BodyMarkNumber(&d2)
		if ok, err := rdb.SIsMember(ctx, in.BodyMarks().Bucket(start, 0), member).Result(); err != nil || !ok {
			t.Fatalf("the body's mark is not in its period's set: %v %v", ok, err)
		}
		if got, err := ingest.New(rdb, j).CommitDelivery(ctx, &d2); err != nil || got != ingest.DuplicateGUID {
			t.Fatalf("the same delivery again: %v %v", got, err)
		}
		d3 := withGUID(d2, "g3")
		if got, err := ingest.New(rdb, j).CommitDelivery(ctx, &d3); err != nil || got != ingest.DuplicateBody {
			t.Fatalf("its body under a fresh GUID: %v %v, want DuplicateBody", got, err)
		}
		// an epoch older than a retention and a day: main's keys are not read
		past := time.Now().Add(-j.Config().Retention - ingest.LegacyMarkerSlack - time.Hour).UnixMilli()
		if err := rdb.Set(ctx, in.BodyMarksEpoch(), fmt.Sprint(past), 0).Err(); err != nil {
			t.Fatal(err)
		}
		d4 := withBody(withGUID(d, "g4"), append([]byte("  "), d.Body...))
		if err := rdb.Set(ctx, in.StoredBodyMarker(ingest.BodyMark(&d4)), "1", time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		late := ingest.New(rdb, j)
		d5 := withGUID(d, "g5")
		if got, err := late.CommitDelivery(ctx, &d5); err != nil || got != ingest.DuplicateBody {
			t.Fatalf("first commit of a process (it has not heard the epoch) of the body main's code marked: %v %v, want DuplicateBody", got, err)
		}
		if got, err := late.CommitDelivery(ctx, &d4); err != nil || got != ingest.Committed {
			t.Fatalf("a body marked by main's code past the epoch's retention and a day: %v %v, want Committed", got, err)
		}
	})
}

// TestBodyMarkBuckets: 3,000 bodies committed in one period grow the
// shard's body-marker sets by linear hashing to 1 + 3,000/128 buckets,
// every one an intset; each body is then a duplicate under a fresh GUID,
// its member in the bucket journal.LinearBucket names, and 3,000 bodies
// never committed are not (on real Redis: OBJECT ENCODING).
func TestBodyMarkBuckets(t *testing.T) {
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 4})
	s := ingest.New(rdb, j)
	const n = 3000
	d := ingest.Delivery{Event: "ping", Hook: "42", ContentType: "application/json",
		Repo: "Codertocat/Hello-World", Workspace: "default", Received: time.Unix(1700000000, 0)}
	body := func(i int) []byte { return []byte(`{"zen":"body ` + strconv.Itoa(i) + `"}`) }
	for i := range n {
		di := withBody(withGUID(d, "g"+strconv.Itoa(i)), body(i))
		if got, err := s.CommitDelivery(ctx, &di); err != nil || got != ingest.Committed {
			t.Fatalf("commit %d: %v %v", i, got, err)
		}
	}
	shard := s.ShardOf(d.Repo)
	marks := s.Keys(shard).BodyMarks()
	start := redistest.MarkerPeriod(t, rdb, j.Config().Retention)
	redistest.MarkerBuckets(t, rdb, marks.Count(start), n, journal.BodyMarkFill, false)
	for i := range n {
		di := withBody(withGUID(d, "again"+strconv.Itoa(i)), body(i))
		m := ingest.BodyMarkNumber(&di)
		if ok, _ := rdb.SIsMember(ctx, marks.Bucket(start, journal.LinearBucket(m, n, journal.BodyMarkFill)), m).Result(); !ok {
			t.Fatalf("body %d's member is not in its bucket", i)
		}
	}
	for i := range n {
		di := withBody(withGUID(d, "again"+strconv.Itoa(i)), body(i))
		if i%5 == 0 {
			if got, err := s.CommitDelivery(ctx, &di); err != nil || got != ingest.DuplicateBody {
				t.Fatalf("body %d under a fresh GUID: %v %v, want DuplicateBody", i, got, err)
			}
		}
		if i%3 == 0 {
			dn := withBody(withGUID(d, "new"+strconv.Itoa(i)), body(n+i))
			if got, err := s.CommitDelivery(ctx, &dn); err != nil || got != ingest.Committed {
				t.Fatalf("a body never committed: %v %v, want Committed", got, err)
			}
		}
	}
	// a split at 2^20 + 5 buckets: bucket 5's members whose bit 20 is set
	// move to bucket 2^20 + 5, by the script's exact mod 2^28 of a 63-bit
	// member (from its decimal digits), as Go's LinearBucket says
	const atSplit = 128*(1<<20+5) - 1
	if err := rdb.Set(ctx, marks.Count(start), atSplit, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	moved := []any{-1}
	for i := range 64 {
		moved = append(moved, uint64(i+1)*0x9E3779B97F4A7C15>>1&^(1<<20-1)|5)
	}
	if err := rdb.SAdd(ctx, marks.Bucket(start, 5), moved...).Err(); err != nil {
		t.Fatal(err)
	}
	dn := withBody(withGUID(d, "split"), body(20*n))
	if got, err := s.CommitDelivery(ctx, &dn); err != nil || got != ingest.Committed {
		t.Fatalf("the commit that splits: %v %v", got, err)
	}
	for _, v := range moved[1:] {
		m := v.(uint64)
		b := journal.LinearBucket(m, atSplit+1, journal.BodyMarkFill)
		if ok, _ := rdb.SIsMember(ctx, marks.Bucket(start, b), m).Result(); !ok {
			t.Fatalf("member %d is not in bucket %d after the split", m, b)
		}
	}
	// at 2^26 buckets the high bits of the member's 28 pick the bucket:
	// the script's exact mod 2^28 of a 63-bit member agrees with Go's
	const big = 128<<26 + 12345*128
	if err := rdb.Set(ctx, marks.Count(start), big, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		di := withBody(withGUID(d, "big"+strconv.Itoa(i)), body(10*n+i))
		m := ingest.BodyMarkNumber(&di)
		if err := rdb.SAdd(ctx, marks.Bucket(start, journal.LinearBucket(m, big, journal.BodyMarkFill)), -1, m).Err(); err != nil {
			t.Fatal(err)
		}
		if got, err := s.CommitDelivery(ctx, &di); err != nil || got != ingest.DuplicateBody {
			t.Fatalf("body %d marked in bucket %d of %d: %v %v, want DuplicateBody", i, journal.LinearBucket(m, big, journal.BodyMarkFill), 1+big/journal.BodyMarkFill, got, err)
		}
	}
}

// TestRawMarkerEpochFresh: a shard whose first commit finds no ingest
// record (a new deployment, whose workers have made the streams' consumer
// groups) has no markers of before to look for.
func TestRawMarkerEpochFresh(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, j *journal.Journal) {
		ctx := context.Background()
		s := ingest.New(rdb, j)
		d := ingest.Delivery{GUID: "g1", Event: "pull_request", Hook: "42", ContentType: "application/json",
			Repo: "Codertocat/Hello-World", Workspace: "default", Body: fixture(t), Received: time.Unix(1700000000, 0)}
		if err := rdb.XGroupCreateMkStream(ctx, s.StreamKey(s.ShardOf(d.Repo)), "derive", "0").Err(); err != nil {
			t.Fatal(err)
		}
		if got, err := s.CommitDelivery(ctx, &d); err != nil || got != ingest.Committed {
			t.Fatalf("first: %v %v", got, err)
		}
		if v, err := rdb.Get(ctx, s.Tag(s.ShardOf(d.Repo))+":bsepoch").Result(); err != nil || v != "0" {
			t.Fatalf("epoch of a fresh shard %q (%v), want 0", v, err)
		}
		if s.LegacyMarkers(s.ShardOf(d.Repo), time.Now()) {
			t.Fatal("a fresh shard's commits look for markers of before")
		}
		d2 := withGUID(d, "g2")
		if got, err := s.CommitDelivery(ctx, &d2); err != nil || got != ingest.DuplicateBody {
			t.Fatalf("replay: %v %v, want DuplicateBody", got, err)
		}
	})
}

// TestRawObjectRefresh: a shared object is stored for the retention and a
// day; a process that gave it that TTL lately only checks it is there,
// and refreshes it again once it is due, so an object always outlives the
// records committed.
func TestRawObjectRefresh(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, j *journal.Journal) {
		ctx := context.Background()
		s := ingest.New(rdb, j)
		body := fixture(t)
		d := ingest.Delivery{GUID: "g1", Event: "pull_request", Hook: "42", ContentType: "application/json",
			Repo: "Codertocat/Hello-World", Workspace: "default", Body: body, Received: time.Unix(1700000000, 0)}
		if got, err := s.CommitDelivery(ctx, &d); err != nil || got != ingest.Committed {
			t.Fatalf("first: %v %v", got, err)
		}
		retention := j.Config().Retention
		keys := s.ObjectKeys(s.ShardOf(d.Repo), body)
		for _, k := range keys {
			if ttl, err := rdb.TTL(ctx, k).Result(); err != nil || ttl < retention+ingest.ObjectRefresh {
				t.Fatalf("object %s TTL %v (%v), want the retention and more than %v", k, ttl, err, ingest.ObjectRefresh)
			}
			if err := rdb.Expire(ctx, k, time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
		}
		// refreshed lately: checked only
		d2 := withBody(withGUID(d, "g2"), append([]byte(" "), body...))
		if got, err := s.CommitDelivery(ctx, &d2); err != nil || got != ingest.Committed {
			t.Fatalf("second: %v %v", got, err)
		}
		if ttl, err := rdb.TTL(ctx, keys[0]).Result(); err != nil || ttl > time.Hour {
			t.Fatalf("object TTL %v (%v) after a commit within %v of its refresh, want it left as it was", ttl, err, ingest.ObjectRefresh)
		}
		// due: refreshed
		s.AgeKnown(ingest.ObjectRefresh + time.Minute)
		d3 := withBody(withGUID(d, "g3"), append([]byte("  "), body...))
		if got, err := s.CommitDelivery(ctx, &d3); err != nil || got != ingest.Committed {
			t.Fatalf("third: %v %v", got, err)
		}
		for _, k := range keys {
			if ttl, err := rdb.TTL(ctx, k).Result(); err != nil || ttl < retention+ingest.ObjectRefresh {
				t.Fatalf("object %s TTL %v (%v) after a commit past its refresh, want it refreshed", k, ttl, err)
			}
		}
		// refreshed lately again: a missing one is still noticed and stored
		if err := rdb.Del(ctx, keys[len(keys)-1]).Err(); err != nil {
			t.Fatal(err)
		}
		d4 := withBody(withGUID(d, "g4"), append([]byte("   "), body...))
		if got, err := s.CommitDelivery(ctx, &d4); err != nil || got != ingest.Committed {
			t.Fatalf("fourth: %v %v", got, err)
		}
		if got, err := ingest.New(rdb, j).Stored(ctx, "g4", "42"); err != nil || !bytes.Equal(got.Body, d4.Body) {
			t.Fatalf("g4 back: %v", err)
		}
	})
}
