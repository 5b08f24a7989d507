package health_test

import (
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/github"
	"github.com/wakegate/wakegate/workers/health"
)

// sweepTogether runs a pass of each sweeper at once, as two workers whose
// ticks overlap, and returns the events they journaled together.
func (w *world) sweepTogether(now time.Time, sws ...*health.Sweeper) int {
	w.t.Helper()
	var wg sync.WaitGroup
	stats := make([]health.Stats, len(sws))
	errs := make([]error, len(sws))
	for i, sw := range sws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stats[i], errs[i] = sw.Sweep(w.ctx, now)
		}()
	}
	wg.Wait()
	n := 0
	for i := range sws {
		if errs[i] != nil {
			w.t.Fatalf("sweeper %d: %v", i, errs[i])
		}
		n += stats[i].Synthesized
	}
	return n
}

// A session busy past WAKEGATE_MAX_TURN with no heartbeat is stalled: the
// sweep journals session.stalled once — not before its due, once when two
// sweepers run at once, never again on re-runs (even with the sweep's own
// memory of it gone: the journal's fact id dedups) — and the router
// delivers it to the session's controller. A heartbeat (never journaled)
// starts a new silence: the due index finds it, and it stalls again under
// a new fact id. A turn end, and an exited session, never stall.
func TestStalledOnce(t *testing.T) {
	w := newWorld(t, health.Config{MaxTurn: time.Hour})
	w.settings(`{"default_controller": "human:ops"}`) // no I1 finding: those are rechecked every pass
	w.spawn("boss", "")
	w.spawn("busy1", "boss")
	w.spawn("calm", "boss")
	w.push("session:busy1", "busy1", "session.turn_started", "")
	w.push("session:calm", "calm", "session.turn_started", "")
	w.now = w.at(5 * time.Minute)
	w.push("session:calm", "calm", "session.turn_ended", `{"idle":false}`)
	w.routeAll()

	if st := w.sweep(w.sw, w.at(10*time.Minute)); st.Synthesized != 0 {
		t.Fatalf("stalled before its time: %+v", st)
	}
	// Due at t0+1h exactly: a millisecond before, nothing is evaluated.
	if st := w.sweep(w.sw, w.at(time.Hour-time.Millisecond)); st.Sessions != 0 || st.Synthesized != 0 {
		t.Fatalf("a pass before the due evaluated %d sessions, synthesized %d", st.Sessions, st.Synthesized)
	}
	other := w.sweeper()
	if n := w.sweepTogether(w.at(time.Hour), w.sw, other); n != 1 {
		t.Fatalf("two sweepers at the due journaled %d, want 1", n)
	}
	wantID := "stalled/busy1/" + strconv.FormatInt(w.t0.UnixMilli(), 10)
	got := w.ofType("session.stalled")
	if len(got) != 1 || got[0].ID != wantID || got[0].SessionID != "busy1" || got[0].Subject != "session:busy1" ||
		got[0].Priority != event.Attention || got[0].Source != event.ServerSource(ws) || len(got[0].Lineage) != 1 {
		t.Fatalf("stalled events %+v, want one %s about busy1, attention, with its lineage", got, wantID)
	}
	// Re-runs: nothing more, even when the sweep forgot what it emitted.
	w.sweep(w.sw, w.at(time.Hour+time.Minute))
	w.rdb.Del(w.ctx, w.prefix+":{hl:"+ws+"}:emitted")
	w.sweep(other, w.at(time.Hour+2*time.Minute))
	if got := ids(w.ofType("session.stalled")); len(got) != 1 {
		t.Fatalf("re-runs journaled again: %v", got)
	}
	w.routeAll()
	if e, err := w.box.Get(w.ctx, ws, "session:boss", "session:busy1"); err != nil || e == nil || e.Type != "session.stalled" {
		t.Fatalf("boss's entry about busy1: %+v, %v; want the stalled alarm", e, err)
	}

	// A heartbeat at +2h: a new silence, found through the due index (a
	// heartbeat is never journaled), stalled at +3h under a new id.
	w.now = w.at(2 * time.Hour)
	w.push("session:busy1", "busy1", "session.heartbeat", "")
	if st := w.sweep(w.sw, w.at(2*time.Hour+30*time.Minute)); st.Synthesized != 0 {
		t.Fatalf("stalled within the new turn: %+v", st)
	}
	if st := w.sweep(w.sw, w.at(3*time.Hour)); st.Synthesized != 1 {
		t.Fatalf("the second silence: %+v, want one stalled", st)
	}
	want := []string{wantID, "stalled/busy1/" + strconv.FormatInt(w.at(2*time.Hour).UnixMilli(), 10)}
	slices.Sort(want)
	if got := ids(w.ofType("session.stalled")); !slices.Equal(got, want) {
		t.Fatalf("stalled ids %v, want %v", got, want)
	}
	// calm ended its turn; an exited session is never busy.
	w.now = w.at(3 * time.Hour)
	w.push("session:busy1", "busy1", "session.exited", "")
	w.sweep(w.sw, w.at(9*time.Hour))
	for _, e := range w.ofType("session.stalled") {
		if e.SessionID != "busy1" {
			t.Errorf("stalled about %s", e.SessionID)
		}
	}
	if n := len(w.ofType("session.stalled")); n != 2 {
		t.Errorf("%d stalled events, want 2", n)
	}
}

