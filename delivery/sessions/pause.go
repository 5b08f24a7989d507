package sessions

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/providers/event"
)

// PauseResurface is how often an idle or stale alarm about a session
// paused until a time surfaces again after its first sight (
// the watcher rechecks a paused worker every 4 h instead of nagging).
const PauseResurface = 4 * time.Hour

// pauseMargin is how long a pause marker outlives its until, so that a
// re-run of the routing just after the end still reads it.
const pauseMargin = time.Hour

var (
	//go:embed pause.lua
	pauseLua    string
	pauseScript = keyspace.NewScript("delivery/sessions/pause.lua", pauseLua)
)

// PauseKey is the marker of a session paused until a time, under the tag
// of its journal shard (pause.lua documents it).
func PauseKey(j *journal.Journal, workspace, party string) string {
	return j.Keys(j.ShardOf(workspace, party)).Pause(workspace, party)
}

// IsPauseAlarm reports whether e is a stale or idle alarm about its
// session, the kind a pause with an until suppresses (docs/design.md §7):
// session.stalled (the sweep's "no progress"), and
// session.turn_ended with data.idle (the session stopped and waits). Not
// session.awaiting_input or permission_requested: those are the session
// asking a question, an open decision someone must take, whatever it
// declared about its wait; and never a crash.
func IsPauseAlarm(e *event.Event) bool {
	switch e.Type {
	case event.TypeSessionStalled:
		return true
	case event.TypeSessionTurnEnded:
		var d struct {
			Idle bool `json:"idle"`
		}
		return len(e.Data) > 0 && json.Unmarshal(e.Data, &d) == nil && d.Idle
	}
	return false
}

// Pause applies one routed event to the pause marker of the session it is
// about, and answers whether it surfaces:
//   - session.paused with data.until in the future (of the event's
//     journal time) starts the pause, or renews it (keeping when an alarm
//     last surfaced); without an until, or one already past, it ends it;
//   - session.resumed, session.turn_started and session.exited end it;
//   - an alarm (IsPauseAlarm) during the pause surfaces at first sight,
//     then at most once per PauseResurface; the others answer false;
//   - anything else answers true and touches nothing.
//
// Time is the event's journal time (from its seq), so a re-run of the
// routing decides the same; now stands in for an event without a seq.
// Call it in journal order per session, as the router routes.
func (r *Registry) Pause(ctx context.Context, e *event.Event, now time.Time) (bool, error) {
	if e.SessionID == "" {
		return true, nil
	}
	at := journalTime(e.Seq, now)
	var args []any
	switch {
	case e.Type == event.TypeSessionPaused:
		var d struct {
			Until string `json:"until"`
		}
		_ = json.Unmarshal(e.Data, &d) // validated at ingest; anything else reads as no until
		until, err := time.Parse(time.RFC3339, d.Until)
		if err != nil || !until.After(at) {
			args = []any{"end", at.UnixMilli()}
		} else {
			args = []any{"pause", at.UnixMilli(), until.UnixMilli(), "", 0, pauseMargin.Milliseconds()}
		}
	case e.Type == event.TypeSessionResumed, e.Type == event.TypeSessionTurnStarted, e.Type == event.TypeSessionExited:
		args = []any{"end", at.UnixMilli()}
	case IsPauseAlarm(e):
		args = []any{"alarm", at.UnixMilli(), 0, e.Source + " " + e.ID, PauseResurface.Milliseconds()}
	default:
		return true, nil
	}
	party := event.SessionSubject(e.SessionID)
	n, err := pauseScript.Run(ctx, r.rdb, []string{PauseKey(r.j, e.Workspace, party)}, args...).Int()
	if err != nil {
		return true, fmt.Errorf("pause marker of %s: %w", party, err)
	}
	return n == 1, nil
}

// journalTime is the time a journal seq ("<shard>-<ms>-<n>") was
// appended, else now.
func journalTime(seq string, now time.Time) time.Time {
	if _, id, err := journal.ParseSeq(seq); err == nil {
		ms, _, _ := strings.Cut(id, "-")
		if n, err := strconv.ParseInt(ms, 10, 64); err == nil && n > 0 {
			return time.UnixMilli(n)
		}
	}
	return now
}
