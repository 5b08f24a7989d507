package route

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/providers/event"
)

// recorder is an idempotent handler that remembers what it saw, in order.
type recorder struct {
	mu    sync.Mutex
	seen  map[string]int      // event id → times handled
	order map[string][]string // subject → seqs in handling order
	fail  func(e *event.Event) error
}

func newRecorder() *recorder { return &recorder{seen: map[string]int{}, order: map[string][]string{}} }

func (r *recorder) handle(_ context.Context, shard int, e *event.Event) error {
	if r.fail != nil {
		if err := r.fail(e); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[e.ID]++
	r.order[e.Subject] = append(r.order[e.Subject], e.Seq)
	return nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func appendEvents(t *testing.T, j *journal.Journal, n int) {
	t.Helper()
	for i := range n {
		e := &event.Event{SpecVersion: "1.0", ID: fmt.Sprint(i), Source: "//t", Type: "session.turn_ended",
			Subject: fmt.Sprintf("session:s%d", i%13), Workspace: "ws", Time: time.Now().UTC()}
		if _, _, err := j.Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestShardsAreSharedAndTakenOver(t *testing.T) {
	rdb, prefix := redistest.New(t)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 4})
	rec := newRecorder()
	cfg := ConsumerConfig{LeaseTTL: time.Second}
	a := NewConsumer(rdb, j, rec.handle, quiet(), prometheus.NewRegistry(), cfg)
	b := NewConsumer(rdb, j, rec.handle, quiet(), prometheus.NewRegistry(), cfg)
	ctxA, stopA := context.WithCancel(context.Background())
	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	doneA := make(chan struct{})
	go func() { _ = a.Run(ctxA); close(doneA) }()
	waitFor(t, "a to hold every shard", func() bool { return len(a.Held()) == 4 })
	go func() { _ = b.Run(ctxB) }()
	waitFor(t, "the shards to be shared 2/2", func() bool { return len(a.Held()) == 2 && len(b.Held()) == 2 })
	appendEvents(t, j, 300)
	waitFor(t, "300 events routed", func() bool { return rec.count() == 300 })
	stopA()
	<-doneA
	waitFor(t, "b to take every shard over", func() bool { return len(b.Held()) == 4 })
	appendEvents(t, j, 400) // ids 0..399: 300 seen already, 100 new ones
	waitFor(t, "400 events routed", func() bool { return rec.count() == 400 })

	rec.mu.Lock()
	defer rec.mu.Unlock()
	for id, n := range rec.seen {
		if n != 1 {
			t.Errorf("event %s handled %d times", id, n)
		}
	}
	// Events of one subject are routed in journal order (subjects of a
	// batch run concurrently).
	for subject, seqs := range rec.order {
		for i := 1; i < len(seqs); i++ {
			_, prev, _ := journal.ParseSeq(seqs[i-1])
			_, cur, _ := journal.ParseSeq(seqs[i])
			if !streamLess(prev, cur) {
				t.Fatalf("%s out of order: %s then %s", subject, seqs[i-1], seqs[i])
			}
		}
	}
}

func TestExpiredLeaseOfADeadWorkerIsTakenOver(t *testing.T) {
	rdb, prefix := redistest.New(t)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 1})
	c := NewConsumer(rdb, j, newRecorder().handle, quiet(), prometheus.NewRegistry(), ConsumerConfig{LeaseTTL: time.Second})
	// A worker that died holding the lease at epoch 7.
	rdb.Set(context.Background(), c.epochKey(0), 7, 0)
	rdb.Set(context.Background(), c.leaseKey(0), "w-dead:7", 1500*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()
	if len(c.Held()) != 0 {
		t.Fatal("took a lease that was still held")
	}
	waitFor(t, "the dead worker's shard to be taken over", func() bool { return len(c.Held()) == 1 })
	if v := rdb.Get(context.Background(), c.leaseKey(0)).Val(); v != c.owner+":8" {
		t.Fatalf("lease %q, want epoch 8 for %s", v, c.owner)
	}
	// The dead worker, had it woken up, can no longer move the cursor.
	ledger := [][]any{{"seq", "0-9-9", "source", "s", "id", "x", "to", "human:a", "inbox_seq", 1, "via", "controller"}}
	_, ok, err := c.advance(context.Background(), 0, "w-dead:7", "9-9", ledger)
	if err != nil || ok {
		t.Fatalf("a stale holder advanced the cursor: %v %v", ok, err)
	}
	if n := rdb.XLen(context.Background(), LedgerKey(j, 0)).Val(); n != 0 {
		t.Fatalf("a stale holder wrote %d ledger entries", n)
	}
	// The holder moves it with a fan-out's worth of ledger entries, more
	// than one script call takes: all of them are written.
	big := make([][]any, maxLedgerArgs+500)
	for i := range big {
		big[i] = []any{"seq", "0-9-9", "source", "s", "id", "x", "to", fmt.Sprintf("human:r%d", i), "inbox_seq", 1, "via", "subscription"}
	}
	if _, ok, err := c.advance(context.Background(), 0, c.owner+":8", "9-9", big); err != nil || !ok {
		t.Fatalf("the holder could not advance: %v %v", ok, err)
	}
	if n := rdb.XLen(context.Background(), LedgerKey(j, 0)).Val(); n != int64(len(big)) {
		t.Fatalf("%d ledger entries written, want %d", n, len(big))
	}
	if v := rdb.Get(context.Background(), c.cursorKey(0)).Val(); v != "9-9" {
		t.Fatalf("cursor %q, want 9-9", v)
	}
}

// TestAdvanceReadsTheNextBatch: moving the cursor answers the entries
// after it (at most Batch), as XRANGE reads them, on Redis and on the
// embedded Redis serve runs by default.
func TestAdvanceReadsTheNextBatch(t *testing.T) {
	redistest.Backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 1})
		c := NewConsumer(rdb, j, newRecorder().handle, quiet(), prometheus.NewRegistry(), ConsumerConfig{Batch: 2})
		lease := c.owner + ":1"
		rdb.Set(ctx, c.leaseKey(0), lease, time.Minute)
		appendEvents(t, j, 5)
		all, err := rdb.XRange(ctx, j.StreamKey(0), "-", "+").Result()
		if err != nil || len(all) != 5 {
			t.Fatalf("journal: %d entries, %v", len(all), err)
		}
		for i, want := range [][]redis.XMessage{all[1:3], all[3:5], {}} {
			done := all[2*i].ID // the batch routed last ended here
			ledger := [][]any{{"seq", "0-" + done, "source", "//t", "id", "x", "to", "human:a", "inbox_seq", 1, "via", "controller"}}
			next, ok, err := c.advance(ctx, 0, lease, done, ledger)
			if err != nil || !ok {
				t.Fatalf("advance past %s: %v %v", done, ok, err)
			}
			if !reflect.DeepEqual(next, want) && (len(next) != 0 || len(want) != 0) {
				t.Fatalf("advance past %s read %v, want %v", done, next, want)
			}
			for _, m := range next {
				if _, err := journal.Decode(0, m); err != nil {
					t.Fatalf("entry %s read by advance: %v", m.ID, err)
				}
			}
			if v := rdb.Get(ctx, c.cursorKey(0)).Val(); v != done {
				t.Fatalf("cursor %q, want %s", v, done)
			}
		}
	})
}

