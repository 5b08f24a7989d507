package tasks

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/delivery/holds"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/workers/route"
)

// shiftedReleaser schedules releases on the real clock for a router and
// releaser that read a shifted one: at (shifted) - offset is when Asynq
// must run it.
type shiftedReleaser struct {
	rel    *Releaser
	offset time.Duration
}

func (s shiftedReleaser) Schedule(ctx context.Context, workspace, party, reason string, at time.Time) error {
	return s.rel.Schedule(ctx, workspace, party, reason, at.Add(-s.offset))
}

// TestQuietHoursHoldThenOneDigest is the "during quiet hours a
// critical event reaches the human at once, an attention event only in
// the digest at the end", through the router, the holds, the Asynq
// release at the period's end and a real receiver. The router's and the
// releaser's clock is shifted to 4 s before 06:00 in Asia/Kolkata, the end
// of a 22:00–06:00 window; Asynq runs on the real clock.
func TestQuietHoursHoldThenOneDigest(t *testing.T) {
	he := newHoldsEnv(t)
	if _, err := he.sup.MergeSettings(he.ctx, ws, []byte(`{"rate":{"per":"1s","burst":100},
		"quiet_hours":{"start":"22:00","end":"06:00","tz":"Asia/Kolkata"}}`)); err != nil {
		t.Fatal(err)
	}
	end := time.Date(2026, 7, 2, 0, 30, 0, 0, time.UTC) // 06:00 IST
	offset := time.Until(end.Add(-4 * time.Second))
	clock := func() time.Time { return time.Now().Add(offset) }
	realEnd := end.Add(-offset)
	he.rel.now = clock
	j := journal.New(he.rdb, journal.Config{Prefix: he.prefix, Shards: 4})
	he.r = route.NewRouter(he.rdb, j, sessions.New(he.rdb, j, time.Minute), he.sub, he.sup, he.box,
		prometheus.NewRegistry()).WithPusher(he.p).WithHolds(he.h, shiftedReleaser{he.rel, offset}).WithClock(clock)

	human := newReceiver(t, statuses(200))
	he.endpoint("human:gera", human.url(), "")
	he.subscribe("human:gera", `{"subjects":["github:org/repo#*"]}`)
	he.subscribe("human:gera", `{"types":["session.*"]}`)
	boss := newReceiver(t, statuses(200))
	he.endpoint("session:boss", boss.url(), "")
	he.subscribe("session:boss", `{"subjects":["github:org/repo#*"]}`)

	he.route("github.pull_request.ready", "#1", "", "")
	he.route("session.turn_ended", "w1", `{"idle":true}`, "")
	crash := he.route("session.crashed", "w2", "", "") // critical
	// The critical event reaches the human at once; the session's wake
	// is not held (quiet hours are for people).
	eventually(t, 5*time.Second, "the critical push", func() bool { return human.count() == 1 })
	eventually(t, 5*time.Second, "the session's push", func() bool { return boss.count() == 1 })
	if time.Now().After(realEnd) {
		t.Fatalf("the critical push came after the period's end: the test machine is too slow to show 'at once'")
	}
	if b := bodies(t, human)[0]; b.Kind != "wake" || b.Entry == nil || b.Entry.Type != crash.Type {
		t.Fatalf("first push %+v, want the crash", b)
	}
	held, err := he.h.Held(he.ctx, ws, "human:gera", holds.ReasonQuietHours)
	if err != nil || len(held) != 2 {
		t.Fatalf("held %d %v, want the ready and the idle turn end", len(held), err)
	}
	// The held entries stay in the inbox (the crash's is acked by its 2xx,
	// once the worker has read it: the receiver counts before that).
	eventually(t, 5*time.Second, "two unacked entries: the held ones", func() bool {
		es, _, _ := he.box.List(he.ctx, ws, "human:gera", 0, false, 10)
		return len(es) == 2
	})

	eventually(t, 15*time.Second, "the digest at the period's end", func() bool { return human.count() >= 2 })
	he.settle(t, human, 2)
	got := human.got()[1]
	if got.at.Before(realEnd) {
		t.Fatalf("digest arrived %v before the period's end", realEnd.Sub(got.at))
	}
	if late := got.at.Sub(realEnd); late > 3*time.Second {
		t.Fatalf("digest arrived %v after the period's end, want within ±2 s (Asynq's whole seconds and 1 s check)", late)
	}
	d := bodies(t, human)[1]
	if d.Kind != "digest" || len(d.Digest) != 2 || !strings.HasPrefix(d.Text, "[quiet hours ended 00:30Z") ||
		!strings.Contains(d.Text, "ready: #1") || !strings.Contains(d.Text, "idle: session:w1") {
		t.Fatalf("digest %+v", d)
	}
	eventually(t, 5*time.Second, "the digest's 2xx acks the held entries", func() bool {
		es, _, _ := he.box.List(he.ctx, ws, "human:gera", 0, false, 10)
		return len(es) == 0
	})
	// After the end, an attention event is pushed at once.
	he.route("github.pull_request.ready", "#2", "", "")
	eventually(t, 5*time.Second, "a push after the period", func() bool { return human.count() == 3 })
	if b := bodies(t, human)[2]; b.Kind != "wake" || b.Entry.Subject != "github:org/repo#2" {
		t.Fatalf("push after the period %+v", b)
	}
}
