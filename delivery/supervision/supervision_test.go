package supervision

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/redistest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// deadSet is a DeadFunc over a set of dead parties.
type deadSet struct {
	mu   sync.Mutex
	dead map[string]bool
	err  error
}

func (d *deadSet) set(party string, dead bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead[party] = dead
}

func (d *deadSet) fn(_ context.Context, _, party string) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dead[party], d.err
}

func newStore(t *testing.T) (*Store, *deadSet) {
	t.Helper()
	rdb, prefix := redistest.New(t)
	d := &deadSet{dead: map[string]bool{}}
	return New(rdb, prefix, d.fn), d
}

func supervise(s *Store, session, caller, role string, takeover, may bool) (Edge, string, error) {
	return s.Supervise(context.Background(), "ws", session, caller, role, "", takeover, may, t0)
}

func mustEdge(t *testing.T, e Edge, prev string, err error, holder string, epoch int64, wantPrev string) {
	t.Helper()
	if err != nil {
		t.Fatalf("supervise: %v", err)
	}
	if e.Holder != holder || e.Epoch != epoch || e.Role != Controller || prev != wantPrev {
		t.Fatalf("got %+v prev %q, want holder %s epoch %d prev %q", e, prev, holder, epoch, wantPrev)
	}
}

func TestControllerLease(t *testing.T) {
	s, dead := newStore(t)
	ctx := context.Background()

	// Free: granted at epoch 1, scope subtree by default.
	e, prev, err := supervise(s, "kid", "session:boss", Controller, false, false)
	mustEdge(t, e, prev, err, "session:boss", 1, "")
	if e.Scope != ScopeSubtree || e.Session != "kid" {
		t.Fatalf("edge %+v", e)
	}
	// The same holder again: same epoch; its scope follows the request.
	e, prev, err = s.Supervise(ctx, "ws", "kid", "session:boss", Controller, ScopeSelf, false, false, t0)
	mustEdge(t, e, prev, err, "session:boss", 1, "")
	if e.Scope != ScopeSelf {
		t.Fatalf("scope not updated: %+v", e)
	}
	// The same holder asking with takeover is still idempotent.
	e, prev, err = supervise(s, "kid", "session:boss", Controller, true, false)
	mustEdge(t, e, prev, err, "session:boss", 1, "")

	// Held by a party that is not dead: 409 with holder and epoch.
	_, _, err = supervise(s, "kid", "session:rival", Controller, false, true)
	var held *HeldError
	if !errors.As(err, &held) || !errors.Is(err, ErrHeld) || held.Holder != "session:boss" || held.Epoch != 1 {
		t.Fatalf("second supervisor: %v", err)
	}
	// A takeover the caller may not make: 403, nothing changes.
	if _, _, err = supervise(s, "kid", "session:rival", Controller, true, false); !errors.Is(err, ErrForbidden) {
		t.Fatalf("forbidden takeover: %v", err)
	}
	if got, _ := s.Get(ctx, "ws", "kid"); len(got) != 1 || got[0].Holder != "session:boss" || got[0].Epoch != 1 {
		t.Fatalf("after a refused takeover: %+v", got)
	}
	// An allowed takeover: new holder, epoch+1, the previous holder named.
	e, prev, err = supervise(s, "kid", "human:ops", Controller, true, true)
	mustEdge(t, e, prev, err, "human:ops", 2, "session:boss")

	// A dead holder is replaced without a takeover; it is not named.
	dead.set("human:ops", true)
	e, prev, err = supervise(s, "kid", "session:boss", Controller, false, false)
	mustEdge(t, e, prev, err, "session:boss", 3, "")

	// Release: only the holder; the epoch keeps growing afterwards.
	if err := s.Release(ctx, "ws", "kid", "session:rival", Controller); !errors.Is(err, ErrNotFound) {
		t.Fatalf("release by a non-holder: %v", err)
	}
	if err := s.Release(ctx, "ws", "kid", "session:boss", Observer); !errors.Is(err, ErrNotFound) {
		t.Fatalf("release of an edge the caller lacks: %v", err)
	}
	if got, _ := s.Get(ctx, "ws", "kid"); len(got) != 1 || got[0].Holder != "session:boss" {
		t.Fatalf("a refused release changed the lease: %+v", got)
	}
	if err := s.Release(ctx, "ws", "kid", "session:boss", Controller); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, "ws", "kid"); len(got) != 0 {
		t.Fatalf("after release: %+v", got)
	}
	if err := s.Release(ctx, "ws", "kid", "session:boss", Controller); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second release: %v", err)
	}
	e, prev, err = supervise(s, "kid", "session:rival", Controller, false, false)
	mustEdge(t, e, prev, err, "session:rival", 4, "")
}

