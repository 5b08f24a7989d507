package supervision

import (
	"sync"
	"time"
)

// Window reports whether t falls inside a quiet-hours period and, if so,
// when that period ends.
//
// A period starts on a local date D at the first instant the wall clock
// in the window's time zone reads Start, and ends at the first instant
// after that when it reads End (on D, or on D+1 when the window spans
// midnight). Read this way the window is DST-safe:
//   - a Start or End that a spring-forward skips happens at the transition
//     (the first instant whose wall clock is past it), so a period never
//     runs an hour long or starts an hour late;
//   - a Start or End that a fall-back repeats happens at its first
//     occurrence, so a period ends once and does not come back for the
//     repeated hour.
//
// Every instant is in at most one period, and the end Window answers is
// exactly the instant from which Window reports false: a hold released at
// it never meets the same period again.
func (q *QuietHours) Window(t time.Time) (end time.Time, ok bool) {
	if q == nil || !hhmm.MatchString(q.Start) || !hhmm.MatchString(q.End) || q.Start == q.End {
		return time.Time{}, false
	}
	loc, err := location(q.TZ)
	if err != nil {
		return time.Time{}, false
	}
	sm, em := minutes(q.Start), minutes(q.End)
	span := 0 // the end is on the start's date
	if em <= sm {
		span = 1 // the end is on the next date
	}
	y, m, d := t.In(loc).Date()
	// A period containing t started on t's local date or the day before
	// (periods are under a day long, and t's date is at most one day past
	// the start's).
	for _, back := range []int{0, 1} {
		s := firstAt(loc, y, m, d-back, sm)
		e := firstAt(loc, y, m, d-back+span, em)
		if !t.Before(s) && t.Before(e) {
			return e, true
		}
	}
	return time.Time{}, false
}

// Contains reports whether t falls inside the quiet window (start
// inclusive, end exclusive) in the window's time zone: see Window.
func (q *QuietHours) Contains(t time.Time) bool {
	_, ok := q.Window(t)
	return ok
}

// firstAt is the first instant of local date (y, m, d) — normalized, so d
// may be out of range — at which the wall clock in loc reads the minute of
// day mod or later.
func firstAt(loc *time.Location, y int, m time.Month, d, mod int) time.Time {
	naive := time.Date(y, m, d, mod/60, mod%60, 0, 0, time.UTC) // the wall reading, as if loc were UTC
	guess := time.Date(y, m, d, mod/60, mod%60, 0, 0, loc)
	// The offsets in effect around the reading: zone changes are months
	// apart, so the day before and the day after cover both sides of one.
	var best time.Time
	minOff := 0
	for i, probe := range []time.Time{guess.Add(-24 * time.Hour), guess, guess.Add(24 * time.Hour)} {
		_, off := probe.Zone()
		if i == 0 || off < minOff {
			minOff = off
		}
		inst := naive.Add(-time.Duration(off) * time.Second)
		if _, o := inst.In(loc).Zone(); o == off && (best.IsZero() || inst.Before(best)) {
			best = inst // the wall clock really reads mod at inst
		}
	}
	if !best.IsZero() {
		return best
	}
	// Skipped by a spring-forward: read with the offset before the jump,
	// the instant lies after it, in the zone the jump began; the first
	// instant past the reading is that zone's start.
	inst := naive.Add(-time.Duration(minOff) * time.Second).In(loc)
	start, _ := inst.ZoneBounds()
	if start.IsZero() {
		return inst
	}
	return start
}

// locations caches loaded time zones: time.LoadLocation parses the zone
// database on every call, and Window runs for every held wake.
var locations sync.Map // name → *time.Location

func location(name string) (*time.Location, error) {
	if l, ok := locations.Load(name); ok {
		return l.(*time.Location), nil
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	locations.Store(name, l)
	return l, nil
}
