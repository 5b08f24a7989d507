package derive_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/github"
	"github.com/wakegate/wakegate/workers/derive"
)

type env struct {
	ctx   context.Context
	rdb   *redis.Client
	j     *journal.Journal
	store *ingest.Store
	d     *derive.Deriver
}

func newEnv(t *testing.T) *env {
	rdb, prefix := redistest.New(t)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 2})
	store := ingest.New(rdb, j)
	tr := tracker.New(rdb, j, tracker.Config{})
	d := derive.New(rdb, store, tr, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry(), derive.Config{MaxRuns: 3})
	return &env{context.Background(), rdb, j, store, d}
}

func (e *env) commit(t *testing.T, guid, event string, body []byte) {
	t.Helper()
	e.commitFact(t, guid, event, body, nil)
}

// commitFact commits a delivery whose ingest record carries fact, as the
// gateway commits those it normalized.
func (e *env) commitFact(t *testing.T, guid, event string, body, fact []byte) {
	t.Helper()
	out, err := e.store.CommitDelivery(e.ctx, &ingest.Delivery{GUID: guid, Event: event, Hook: "1", ContentType: "application/json",
		Repo: "Codertocat/Hello-World", Workspace: "default", Body: body, Received: time.Now(), Fact: fact})
	if err != nil || out != ingest.Committed {
		t.Fatalf("commit %s: %v %v", guid, out, err)
	}
}

// crash reads every ingest record as a consumer that then dies: the
// records stay pending, as after a SIGKILL between commit and derivation.
func (e *env) crash(t *testing.T) {
	t.Helper()
	for s := range e.store.Shards() {
		_ = e.rdb.XGroupCreateMkStream(e.ctx, e.store.StreamKey(s), "derive", "0").Err()
		if err := e.rdb.XReadGroup(e.ctx, &redis.XReadGroupArgs{Group: "derive", Consumer: "dead",
			Streams: []string{e.store.StreamKey(s), ">"}, Count: 100, Block: -1}).Err(); err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
	}
}

func (e *env) relay(t *testing.T) int {
	t.Helper()
	n := 0
	for s := range e.store.Shards() {
		k, err := e.d.Relay(e.ctx, s, 0)
		if err != nil {
			t.Fatal(err)
		}
		n += k
	}
	return n
}

