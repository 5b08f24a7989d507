package event

import (
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
