package journal

import (
	"strings"
	"testing"
)

// entryCases are events as the PR tracker's worker builds them.
var entryCases = []EntryFields{
	{ID: "pr/12/opened/0123456789abcdef0123456789abcdef01234567", Source: "//github.com/octo-org/hello.world", Type: "github.pull_request.opened",
		Subject: "github:octo-org/hello.world#12", Time: "2026-12-05T10:00:00.123Z", Priority: "attention",
		Summary: "PR #12 opened by octocat: Fix the frobnicator (octo-org/hello.world)",
		Data:    `{"repo":"octo-org/hello.world","number":12,"action":"opened","title":"Fix the frobnicator","url":"https://github.com/octo-org/hello.world/pull/12","author":"octocat","head":"0123456789abcdef0123456789abcdef01234567","base":"main","state":"open","draft":false,"merged":false,"labels":[]}`},
	{ID: "3f1c-guid", Source: "//github.com/o/r", Type: "github.check_run.completed", Subject: "github:o/r@0123456789abcdef0123456789abcdef01234567",
		Time: "now", Priority: "info", CoalesceKey: "github:o/r/check/1", Terminal: true, Summary: `say "hi" \ tab	(o/r)`, Data: `{"a":"\u003c/"}`},
	{ID: "x", Source: "//elsewhere", Type: "wakegate.other", Subject: "github:o/r#1", Time: "t", Priority: "custom", Summary: "a: b (c)"},
	{ID: "sha-short-ab12", Source: "//github.com/o/r", Type: "github.pull_request.closed", Subject: "github:o/r#1", Time: "t",
		Summary: "PR #1 closed: <b>&amp;</b> / café ✓ (o/r)", Data: `{"title":"<b>&amp;</b> / café ✓","repo":"o\/r"}`},
	{ID: "i", Source: "//github.com", Type: "github.installation.created", Subject: "github:installation/1", Time: "t", Data: `{}`},
	{ID: "j", Source: "s", Type: "t.x", Subject: "session:s", Time: "now", CoalesceKey: "session:s"},
}

// TestEntry: the entry Entry writes expands (decode's expand) to exactly
// the JSON form of the same event, with and without a sessionid spliced
// in at sessionAt; for a GitHub subject it is the compact entry and
// shorter.
func TestEntry(t *testing.T) {
	for _, e := range entryCases {
		checkEntry(t, e)
	}
}

func checkEntry(t *testing.T, e EntryFields) {
	t.Helper()
	got, at := Entry(e)
	want, wantAt := entryJSON(e)
	const sid = `,"sessionid":"s-1"`
	for _, linked := range []bool{false, true} {
		g, w := got, want
		if linked {
			g, w = got[:at]+sid+got[at:], want[:wantAt]+sid+want[wantAt:]
		}
		plain := g
		if g[0] == compactMark {
			b, err := expand(g)
			if err != nil {
				t.Fatalf("%q: expand: %v", g, err)
			}
			plain = string(b)
		}
		if plain != w {
			t.Fatalf("entry %q expands to\n%s\nwant\n%s", g, plain, w)
		}
	}
	if _, ok := subjectRepo(e.Subject); ok != (got[0] == compactMark) {
		t.Errorf("%s: compact %v", e.Subject, !ok)
	}
	if got[0] == compactMark && len(got) >= len(want) && len(want) > 100 {
		t.Errorf("%s: compact %d bytes, JSON %d", e.Subject, len(got), len(want))
	}
}

// FuzzEntry: whatever the strings hold, Entry's entry expands to the
// event's JSON form.
func FuzzEntry(f *testing.F) {
	for _, e := range entryCases {
		f.Add(e.ID, e.Source, e.Type, e.Subject, e.Summary, e.Priority, e.Data, e.Terminal)
	}
	f.Fuzz(func(t *testing.T, id, source, typ, subject, summary, priority, data string, terminal bool) {
		if strings.ContainsRune(data, 0) || data != "" && !validJSONish(data) {
			return
		}
		checkEntry(t, EntryFields{ID: id, Source: source, Type: typ, Subject: subject, Time: "t",
			Priority: priority, Summary: summary, Terminal: terminal, Data: data})
	})
}

// validJSONish: data is JSON the caller validated; here it only must hold
// no byte a token uses.
func validJSONish(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 {
			return false
		}
	}
	return true
}

// BenchmarkEntry: the compact entry of a pull_request delivery's own
// event, as the PR tracker's worker builds it:
// go test -run '^$' -bench 'Entry$' -benchmem ./delivery/journal
func BenchmarkEntry(b *testing.B) {
	for b.Loop() {
		Entry(entryCases[0])
	}
}
