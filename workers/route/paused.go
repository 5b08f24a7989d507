package route

import (
	"context"
	"time"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/providers/event"
)

// pausedSessions applies paused sessions (docs/design.md §7) to one
// event about to be delivered to the recipients in to: a session.paused
// with an until, its end (session.resumed, turn_started, exited, or the
// until) and the stale and idle alarms about the session in between
// (sessions.IsPauseAlarm) go through the session's pause marker
// (sessions.Registry.Pause). An alarm the marker suppresses — every one
// after the first sight, until 4 h have passed — is still delivered, to
// the same recipients, but as inbox-only (kind digest): it is in the
// inbox and on the next read, and it wakes nobody, so nothing is pushed,
// held or escalated for it. It is not dropped: "never miss" stands.
//
// It runs where the recipients are known, after the fallback, so an
// alarm nobody can hear (undeliverable) does not use up the first sight.
// gather peeked at the marker in its first round trip (pending: what it
// read leaves the marker something to do): an end with no pause recorded
// and an alarm with none running at its time — nearly every event — make
// no call of their own.
func (r *Router) pausedSessions(ctx context.Context, e *event.Event, now time.Time, to map[string]recipient, pending bool) error {
	if !pending {
		return nil
	}
	surface, err := r.reg.Pause(ctx, e, now)
	if err != nil || surface {
		return err
	}
	for party, rc := range to {
		rc.mode = inbox.ModeInbox
		to[party] = rc
	}
	return nil
}
