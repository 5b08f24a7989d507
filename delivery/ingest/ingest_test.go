package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/providers/event"
)

// backends runs a test on real Redis and on miniredis (the embedded serve).
func backends(t *testing.T, f func(t *testing.T, rdb redis.UniversalClient, j *journal.Journal)) {
	redistest.Backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		f(t, rdb, journal.New(rdb, journal.Config{Prefix: prefix, Shards: 4}))
	})
}

func fixture(t *testing.T) []byte {
	b, err := os.ReadFile("../../testdata/github/octokit/pull_request/opened.payload.json")
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return b
}

func TestCommitDelivery(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, j *journal.Journal) {
		ctx := context.Background()
		s := ingest.New(rdb, j)
		body := fixture(t)
		d := &ingest.Delivery{GUID: "g1", Event: "pull_request", Hook: "42", ContentType: "application/json",
			Repo: "Codertocat/Hello-World", Workspace: "default", Body: body, Received: time.Unix(1700000000, 0)}
		steps := []struct {
			name string
			d    ingest.Delivery
			want ingest.Outcome
		}{
			{"first", *d, ingest.Committed},
			{"same guid again (a redelivery)", *d, ingest.DuplicateGUID},
			{"same body under a fresh guid (a replay)", withGUID(*d, "g2"), ingest.DuplicateBody},
			{"same guid from another hook", withHook(withBody(*d, append([]byte(" "), body...)), "43"), ingest.Committed},
			{"operator redelivery passes", withReplay(*d), ingest.Committed},
		}
		for _, st := range steps {
			got, err := s.CommitDelivery(ctx, &st.d)
			if err != nil || got != st.want {
				t.Fatalf("%s: outcome %v err %v, want %v", st.name, got, err, st.want)
			}
		}
		// Three ingest records: first, other hook, replay; the duplicates wrote none.
		n := 0
		for shard := range s.Shards() {
			msgs, err := rdb.XRange(ctx, s.StreamKey(shard), "-", "+").Result()
			if err != nil {
				t.Fatal(err)
			}
			var recs []ingest.Record
			for _, m := range msgs {
				recs = append(recs, ingest.ParseRecord(shard, m))
			}
			if len(recs) == 0 {
				continue
			}
			raws, errs, err := s.Raws(ctx, shard, append(recs, ingest.Record{Shard: shard, GUID: "gone", Hook: "1"}))
			if err != nil {
				t.Fatal(err)
			}
			for i, raw := range raws[:len(recs)] {
				n++
				if errs[i] != nil || raw.Event != "pull_request" || raw.Workspace != "default" || len(raw.Body) < len(body) {
					t.Fatalf("raw round trip of %+v: %+v %v", recs[i], raw, errs[i])
				}
			}
			if !errors.Is(errs[len(recs)], ingest.ErrNotFound) {
				t.Fatalf("missing raw delivery: %v", errs[len(recs)])
			}
		}
		if n != 3 {
			t.Fatalf("%d ingest records, want 3", n)
		}
		ignored := withGUID(withBody(*d, []byte(`{"zen":"x"}`)), "g9")
		ignored.Ignored = "event not mapped"
		if got, err := s.CommitDelivery(ctx, &ignored); err != nil || got != ingest.Committed {
			t.Fatalf("ignored: %v %v", got, err)
		}
	})
}

// TestRecordCarriesTheFact: the ingest record of a delivery to derive
// carries its normalized fact and workspace; an ignored delivery writes no
// record, fact or not.
func TestRecordCarriesTheFact(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, j *journal.Journal) {
		ctx := context.Background()
		s := ingest.New(rdb, j)
		d := ingest.Delivery{GUID: "g1", Event: "pull_request", Hook: "42", ContentType: "application/json",
			Repo: "o/r", Workspace: "ws", Body: fixture(t), Received: time.Unix(1700000000, 0), Fact: []byte(`{"Event":"pull_request"}`)}
		ignored := withBody(withGUID(d, "g2"), []byte(`{}`))
		ignored.Ignored = "event not mapped"
		for _, d := range []ingest.Delivery{d, ignored} {
			if got, err := s.CommitDelivery(ctx, &d); err != nil || got != ingest.Committed {
				t.Fatalf("%s: %v %v", d.GUID, got, err)
			}
		}
		var recs []ingest.Record
		for shard := range s.Shards() {
			msgs, err := rdb.XRange(ctx, s.StreamKey(shard), "-", "+").Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				recs = append(recs, ingest.ParseRecord(shard, m))
			}
		}
		if len(recs) != 1 || recs[0].GUID != "g1" || recs[0].Workspace != "ws" || string(recs[0].Fact) != string(d.Fact) {
			t.Fatalf("records %+v, want g1's with its fact", recs)
		}
	})
}