func (e *env) count(t *testing.T, typ string) int {
	t.Helper()
	evs, _, err := e.j.Read(e.ctx, make(journal.Cursor, 2), journal.Filter{Workspace: "default"}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

func fixture(t *testing.T, path string) []byte {
	b, err := os.ReadFile("../../testdata/github/octokit/" + path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRelayRederivesAfterACrash(t *testing.T) {
	e := newEnv(t)
	e.commit(t, "g-opened", "pull_request", fixture(t, "pull_request/opened.payload.json"))
	e.crash(t)
	if n := e.count(t, "github.pull_request.opened"); n != 0 {
		t.Fatalf("journaled before derivation: %d", n)
	}
	if n := e.relay(t); n != 1 {
		t.Fatalf("relay ran %d records, want 1", n)
	}
	if n := e.count(t, "github.pull_request.opened"); n != 1 {
		t.Fatalf("opened journaled %d times after the relay, want 1", n)
	}
	// Acknowledged: nothing is pending, a second relay runs nothing.
	if n := e.relay(t); n != 0 {
		t.Fatalf("second relay ran %d records", n)
	}
}

func TestPoisonIsSetAsideWithItsReason(t *testing.T) {
	e := newEnv(t)
	// Signed and committed, but not a pull_request payload wakegate can read.
	e.commit(t, "g-bad", "pull_request", []byte(`{"action":"opened","repository":{"full_name":"Codertocat/Hello-World"}}`))
	e.commit(t, "g-good", "pull_request", fixture(t, "pull_request/reopened.payload.json"))
	e.crash(t)
	e.relay(t)
	if n := e.count(t, "github.pull_request.reopened"); n != 1 {
		t.Fatalf("the good delivery journaled %d times, want 1", n)
	}
	var poison []redis.XMessage
	for s := range e.store.Shards() {
		msgs, err := e.rdb.XRange(e.ctx, e.store.Tag(s)+":poison", "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		poison = append(poison, msgs...)
	}
	if len(poison) != 1 || poison[0].Values["g"] != "g-bad" || poison[0].Values["reason"] == "" {
		t.Fatalf("poison %+v, want g-bad with a reason", poison)
	}
}

func TestRunDerivesAndStops(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- e.d.Run(ctx) }()
	e.commit(t, "g1", "pull_request", fixture(t, "pull_request/opened.payload.json"))
	deadline := time.Now().Add(10 * time.Second)
	for e.count(t, "github.pull_request.opened") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("opened not journaled within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop within 5s of cancel")
	}
}

// TestFactInTheRecord: a record that carries its normalized fact is folded
// in from it, without its raw body (deleted here); a fact that does not
// decode is set aside as poison; derived records leave the stream.
func TestFactInTheRecord(t *testing.T) {
	e := newEnv(t)
	body := fixture(t, "pull_request/opened.payload.json")
	f, err := github.Normalize("pull_request", body)
	if err != nil {
		t.Fatal(err)
	}
	f.Summary = "from the record" // the journal shows which fact was folded in
	fact, err := github.EncodeFact(&f)
	if err != nil {
		t.Fatal(err)
	}
	e.commitFact(t, "g-fact", "pull_request", body, fact)
	e.commitFact(t, "g-corrupt", "pull_request", fixture(t, "pull_request/reopened.payload.json"), []byte(`{"Event":`))
	for s := range e.store.Shards() {
		keys, err := e.rdb.Keys(e.ctx, e.store.Tag(s)+":raw:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) > 0 {
			e.rdb.Del(e.ctx, keys...)
		}
	}
	e.crash(t)
	e.relay(t)
	evs, _, err := e.j.Read(e.ctx, make(journal.Cursor, 2), journal.Filter{Workspace: "default"}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Type != "github.pull_request.opened" || evs[0].Summary != "from the record" {
		t.Fatalf("journal %+v, want the record's opened only", evs)
	}
	var poison, left int64
	for s := range e.store.Shards() {
		msgs, _ := e.rdb.XRange(e.ctx, e.store.Tag(s)+":poison", "-", "+").Result()
		for _, m := range msgs {
			if m.Values["g"] != "g-corrupt" || !strings.Contains(fmt.Sprint(m.Values["reason"]), "decode fact") {
				t.Fatalf("poison %+v", m.Values)
			}
			poison++
		}
		n, _ := e.rdb.XLen(e.ctx, e.store.StreamKey(s)).Result()
		left += n
	}
	if poison != 1 || left != 0 {
		t.Fatalf("%d set aside (want 1), %d ingest records left (want 0)", poison, left)
	}
}

// TestIdleStopIsPrompt: a deriver blocked reading idle shards stops as
// soon as its context ends, not when its 2 s blocking read times out.
func TestIdleStopIsPrompt(t *testing.T) {
	e := newEnv(t)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.d.Run(ctx); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for e.d.Healthy() != nil {
		if time.Now().After(deadline) {
			t.Fatal("not reading within 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	stop()
	select {
	case <-done:
		if took := time.Since(start); took > 500*time.Millisecond {
			t.Errorf("stopped in %v, want within 0.5 s", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("did not stop within 5 s")
	}
}

// TestStopFinishesWhatWasRead: records a consumer had read when its stop
// came (a blocking read that answered as it was abandoned) are derived
// before Run returns, not left pending for a peer's relay (which takes a
// record only once idle for MinIdle, 15 s).
func TestStopFinishesWhatWasRead(t *testing.T) {
	e := newEnv(t)
	e.commit(t, "g-read", "pull_request", fixture(t, "pull_request/opened.payload.json"))
	for s := range e.store.Shards() {
		_ = e.rdb.XGroupCreateMkStream(e.ctx, e.store.StreamKey(s), "derive", "0").Err()
		if err := e.rdb.XReadGroup(e.ctx, &redis.XReadGroupArgs{Group: "derive", Consumer: derive.ConsumerOf(e.d),
			Streams: []string{e.store.StreamKey(s), ">"}, Count: 100, Block: -1}).Err(); err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- e.d.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for e.d.Healthy() != nil {
		if time.Now().After(deadline) {
			t.Fatal("the deriver's consumers did not start within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop within 10s of cancel")
	}
	if n := e.count(t, "github.pull_request.opened"); n != 1 {
		t.Errorf("the record read before the stop journaled %d times, want 1", n)
	}
	for s := range e.store.Shards() {
		if p, err := e.rdb.XPending(e.ctx, e.store.StreamKey(s), "derive").Result(); err != nil || p.Count != 0 {
			t.Errorf("shard %d: %v pending after the stop (%v), want none", s, p, err)
		}
	}
}
