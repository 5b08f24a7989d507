package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/agent"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/github"
	"github.com/wakegate/wakegate/providers/kind"
)

// The resolution before an agent push's commit (docs/design.md §4),
// without Redis: the registry and the PR links are fakes that keep what
// they were asked.

// fakeLineages gives every parent the lineage parent, grandparent; a
// child that is its parent's ancestor is a cycle.
type fakeLineages struct {
	ancestors map[string][]string // session → its lineage, nearest first
	err       error
}

func (f *fakeLineages) LineageFor(_ context.Context, _, child, parent string, _ time.Time) ([]string, error) {
	if f.err != nil {
		return nil, f.err
	}
	lineage := append([]string{parent}, f.ancestors[parent]...)
	if slices.Contains(lineage, child) {
		return nil, fmt.Errorf("parent %s descends from %s: %w", parent, child, sessions.ErrCycle)
	}
	return lineage, nil
}

// fakeLinker links "repo#n" to a session; Claim of a PR held by another
// session fails as the tracker's does, and is recorded either way.
type fakeLinker struct {
	holders  map[string]string
	claims   []string // "repo#n session", in order
	linkErr  error
	claimErr error
	// meanwhile, when set, takes a PR for this session between Link and
	// Claim.
	meanwhile string
}

func (f *fakeLinker) Link(_ context.Context, _, repo string, n int) (string, error) {
	if f.linkErr != nil {
		return "", f.linkErr
	}
	return f.holders[fmt.Sprintf("%s#%d", repo, n)], nil
}

func (f *fakeLinker) Claim(_ context.Context, _, repo string, n int, session string, _ time.Time) (string, error) {
	k := fmt.Sprintf("%s#%d", repo, n)
	f.claims = append(f.claims, k+" "+session)
	if f.claimErr != nil {
		return "", f.claimErr
	}
	if f.meanwhile != "" {
		f.holders[k], f.meanwhile = f.meanwhile, ""
	}
	if h := f.holders[k]; h != "" && h != session {
		return h, fmt.Errorf("claim %s for %s: %w", k, session, tracker.ErrLinkConflict)
	}
	f.holders[k] = session
	return session, nil
}

