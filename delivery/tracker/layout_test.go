package tracker_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/github"
)

// longLayout writes PR n's tracker hash as main's code wrote it before the
// short field names (docs/design.md §3): long names, every head's
// ready:<sha>, plus extra fields.
func longLayout(e *env, n int, head string, headSeen time.Time, extra ...any) {
	e.t.Helper()
	args := append([]any{"ws", e.ws, "state", "open", "draft", "0", "merged", "0", "base", "main",
		"author", "octocat", "title", "Long layout", "labels", `["ci"]`,
		"updated_at", at(0).UnixMilli(), "head", head, "head_seen_at", headSeen.UnixMilli()}, extra...)
	if err := e.rdb.HSet(e.ctx, prKeyForTest(e, n), args...).Err(); err != nil {
		e.t.Fatal(err)
	}
}

// TestLongLayoutRead: a hash of the long layout is read (State, the
// dashboard's source), folded into, settled and claimed as before; its
// ready:<head> still makes ready once per head; a snapshot applied to it
// rewrites it in the short layout.
func TestLongLayoutRead(t *testing.T) {
	e := newEnv(t, tracker.Config{Settle: time.Hour})
	longLayout(e, 9, shaA, e.now, "ready:"+shaA, "1-0")
	st := e.state(9)
	if !st.Seen || st.Head != shaA || st.Title != "Long layout" || st.Workspace != e.ws ||
		!slices.Equal(st.Ready, []string{shaA}) || !slices.Equal(st.Labels, []string{"ci"}) ||
		st.HeadSeenAt.UnixMilli() != e.now.UnixMilli() {
		t.Fatalf("state of the long layout: %+v", st)
	}
	// its ready:<head> stands: passing checks make no second ready, a
	// failure at a head that was ready is critical
	e.apply(e.run(shaA, "build", github.ResultPass, at(1), 9))
	e.wantCount("github.pull_request.ready", 0)
	e.apply(e.run(shaA, "lint", github.ResultFail, at(2), 9))
	if f := e.wantCount("github.pull_request.checks_failed", 1)[0]; f.Priority != event.Critical {
		t.Errorf("checks_failed at a head ready before: priority %s", f.Priority)
	}

	// a snapshot rewrites it in the short layout, values kept
	e.apply(e.pr("edited", 9, shaA, at(3)))
	fields, err := e.rdb.HGetAll(e.ctx, prKeyForTest(e, 9)).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, long := range []string{"ws", "state", "draft", "merged", "base", "author", "title", "labels", "updated_at", "head", "head_seen_at"} {
		if _, ok := fields[long]; ok {
			t.Errorf("rewritten hash keeps %q: %v", long, fields)
		}
	}
	if fields["h"] != shaA || fields["hs"] != fmt.Sprint(e.now.UnixMilli()) || fields["s"] != "open" || fields["ready:"+shaA] != "1-0" {
		t.Errorf("rewritten hash: %v", fields)
	}
	st = e.state(9)
	if st.Head != shaA || st.Title != "Add feature" || !slices.Equal(st.Ready, []string{shaA}) || !slices.Equal(st.Failed, []string{shaA}) ||
		st.HeadSeenAt.UnixMilli() != e.now.UnixMilli() {
		t.Errorf("state after the rewrite: %+v", st)
	}
	e.wantCount("github.pull_request.ready", 0)

	// a claim reads the long layout (the PR is known: linked is journaled)
	longLayout(e, 10, shaB, e.now.Add(-2*time.Hour))
	if _, err := e.tr.Claim(e.ctx, e.ws, e.repo, 10, "s1", e.now); err != nil {
		t.Fatal(err)
	}
	e.wantCount("github.pull_request.linked", 1)
	// a settle member scheduled by main's code settles the long layout
	member := e.ws + "\n" + e.repo + "\n10\n" + shaB
	if err := e.rdb.ZAdd(e.ctx, settleKeyForTest(e), redisZ(e.now.Add(-time.Hour), member)).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := e.tr.SettleDue(e.ctx, e.now); err != nil || n != 1 {
		t.Fatalf("SettleDue = %d, %v; want 1", n, err)
	}
	r := e.wantCount("github.pull_request.ready", 1)[0]
	if r.Subject != event.PRSubject(e.repo, 10) || r.SessionID != "s1" {
		t.Errorf("ready %s session %q", r.Subject, r.SessionID)
	}
	if st := e.state(10); !slices.Equal(st.Ready, []string{shaB}) || st.Title != "Long layout" || st.Session != "s1" {
		t.Errorf("state after settling: %+v", st)
	}
}

