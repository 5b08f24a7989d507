package subscriptions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/providers/event"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// The journal's DeathWatch lookup is a TerminalFunc as it is.
var _ TerminalFunc = (*journal.Journal)(nil).TerminalOf

func newStore(t testing.TB) (*Store, *redis.Client, string) {
	t.Helper()
	rdb, prefix := redistest.New(t)
	return New(rdb, prefix).WithClock(func() time.Time { return t0 }), rdb, prefix
}

// create parses body and creates it for owner in workspace ws.
func create(t testing.TB, s *Store, ws, owner, body string) Subscription {
	t.Helper()
	sub, err := Parse([]byte(body))
	if err != nil {
		t.Fatalf("parse %s: %v", body, err)
	}
	sub.Workspace, sub.Owner = ws, owner
	out, err := s.Create(context.Background(), sub, t0)
	if err != nil {
		t.Fatalf("create %s: %v", body, err)
	}
	return out
}

func ev(typ, subject, session string, lineage ...string) *event.Event {
	return &event.Event{SpecVersion: "1.0", ID: "1", Source: "//t", Type: typ, Subject: subject, Workspace: "ws",
		SessionID: session, Lineage: lineage, Priority: event.DefaultPriority(typ, nil), Time: t0}
}

func ids(subs []Subscription) []string {
	out := []string{}
	for _, s := range subs {
		out = append(out, s.ID)
	}
	slices.Sort(out)
	return out
}

func want(subs ...Subscription) []string { return ids(subs) }

func match(t *testing.T, s *Store, e *event.Event, labels ...string) []string {
	t.Helper()
	got, err := s.Match(context.Background(), e, labels)
	if err != nil {
		t.Fatal(err)
	}
	return ids(got)
}

func TestCreateListDelete(t *testing.T) {
	s, rdb, prefix := newStore(t)
	ctx := context.Background()
	a := create(t, s, "ws", "session:a", `{"types": ["github.*"], "delivery": "inbox"}`)
	b := create(t, s, "ws", "session:a", `{"subjects": ["github:org/repo#7"], "until": "subject_terminal"}`)
	create(t, s, "ws", "session:b", `{"labels": ["x"]}`)
	create(t, s, "other", "session:a", `{"labels": ["x"]}`)
	if a.ID == "" || a.ID == b.ID || !a.CreatedAt.Equal(t0) || a.Workspace != "ws" || a.Owner != "session:a" {
		t.Fatalf("created: %+v", a)
	}
	for _, c := range a.ID {
		if !strings.ContainsRune("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", c) {
			t.Fatalf("id %q is not url-safe", a.ID)
		}
	}
	got, err := s.List(ctx, "ws", "session:a")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ids(got)) != fmt.Sprint(want(a, b)) {
		t.Fatalf("list: %+v", got)
	}
	for _, sub := range got {
		if (sub.ID == a.ID && sub.Delivery != "inbox") || (sub.ID == b.ID && sub.Until != "subject_terminal") {
			t.Fatalf("listed %+v", sub)
		}
	}

	if err := s.Delete(ctx, "ws", "session:b", a.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete by another party: %v", err)
	}
	if err := s.Delete(ctx, "other", "session:a", a.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete from another workspace: %v", err)
	}
	if err := s.Delete(ctx, "ws", "session:a", "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete unknown: %v", err)
	}
	for _, sub := range []Subscription{a, b} {
		if err := s.Delete(ctx, "ws", "session:a", sub.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "ws", "session:a", a.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if got, _ := s.List(ctx, "ws", "session:a"); len(got) != 0 {
		t.Fatalf("listed after delete: %+v", got)
	}
	if m := match(t, s, ev("github.pull_request.closed", "github:org/repo#7", "")); len(m) != 0 {
		t.Fatalf("matched after delete: %v", m)
	}
	// Nothing of a or b is left in any key of the workspace.
	keys, err := rdb.Keys(ctx, prefix+":{sub:ws}:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		var members []string
		switch rdb.Type(ctx, k).Val() {
		case "set":
			members = rdb.SMembers(ctx, k).Val()
		case "hash":
			members = rdb.HKeys(ctx, k).Val()
		}
		if slices.Contains(members, a.ID) || slices.Contains(members, b.ID) {
			t.Fatalf("%s still holds a deleted id: %v", k, members)
		}
		if strings.Contains(k, ":ix:type:") || strings.Contains(k, ":ix:tpre:") || strings.Contains(k, ":ix:subj:") || strings.Contains(k, ":term:") {
			t.Fatalf("index key %s left behind", k)
		}
	}
}

func TestCreateRefuses(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	ok := Subscription{Workspace: "ws", Owner: "session:a", Types: []string{"a.b"}}
	for name, c := range map[string]struct {
		mut  func(*Subscription)
		want error
	}{
		"bad owner":          {func(s *Subscription) { s.Owner = "session:a/b" }, ErrInvalid},
		"owner not a party":  {func(s *Subscription) { s.Owner = "a" }, ErrInvalid},
		"bad workspace":      {func(s *Subscription) { s.Workspace = "w s" }, ErrInvalid},
		"bad glob":           {func(s *Subscription) { s.Types = []string{"a.*.b"} }, ErrInvalid},
		"no filter":          {func(s *Subscription) { s.Types = nil }, ErrInvalid},
		"until passed":       {func(s *Subscription) { s.Until = t0.Add(-time.Second).Format(time.RFC3339) }, ErrUntil},
		"until now":          {func(s *Subscription) { s.Until = t0.Format(time.RFC3339) }, ErrUntil},
		"terminal with glob": {func(s *Subscription) { s.Subjects, s.Until = []string{"github:o/r#*"}, UntilSubjectTerminal }, ErrUntil},
	} {
		sub := ok
		c.mut(&sub)
		if _, err := s.Create(ctx, sub, t0); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", name, err, c.want)
		}
	}
	if got, _ := s.List(ctx, "ws", "session:a"); len(got) != 0 {
		t.Fatalf("a refused create stored something: %+v", got)
	}
}

