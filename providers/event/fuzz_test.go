package event

import (
	"regexp"
	"strings"
	"testing"
)

// FuzzParseParty: whatever the input, ParseParty does not panic, and
// what it accepts is session:<id> or human:<id> with an id of 1–128
// characters from [A-Za-z0-9._-] — never a '/', a control character, a
// space or a second ':' that could reach a Redis key, a header or a log
// line — and Session answers the id of a session party.
func FuzzParseParty(f *testing.F) {
	for _, s := range []string{"session:abc", "human:ops", "session:", "human:a/b", "session:a\nb", "session:" + strings.Repeat("x", 129),
		"robot:x", "session:a:b", "human:ops.team_1-2", ":", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseParty(s)
		if err != nil {
			if p != "" {
				t.Fatalf("ParseParty(%q) refused but answered %q", s, p)
			}
			return
		}
		kind, id, _ := strings.Cut(string(p), ":")
		if string(p) != s || (kind != "session" && kind != "human") || len(id) < 1 || len(id) > 128 {
			t.Fatalf("ParseParty(%q) = %q", s, p)
		}
		for _, r := range id {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
				t.Fatalf("ParseParty(%q) accepted %q in the id", s, r)
			}
		}
		if (kind == "session") != (p.Session() == id) {
			t.Fatalf("%q.Session() = %q", p, p.Session())
		}
	})
}

// FuzzValidGrammar checks ValidID and ValidType, which scan bytes, against
// the grammars they implement as regular expressions.
func FuzzValidGrammar(f *testing.F) {
	idRe := regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)
	typeRe := regexp.MustCompile(`^[a-z0-9_]+(\.[a-z0-9_]+)+$`)
	for _, s := range []string{"", "a", "acme", "a.b", "session.turn_ended", ".a", "a.", "a..b", "A.b", "a.b.c_1",
		"github.pull_request.ready", strings.Repeat("x", 128), strings.Repeat("x", 129), "a.b\n", "é.b", "a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidID(s), idRe.MatchString(s); got != want {
			t.Fatalf("ValidID(%q) = %v, want %v", s, got, want)
		}
		if got, want := ValidType(s), len(s) <= 128 && typeRe.MatchString(s); got != want {
			t.Fatalf("ValidType(%q) = %v, want %v", s, got, want)
		}
	})
}