// An open PR, not a draft, with the same head and no new check result for
// WAKEGATE_PR_STUCK_AFTER is stuck: github.pull_request.stuck is journaled
// once per head — a new result moves the due, two sweepers journal it
// once, a re-run never again, a new head starts over; drafts and closed
// PRs never stick. The PR's linked session carries it to its chain.
func TestStuckOncePerHead(t *testing.T) {
	w := newWorld(t, health.Config{StuckAfter: 6 * time.Hour})
	const repo = "org/app"
	subj := event.PRSubject(repo, 7)
	w.spawn("author", "")
	if _, err := w.tr.Claim(w.ctx, ws, repo, 7, "author", w.now); err != nil {
		t.Fatal(err)
	}
	w.apply(pr(repo, "opened", 7, "aaa", w.now))
	w.apply(pr(repo, "opened", 8, "ddd", w.now, func(p *github.PRFact) { p.Draft = true }))
	w.sweep(w.sw, w.at(time.Hour))
	// A result at head at +2h: stuck no earlier than +8h.
	w.now = w.at(2 * time.Hour)
	w.apply(checkRun(repo, "aaa", "build", github.ResultPass, w.now, 7))
	w.sweep(w.sw, w.at(3*time.Hour))
	if st := w.sweep(w.sw, w.at(7*time.Hour)); st.PRs != 0 || st.Synthesized != 0 {
		t.Fatalf("between the result and its due: evaluated %d PRs, synthesized %d", st.PRs, st.Synthesized)
	}
	if n := w.sweepTogether(w.at(8*time.Hour), w.sw, w.sweeper()); n != 1 {
		t.Fatalf("two sweepers at the due journaled %d stuck, want 1", n)
	}
	w.rdb.Del(w.ctx, w.prefix+":{hl:"+ws+"}:emitted")
	w.now = w.at(8*time.Hour + time.Minute)
	w.apply(pr(repo, "labeled", 7, "aaa", w.now)) // the subject changes, the head and its results do not
	w.sweep(w.sw, w.at(9*time.Hour))
	got := w.ofType("github.pull_request.stuck")
	if len(got) != 1 || got[0].ID != "stuck/"+subj+"/aaa" || got[0].SessionID != "author" || got[0].Subject != subj ||
		got[0].Source != event.GitHubSource(repo) || got[0].Priority != event.Attention {
		t.Fatalf("stuck events %+v, want one stuck/%s/aaa about author's PR", got, subj)
	}
	// A new head starts over.
	w.now = w.at(10 * time.Hour)
	w.apply(pr(repo, "synchronize", 7, "bbb", w.now))
	w.sweep(w.sw, w.at(15*time.Hour))
	if n := len(w.ofType("github.pull_request.stuck")); n != 1 {
		t.Fatalf("stuck before the new head's time: %d", n)
	}
	w.sweep(w.sw, w.at(16*time.Hour))
	if got := ids(w.ofType("github.pull_request.stuck")); len(got) != 2 || got[1] != "stuck/"+subj+"/bbb" {
		t.Fatalf("stuck ids %v, want the new head's too", got)
	}
	// Closed: never again; the draft never.
	w.now = w.at(17 * time.Hour)
	w.apply(pr(repo, "closed", 7, "bbb", w.now))
	w.sweep(w.sw, w.at(40*time.Hour))
	for _, e := range w.ofType("github.pull_request.stuck") {
		if e.Subject != subj {
			t.Errorf("stuck about %s (a draft)", e.Subject)
		}
	}
	if n := len(w.ofType("github.pull_request.stuck")); n != 2 {
		t.Errorf("%d stuck events, want 2", n)
	}
}