func TestMatchEachFilter(t *testing.T) {
	s, _, _ := newStore(t)
	o := "session:watcher"
	exactType := create(t, s, "ws", o, `{"types": ["github.pull_request.ready"]}`)
	prGlob := create(t, s, "ws", o, `{"types": ["github.pull_request.*"]}`)
	ghGlob := create(t, s, "ws", o, `{"types": ["github.*"]}`)
	twoTypes := create(t, s, "ws", o, `{"types": ["session.crashed", "cron.*"]}`)
	exactSubj := create(t, s, "ws", o, `{"subjects": ["github:org/repo#42"]}`)
	subjGlob := create(t, s, "ws", o, `{"subjects": ["github:org/repo#*"]}`)
	shaGlob := create(t, s, "ws", o, `{"subjects": ["github:org/repo@*"]}`)
	sessSubj := create(t, s, "ws", o, `{"subjects": ["session:kid"]}`)
	self := create(t, s, "ws", o, `{"session": {"id": "boss", "scope": "self"}}`)
	tree := create(t, s, "ws", o, `{"session": {"id": "boss", "scope": "subtree"}}`)
	label := create(t, s, "ws", o, `{"labels": ["team-a", "team-b"]}`)
	critical := create(t, s, "ws", o, `{"labels": ["team-c"], "min_priority": "critical"}`)
	create(t, s, "elsewhere", o, `{"types": ["github.*"]}`)

	cases := []struct {
		name   string
		e      *event.Event
		labels []string
		want   []string
	}{
		{"exact type and both globs", ev("github.pull_request.ready", "github:x/y#1", ""), nil, want(exactType, prGlob, ghGlob)},
		{"prefix glob stops at a dot", ev("github.pull_request_review.submitted", "github:x/y#1", ""), nil, want(ghGlob)},
		{"any of several types", ev("cron.unhealthy", "session:z", "z"), nil, want(twoTypes)},
		{"exact subject and repo glob", ev("github.check_suite.completed", "github:org/repo#42", ""), nil, want(ghGlob, exactSubj, subjGlob)},
		{"repo glob, other number", ev("github.check_suite.completed", "github:org/repo#7", ""), nil, want(ghGlob, subjGlob)},
		{"glob does not reach another repo", ev("github.status", "github:org/repo2#42", ""), nil, want(ghGlob)},
		{"PR glob does not reach sha subjects", ev("github.status", "github:org/repo@abcdef1", ""), nil, want(ghGlob, shaGlob)},
		{"sha glob reaches every sha of the repo", ev("github.deployment_status", "github:org/repo@0123456789", ""), nil, want(ghGlob, shaGlob)},
		{"sha glob does not reach another repo", ev("github.deployment_status", "github:org/repo2@0123456789", ""), nil, want(ghGlob)},
		{"session self and subtree", ev("session.turn_started", "session:boss", "boss"), nil, want(self, tree)},
		{"subtree through lineage", ev("session.turn_started", "session:kid", "kid", "boss", "root"), nil, want(sessSubj, tree)},
		{"deep descendant", ev("session.turn_started", "session:gk", "gk", "kid", "boss"), nil, want(tree)},
		{"ancestor is not in a subtree", ev("session.turn_started", "session:root", "root"), nil, want()},
		{"label", ev("session.turn_started", "session:z", "z"), []string{"team-b"}, want(label)},
		{"label below min_priority", ev("session.turn_started", "session:z", "z"), []string{"team-c"}, want()},
		{"label at min_priority", ev("session.crashed", "session:z", "z"), []string{"team-c"}, want(twoTypes, critical)},
		{"no label", ev("session.turn_started", "session:z", "z"), []string{"team-z"}, want()},
		{"internal events match nothing", ev("wakegate.digest", "session:boss", "boss"), nil, want()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := match(t, s, c.e, c.labels...); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestMatchANDsEveryFilter(t *testing.T) {
	s, _, _ := newStore(t)
	o := "human:ops"
	// Indexed by its exact subject; the type must match too.
	subjType := create(t, s, "ws", o, `{"subjects": ["github:org/repo#1"], "types": ["github.pull_request.closed"]}`)
	// Indexed by session; subject glob and min priority must match too.
	sessGlob := create(t, s, "ws", o, `{"session": {"id": "boss", "scope": "subtree"}, "subjects": ["github:org/repo#*"], "min_priority": "attention"}`)
	// Indexed by label; the type glob must match too.
	labelType := create(t, s, "ws", o, `{"labels": ["team-a"], "types": ["session.*"]}`)
	// Indexed by subject glob; the type must match too.
	globType := create(t, s, "ws", o, `{"subjects": ["github:org/repo#*"], "types": ["github.pull_request.ready"]}`)
	// All four.
	all := create(t, s, "ws", o, `{"types": ["github.pull_request.*"], "subjects": ["github:org/repo#*"],
		"session": {"id": "boss", "scope": "subtree"}, "labels": ["team-a"], "min_priority": "attention"}`)

	cases := []struct {
		name   string
		e      *event.Event
		labels []string
		want   []string
	}{
		{"subject without its type", ev("github.pull_request.ready", "github:org/repo#1", ""), nil, want(globType)},
		{"subject with its type", ev("github.pull_request.closed", "github:org/repo#1", ""), nil, want(subjType)},
		{"session's PR, attention", ev("github.pull_request.opened", "github:org/repo#9", "kid", "boss"), nil, want(sessGlob)},
		{"session's PR, info", ev("github.pull_request.synchronize", "github:org/repo#9", "kid", "boss"), nil, want()},
		{"session's other repo", ev("github.pull_request.opened", "github:org/else#9", "kid", "boss"), nil, want()},
		{"label with its type", ev("session.crashed", "session:z", "z"), []string{"team-a"}, want(labelType)},
		{"label without its type", ev("message.sent", "session:z", "z"), []string{"team-a"}, want()},
		{"all four", ev("github.pull_request.ready", "github:org/repo#9", "kid", "boss"), []string{"team-a"}, want(sessGlob, globType, all)},
		{"all but the label", ev("github.pull_request.ready", "github:org/repo#9", "kid", "boss"), []string{"team-b"}, want(sessGlob, globType)},
		{"all but the session", ev("github.pull_request.ready", "github:org/repo#9", "other"), []string{"team-a"}, want(globType)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := match(t, s, c.e, c.labels...); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestExpiredUntil(t *testing.T) {
	s, rdb, prefix := newStore(t)
	ctx := context.Background()
	o := "session:a"
	soon := create(t, s, "ws", o, `{"types": ["a.b"], "until": "`+t0.Add(time.Hour).Format(time.RFC3339)+`"}`)
	later := create(t, s, "ws", o, `{"types": ["a.b"], "until": "`+t0.Add(3*time.Hour).Format(time.RFC3339)+`"}`)
	never := create(t, s, "ws", o, `{"types": ["a.b"], "until": "never"}`)
	e := ev("a.b", "session:x", "x")
	if got := match(t, s, e); fmt.Sprint(got) != fmt.Sprint(want(soon, later, never)) {
		t.Fatalf("before: %v", got)
	}
	at := func(d time.Duration) *Store { return s.WithClock(func() time.Time { return t0.Add(d) }) }
	if got := match(t, at(time.Hour), e); fmt.Sprint(got) != fmt.Sprint(want(later, never)) {
		t.Fatalf("at the until time: %v", got)
	}
	if rdb.HExists(ctx, prefix+":{sub:ws}:subs", soon.ID).Val() {
		t.Fatal("an expired subscription met by Match was not removed")
	}
	if got, _ := at(4*time.Hour).List(ctx, "ws", o); fmt.Sprint(ids(got)) != fmt.Sprint(want(never)) {
		t.Fatalf("list after both ended: %v", ids(got))
	}
	if rdb.HExists(ctx, prefix+":{sub:ws}:subs", later.ID).Val() {
		t.Fatal("an expired subscription met by List was not removed")
	}
	if n := rdb.ZCard(ctx, prefix+":sub:expiry").Val(); n != 0 {
		t.Fatalf("%d expiry entries left", n)
	}
}

func TestSweep(t *testing.T) {
	s, rdb, prefix := newStore(t)
	ctx := context.Background()
	gone := create(t, s, "ws", "session:a", `{"labels": ["l"], "until": "`+t0.Add(time.Minute).Format(time.RFC3339)+`"}`)
	create(t, s, "w2", "session:a", `{"labels": ["l"], "until": "`+t0.Add(time.Minute).Format(time.RFC3339)+`"}`)
	kept := create(t, s, "ws", "session:a", `{"labels": ["l"], "until": "`+t0.Add(time.Hour).Format(time.RFC3339)+`"}`)
	n, err := s.Sweep(ctx, t0.Add(2*time.Minute))
	if err != nil || n != 2 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if rdb.HExists(ctx, prefix+":{sub:ws}:subs", gone.ID).Val() || rdb.SIsMember(ctx, prefix+":{sub:ws}:ix:label:l", gone.ID).Val() {
		t.Fatal("swept subscription still stored or indexed")
	}
	if !rdb.SIsMember(ctx, prefix+":{sub:ws}:ix:label:l", kept.ID).Val() || rdb.ZCard(ctx, prefix+":sub:expiry").Val() != 1 {
		t.Fatal("sweep removed a live subscription")
	}
}

func TestCloseForSubject(t *testing.T) {
	s, rdb, prefix := newStore(t)
	ctx := context.Background()
	a := create(t, s, "ws", "session:a", `{"subjects": ["github:org/repo#42"], "until": "subject_terminal"}`)
	b := create(t, s, "ws", "session:b", `{"subjects": ["github:org/repo#42"], "until": "subject_terminal", "types": ["github.pull_request.closed"]}`)
	stays := create(t, s, "ws", "session:c", `{"subjects": ["github:org/repo#42"]}`)
	other := create(t, s, "ws", "session:a", `{"subjects": ["github:org/repo#43"], "until": "subject_terminal"}`)

	closed := ev("github.pull_request.closed", "github:org/repo#42", "")
	if got := match(t, s, closed); fmt.Sprint(got) != fmt.Sprint(want(a, b, stays)) {
		t.Fatalf("terminal event matches: %v", got)
	}
	gone, err := s.CloseForSubject(ctx, "ws", "github:org/repo#42")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ids(gone)) != fmt.Sprint(want(a, b)) {
		t.Fatalf("closed %v", ids(gone))
	}
	if got := match(t, s, closed); fmt.Sprint(got) != fmt.Sprint(want(stays)) {
		t.Fatalf("after close: %v", got)
	}
	if got, _ := s.List(ctx, "ws", "session:a"); fmt.Sprint(ids(got)) != fmt.Sprint(want(other)) {
		t.Fatalf("a's list: %v", ids(got))
	}
	if rdb.Exists(ctx, prefix+":{sub:ws}:term:github:org/repo#42").Val() != 0 {
		t.Fatal("term set left behind")
	}
	if again, err := s.CloseForSubject(ctx, "ws", "github:org/repo#42"); err != nil || len(again) != 0 {
		t.Fatalf("second close: %v %v", again, err)
	}
}

func TestCreateWatching(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	ended := &journal.Terminal{Type: "github.pull_request.closed", Time: t0.Format(time.RFC3339), Seq: "3-1700000000000-0"}
	terminalOf := func(_ context.Context, ws, subject string) (*journal.Terminal, error) {
		if ws == "ws" && subject == "github:org/repo#1" {
			return ended, nil
		}
		return nil, nil
	}
	parse := func(body string) Subscription {
		sub, err := Parse([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		sub.Workspace, sub.Owner = "ws", "session:a"
		return sub
	}

	c, err := s.CreateWatching(ctx, parse(`{"subjects": ["github:org/repo#1"], "until": "subject_terminal"}`), t0, terminalOf)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Closed || len(c.Ended) != 1 || c.Ended[0].Terminal.Seq != ended.Seq || c.ID == "" {
		t.Fatalf("already terminal: %+v", c)
	}
	if got, _ := s.List(ctx, "ws", "session:a"); len(got) != 0 {
		t.Fatalf("closed subscription still listed: %+v", got)
	}

	c, err = s.CreateWatching(ctx, parse(`{"subjects": ["github:org/repo#1", "github:org/repo#2"]}`), t0, terminalOf)
	if err != nil || c.Closed || len(c.Ended) != 1 || c.Ended[0].Subject != "github:org/repo#1" {
		t.Fatalf("until never on an ended subject: %+v %v", c, err)
	}
	c, err = s.CreateWatching(ctx, parse(`{"subjects": ["github:org/repo#2"], "until": "subject_terminal"}`), t0, terminalOf)
	if err != nil || c.Closed || len(c.Ended) != 0 {
		t.Fatalf("open subject: %+v %v", c, err)
	}
	if got, _ := s.List(ctx, "ws", "session:a"); len(got) != 2 {
		t.Fatalf("list: %+v", got)
	}
	boom := errors.New("boom")
	if _, err := s.CreateWatching(ctx, parse(`{"subjects": ["github:org/repo#3"]}`), t0,
		func(context.Context, string, string) (*journal.Terminal, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("lookup error: %v", err)
	}
}

// TestCandidatesDoNotGrow proves the index claim deterministically: the
// subscriptions Match reads for an event are the same whether 10 or 10,000
// subscriptions that do not match it exist.
func TestCandidatesDoNotGrow(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	e, labels := benchEvent()
	seedMatching(t, s)
	seedNonMatching(t, s, 10)
	small, err := s.candidates(ctx, e, labels)
	if err != nil {
		t.Fatal(err)
	}
	seedNonMatching(t, s, 10_000)
	large, err := s.candidates(ctx, e, labels)
	if err != nil {
		t.Fatal(err)
	}
	if len(small) != len(large) || len(large) != 3 {
		t.Fatalf("candidates: %d with 10 non-matching, %d with 10,010", len(small), len(large))
	}
	if got := match(t, s, e, labels...); len(got) != 3 {
		t.Fatalf("matches: %v", got)
	}
}

// MatchCandidates + MatchFrom, for events of several workspaces at once,
// finds what Match finds for each of them (no session labels).
func TestMatchCandidatesIsMatch(t *testing.T) {
	s, _, _ := newStore(t)
	o := "session:watcher"
	create(t, s, "ws", o, `{"types": ["github.pull_request.ready"]}`)
	create(t, s, "ws", o, `{"types": ["github.*"]}`)
	create(t, s, "ws", o, `{"subjects": ["github:org/repo#42"]}`)
	create(t, s, "ws", o, `{"subjects": ["github:org/repo#*"], "types": ["github.pull_request.ready"]}`)
	create(t, s, "ws", o, `{"session": {"id": "boss", "scope": "subtree"}}`)
	create(t, s, "ws", o, `{"types": ["cron.*"], "min_priority": "critical"}`)
	create(t, s, "elsewhere", o, `{"types": ["github.*"]}`)
	other := func(e *event.Event) *event.Event { e.Workspace = "elsewhere"; return e }
	events := []*event.Event{
		ev("github.pull_request.ready", "github:org/repo#42", ""),
		ev("github.pull_request.opened", "github:org/repo#7", ""),
		other(ev("github.pull_request.opened", "github:org/repo#7", "")),
		ev("github.status", "github:org/repo@abcdef1", ""),
		ev("session.turn_started", "session:kid", "kid", "boss"),
		ev("cron.unhealthy", "session:z", "z"),
		ev("wakegate.digest", "session:boss", "boss"),
		other(ev("session.crashed", "session:z", "z")),
	}
	cands, err := s.MatchCandidates(context.Background(), events)
	if err != nil {
		t.Fatal(err)
	}
	if len(cands) != len(events) {
		t.Fatalf("%d results for %d events", len(cands), len(events))
	}
	matched := 0
	for i, e := range events {
		got, want := ids(s.MatchFrom(context.Background(), e, cands[i])), match(t, s, e)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("event %d (%s %s in %s): batch %v, Match %v", i, e.Type, e.Subject, e.Workspace, got, want)
		}
		matched += len(want)
	}
	if matched == 0 {
		t.Fatal("the cases match nothing: the test proves nothing")
	}
}

// An id is handed to the CLI as an argument (wakegate unsubscribe ID): one
// that began with '-' would be read as a flag.
func TestNewIDNeverLooksLikeAFlag(t *testing.T) {
	for range 10000 {
		if id := newID(); id == "" || id[0] == '-' || strings.ContainsAny(id, "-_") {
			t.Fatalf("id %q", id)
		}
	}
}
