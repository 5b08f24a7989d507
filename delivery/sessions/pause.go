package sessions

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

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
	op, args := pauseOp(e, now)
	if op == "" {
		return true, nil
	}
	party := event.SessionSubject(e.SessionID)
	n, err := pauseScript.Run(ctx, r.rdb, []string{PauseKey(r.j, e.Workspace, party)}, args...).Int()
	if err != nil {
		return true, fmt.Errorf("pause marker of %s: %w", party, err)
	}
	return n == 1, nil
}

// QueuePausePeek queues on p the read of the pause marker of e's session
// (its until) and returns a function that, once p has run, answers
// whether Pause(e) has anything to do: false when it would answer true
// without writing — an end when no pause is recorded, an alarm at a time
// no pause runs (pause.lua) — so the router spares that call its round
// trip; true for a pause, a marker to end or a pause running at the
// alarm's time, and when the read failed. Only routing writes the marker,
// in journal order per session, so what the peek read still holds when
// Pause would run.
func (r *Registry) QueuePausePeek(ctx context.Context, p redis.Pipeliner, e *event.Event, now time.Time) func() bool {
	op, args := pauseOp(e, now)
	switch op {
	case "":
		return func() bool { return false }
	case "pause":
		return func() bool { return true }
	}
	cmd := p.HGet(ctx, PauseKey(r.j, e.Workspace, event.SessionSubject(e.SessionID)), "until")
	at, _ := args[1].(int64)
	return func() bool {
		v, err := cmd.Result()
		if errors.Is(err, redis.Nil) {
			return false
		}
		if err != nil {
			return true
		}
		until, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return true
		}
		return op == "end" || until > at // pause.lua: an alarm surfaces untouched once until <= at
	}
}

// pauseOp is pause.lua's operation for e and its ARGV; "" when e touches
// no pause marker (Pause answers true).
func pauseOp(e *event.Event, now time.Time) (string, []any) {
	if e.SessionID == "" {
		return "", nil
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
		return "", nil
	}
	return args[0].(string), args
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