func withGUID(d ingest.Delivery, g string) ingest.Delivery { d.GUID = g; return d }
func withHook(d ingest.Delivery, h string) ingest.Delivery { d.Hook = h; return d }
func withBody(d ingest.Delivery, b []byte) ingest.Delivery { d.Body = b; return d }
func withReplay(d ingest.Delivery) ingest.Delivery         { d.Replay = true; return d }

func agentEvent(ws, pusher, session, id, typ string) *event.Event {
	return &event.Event{SpecVersion: "1.0", ID: id, Source: event.AgentSource(ws, pusher), Type: typ,
		Subject: event.SessionSubject(session), Workspace: ws, SessionID: session, Time: time.Unix(1700000000, 0).UTC(),
		Priority: event.Info, CoalesceKey: event.SessionSubject(session)}
}

func TestCommitEvents(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, j *journal.Journal) {
		ctx := context.Background()
		s := ingest.New(rdb, j)
		reg := sessions.New(rdb, j, time.Minute)
		now := time.Now()
		// The parent spawns a child; the child then pushes about itself.
		res, err := s.CommitEvents(ctx, "ws", "session:boss", []ingest.Item{
			{Event: agentEvent("ws", "session:boss", "boss", "1", "session.spawned"), Journal: true},
		}, now)
		if err != nil || res[0].Duplicate {
			t.Fatalf("spawn boss: %+v %v", res, err)
		}
		lineage, err := reg.LineageFor(ctx, "ws", "kid", "boss", now)
		if err != nil {
			t.Fatal(err)
		}
		items := []ingest.Item{
			{Event: agentEvent("ws", "session:kid", "kid", "1", "session.spawned"), Parent: "boss", Lineage: lineage, Labels: []string{"team-a"}, Journal: true},
			{Event: agentEvent("ws", "session:kid", "kid", "2", "session.turn_started"), Journal: true},
			{Event: agentEvent("ws", "session:kid", "kid", "hb", "session.heartbeat"), Journal: false},
		}
		res, err = s.CommitEvents(ctx, "ws", "session:kid", items, now)
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Duplicate || res[1].Duplicate || res[0].Seq == "" || res[2].Seq != "" {
			t.Fatalf("results %+v", res)
		}
		// Same push again: duplicates, same seqs, nothing applied twice.
		again, err := s.CommitEvents(ctx, "ws", "session:kid", items, now)
		if err != nil || !again[0].Duplicate || again[0].Seq != res[0].Seq || again[1].Seq != res[1].Seq {
			t.Fatalf("retry: %+v %v (first %+v)", again, err, res)
		}
		e, err := j.Get(ctx, res[1].Seq)
		if err != nil || e == nil {
			t.Fatalf("get: %v %v", e, err)
		}
		if fmt.Sprint([]string(e.Lineage)) != "[boss]" {
			t.Fatalf("lineage stamped %v, want [boss]", e.Lineage)
		}
		// A grandchild's lineage is one string, nearest first (docs/design.md §2).
		gl, err := reg.LineageFor(ctx, "ws", "grandkid", "kid", now)
		if err != nil {
			t.Fatal(err)
		}
		gres, err := s.CommitEvents(ctx, "ws", "session:grandkid", []ingest.Item{{Event: agentEvent("ws", "session:grandkid", "grandkid", "1", "session.spawned"),
			Parent: "kid", Lineage: gl, Journal: true}}, now)
		if err != nil {
			t.Fatal(err)
		}
		shard, sid, _ := journal.ParseSeq(gres[0].Seq)
		msgs, err := rdb.XRange(ctx, j.StreamKey(shard), sid, sid).Result()
		if err != nil || len(msgs) != 1 || !strings.Contains(msgs[0].Values["e"].(string), `"lineage":"kid boss"`) {
			t.Fatalf("grandchild's stored event %+v %v, want lineage \"kid boss\"", msgs, err)
		}
		kid, err := reg.Get(ctx, "ws", "session:kid", now)
		if err != nil {
			t.Fatal(err)
		}
		if kid.Parent != "boss" || kid.Busy != "busy" || kid.Liveness != sessions.Live || fmt.Sprint(kid.Labels) != "[team-a]" {
			t.Fatalf("kid record %+v", kid)
		}
		// Events of other kinds about a session leave its lifecycle state alone.
		msg := agentEvent("ws", "session:boss", "kid", "m1", "message.sent")
		if _, err := s.CommitEvents(ctx, "ws", "session:boss", []ingest.Item{{Event: msg, Journal: true}}, now); err != nil {
			t.Fatal(err)
		}
		if kid, _ = reg.Get(ctx, "ws", "session:kid", now); kid.State != "session.turn_started" {
			t.Fatalf("a message changed kid's state to %q", kid.State)
		}
		// A second parent is never recorded.
		other := agentEvent("ws", "session:kid", "kid", "3", "session.spawned")
		if _, err := s.CommitEvents(ctx, "ws", "session:kid", []ingest.Item{{Event: other, Parent: "x", Lineage: []string{"x"}, Journal: true}}, now); err != nil {
			t.Fatal(err)
		}
		if kid, _ = reg.Get(ctx, "ws", "session:kid", now); kid.Parent != "boss" {
			t.Fatalf("parent changed to %q", kid.Parent)
		}
		if _, err := reg.LineageFor(ctx, "ws", "boss", "kid", now); err == nil {
			t.Fatal("a cycle boss→kid→boss was not refused")
		}
		// An exit is terminal: the subject gets its compact record, the
		// session is dead.
		exit := agentEvent("ws", "session:kid", "kid", "4", "session.exited")
		exit.Terminal, exit.Summary = true, "done"
		res, err = s.CommitEvents(ctx, "ws", "session:kid", []ingest.Item{{Event: exit, Journal: true}}, now)
		if err != nil {
			t.Fatal(err)
		}
		term, err := j.TerminalOf(ctx, "ws", "session:kid")
		if err != nil || term == nil || term.Type != "session.exited" || term.Summary != "done" || term.Seq != res[0].Seq {
			t.Fatalf("terminal record %+v, %v", term, err)
		}
		if kid, _ = reg.Get(ctx, "ws", "session:kid", now); kid.Liveness != sessions.Dead {
			t.Fatalf("exited kid is %s", kid.Liveness)
		}
		if term, _ := j.TerminalOf(ctx, "ws", "session:boss"); term != nil {
			t.Fatalf("boss has a terminal record %+v", term)
		}
		// Liveness: silent past the TTL is dead; exited is dead.
		if kid, _ = reg.Get(ctx, "ws", "session:kid", now.Add(2*time.Minute)); kid.Liveness != sessions.Dead {
			t.Fatalf("silent kid is %s", kid.Liveness)
		}
		if u, _ := reg.Get(ctx, "ws", "session:never", now); u.Liveness != sessions.Unknown || u.Busy != "unknown" {
			t.Fatalf("never-seen party %+v", u)
		}
	})
}

