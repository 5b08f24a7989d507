package escalate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/event"
)

// Why an entry climbs (inbox.Escalation.Reason).
const (
	ReasonDead       = "dead"        // its recipient is dead
	ReasonUnreached  = "unreached"   // no request since the entry, and no endpoint
	ReasonDeadLetter = "dead_letter" // its push was dead-lettered
	ReasonUnacked    = "unacked"     // escalate_unacked names its priority
)

// Eligible reports whether an update that reached a party via, in mode,
// may arm its entry's escalation (docs/design.md §8): attention or more, delivered
// to wake (not inbox.ModeInbox: a delivery=inbox subscription, or an alarm
// about a paused session that wakes nobody), and reached through the
// subject's supervision chain — as its controller (also when the
// controller holds a matching subscription: alsoController), as the human
// fallback, or as an escalated copy.
//
// It is false for the rest, on purpose:
//   - via subscription only: the subject's own chain got its copy (§8);
//   - via observer: an observer is an onlooker beside the chain, whose
//     controller got its own copy and climbs; escalating the observer's
//     too would page the chain twice for one event;
//   - via direct (message.sent): a message goes to its target and the
//     target's observers only (§7) — routing keeps controllers and the
//     fallback out of a conversation, so escalating it to them would undo
//     that; the sender chose the target;
//   - via takeover: the notice to a displaced holder is about the lease
//     itself.
func Eligible(via, mode string, alsoController bool, p event.Priority) bool {
	if p.Rank() < event.Attention.Rank() || mode == inbox.ModeInbox {
		return false
	}
	switch via {
	case inbox.ViaController, inbox.ViaFallback, inbox.ViaEscalation:
		return true
	case inbox.ViaSubscription:
		return alsoController
	}
	return false
}

// Facts are what the check of one entry decides on.
type Facts struct {
	Party    string
	Liveness sessions.Liveness
	SeenAt   time.Time // the recipient's last authenticated request, zero if never
	// Since is when the entry's escalation clock started: its creation,
	// its raise, or its escalated copy's arrival.
	Since       time.Time
	HasEndpoint bool // an enabled push endpoint
	Priority    event.Priority
	// EscalateUnacked is the setting of the entry's snapshot.
	EscalateUnacked []string
	// DeadLettered: a push of the entry became a dead letter.
	DeadLettered bool
}

// Decide returns why an unacked entry escalates, "" when it does not
// (docs/design.md §8): a dead-lettered push; a dead recipient; a recipient that
// has made no request since the entry and has no endpoint (unknown, or
// silent); else, for a recipient that was reached, only a priority that
// escalate_unacked names.
//
// "Since" is strict: a request just before the entry did not read it.
// The registry records a party's sightings at most once a second per
// process, so a party whose only request after the entry came within a
// second of an earlier one, and that then stays silent for all of
// escalate_after, is escalated although it read: the rare error is on the
// side of being heard, never of a silent miss. A human: party is never dead here: liveness by
// sightings and lifecycle is a session's (docs/design.md §2), and a person is
// reached through an endpoint, not by making requests.
func Decide(f Facts) string {
	switch {
	case f.DeadLettered:
		return ReasonDeadLetter
	case f.Liveness == sessions.Dead && IsSession(f.Party):
		return ReasonDead
	case !f.HasEndpoint && f.SeenAt.Before(f.Since): // never seen: the zero time
		return ReasonUnreached
	case slices.Contains(f.EscalateUnacked, string(f.Priority)):
		return ReasonUnacked
	}
	return ""
}

// IsSession reports whether party is a session:<id>.
func IsSession(party string) bool { return strings.HasPrefix(party, "session:") }

// Rung kinds: where a party stands above an entry's subject.
const (
	RungController = "controller" // the holder of a session's controller lease
	RungDefault    = "default"    // the workspace default controller
	RungFallback   = "fallback"   // the human fallback
)

// Rung is one step of the ladder an entry climbs.
type Rung struct {
	Party   string
	Kind    string // a Rung constant
	Session string // RungController: whose lease
}

// String is the rung as an escalated entry records it:
// "controller:<session>", "default" or "fallback".
func (r Rung) String() string {
	if r.Kind == RungController {
		return RungController + ":" + r.Session
	}
	return r.Kind
}

