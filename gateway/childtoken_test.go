package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/providers/agent"
)

const spawnScope = "spawn events:push inbox supervise"

// mint asks for a token for child as sub.
func (e *env) mint(sub, child string) answer {
	e.t.Helper()
	return e.do("POST", "/v1/sessions/"+child+"/token", sub, spawnScope, `{"scope": "events:push inbox"}`)
}

func hasEntryAbout(entries []inbox.Entry, subject, typ string) bool {
	for _, en := range entries {
		if en.Subject == subject && en.Type == typ {
			return true
		}
	}
	return false
}

// The child-token route mints for a new session (created as the caller's
// child) or re-issues within the caller's own subtree; a sibling, a cousin
// or a stranger — a session or a human: caller — gets 403, and nothing of
// the target's parent or lease moves (docs/design.md §4).
func TestChildTokenOnlyWithinOwnSubtree(t *testing.T) {
	e := newEnvConfig(t, Config{TokenSecret: []byte(testSecret)})
	e.do("PUT", "/v1/workspace/supervision", "human:admin", "admin", `{"default_controller": "session:boss"}`).want(t, 200)

	// alice, a root session, spawns worker1 and worker2; worker1 spawns g1.
	if a := e.mint("session:alice", "worker1").want(t, 200); a.str("parent") != "alice" || a.str("token") == "" {
		t.Fatalf("alice's new child worker1: %s", a.raw)
	}
	e.mint("session:alice", "worker2").want(t, 200)
	e.mint("session:worker1", "g1").want(t, 200)
	e.push("session:alice", "alice", "session.turn_started", "") // alice exists on its own

	// Strangers, siblings, cousins, children upwards: 403, session or human.
	for _, c := range []struct{ caller, child string }{
		{"session:eve", "worker1"},     // a stranger: the hijack of a child
		{"session:eve", "alice"},       // a stranger adopting a root session
		{"session:worker2", "worker1"}, // a sibling
		{"session:worker2", "g1"},      // an uncle
		{"session:worker1", "alice"},   // a child upwards
		{"session:g1", "worker2"},      // a cousin... of its parent
		{"human:mallory", "worker1"},
		{"human:mallory", "alice"},
	} {
		if a := e.mint(c.caller, c.child).want(t, 403); !strings.Contains(a.str("detail"), "subtree") {
			t.Errorf("%s minting for %s: %s", c.caller, c.child, a.raw)
		}
	}

	// Nothing moved: parents and controllers are as spawned.
	for child, want := range map[string]string{"worker1": "session:alice", "g1": "session:worker1"} {
		if a := e.do("GET", "/v1/sessions/"+child+"/supervision", "session:alice", supScope, "").want(t, 200); strings.Contains(string(a.raw), "eve") ||
			strings.Contains(string(a.raw), "mallory") || !strings.Contains(string(a.raw), want) {
			t.Errorf("%s's supervision after the refused mints: %s, want %s controlling", child, a.raw, want)
		}
	}
	if s, err := e.reg.Get(e.ctx, tws, "session:alice", time.Now()); err != nil || s.Parent != "" {
		t.Fatalf("alice's parent is %q (%v), want none", s.Parent, err)
	}
	// alice's permission request reaches the workspace's controller, not eve.
	e.push("session:alice", "alice", "session.permission_requested", `{"tool": "Bash"}`)
	e.events("session.permission_requested")
	if !hasEntryAbout(e.inbox("session:boss"), "session:alice", "session.permission_requested") {
		t.Fatalf("boss (default controller) has no entry for alice's permission request: %+v", e.inbox("session:boss"))
	}
	if got := e.inbox("session:eve"); len(got) != 0 {
		t.Fatalf("eve's inbox has %+v", got)
	}

	// Re-issue within the subtree: parent, ancestor, itself.
	for _, c := range []struct{ caller, child, parent string }{
		{"session:alice", "worker1", "alice"},
		{"session:alice", "g1", "worker1"},
		{"session:worker1", "g1", "worker1"},
		{"session:g1", "g1", ""},
	} {
		if a := e.mint(c.caller, c.child).want(t, 200); a.str("parent") != c.parent {
			t.Errorf("%s re-issuing for %s: %s, want parent %q", c.caller, c.child, a.raw, c.parent)
		}
	}

	// A human: caller mints a new session: its minter, no parent, no lease;
	// it re-issues for it and for its descendants, and nobody else does.
	if a := e.mint("human:ops", "h1").want(t, 200); a.str("parent") != "" {
		t.Fatalf("human:ops's new session h1: %s, want no parent", a.raw)
	}
	if s, _ := e.reg.Get(e.ctx, tws, "session:h1", time.Now()); s.Parent != "" {
		t.Fatalf("h1 has parent %q", s.Parent)
	}
	if a := e.do("GET", "/v1/sessions/h1/supervision", "human:ops", supScope, "").want(t, 200); strings.Contains(string(a.raw), "human:ops") {
		t.Errorf("h1's supervision names its minter: %s", a.raw)
	}
	e.mint("session:h1", "h2").want(t, 200)
	e.mint("human:ops", "h1").want(t, 200)
	e.mint("human:ops", "h2").want(t, 200)
	e.mint("human:mallory", "h1").want(t, 403)
	e.mint("human:mallory", "h2").want(t, 403)
	e.mint("session:alice", "h1").want(t, 403)
}

// A child token carries the configured issuer, so a gateway that
// requires one accepts it.
func TestChildTokenCarriesIssuer(t *testing.T) {
	e := newEnvConfig(t, Config{TokenSecret: []byte(testSecret), TokenIssuer: "https://wakegate.example"})
	a := e.mint("session:alice", "worker1").want(t, 200)
	v, err := agent.NewVerifier(agent.VerifierConfig{HS256Secret: []byte(testSecret), Issuer: "https://wakegate.example"})
	if err != nil {
		t.Fatal(err)
	}
	if cl, err := v.Verify(a.str("token")); err != nil || cl.Issuer != "https://wakegate.example" {
		t.Fatalf("the child token does not verify where the issuer is required: %v", err)
	}
}