func TestPoisonAndInfrastructureErrors(t *testing.T) {
	rdb, prefix := redistest.New(t)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 1})
	rec := newRecorder()
	var mu sync.Mutex
	infra := 0
	rec.fail = func(e *event.Event) error {
		switch e.ID {
		case "3":
			return fmt.Errorf("cannot route this: %w", ErrPermanent)
		case "5":
			mu.Lock()
			defer mu.Unlock()
			if infra < 4 { // more than MaxAttempts: infrastructure errors consume no attempt
				infra++
				return errors.New("redis: connection refused")
			}
		case "7":
			panic("handler bug")
		}
		return nil
	}
	c := NewConsumer(rdb, j, rec.handle, quiet(), prometheus.NewRegistry(), ConsumerConfig{LeaseTTL: time.Second, MaxAttempts: 2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()
	appendEvents(t, j, 10)
	waitFor(t, "the good events routed", func() bool { return rec.count() == 8 })
	// Subjects are routed concurrently: the bad ones are set aside in
	// their own time.
	var poison []redis.XMessage
	waitFor(t, "events 3 and 7 set aside", func() bool {
		var err error
		poison, err = c.Poisoned(ctx, 0)
		return err == nil && len(poison) == 2
	})
	for _, p := range poison {
		if p.Values["reason"] == "" {
			t.Fatalf("poison without a reason: %v", p.Values)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.seen["5"] != 1 || rec.seen["3"] != 0 || rec.seen["7"] != 0 {
		t.Fatalf("seen %v", rec.seen)
	}
}

// streamLess orders two stream ids of one stream.
func streamLess(a, b string) bool {
	var am, as, bm, bs int64
	fmt.Sscanf(a, "%d-%d", &am, &as)
	fmt.Sscanf(b, "%d-%d", &bm, &bs)
	return am < bm || am == bm && as < bs
}

// TestIdleStopIsPrompt: a consumer blocked reading idle shards stops as
// soon as its context ends, not when its blocking read (LeaseTTL/5 = 2 s
// here) would have timed out.
func TestIdleStopIsPrompt(t *testing.T) {
	rdb, prefix := redistest.New(t)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 4})
	c := NewConsumer(rdb, j, newRecorder().handle, quiet(), prometheus.NewRegistry(), ConsumerConfig{LeaseTTL: 10 * time.Second})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	waitFor(t, "every shard held", func() bool { return len(c.Held()) == 4 })
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

// A worker starting on 16 free shards says so in one line at info; the
// lease of each shard is at debug.
func TestTakingShardsLogsOneSummaryAtInfo(t *testing.T) {
	rdb, prefix := redistest.New(t)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 16})
	var buf syncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := NewConsumer(rdb, j, newRecorder().handle, log, prometheus.NewRegistry(), ConsumerConfig{LeaseTTL: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	waitFor(t, "all 16 shards taken", func() bool { return len(c.Held()) == 16 })
	cancel()
	<-done

	counts := map[string]int{}
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var rec struct{ Level, Msg string }
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if strings.HasPrefix(rec.Msg, "shard") {
			counts[rec.Level+" "+rec.Msg]++
		}
	}
	want := map[string]int{"INFO shards taken": 1, "DEBUG shard taken": 16}
	if !reflect.DeepEqual(counts, want) {
		t.Errorf("shard log lines by level %v, want %v", counts, want)
	}
}

// syncBuffer is a bytes.Buffer safe for the goroutines of a logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.b.Bytes()...)
}