// A batch about sessions on several journal shards commits whole: as one
// script per shard after its record; a record whose parts were never
// applied is applied by RecoverBatches, once, and then deleted.
func TestCommitEventsAcrossShards(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, j *journal.Journal) {
		ctx := context.Background()
		s := ingest.New(rdb, j)
		now := time.Now()
		var items []ingest.Item
		shards := map[int]bool{}
		for i := 0; len(shards) < 3; i++ {
			sid := fmt.Sprintf("s%d", i)
			shards[j.ShardOf("ws", event.SessionSubject(sid))] = true
			items = append(items, ingest.Item{Event: agentEvent("ws", "human:ops", sid, "e"+sid, "session.turn_started"), Journal: true})
		}
		res, err := s.CommitEvents(ctx, "ws", "human:ops", items, now)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			e, err := j.Get(ctx, r.Seq)
			if err != nil || e == nil || r.Duplicate || e.ID != items[i].Event.ID {
				t.Fatalf("item %d: %+v → %+v %v", i, r, e, err)
			}
		}
		again, err := s.CommitEvents(ctx, "ws", "human:ops", items, now)
		if err != nil || !again[0].Duplicate || again[len(again)-1].Seq != res[len(res)-1].Seq {
			t.Fatalf("again: %+v %v", again, err)
		}
		for sh := range 4 {
			if n := rdb.XLen(ctx, j.Tag(sh)+":batches").Val(); n != 0 {
				t.Fatalf("shard %d keeps %d batch records after the commit", sh, n)
			}
		}

		// Stopped after the record: nothing journaled until recovery.
		var lost []ingest.Item
		for _, it := range items {
			e := *it.Event
			e.ID = "lost-" + e.ID
			lost = append(lost, ingest.Item{Event: &e, Journal: true})
		}
		if err := s.RecordOnly(ctx, "ws", "human:ops", lost, now); err != nil {
			t.Fatal(err)
		}
		if n, err := s.RecoverBatches(ctx, time.Now(), time.Hour); err != nil || n != 0 {
			t.Fatalf("a record within its grace recovered: %d %v", n, err)
		}
		if n, err := s.RecoverBatches(ctx, time.Now().Add(time.Minute), 30*time.Second); err != nil || n != 1 {
			t.Fatalf("recovered %d records (%v), want 1", n, err)
		}
		for _, it := range lost {
			if seq, err := j.Lookup(ctx, "ws", it.Event.Subject, it.Event.Source, it.Event.ID); err != nil || seq == "" {
				t.Fatalf("%s not journaled by recovery: %q %v", it.Event.ID, seq, err)
			}
		}
		if n, err := s.RecoverBatches(ctx, time.Now().Add(time.Minute), 30*time.Second); err != nil || n != 0 {
			t.Fatalf("recovered again: %d %v", n, err)
		}
	})
}
