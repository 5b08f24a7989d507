package dashboard

import (
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/tracker"
)

// A PR's readiness as a person reads it: failed checks and requested
// changes win over an earlier ready; pending checks are named.
func TestPRReadiness(t *testing.T) {
	r := New(Deps{}, Config{StuckAfter: time.Hour})
	now := time.Now()
	base := func() tracker.PRState {
		return tracker.PRState{Repo: "org/r", Number: 1, Seen: true, State: "open", Head: "aaa", HeadSeenAt: now,
			Checks: map[string]tracker.CheckResult{}, Reviews: map[string]string{}}
	}
	for name, tc := range map[string]struct {
		edit  func(*tracker.PRState)
		want  string
		ready bool
		stuck bool
	}{
		"nothing reported": {func(*tracker.PRState) {}, "waiting for checks", false, false},
		"pending": {func(s *tracker.PRState) {
			s.Checks["lint"] = tracker.CheckResult{Result: "pending", At: now}
			s.Checks["build"] = tracker.CheckResult{Result: "pass", At: now}
		}, "waiting on lint", false, false},
		"ready at head":          {func(s *tracker.PRState) { s.Ready = []string{"aaa"} }, "ready", true, false},
		"ready at an older head": {func(s *tracker.PRState) { s.Ready = []string{"old"} }, "waiting for checks", false, false},
		"failed after ready": {func(s *tracker.PRState) {
			s.Ready = []string{"aaa"}
			s.Checks["build"] = tracker.CheckResult{Result: "fail", At: now}
		}, "checks failed", false, false},
		"changes requested": {func(s *tracker.PRState) {
			s.Ready = []string{"aaa"}
			s.Reviews["bob"] = "changes_requested"
		}, "changes requested", false, false},
		"draft": {func(s *tracker.PRState) { s.Draft = true }, "draft", false, false},
		"stuck": {func(s *tracker.PRState) { s.HeadSeenAt = now.Add(-2 * time.Hour) }, "waiting for checks", false, true},
	} {
		st := base()
		tc.edit(&st)
		p := r.pr("github:org/r#1", &st, now)
		if p.Readiness != tc.want || p.Ready != tc.ready || p.Stuck != tc.stuck {
			t.Errorf("%s: %q ready=%v stuck=%v, want %q %v %v", name, p.Readiness, p.Ready, p.Stuck, tc.want, tc.ready, tc.stuck)
		}
	}
}

// A session's at-a-glance state: dead first, then what it waits on, then
// stalled; unknown busy state is never working.
func TestStatus(t *testing.T) {
	r := New(Deps{}, Config{MaxTurn: time.Hour})
	now := time.Now()
	for name, tc := range map[string]struct {
		rec  sessions.Session
		want Status
	}{
		"dead waiting": {sessions.Session{Liveness: sessions.Dead, State: "session.permission_requested"}, Dead},
		"approval":     {sessions.Session{Liveness: sessions.Live, State: "session.permission_requested", Busy: "idle"}, Approval},
		"input":        {sessions.Session{Liveness: sessions.Live, State: "session.awaiting_input", Busy: "idle"}, Input},
		"working":      {sessions.Session{Liveness: sessions.Live, Busy: "busy", BusyAt: now}, Working},
		"stalled":      {sessions.Session{Liveness: sessions.Live, Busy: "busy", BusyAt: now.Add(-2 * time.Hour)}, Stalled},
		"idle":         {sessions.Session{Liveness: sessions.Live, Busy: "idle"}, Idle},
		"unknown busy": {sessions.Session{Liveness: sessions.Unknown, Busy: "unknown"}, Unknown},
	} {
		if got := r.status(&tc.rec, now); got != tc.want {
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}
}