func TestUnknownHolderIsNotDeadAndLivenessErrors(t *testing.T) {
	s, dead := newStore(t)
	// A holder never seen (unknown) holds like a live one.
	e, prev, err := supervise(s, "kid", "session:ghost", Controller, false, false)
	mustEdge(t, e, prev, err, "session:ghost", 1, "")
	if _, _, err := supervise(s, "kid", "session:boss", Controller, false, false); !errors.Is(err, ErrHeld) {
		t.Fatalf("unknown holder: %v", err)
	}
	boom := errors.New("registry down")
	dead.err = boom
	if _, _, err := supervise(s, "kid", "session:boss", Controller, true, true); !errors.Is(err, boom) {
		t.Fatalf("liveness error: %v", err)
	}
}

func TestSuperviseRefusesBadInput(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	for name, f := range map[string]func() error{
		"self": func() error {
			_, _, err := supervise(s, "kid", "session:kid", Controller, false, false)
			return err
		},
		"bad role": func() error { _, _, err := supervise(s, "kid", "session:boss", "driver", false, false); return err },
		"bad scope": func() error {
			_, _, err := s.Supervise(ctx, "ws", "kid", "session:boss", Observer, "all", false, false, t0)
			return err
		},
		"caller with slash": func() error { _, _, err := supervise(s, "kid", "session:a/b", Observer, false, false); return err },
		"caller not a party": func() error {
			_, _, err := supervise(s, "kid", "boss", Observer, false, false)
			return err
		},
		"session with newline": func() error { _, _, err := supervise(s, "a\nb", "session:boss", Observer, false, false); return err },
		"session 200 chars": func() error {
			_, _, err := supervise(s, string(make([]byte, 200)), "session:boss", Observer, false, false)
			return err
		},
		"bad workspace": func() error {
			_, _, err := s.Supervise(ctx, "w/s", "kid", "session:boss", Observer, "", false, false, t0)
			return err
		},
		"edges of a bad session": func() error { _, err := s.EdgesFor(ctx, "ws", []string{"ok", "no/pe"}); return err },
		"release bad role":       func() error { return s.Release(ctx, "ws", "kid", "session:boss", "x") },
		"default parent = child": func() error { return s.SetDefaultController(ctx, "ws", "kid", "kid") },
	} {
		if err := f(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	if got, _ := s.Get(ctx, "ws", "kid"); len(got) != 0 {
		t.Fatalf("refused requests wrote %+v", got)
	}
}

func TestObservers(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	if _, _, err := supervise(s, "kid", "session:boss", Controller, false, false); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"human:ops", "session:peer", "session:boss"} {
		e, prev, err := supervise(s, "kid", p, Observer, false, false)
		if err != nil || e.Role != Observer || e.Scope != ScopeSelf || e.Epoch != 0 || prev != "" {
			t.Fatalf("observe as %s: %+v %v", p, e, err)
		}
	}
	// Asking again updates the scope; it adds no edge.
	if _, _, err := s.Supervise(ctx, "ws", "kid", "human:ops", Observer, ScopeSubtree, false, false, t0); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "ws", "kid")
	if err != nil {
		t.Fatal(err)
	}
	want := "[{kid controller session:boss subtree 1} {kid observer human:ops subtree 0} {kid observer session:boss self 0} {kid observer session:peer self 0}]"
	if fmt.Sprint(got) != want {
		t.Fatalf("edges\n got %v\nwant %s", got, want)
	}
	if err := s.Release(ctx, "ws", "kid", "session:peer", Observer); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, "ws", "kid", "session:peer", Observer); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second release: %v", err)
	}
	if got, _ := s.Get(ctx, "ws", "kid"); len(got) != 3 {
		t.Fatalf("after release: %v", got)
	}
}

