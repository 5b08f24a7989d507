package escalate_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/escalate"
	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/event"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestDecide(t *testing.T) {
	since := t0
	base := escalate.Facts{Party: "session:mid", Since: since, Priority: event.Attention}
	with := func(f func(*escalate.Facts)) escalate.Facts {
		x := base
		f(&x)
		return x
	}
	for _, tc := range []struct {
		name string
		f    escalate.Facts
		want string
	}{
		{"unknown, no endpoint", with(func(f *escalate.Facts) { f.Liveness = sessions.Unknown }), escalate.ReasonUnreached},
		{"unknown with an endpoint", with(func(f *escalate.Facts) { f.Liveness, f.HasEndpoint = sessions.Unknown, true }), ""},
		{"silent since before the entry, no endpoint", with(func(f *escalate.Facts) {
			f.Liveness, f.SeenAt = sessions.Live, since.Add(-time.Minute)
		}), escalate.ReasonUnreached},
		{"seen just before the entry", with(func(f *escalate.Facts) {
			f.Liveness, f.SeenAt = sessions.Live, since.Add(-100*time.Millisecond)
		}), escalate.ReasonUnreached},
		{"seen as the entry arrived", with(func(f *escalate.Facts) { f.Liveness, f.SeenAt = sessions.Live, since }), ""},
		{"seen since the entry", with(func(f *escalate.Facts) { f.Liveness, f.SeenAt = sessions.Live, since.Add(time.Second) }), ""},
		{"silent with an endpoint", with(func(f *escalate.Facts) {
			f.Liveness, f.SeenAt, f.HasEndpoint = sessions.Live, since.Add(-time.Minute), true
		}), ""},
		{"dead session, even with an endpoint and seen", with(func(f *escalate.Facts) {
			f.Liveness, f.SeenAt, f.HasEndpoint = sessions.Dead, since.Add(time.Second), true
		}), escalate.ReasonDead},
		{"a human is never dead", with(func(f *escalate.Facts) {
			f.Party, f.Liveness, f.SeenAt, f.HasEndpoint = "human:ops", sessions.Dead, since.Add(-time.Hour), true
		}), ""},
		{"live, critical, escalate_unacked critical", with(func(f *escalate.Facts) {
			f.Liveness, f.SeenAt, f.Priority, f.EscalateUnacked = sessions.Live, since.Add(time.Second), event.Critical, []string{"critical"}
		}), escalate.ReasonUnacked},
		{"live, attention, escalate_unacked critical", with(func(f *escalate.Facts) {
			f.Liveness, f.SeenAt, f.EscalateUnacked = sessions.Live, since.Add(time.Second), []string{"critical"}
		}), ""},
		{"live, critical, escalate_unacked none", with(func(f *escalate.Facts) {
			f.Liveness, f.SeenAt, f.Priority = sessions.Live, since.Add(time.Second), event.Critical
		}), ""},
		{"dead-lettered, live with an endpoint", with(func(f *escalate.Facts) {
			f.Liveness, f.SeenAt, f.HasEndpoint, f.DeadLettered = sessions.Live, since.Add(time.Second), true, true
		}), escalate.ReasonDeadLetter},
	} {
		if got := escalate.Decide(tc.f); got != tc.want {
			t.Errorf("%s: Decide = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestEligible(t *testing.T) {
	for _, tc := range []struct {
		via, mode string
		ctl       bool
		p         event.Priority
		want      bool
	}{
		{inbox.ViaController, "", false, event.Attention, true},
		{inbox.ViaController, inbox.ModeWake, false, event.Critical, true},
		{inbox.ViaController, "", false, event.Info, false},
		{inbox.ViaController, inbox.ModeInbox, false, event.Critical, false}, // a paused session's alarm
		{inbox.ViaFallback, "", false, event.Attention, true},
		{inbox.ViaEscalation, "", false, event.Attention, true},
		{inbox.ViaSubscription, "", false, event.Critical, false},
		{inbox.ViaSubscription, "", true, event.Attention, true},
		{inbox.ViaObserver, "", false, event.Critical, false},
		{inbox.ViaDirect, "", false, event.Critical, false},
		{inbox.ViaTakeover, "", false, event.Attention, false},
	} {
		if got := escalate.Eligible(tc.via, tc.mode, tc.ctl, tc.p); got != tc.want {
			t.Errorf("Eligible(%s, %q, %v, %s) = %v, want %v", tc.via, tc.mode, tc.ctl, tc.p, got, tc.want)
		}
	}
}

// chain kid → mid → gp → root; kid and mid are controlled by their
// spawners, root by boss; gp has only an observer.
var (
	chain = []string{"kid", "mid", "gp", "root"}
	edges = map[string][]supervision.Edge{
		"kid":  {{Session: "kid", Role: supervision.Controller, Holder: "session:mid", Scope: supervision.ScopeSubtree}},
		"mid":  {{Session: "mid", Role: supervision.Controller, Holder: "session:gp", Scope: supervision.ScopeSubtree}},
		"gp":   {{Session: "gp", Role: supervision.Observer, Holder: "human:watcher", Scope: supervision.ScopeSubtree}},
		"root": {{Session: "root", Role: supervision.Controller, Holder: "session:boss", Scope: supervision.ScopeSubtree}},
	}
)

func TestLadderAndNext(t *testing.T) {
	ctx := context.Background()
	ladder := escalate.Ladder(chain, edges, "session:boss", "human:ops")
	var got []string
	for _, r := range ladder {
		got = append(got, r.Party+"@"+r.String())
	}
	if got, want := fmt.Sprint(got), "[session:mid@controller:kid session:gp@controller:mid session:boss@controller:root session:boss@default human:ops@fallback]"; got != want {
		t.Fatalf("ladder %s, want %s", got, want)
	}
	alive := func(context.Context, string) (bool, error) { return false, nil }
	next := func(party, rung string, path []string, dead escalate.DeadFunc) (escalate.Rung, bool) {
		t.Helper()
		skip := func(p string) bool {
			if p == party || p == "session:kid" {
				return true
			}
			for _, q := range path {
				if q == p {
					return true
				}
			}
			return false
		}
		r, ok, err := escalate.Next(ctx, chain, ladder, escalate.Standing(chain, ladder, party, rung), skip, dead)
		if err != nil {
			t.Fatal(err)
		}
		return r, ok
	}
	for _, tc := range []struct {
		party, rung string
		path        []string
		want        string // party@rung, or "" for nobody
	}{
		{"session:mid", "", nil, "session:gp@controller:mid"},                                            // the recipient's own rung, then the next one up
		{"session:gp", "controller:mid", []string{"session:mid"}, "session:boss@controller:root"},        // an escalated copy climbs from its recorded rung
		{"session:boss", "controller:root", []string{"session:mid", "session:gp"}, "human:ops@fallback"}, // the default is the same party: passed
		{"human:ops", "fallback", []string{"session:mid", "session:gp", "session:boss"}, ""},             // the top
		{"session:elsewhere", "", nil, "session:mid@controller:kid"},                                     // holds no rung: from the bottom
		{"session:gp", "", nil, "session:boss@controller:root"},                                          // routed to gp (mid was dead then)
	} {
		r, ok := next(tc.party, tc.rung, tc.path, alive)
		got := ""
		if ok {
			got = r.Party + "@" + r.String()
		}
		if got != tc.want {
			t.Errorf("next above %s (%q): %q, want %q", tc.party, tc.rung, got, tc.want)
		}
	}

	// A dead party is passed at once; a human never counts as dead here,
	// but a dead fallback session would leave nobody.
	gpDead := func(_ context.Context, p string) (bool, error) { return p == "session:gp", nil }
	if r, ok := next("session:mid", "", nil, gpDead); !ok || r.Party != "session:boss" || r.String() != "controller:root" {
		t.Errorf("gp dead: next %+v %v, want boss at controller:root", r, ok)
	}
	allDead := func(_ context.Context, p string) (bool, error) { return escalate.IsSession(p), nil }
	if r, ok := next("session:mid", "", nil, allDead); !ok || r.Party != "human:ops" {
		t.Errorf("every session dead: next %+v %v, want the fallback", r, ok)
	}
	boom := errors.New("boom")
	if _, _, err := escalate.Next(ctx, chain, ladder, -1, func(string) bool { return false },
		func(context.Context, string) (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Errorf("a liveness error: %v", err)
	}

	// No session, no settings: nobody.
	if l := escalate.Ladder(nil, nil, "", ""); len(l) != 0 {
		t.Errorf("empty ladder: %v", l)
	}
	if r, ok, _ := escalate.Next(ctx, nil, escalate.Ladder(nil, nil, "", "human:ops"), -1, func(string) bool { return false }, alive); !ok || r.Kind != escalate.RungFallback {
		t.Errorf("an event about no session climbs to the fallback: %+v %v", r, ok)
	}
}

func TestRungsAndHelpers(t *testing.T) {
	for _, s := range []string{"controller:mid", "default", "fallback"} {
		r, ok := escalate.ParseRung(s)
		if !ok || r.String() != s {
			t.Errorf("ParseRung(%q) = %+v %v", s, r, ok)
		}
	}
	for _, s := range []string{"", "controller:", "observer", "controller"} {
		if _, ok := escalate.ParseRung(s); ok {
			t.Errorf("ParseRung(%q) accepted", s)
		}
	}
	e := &event.Event{Workspace: "ws", Source: "//wakegate/ws/session:kid", SessionID: "kid", Lineage: []string{"mid"}}
	if c := escalate.Causer(e); c != "session:kid" {
		t.Errorf("Causer = %q", c)
	}
	if c := escalate.Causer(&event.Event{Workspace: "ws", Source: "//github.com/org/repo"}); c != "" {
		t.Errorf("Causer of a GitHub event = %q", c)
	}
	if got := fmt.Sprint(escalate.Chain(e)); got != "[kid mid]" {
		t.Errorf("Chain = %s", got)
	}
	if escalate.Chain(&event.Event{}) != nil {
		t.Error("Chain of an event about no session")
	}

	now := t0.Add(500 * time.Millisecond)
	for _, tc := range []struct{ due, want time.Time }{
		{t0.Add(10*time.Second + 300*time.Millisecond), t0.Add(10 * time.Second)}, // the start of the due's second
		{t0.Add(300 * time.Millisecond), t0.Add(time.Second)},                     // never the current second
		{t0.Add(-time.Minute), t0.Add(time.Second)},                               // nor the past
	} {
		if got := escalate.Slot(tc.due, now); !got.Equal(tc.want) {
			t.Errorf("Slot(%s) = %s, want %s", tc.due.Format("15:04:05.000"), got.Format("15:04:05.000"), tc.want.Format("15:04:05.000"))
		}
	}
}
