package supervision

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestHeldBy: the reverse index follows every way a lease moves — grant,
// takeover, a dead holder replaced, release, the spawner's default — and
// names each lease with its epoch.
func TestHeldBy(t *testing.T) {
	s, dead := newStore(t)
	ctx := context.Background()
	held := func(party string) string {
		t.Helper()
		es, err := s.HeldBy(ctx, "ws", party)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(es)
	}
	if got := held("session:boss"); got != "[]" {
		t.Fatalf("nothing held yet: %s", got)
	}
	for _, id := range []string{"b", "a"} {
		if _, _, err := supervise(s, id, "session:boss", Controller, false, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetDefaultController(ctx, "ws", "c", "boss"); err != nil {
		t.Fatal(err)
	}
	// An observer edge is no lease.
	if _, _, err := supervise(s, "d", "session:boss", Observer, false, false); err != nil {
		t.Fatal(err)
	}
	if got := held("session:boss"); got != "[{a controller session:boss subtree 1} {b controller session:boss subtree 1} {c controller session:boss subtree 1}]" {
		t.Fatalf("held by boss: %s", got)
	}
	// A takeover moves a to the new holder's set.
	if _, prev, err := supervise(s, "a", "human:ops", Controller, true, true); err != nil || prev != "session:boss" {
		t.Fatalf("takeover: %q %v", prev, err)
	}
	// A dead holder is replaced: b moves too.
	dead.set("session:boss", true)
	if _, _, err := supervise(s, "b", "session:heir", Controller, false, false); err != nil {
		t.Fatal(err)
	}
	// A release drops c.
	if err := s.Release(ctx, "ws", "c", "session:boss", Controller); err != nil {
		t.Fatal(err)
	}
	if got := held("session:boss"); got != "[]" {
		t.Fatalf("boss after takeover, replacement and release: %s", got)
	}
	if got := held("human:ops"); got != "[{a controller human:ops subtree 2}]" {
		t.Fatalf("held by ops: %s", got)
	}
	if got := held("session:heir"); got != "[{b controller session:heir subtree 2}]" {
		t.Fatalf("held by heir: %s", got)
	}
	if _, err := s.HeldBy(ctx, "ws", "session:a/b"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad party: %v", err)
	}
}

// TestEffectiveController: own if not dead, else the nearest ancestor's
// subtree controller not dead, else the workspace default if not dead.
func TestEffectiveController(t *testing.T) {
	s, dead := newStore(t)
	ctx := context.Background()
	chain := []string{"leaf", "mid", "top"}
	resolve := func(def string) string {
		t.Helper()
		edges, err := s.EdgesFor(ctx, "ws", chain)
		if err != nil {
			t.Fatal(err)
		}
		r, err := EffectiveController(ctx, "ws", chain, edges, def, dead.fn)
		if err != nil {
			t.Fatal(err)
		}
		return r.Party + " " + r.Resolved
	}
	if got := resolve(""); got != " none" {
		t.Fatalf("nobody: %q", got)
	}
	if got := resolve("human:ops"); got != "human:ops workspace_default" {
		t.Fatalf("default: %q", got)
	}
	// mid's self-scoped controller does not reach leaf; top's subtree one does.
	if _, _, err := s.Supervise(ctx, "ws", "mid", "session:m", Controller, ScopeSelf, false, false, t0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Supervise(ctx, "ws", "top", "session:t", Controller, ScopeSubtree, false, false, t0); err != nil {
		t.Fatal(err)
	}
	if got := resolve("human:ops"); got != "session:t ancestor:top" {
		t.Fatalf("inherited: %q", got)
	}
	if _, _, err := supervise(s, "leaf", "session:l", Controller, false, false); err != nil {
		t.Fatal(err)
	}
	if got := resolve(""); got != "session:l own" {
		t.Fatalf("own: %q", got)
	}
	// Dead holders are climbed past, down to the default, then to none.
	dead.set("session:l", true)
	dead.set("session:t", true)
	if got := resolve("human:ops"); got != "human:ops workspace_default" {
		t.Fatalf("dead chain: %q", got)
	}
	dead.set("human:ops", true)
	if got := resolve("human:ops"); got != " none" {
		t.Fatalf("dead default: %q", got)
	}
	// Applicable lists own edges, then ancestors' subtree edges.
	edges, _ := s.EdgesFor(ctx, "ws", chain)
	if got := fmt.Sprint(Applicable(chain, edges)); got != "[{leaf controller session:l subtree 1} {top controller session:t subtree 1}]" {
		t.Fatalf("applicable: %s", got)
	}
	boom := errors.New("boom")
	dead.err = boom
	if _, err := EffectiveController(ctx, "ws", chain, edges, "", dead.fn); !errors.Is(err, boom) {
		t.Fatalf("liveness error: %v", err)
	}
}