func TestSetDefaultController(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	if err := s.SetDefaultController(ctx, "ws", "kid", "boss"); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Get(ctx, "ws", "kid")
	if fmt.Sprint(got) != "[{kid controller session:boss subtree 1}]" {
		t.Fatalf("default: %v", got)
	}
	// One is set: a second spawn-time default changes nothing.
	if err := s.SetDefaultController(ctx, "ws", "kid", "other"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, "ws", "kid"); fmt.Sprint(got) != "[{kid controller session:boss subtree 1}]" {
		t.Fatalf("default overwrote: %v", got)
	}
	// A controller chosen before the spawn is kept too.
	if _, _, err := supervise(s, "kid2", "human:ops", Controller, false, false); err != nil {
		t.Fatal(err)
	}
	if err := s.SetDefaultController(ctx, "ws", "kid2", "boss"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, "ws", "kid2"); got[0].Holder != "human:ops" {
		t.Fatalf("default replaced a chosen controller: %v", got)
	}
	// The spawner holds a real lease: the same rules apply to it.
	if _, _, err := supervise(s, "kid", "session:rival", Controller, false, false); !errors.Is(err, ErrHeld) {
		t.Fatalf("spawner's lease: %v", err)
	}
}

func TestEdgesForLineage(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	must := func(_ Edge, _ string, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// root ← boss ← kid ← gk (nearest first in a lineage).
	must(supervise(s, "kid", "session:boss", Controller, false, false))
	must(supervise(s, "kid", "human:watch", Observer, false, false))
	must(s.Supervise(ctx, "ws", "boss", "session:root", Controller, ScopeSubtree, false, false, t0))
	must(s.Supervise(ctx, "ws", "root", "human:ops", Observer, ScopeSubtree, false, false, t0))
	must(supervise(s, "elsewhere", "session:x", Controller, false, false))

	got, err := s.EdgesFor(ctx, "ws", []string{"gk", "kid", "boss", "root"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got["gk"] != nil {
		t.Fatalf("sessions: %v", got)
	}
	if fmt.Sprint(got["kid"]) != "[{kid controller session:boss subtree 1} {kid observer human:watch self 0}]" ||
		fmt.Sprint(got["boss"]) != "[{boss controller session:root subtree 1}]" ||
		fmt.Sprint(got["root"]) != "[{root observer human:ops subtree 0}]" {
		t.Fatalf("edges: %v", got)
	}
	if got, err := s.EdgesFor(ctx, "ws", nil); err != nil || len(got) != 0 {
		t.Fatalf("no sessions: %v %v", got, err)
	}
	if got, _ := s.EdgesFor(ctx, "other", []string{"kid"}); len(got) != 0 {
		t.Fatalf("another workspace sees %v", got)
	}
}

func TestConcurrentLeaseRequests(t *testing.T) {
	s, dead := newStore(t)
	ctx := context.Background()
	run := func(name string, callers int) (winners []Edge, heldErrs int) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				e, _, err := supervise(s, "kid", fmt.Sprintf("session:%s%d", name, i), Controller, false, false)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					winners = append(winners, e)
				case errors.Is(err, ErrHeld):
					heldErrs++
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		return winners, heldErrs
	}
	// A free lease: exactly one of 20 wins.
	winners, held := run("a", 20)
	if len(winners) != 1 || held != 19 || winners[0].Epoch != 1 {
		t.Fatalf("free lease: %d winners %v, %d held", len(winners), winners, held)
	}
	// Its holder dies: again exactly one of 20 others replaces it, at epoch 2.
	dead.set(winners[0].Holder, true)
	winners, held = run("b", 20)
	if len(winners) != 1 || winners[0].Epoch != 2 {
		t.Fatalf("dead holder: %d winners %v, %d held", len(winners), winners, held)
	}
	got, _ := s.Get(ctx, "ws", "kid")
	if got[0].Holder != winners[0].Holder || got[0].Epoch != 2 {
		t.Fatalf("stored %v, winner %v", got, winners[0])
	}
}
