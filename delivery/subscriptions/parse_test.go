package subscriptions

import (
	"errors"
	"strings"
	"testing"
)

func TestParseGrammar(t *testing.T) {
	long := strings.Repeat("a", 200)
	cases := []struct {
		name, body string
		want       error // nil = accepted
	}{
		{"full example", `{"types": ["github.pull_request.*"], "subjects": ["github:org/repo#*"],
			"session": {"id": "abc", "scope": "subtree"}, "labels": ["team-a"],
			"min_priority": "attention", "delivery": "wake"}`, nil},
		{"exact type", `{"types": ["github.pull_request.ready"]}`, nil},
		{"one-segment glob", `{"types": ["github.*"]}`, nil},
		{"exact PR subject", `{"subjects": ["github:org/repo#42"]}`, nil},
		{"sha subject", `{"subjects": ["github:org/repo@0123abcd"]}`, nil},
		{"sha glob", `{"subjects": ["github:org/repo@*"]}`, nil},
		{"session subject", `{"subjects": ["session:abc"]}`, nil},
		{"session self default", `{"session": {"id": "a.b_c-1"}}`, nil},
		{"label only", `{"labels": ["team-a"]}`, nil},
		{"until terminal on one exact subject", `{"subjects": ["github:org/repo#42"], "until": "subject_terminal"}`, nil},
		{"until never", `{"types": ["a.b"], "until": "never"}`, nil},
		{"until time", `{"types": ["a.b"], "until": "2030-01-02T03:04:05+01:00"}`, nil},

		{"empty body", ``, ErrInvalid},
		{"not an object", `[1]`, ErrInvalid},
		{"two objects", `{"types":["a.b"]}{}`, ErrInvalid},
		{"unknown field", `{"type": ["a.b"]}`, ErrInvalid},
		{"no filter", `{}`, ErrInvalid},
		{"only min_priority", `{"min_priority": "critical"}`, ErrInvalid},
		{"empty lists are no filter", `{"types": [], "labels": []}`, ErrInvalid},
		{"types not a list", `{"types": "a.b"}`, ErrInvalid},
		{"glob in the middle", `{"types": ["a.*.b"]}`, ErrInvalid},
		{"bare star type", `{"types": ["*"]}`, ErrInvalid},
		{"suffix star without dot", `{"types": ["github*"]}`, ErrInvalid},
		{"one-segment exact type", `{"types": ["github"]}`, ErrInvalid},
		{"upper case type", `{"types": ["GitHub.push"]}`, ErrInvalid},
		{"glob owner", `{"subjects": ["github:org/*#1"]}`, ErrInvalid},
		{"glob repo prefix", `{"subjects": ["github:org/re*#*"]}`, ErrInvalid},
		{"partial number glob", `{"subjects": ["github:org/repo#4*"]}`, ErrInvalid},
		{"partial sha glob", `{"subjects": ["github:org/repo@ab*"]}`, ErrInvalid},
		{"sha glob with subject_terminal", `{"subjects": ["github:org/repo@*"], "until": "subject_terminal"}`, ErrUntil},
		{"github star", `{"subjects": ["github:*"]}`, ErrInvalid},
		{"session glob", `{"subjects": ["session:*"]}`, ErrInvalid},
		{"unknown subject family", `{"subjects": ["jira:ABC-1"]}`, ErrInvalid},
		{"PR number zero", `{"subjects": ["github:org/repo#0"]}`, ErrInvalid},
		{"session id with slash", `{"session": {"id": "a/b"}}`, ErrInvalid},
		{"session id with newline", `{"session": {"id": "a\nb"}}`, ErrInvalid},
		{"session id of 200 chars", `{"session": {"id": "` + long + `"}}`, ErrInvalid},
		{"session id empty", `{"session": {}}`, ErrInvalid},
		{"session party prefix", `{"session": {"id": "session:abc"}}`, ErrInvalid},
		{"bad scope", `{"session": {"id": "abc", "scope": "all"}}`, ErrInvalid},
		{"session subject with slash", `{"subjects": ["session:a/b"]}`, ErrInvalid},
		{"session subject with newline", `{"subjects": ["session:a\nb"]}`, ErrInvalid},
		{"session subject 200 chars", `{"subjects": ["session:` + long + `"]}`, ErrInvalid},
		{"label with slash", `{"labels": ["team/a"]}`, ErrInvalid},
		{"label 200 chars", `{"labels": ["` + long + `"]}`, ErrInvalid},
		{"bad min_priority", `{"types": ["a.b"], "min_priority": "internal"}`, ErrInvalid},
		{"bad delivery", `{"types": ["a.b"], "delivery": "push"}`, ErrInvalid},
		{"bad until", `{"types": ["a.b"], "until": "tomorrow"}`, ErrInvalid},
		{"too many values", `{"labels": [` + strings.TrimSuffix(strings.Repeat(`"x",`, MaxValues+1), ",") + `]}`, ErrInvalid},

		{"until terminal with a wildcard", `{"subjects": ["github:org/repo#*"], "until": "subject_terminal"}`, ErrUntil},
		{"until terminal with no subject", `{"types": ["a.b"], "until": "subject_terminal"}`, ErrUntil},
		{"until terminal with two subjects", `{"subjects": ["github:org/repo#1", "github:org/repo#2"], "until": "subject_terminal"}`, ErrUntil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sub, err := Parse([]byte(c.body))
			switch {
			case c.want == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != nil && !errors.Is(err, c.want):
				t.Fatalf("got %v (%+v), want %v", err, sub, c.want)
			case c.want != nil && err.Error() == c.want.Error():
				t.Fatalf("error %q carries no message", err)
			}
		})
	}
}

func TestParseDefaultsAndNormalizes(t *testing.T) {
	sub, err := Parse([]byte(`{"types": ["a.b", "a.b"], "session": {"id": "s1"}, "until": "2030-01-02T03:04:05+01:00"}`))
	if err != nil {
		t.Fatal(err)
	}
	if sub.MinPriority != "info" || sub.Delivery != "wake" || sub.Session.Scope != "self" {
		t.Fatalf("defaults: %+v %+v", sub, sub.Session)
	}
	if len(sub.Types) != 1 {
		t.Fatalf("duplicates kept: %v", sub.Types)
	}
	if sub.Until != "2030-01-02T02:04:05Z" {
		t.Fatalf("until not normalized to UTC: %s", sub.Until)
	}
}