// A pass does no work for what did not change: after a first pass over
// many sessions, a pass with nothing journaled and nothing due evaluates
// nothing; one event evaluates its session and its recipient only.
func TestUnchangedSubjectsSkipped(t *testing.T) {
	w := newWorld(t, health.Config{})
	w.settings(`{"default_controller": "human:ops"}`) // no I1 finding: those are rechecked every pass
	w.spawn("boss", "")
	for i := range 30 {
		w.spawn("kid"+strconv.Itoa(i), "boss")
	}
	w.routeAll()
	first := w.sweep(w.sw, w.at(time.Minute))
	if first.Sessions != 31 || first.Parties == 0 {
		t.Fatalf("first pass: %+v, want the 31 sessions and boss evaluated", first)
	}
	if st := w.sweep(w.sw, w.at(2*time.Minute)); st.Evaluated != 0 {
		t.Fatalf("a pass with nothing changed evaluated %d (%+v)", st.Evaluated, st)
	}
	w.now = w.at(3 * time.Minute)
	w.push("session:kid7", "kid7", "session.turn_ended", `{"idle":true}`)
	w.routeAll()
	st := w.sweep(w.sw, w.at(4*time.Minute))
	if st.Sessions != 1 || st.Parties != 1 || st.Evaluated != 2 {
		t.Fatalf("after one event: %+v, want kid7 and its recipient boss only", st)
	}
	// A resync is due an hour after each evaluation: then every session
	// again, and only then.
	if st := w.sweep(w.sw, w.at(time.Hour)); st.Sessions != 0 {
		t.Fatalf("before the resync: %d sessions", st.Sessions)
	}
	if st := w.sweep(w.sw, w.at(time.Hour+5*time.Minute)); st.Sessions != 31 {
		t.Fatalf("at the resync: %d sessions, want 31", st.Sessions)
	}
}

// A session paused until a time (a known wait declared while
// busy) still stalls, and its stalled alarm surfaces at first sight; the
// next one within the resurface interval is held back by the router
// (inbox-only: in the controller's inbox, waking nobody).
func TestStalledPausedSession(t *testing.T) {
	w := newWorld(t, health.Config{MaxTurn: time.Hour})
	w.settings(`{"default_controller": "human:ops"}`)
	w.spawn("boss", "")
	w.spawn("p1", "boss")
	w.push("session:p1", "p1", "session.turn_started", "")
	w.now = w.at(time.Minute)
	w.push("session:p1", "p1", "session.paused", `{"until":"`+w.at(10*time.Hour).UTC().Format(time.RFC3339)+`","reason":"waiting on CI"}`)
	w.routeAll()
	w.sweep(w.sw, w.at(time.Hour))
	w.routeAll()
	first, err := w.box.Get(w.ctx, ws, "session:boss", "session:p1")
	if err != nil || first == nil || first.Type != "session.stalled" || !first.Wake {
		t.Fatalf("boss's entry after the first stall: %+v, %v; want it to wake (first sight)", first, err)
	}
	w.now = w.at(90 * time.Minute)
	w.push("session:p1", "p1", "session.heartbeat", "")
	if st := w.sweep(w.sw, w.at(150*time.Minute)); st.Synthesized != 1 {
		t.Fatalf("the second silence: %+v", st)
	}
	w.routeAll()
	second, err := w.box.Get(w.ctx, ws, "session:boss", "session:p1")
	if err != nil || second == nil || second.Count != first.Count+1 || second.Wake || second.Kind != "digest" {
		t.Fatalf("boss's entry after the second stall: %+v, %v; want it folded in, waking nobody", second, err)
	}
}