// ParseRung reads Rung.String (without the party); ok false for anything else.
func ParseRung(s string) (Rung, bool) {
	if id, ok := strings.CutPrefix(s, RungController+":"); ok && id != "" {
		return Rung{Kind: RungController, Session: id}, true
	}
	if s == RungDefault || s == RungFallback {
		return Rung{Kind: s}, true
	}
	return Rung{}, false
}

// Chain is the subject session of e followed by its lineage, nearest
// ancestor first; nil for an event about no session.
func Chain(e *event.Event) []string {
	if e.SessionID == "" {
		return nil
	}
	return append([]string{e.SessionID}, e.Lineage...)
}

// Ladder lists whom an entry about chain[0] climbs to, lowest first: the
// controllers of the chain as supervision.Applicable orders them (the
// session's own, then each ancestor's subtree controller, nearest first),
// then the workspace default controller, then the human fallback. Dead
// holders are kept here; Next passes them.
func Ladder(chain []string, edges map[string][]supervision.Edge, defaultController, fallback string) []Rung {
	var out []Rung
	for _, e := range supervision.Applicable(chain, edges) {
		if e.Role == supervision.Controller {
			out = append(out, Rung{Party: e.Holder, Kind: RungController, Session: e.Session})
		}
	}
	if defaultController != "" {
		out = append(out, Rung{Party: defaultController, Kind: RungDefault})
	}
	if fallback != "" {
		out = append(out, Rung{Party: fallback, Kind: RungFallback})
	}
	return out
}

// Height orders rungs: a controller by its session's place in chain (0
// for the subject's own), then the default, then the fallback; -1 for a
// controller of a session outside chain.
func Height(chain []string, r Rung) int {
	switch r.Kind {
	case RungController:
		return slices.Index(chain, r.Session)
	case RungDefault:
		return len(chain)
	case RungFallback:
		return len(chain) + 1
	}
	return -1
}

// Standing is the height party holds an entry at: the rung an escalated
// copy recorded (escalatedRung), else the lowest rung of the ladder the
// party holds, else -1 (below every rung: it reached the party some other
// way, or the edge has moved since).
func Standing(chain []string, ladder []Rung, party, escalatedRung string) int {
	if r, ok := ParseRung(escalatedRung); ok {
		return Height(chain, r)
	}
	for _, r := range ladder {
		if r.Party == party {
			return Height(chain, r)
		}
	}
	return -1
}

// DeadFunc tells whether a party is dead.
type DeadFunc func(ctx context.Context, party string) (bool, error)

// Next returns the first rung of ladder above height whose party is not
// skipped and not dead: a dead party is passed at once, without waiting
// for its own check (docs/design.md §8). ok false: nobody is left — the entry is
// undeliverable.
func Next(ctx context.Context, chain []string, ladder []Rung, height int, skip func(party string) bool, dead DeadFunc) (Rung, bool, error) {
	for _, r := range ladder {
		if Height(chain, r) <= height || skip(r.Party) {
			continue
		}
		d, err := dead(ctx, r.Party)
		if err != nil {
			return Rung{}, false, fmt.Errorf("liveness of %s: %w", r.Party, err)
		}
		if !d {
			return r, true, nil
		}
	}
	return Rung{}, false, nil
}

// Causer is the party that pushed e (its agent source names it), "" for
// anything else. Like the subject session itself, it is never an
// escalation target for its own event.
func Causer(e *event.Event) string {
	rest, _ := strings.CutPrefix(e.Source, "//wakegate/"+e.Workspace+"/")
	if rest == e.Source {
		return ""
	}
	return rest
}

// Slot is the whole second an escalation timer due at due is scheduled
// for, given now: the second due falls in (Asynq schedules in whole
// seconds; the timer handles what is due within Slack of its run), but
// never the current second or earlier, so it never names a timer that may
// be running already.
func Slot(due, now time.Time) time.Time {
	s := due.Truncate(time.Second)
	if next := now.Truncate(time.Second).Add(time.Second); s.Before(next) {
		s = next
	}
	return s
}

// Slack is how early a timer handles what is due: everything due within
// it of the run. With Asynq's 1 s delayed-task check and a timer at the
// start of its due second, a check runs at most Slack early and about 2 s
// late (docs/design.md §8: ±2 s).
const Slack = time.Second