// TestReadyMovesWithHead: r and f are the current head's; a new head moves
// them to ready:<sha> / failed:<sha> of the head they were for, so a head
// that comes back is still ready once.
func TestReadyMovesWithHead(t *testing.T) {
	e := newEnv(t, tracker.Config{Settle: time.Hour})
	e.apply(e.pr("opened", 1, shaA, at(0)))
	e.apply(e.run(shaA, "build", github.ResultPass, at(1), 1))
	sidA := e.rdb.HGet(e.ctx, prKeyForTest(e, 1), "r").Val()
	if sidA == "" {
		t.Fatal("no r after ready")
	}
	e.apply(e.pr("synchronize", 1, shaB, at(2)))
	fields := e.rdb.HGetAll(e.ctx, prKeyForTest(e, 1)).Val()
	if _, ok := fields["r"]; ok || fields["ready:"+shaA] != sidA {
		t.Fatalf("after a push: %v; want ready:%s = %s and no r", fields, shaA, sidA)
	}
	e.apply(e.run(shaB, "build", github.ResultPass, at(3), 1))
	e.apply(e.pr("synchronize", 1, shaA, at(4)))
	e.apply(e.run(shaA, "build", github.ResultPass, at(5), 1))
	got := ids(e.wantCount("github.pull_request.ready", 2))
	if want := []string{"pr/1/ready/" + shaA, "pr/1/ready/" + shaB}; !slices.Equal(got, want) {
		t.Errorf("ready %v, want %v", got, want)
	}
	if st := e.state(1); st.Head != shaA || !slices.Equal(st.Ready, []string{shaA, shaB}) {
		t.Errorf("state: head %s ready %v", st.Head, st.Ready)
	}
}

func settleKeyForTest(e *env) string {
	return e.j.Tag(e.j.Shard("github:"+e.repo)) + ":settle"
}

func redisZ(due time.Time, member string) redis.Z {
	return redis.Z{Score: float64(due.UnixMilli()), Member: member}
}

// TestFailedMovesWithHead: the head's checks_failed id moves to
// failed:<sha> when the head changes, and a head that comes back and fails
// again is not announced twice (docs/design.md §3).
func TestFailedMovesWithHead(t *testing.T) {
	e := newEnv(t, tracker.Config{Settle: time.Hour})
	e.apply(e.pr("opened", 1, shaA, at(0)))
	e.apply(e.run(shaA, "build", github.ResultFail, at(1), 1))
	sidA := e.rdb.HGet(e.ctx, prKeyForTest(e, 1), "f").Val()
	if sidA == "" {
		t.Fatal("no f after checks_failed")
	}
	e.apply(e.pr("synchronize", 1, shaB, at(2)))
	fields := e.rdb.HGetAll(e.ctx, prKeyForTest(e, 1)).Val()
	if _, ok := fields["f"]; ok || fields["failed:"+shaA] != sidA {
		t.Fatalf("after a push: %v; want failed:%s = %s and no f", fields, shaA, sidA)
	}
	e.apply(e.pr("synchronize", 1, shaA, at(3)))
	e.apply(e.run(shaA, "build", github.ResultFail, at(4), 2))
	if got := ids(e.wantCount("github.pull_request.checks_failed", 1)); got[0] != "pr/1/checks_failed/"+shaA {
		t.Errorf("checks_failed %v", got)
	}
}
