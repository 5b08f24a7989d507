package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/providers/event"
)

func TestIsPauseAlarm(t *testing.T) {
	for _, tt := range []struct {
		typ, data string
		want      bool
	}{
		{"session.stalled", "", true},
		{"session.turn_ended", `{"idle":true}`, true},
		{"session.turn_ended", `{"idle":false}`, false},
		{"session.turn_ended", "", false},
		{"session.awaiting_input", "", false},
		{"session.permission_requested", "", false},
		{"session.crashed", "", false},
		{"github.pull_request.stuck", "", false},
	} {
		e := &event.Event{Type: tt.typ}
		if tt.data != "" {
			e.Data = json.RawMessage(tt.data)
		}
		if got := IsPauseAlarm(e); got != tt.want {
			t.Errorf("IsPauseAlarm(%s %s) = %v, want %v", tt.typ, tt.data, got, tt.want)
		}
	}
}

// TestPause: an idle or stale alarm about a session paused until a time
// surfaces at first sight, then at most once per 4 h; a re-run of the
// routing answers the same; turn_started, resumed and the until end the
// pause; a renewal keeps the resurface clock; a pause without an until
// suppresses nothing.
func TestPause(t *testing.T) {
	rdb, prefix := redistest.New(t)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 4})
	reg := New(rdb, j, time.Minute)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 5, 1, 0, 0, 0, time.UTC)
	n := 0
	ev := func(session, typ, data string, at time.Time) *event.Event {
		n++
		e := &event.Event{ID: fmt.Sprint(n), Source: event.AgentSource("acme", "session:"+session), Type: typ,
			Subject: event.SessionSubject(session), Workspace: "acme", SessionID: session,
			Seq: journal.FormatSeq(0, fmt.Sprintf("%d-0", at.UnixMilli()))}
		if data != "" {
			e.Data = json.RawMessage(data)
		}
		return e
	}
	// apply also checks the router's peek (QueuePausePeek): when it says
	// the marker has nothing to do, Pause surfaces and writes nothing.
	apply := func(e *event.Event) bool {
		t.Helper()
		key := PauseKey(j, e.Workspace, event.SessionSubject(e.SessionID))
		before := rdb.HGetAll(ctx, key).Val()
		p := rdb.Pipeline()
		peek := reg.QueuePausePeek(ctx, p, e, time.Now())
		if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		pending := peek()
		ok, err := reg.Pause(ctx, e, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if after := rdb.HGetAll(ctx, key).Val(); !pending && (!ok || !maps.Equal(before, after)) {
			t.Fatalf("peek said %s %s has nothing to do, Pause answered %v and the marker went %v → %v", e.Type, e.Data, ok, before, after)
		}
		return ok
	}
	idle := func(session string, at time.Time) *event.Event {
		return ev(session, "session.turn_ended", `{"idle":true}`, at)
	}
	pause := func(session string, at, until time.Time) *event.Event {
		return ev(session, "session.paused", fmt.Sprintf(`{"until":%q,"reason":"waiting on upstream"}`, until.Format(time.RFC3339)), at)
	}

	if !apply(idle("w1", t0)) {
		t.Fatal("an alarm about a session never paused was suppressed")
	}
	apply(pause("w1", t0, t0.Add(10*time.Hour)))
	first := idle("w1", t0.Add(time.Minute))
	if !apply(first) {
		t.Fatal("the first alarm after the pause (first sight) was suppressed")
	}
	second := idle("w1", t0.Add(2*time.Minute))
	if apply(second) {
		t.Fatal("a second idle alarm within 4 h surfaced")
	}
	if apply(ev("w1", "session.stalled", "", t0.Add(time.Hour))) {
		t.Fatal("a stale alarm within 4 h surfaced")
	}
	// Non-alarms pass and touch nothing.
	if !apply(ev("w1", "session.awaiting_input", "", t0.Add(time.Hour))) || !apply(ev("w1", "session.turn_ended", "", t0.Add(time.Hour))) {
		t.Fatal("a non-alarm was suppressed")
	}
	// A re-run of the routing decides the same.
	if !apply(first) || apply(second) {
		t.Fatal("a re-run decided differently")
	}
	// A renewal keeps the resurface clock.
	apply(pause("w1", t0.Add(2*time.Hour), t0.Add(12*time.Hour)))
	if apply(idle("w1", t0.Add(3*time.Hour))) {
		t.Fatal("renewing the pause made an alarm surface again")
	}
	// 4 h after the first sight: once more, then quiet again.
	again := idle("w1", t0.Add(time.Minute+4*time.Hour))
	if !apply(again) {
		t.Fatal("the first alarm 4 h after the last one surfaced was suppressed")
	}
	if apply(idle("w1", t0.Add(5*time.Hour))) {
		t.Fatal("an alarm 1 h after a resurfacing surfaced")
	}
	// The first sight is not surfaced again by its re-run after a later one.
	if !apply(again) {
		t.Fatal("re-run of the resurfaced alarm was suppressed")
	}
	// turn_started ends the pause: every alarm surfaces.
	apply(ev("w1", "session.turn_started", "", t0.Add(6*time.Hour)))
	if !apply(idle("w1", t0.Add(6*time.Hour+time.Minute))) || !apply(idle("w1", t0.Add(6*time.Hour+2*time.Minute))) {
		t.Fatal("an alarm after turn_started was suppressed")
	}
	if ex, _ := rdb.Exists(ctx, PauseKey(j, "acme", "session:w1")).Result(); ex != 0 {
		t.Fatal("the marker outlived turn_started")
	}

	// A new pause starts afresh: first sight again; resumed ends it.
	apply(pause("w2", t0, t0.Add(time.Hour)))
	if !apply(idle("w2", t0.Add(time.Minute))) || apply(idle("w2", t0.Add(2*time.Minute))) {
		t.Fatal("w2: first sight then suppression")
	}
	apply(ev("w2", "session.resumed", "", t0.Add(3*time.Minute)))
	if !apply(idle("w2", t0.Add(4*time.Minute))) {
		t.Fatal("w2: an alarm after resumed was suppressed")
	}
	// The until ends it too.
	apply(pause("w3", t0, t0.Add(time.Hour)))
	apply(idle("w3", t0.Add(time.Minute)))
	if apply(idle("w3", t0.Add(59*time.Minute))) {
		t.Fatal("w3: suppression before the until")
	}
	if !apply(idle("w3", t0.Add(time.Hour))) || !apply(idle("w3", t0.Add(time.Hour+time.Minute))) {
		t.Fatal("w3: an alarm at or after the until was suppressed")
	}
	// A later pause after the until has passed is a new first sight.
	apply(pause("w3", t0.Add(2*time.Hour), t0.Add(3*time.Hour)))
	if !apply(idle("w3", t0.Add(2*time.Hour+time.Minute))) {
		t.Fatal("w3: a new pause's first sight was suppressed")
	}
	if ttl, _ := rdb.PTTL(ctx, PauseKey(j, "acme", "session:w3")).Result(); ttl <= 0 {
		t.Fatalf("the marker does not expire: %v", ttl)
	}
	// A pause without an until, or with one already past, suppresses nothing.
	apply(ev("w4", "session.paused", `{"reason":"indefinitely"}`, t0))
	apply(idle("w4", t0.Add(time.Minute)))
	if !apply(idle("w4", t0.Add(2*time.Minute))) {
		t.Fatal("w4: a pause without an until suppressed an alarm")
	}
	apply(pause("w5", t0.Add(time.Hour), t0))
	apply(idle("w5", t0.Add(time.Hour+time.Minute)))
	if !apply(idle("w5", t0.Add(time.Hour+2*time.Minute))) {
		t.Fatal("w5: a pause whose until had passed suppressed an alarm")
	}
}
