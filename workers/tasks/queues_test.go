package tasks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/delivery/holds"
	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/outbound"
)

func TestQueueNames(t *testing.T) {
	if got := Queues("wg", 3); fmt.Sprint(got) != "[wg:push wg:push:1 wg:push:2]" {
		t.Fatalf("Queues: %v", got)
	}
	for name, want := range map[string]bool{"wg:push": true, "wg:push:7": true, "wg:push:0": false, "wg:push:07": false,
		"wg:push:x": false, "wg:pushy": false, "wgx:push": false, "wg:push:": false} {
		if isPushQueue("wg", name) != want {
			t.Errorf("isPushQueue(wg, %q) = %v", name, !want)
		}
	}
	// Pinned: a recipient's queue must not move between versions (its
	// task ids deduplicate within it).
	if QueueIndex(1, ws, "human:a") != 0 || QueueIndex(8, ws, "human:a") != 3 || QueueIndex(8, ws, "session:w1") != 3 ||
		QueueIndex(16, "default", "human:ops") != 13 {
		t.Fatal("QueueIndex changed: recipients' tasks would move to other queues across an upgrade")
	}
}

// partyIn returns a party name whose tasks go to queue k of n, and
// which is not in queue 0 unless k is.
func partyIn(t *testing.T, n, k int, prefix string) string {
	t.Helper()
	for i := range 10_000 {
		p := fmt.Sprintf("human:%s-%d", prefix, i)
		if QueueIndex(n, ws, p) == k {
			return p
		}
	}
	t.Fatalf("no party in queue %d of %d", k, n)
	return ""
}

// TestPushesSpreadOverQueues: on one Redis, the pushes of different
// recipients go to different queues (docs/design.md §14), each recipient's
// to the queue QueueOf names, and every one is worked.
func TestPushesSpreadOverQueues(t *testing.T) {
	e := newEnv(t, envOpts{})
	rc := newReceiver(t, statuses(200))
	const n = 40
	want := map[string]int64{}
	for i := range n {
		party := fmt.Sprintf("human:r%d", i)
		e.endpoint(party, rc.url(), "")
		e.wake(party)
		want[e.p.QueueOf(ws, party)]++
	}
	eventually(t, 30*time.Second, "every push delivered", func() bool { return rc.count() >= n && e.idle() })
	if len(want) < 4 {
		t.Fatalf("%d recipients' pushes went to %d of %d queues: %v", n, len(want), len(e.p.Queues()), want)
	}
	got := map[string]int64{}
	for _, q := range e.p.Queues() {
		if qi, err := e.insp.GetQueueInfo(q); err == nil && qi.ProcessedTotal > 0 {
			got[q] = int64(qi.ProcessedTotal)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("tasks worked per queue %v, want %v (one per recipient, in its queue)", got, want)
	}
}

// TestTasksOfOtherQueueCountsAreWorked: a push enqueued by the version
// before the queues were spread (one queue, `<prefix>:push`) is worked by
// a worker of today's, and so is one left in a queue past a lowered
// WAKEGATE_PUSH_QUEUES (NewServer works every push queue Asynq knows).
func TestTasksOfOtherQueueCountsAreWorked(t *testing.T) {
	e := newEnv(t, envOpts{cfg: Config{Queues: 4}})
	rc := newReceiver(t, statuses(200))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	older := func(queues int) *Pusher {
		p := New(e.rdb, asynq.NewClientFromRedisClient(e.rdb), e.box, e.endpoints, log, prometheus.NewRegistry(),
			Config{Prefix: e.prefix, Queues: queues, Guard: &outbound.Guard{AllowPrivate: true}, Schedule: []time.Duration{time.Second}})
		t.Cleanup(func() { dropQueues(e.rdb, p.Queues()) })
		return p
	}
	single, more := older(1), older(16)
	// One party whose queue is no longer queue 0, one whose queue of 16
	// is past the 4 of now.
	p1 := partyIn(t, 4, 1, "one")
	p2 := partyIn(t, 16, 13, "sixteen")
	var ids []string
	for _, c := range []struct {
		p     *Pusher
		party string
	}{{single, p1}, {more, p2}} {
		e.endpoint(c.party, rc.url(), "")
		id := DigestWebhookID(e.prefix, ws, c.party, "test", "1")
		if _, err := c.p.EnqueueDigest(e.ctx, ws, c.party, id, "held", []inbox.Entry{}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if _, err := e.insp.GetTaskInfo(e.prefix+":push", ids[0]); err != nil { // the name the single queue had
		t.Fatalf("the single-queue push is not in %s:push: %v", e.prefix, err)
	}
	if _, err := e.insp.GetTaskInfo(QueueName(e.prefix, 13), ids[1]); err != nil {
		t.Fatalf("the push is not in %s: %v", QueueName(e.prefix, 13), err)
	}
	// The worker's own server (the env's works only today's 4 queues).
	srv := NewServer(e.rdb, e.p, NewReleaser(e.p, holds.New(e.rdb, e.prefix), nil), log)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	eventually(t, 30*time.Second, "both pushes delivered", func() bool {
		seen := map[string]bool{}
		for _, r := range rc.got() {
			if r.status == http.StatusOK {
				seen[r.header.Get("webhook-id")] = true
			}
		}
		return seen[ids[0]] && seen[ids[1]]
	})
}

// TestQuietOffCancelsItsEndInAnyQueue: lifting a quiet by hand deletes the
// task scheduled to lift it at its until, in the queue of its scope — and
// a task a version with one queue scheduled in `<prefix>:push`.
func TestQuietOffCancelsItsEndInAnyQueue(t *testing.T) {
	he := newHoldsEnv(t)
	in := asynq.NewInspectorFromRedisClient(he.rdb)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	single := New(he.rdb, asynq.NewClientFromRedisClient(he.rdb), he.box, he.endpoints, log, prometheus.NewRegistry(),
		Config{Prefix: he.prefix, Queues: 1})
	for _, c := range []struct {
		name  string
		rel   *Releaser
		queue func(scope string) string
	}{
		{"today's queue", he.rel, func(scope string) string { return he.p.QueueOf(ws, scope) }},
		{"the single queue of before", NewReleaser(single, he.h, nil), func(string) string { return he.prefix + ":push" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			scope := partyIn(t, DefaultQueues, 3, c.name[:3])
			until := time.Now().Add(time.Hour)
			if err := he.h.SetQuiet(he.ctx, ws, holds.Quiet{Scope: scope, By: scope, At: time.Now(), Until: until}); err != nil {
				t.Fatal(err)
			}
			if err := c.rel.ScheduleQuietEnd(he.ctx, ws, scope, until); err != nil {
				t.Fatal(err)
			}
			id := he.rel.quietEndID(ws, scope, until.UnixMilli())
			if info, err := in.GetTaskInfo(c.queue(scope), id); err != nil || info.State != asynq.TaskStateScheduled {
				t.Fatalf("the quiet's end is not scheduled in %s: %+v %v", c.queue(scope), info, err)
			}
			if _, ok, err := he.rel.LiftQuiet(he.ctx, ws, scope); err != nil || !ok {
				t.Fatalf("lift: %v %v", ok, err)
			}
			if info, err := in.GetTaskInfo(c.queue(scope), id); !errors.Is(err, asynq.ErrTaskNotFound) {
				t.Fatalf("the lifted quiet's end is still there: %+v %v", info, err)
			}
		})
	}
}
