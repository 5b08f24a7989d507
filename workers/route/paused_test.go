package route

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/providers/event"
)

// wakeLog is a pusher that records every wake the router pushes.
type wakeLog struct {
	mu    sync.Mutex
	wakes []string // "party type"
}

func (l *wakeLog) Enqueue(_ context.Context, _, party string, res inbox.Result, e *event.Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if res.Wake {
		l.wakes = append(l.wakes, party+" "+e.Type)
	}
	return nil
}

func (l *wakeLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.wakes)
}

// TestPausedSessionAlarms is a paused session through the router: a session paused
// until a time surfaces its first idle or stale alarm, and the ones after
// it land in its supervisor's inbox without waking anyone, until
// turn_started ends the pause. Questions (awaiting_input) still wake.
func TestPausedSessionAlarms(t *testing.T) {
	w := newWorld(t)
	log := &wakeLog{}
	w.r.WithPusher(log)
	w.settings(`{"default_controller": "session:boss"}`)
	step := func(typ, data string, wantWake bool) {
		t.Helper()
		before := log.count()
		e := w.push("session:w1", "w1", typ, data)
		woke := log.count() > before
		if woke != wantWake {
			t.Fatalf("%s %s: woke %v, want %v (wakes %v)", typ, data, woke, wantWake, log.wakes)
		}
		// The event is in the supervisor's inbox either way.
		es, _, err := w.box.List(w.ctx, ws, "session:boss", 0, false, 10)
		if err != nil || len(es) != 1 || es[0].FoldedIDs[len(es[0].FoldedIDs)-1] != e.ID {
			t.Fatalf("%s: boss's inbox %+v %v, want the event's entry", typ, es, err)
		}
		if !wantWake && e.Priority.Rank() >= event.Attention.Rank() && (es[0].Kind != inbox.KindDigest || es[0].Wake) {
			t.Fatalf("%s: a suppressed alarm's entry is %s wake=%v, want a digest that wakes nobody", typ, es[0].Kind, es[0].Wake)
		}
		// The supervisor reads and acks, so the next alarm is a fresh entry
		// (the wake-again rule alone would keep a second idle turn end of
		// one entry quiet).
		if _, err := w.box.Ack(w.ctx, ws, "session:boss", es[0].Seq, nil); err != nil {
			t.Fatal(err)
		}
	}
	idle := `{"idle":true}`
	step("session.turn_ended", idle, true) // not paused
	step("session.paused", fmt.Sprintf(`{"until":%q,"reason":"waiting on an upstream release"}`,
		time.Now().Add(time.Hour).UTC().Format(time.RFC3339)), false)
	step("session.turn_ended", idle, true)  // first sight
	step("session.turn_ended", idle, false) // suppressed
	step("session.stalled", "", false)      // suppressed
	step("session.turn_ended", idle, false) // suppressed
	step("session.awaiting_input", "", true)
	step("session.turn_started", "", false) // ends the pause
	step("session.turn_ended", idle, true)
	step("session.turn_ended", idle, true)
	if s, err := w.reg.Get(w.ctx, ws, "session:w1", time.Now()); err != nil || !s.PausedUntil.IsZero() {
		t.Fatalf("registry after turn_started: %+v %v, want no paused_until", s, err)
	}
}