func newResolver(t *testing.T, l *fakeLineages, k *fakeLinker) *ingest.Resolver {
	t.Helper()
	ws, err := github.ParseWorkspaces("org/*=w1,other/*=w2", func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if l.ancestors == nil {
		l.ancestors = map[string][]string{}
	}
	if k.holders == nil {
		k.holders = map[string]string{}
	}
	return ingest.NewResolver(l, k, ws)
}

func prepared(session, typ string) *agent.Prepared {
	return &agent.Prepared{Event: &event.Event{ID: session + "-" + typ, Type: typ, Workspace: "w1", SessionID: session,
		Subject: event.SessionSubject(session)}}
}

func spawned(child, parent string) *agent.Prepared {
	p := prepared(child, event.TypeSessionSpawned)
	p.Parent, p.Labels = parent, []string{"team=a"}
	return p
}

func prOpened(session, repo string, n int) *agent.Prepared {
	p := prepared(session, event.TypeSessionPrOpened)
	p.PROpened = &agent.PRClaim{Repo: repo, Number: n}
	return p
}

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestResolveItems(t *testing.T) {
	l := &fakeLineages{ancestors: map[string][]string{"p": {"root"}}}
	k := &fakeLinker{}
	r := newResolver(t, l, k)
	paused := prepared("a", event.TypeSessionPaused)
	paused.PausedUntil, paused.Reason = now.Add(time.Hour), "lunch"
	in := []*agent.Prepared{spawned("c", "p"), prepared("a", event.TypeSessionHeartbeat), paused, prOpened("a", "org/x", 7)}
	items, refused, err := r.Resolve(context.Background(), "w1", in, now)
	if err != nil || refused != nil {
		t.Fatalf("refused %v, err %v", refused, err)
	}
	if len(items) != len(in) {
		t.Fatalf("%d items of %d events", len(items), len(in))
	}
	if c := items[0]; c.Event != in[0].Event || c.Parent != "p" || !slices.Equal(c.Lineage, []string{"p", "root"}) ||
		!slices.Equal(c.Labels, []string{"team=a"}) || !c.Journal {
		t.Errorf("spawned: %+v", c)
	}
	if items[1].Journal {
		t.Error("a heartbeat is journaled: it is the registry's only")
	}
	if p := items[2]; !p.PausedUntil.Equal(now.Add(time.Hour)) || p.Reason != "lunch" || p.Parent != "" || p.Lineage != nil {
		t.Errorf("paused: %+v", p)
	}
	if !slices.Equal(k.claims, []string{"org/x#7 a"}) || k.holders["org/x#7"] != "a" {
		t.Errorf("claims %v: want the one PR claimed for a", k.claims)
	}
}

// Every cycle is refused, each with its event's index, and nothing is
// claimed, even for the events that were fine.
func TestResolveRefusesEveryCycleAndClaimsNothing(t *testing.T) {
	l := &fakeLineages{ancestors: map[string][]string{"p": {"c"}, "q": {"d", "e"}}}
	k := &fakeLinker{}
	r := newResolver(t, l, k)
	in := []*agent.Prepared{prOpened("a", "org/x", 1), spawned("c", "p"), spawned("ok", "p"), spawned("e", "q")}
	items, refused, err := r.Resolve(context.Background(), "w1", in, now)
	if err != nil || items != nil {
		t.Fatalf("items %v, err %v: want the refusals only", items, err)
	}
	var idx []int
	for _, e := range refused {
		idx = append(idx, e.Index)
		if e.ID != in[e.Index].Event.ID || !strings.Contains(e.Detail, "descends from") {
			t.Errorf("refusal %+v", e)
		}
	}
	if !slices.Equal(idx, []int{1, 3}) {
		t.Fatalf("refused events %v, want 1 and 3", idx)
	}
	if len(k.claims) != 0 {
		t.Fatalf("claims %v written for a refused push", k.claims)
	}
}

func TestResolveRepositoryElsewhere(t *testing.T) {
	k := &fakeLinker{}
	r := newResolver(t, &fakeLineages{}, k)
	for _, repo := range []string{"other/x", "nomap/x"} {
		_, refused, err := r.Resolve(context.Background(), "w1", []*agent.Prepared{prepared("a", event.TypeSessionTurnEnded), prOpened("a", repo, 3)}, now)
		if refused != nil || !errors.Is(err, ingest.ErrRepoElsewhere) || !errors.Is(err, kind.Forbidden) {
			t.Fatalf("%s: refused %v, err %v: want forbidden", repo, refused, err)
		}
		if want := "event 1: repository " + repo + " does not map to this workspace"; err.Error() != want {
			t.Errorf("%s: %q, want %q", repo, err, want)
		}
	}
	if len(k.claims) != 0 {
		t.Fatalf("claims %v", k.claims)
	}
}

// A PR another session holds is refused with its holder; the refused
// claim is made once, for its wakegate.link_conflict record, and no other
// claim of the push is written.
func TestResolveLinkedElsewhere(t *testing.T) {
	k := &fakeLinker{holders: map[string]string{"org/x#5": "b"}}
	r := newResolver(t, &fakeLineages{}, k)
	_, _, err := r.Resolve(context.Background(), "w1", []*agent.Prepared{prOpened("a", "org/y", 1), prOpened("a", "org/x", 5)}, now)
	var linked *ingest.LinkedError
	if !errors.As(err, &linked) || !errors.Is(err, tracker.ErrLinkConflict) || !errors.Is(err, kind.Conflict) {
		t.Fatalf("err %v: want a link conflict", err)
	}
	if linked.Holder != "b" || linked.Repo != "org/x" || linked.Number != 5 || err.Error() != "org/x#5 is linked to another session" {
		t.Errorf("%+v %q", linked, err)
	}
	if !slices.Equal(k.claims, []string{"org/x#5 a"}) || k.holders["org/y#1"] != "" {
		t.Fatalf("claims %v: want only the conflict's record", k.claims)
	}
	// The PR's own holder claims it again harmlessly.
	if _, _, err := r.Resolve(context.Background(), "w1", []*agent.Prepared{prOpened("b", "org/x", 5)}, now); err != nil {
		t.Fatal(err)
	}
}

// A PR claimed by another session between the check and the claim is
// refused with the holder the claim found.
func TestResolveClaimedMeanwhile(t *testing.T) {
	k := &fakeLinker{meanwhile: "z"}
	r := newResolver(t, &fakeLineages{}, k)
	_, _, err := r.Resolve(context.Background(), "w1", []*agent.Prepared{prOpened("a", "org/x", 9)}, now)
	var linked *ingest.LinkedError
	if !errors.As(err, &linked) || linked.Holder != "z" {
		t.Fatalf("err %v: want linked to z", err)
	}
}

// A store that fails is a *StepError naming the step, with the store's
// error (and its kind) inside; a claim of a linked PR that succeeds is
// one too.
func TestResolveStoreFailures(t *testing.T) {
	down := errors.New("connection refused")
	for _, tc := range []struct {
		step string
		l    *fakeLineages
		k    *fakeLinker
		in   *agent.Prepared
		want error
	}{
		{"lineage", &fakeLineages{err: down}, &fakeLinker{}, spawned("c", "p"), down},
		{"pull request link", &fakeLineages{}, &fakeLinker{linkErr: down}, prOpened("a", "org/x", 1), down},
		{"pull request claim", &fakeLineages{}, &fakeLinker{claimErr: down}, prOpened("a", "org/x", 1), down},
		{"pull request claim", &fakeLineages{}, &fakeLinker{claimErr: tracker.ErrInvalidFact}, prOpened("a", "org/x", 1), tracker.ErrInvalidFact},
		{"pull request claim", &fakeLineages{}, &fakeLinker{holders: map[string]string{"org/x#1": "b"}, claimErr: down}, prOpened("a", "org/x", 1), down},
	} {
		r := newResolver(t, tc.l, tc.k)
		items, refused, err := r.Resolve(context.Background(), "w1", []*agent.Prepared{tc.in}, now)
		var step *ingest.StepError
		if items != nil || refused != nil || !errors.As(err, &step) || step.Step != tc.step || !errors.Is(err, tc.want) {
			t.Errorf("%s: items %v, refused %v, err %v", tc.step, items, refused, err)
		}
	}
	// The store says a claim of a PR held elsewhere succeeded: not a
	// conflict, a failure.
	k := &fakeLinker{holders: map[string]string{"org/x#1": "b"}}
	k2 := &succeedingLinker{k}
	ws, _ := github.ParseWorkspaces("*=w1", func(string) bool { return true })
	_, _, err := ingest.NewResolver(&fakeLineages{}, k2, ws).Resolve(context.Background(), "w1", []*agent.Prepared{prOpened("a", "org/x", 1)}, now)
	var step *ingest.StepError
	if !errors.As(err, &step) || step.Step != "pull request claim" || errors.Is(err, kind.Conflict) {
		t.Fatalf("err %v: want a failed claim step", err)
	}
}

// succeedingLinker reads the holders of its fake but claims anything.
type succeedingLinker struct{ *fakeLinker }

func (s *succeedingLinker) Claim(_ context.Context, _, _ string, _ int, session string, _ time.Time) (string, error) {
	return session, nil
}
