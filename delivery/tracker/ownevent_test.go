package tracker

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
)

// entryJSON is a stored entry's JSON (a compact entry expanded).
func entryJSON(t *testing.T, entry string) map[string]any {
	t.Helper()
	e, err := journal.Decode(0, redis.XMessage{ID: "1-0", Values: map[string]any{"e": entry, "w": "ws"}})
	if err != nil {
		t.Fatalf("decode %q: %v", entry, err)
	}
	b, _ := json.Marshal(e)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"specversion", "datacontenttype", "workspace", "seq"} {
		delete(m, k)
	}
	if m["coalescekey"] == m["subject"] {
		delete(m, "coalescekey")
	}
	return m
}

// TestOwnEvent holds the own event built in Go (applyInput.ownEvent) to
// what apply.lua journals: valid JSON whatever the strings hold, the
// compact form's fields, a sessionid spliced in at EvAt still valid, and
// the input left with what the script still reads.
func TestOwnEvent(t *testing.T) {
	for _, s := range []string{"plain", `say "hi"`, "back\\slash", `quote " and \ backslash`, "tab\tnew\nline\x01", "<b>&amp;</b> / café ✓"} {
		for _, terminal := range []bool{false, true} {
			in := &applyInput{GUID: "g1", Source: "//github.com/o/r", Type: "github.pull_request.opened",
				Subject: "github:o/r#1", Time: "2026-01-02T03:04:05Z", Priority: "attention",
				CoalesceKey: s, Terminal: terminal, Summary: s}
			ev := in.ownEvent(`{"title":"x"}`)
			got := entryJSON(t, ev)
			want := map[string]any{"id": "g1", "source": "//github.com/o/r", "type": "github.pull_request.opened",
				"subject": "github:o/r#1", "time": "2026-01-02T03:04:05Z", "priority": "attention",
				"coalescekey": s, "summary": s, "data": map[string]any{"title": "x"}}
			if terminal {
				want["terminal"] = true
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("event\n got %v\nwant %v", got, want)
			}
			linked := ev[:in.EvAt] + `,"sessionid":"s1"` + ev[in.EvAt:]
			if got := entryJSON(t, linked); got["sessionid"] != "s1" {
				t.Errorf("spliced at %d: %v in %q", in.EvAt, got["sessionid"], linked)
			}
			if in.Priority != "" || in.CoalesceKey != "" || (in.Summary != "") != terminal || (in.Time != "") != terminal {
				t.Errorf("input keeps %+v (terminal %v)", in, terminal)
			}
		}
	}
	// the subject's own coalescing key and no data leave them out
	in := &applyInput{GUID: "g2", ID: "id2", Source: "s", Type: "t.x", Subject: "sub", Time: "now", CoalesceKey: "sub"}
	if ev, want := in.ownEvent(""), `{"id":"id2","source":"s","type":"t.x","subject":"sub","time":"now"}`; ev != want {
		t.Errorf("event %s, want %s", ev, want)
	}
}
