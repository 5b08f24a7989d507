package journal_test

import (
	"context"
	_ "embed"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/delivery/redistest"
)

//go:embed testdata/entry.lua
var entryTestLua string

// luaEvent is the event table the PR tracker hands journal.lua.
type luaEvent struct {
	ID          string `json:"id"`
	Source      string `json:"source"`
	Type        string `json:"type"`
	Subject     string `json:"subject"`
	Time        string `json:"time,omitempty"`
	SessionID   string `json:"sessionid,omitempty"`
	Priority    string `json:"priority,omitempty"`
	CoalesceKey string `json:"coalescekey,omitempty"`
	Terminal    bool   `json:"terminal,omitempty"`
	Summary     string `json:"summary,omitempty"`
	Data        string `json:"data,omitempty"`
}

// TestCompactEntry: the compact entry journal.lua writes for an event
// decodes to exactly the event its JSON form decodes to — data byte for
// byte — whatever the title and repository hold (one inside the other,
// escapes, one letter, none), and the entry is smaller; events about
// other subjects keep the JSON form.
func TestCompactEntry(t *testing.T) {
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 1})
	script := redis.NewScript(keyspace.Join(journal.AppendLua, entryTestLua))
	const opened = `{"repo":"o/r","number":2,"action":"opened","title":"Fix it","url":"https://github.com/o/r/pull/2","head":"ec26c3e5","labels":["bug"]}`
	pr := func(typ, summary, data string) luaEvent {
		return luaEvent{ID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", Source: "//github.com/o/r", Type: typ, Subject: "github:o/r#2",
			Time: "2019-05-15T15:20:33Z", Priority: "attention", Summary: summary, Data: data}
	}
	cases := map[string]luaEvent{
		"opened":       pr("github.pull_request.opened", "PR #2 opened: Fix it (o/r)", opened),
		"ready, cjson": pr("github.pull_request.ready", `PR #2 ready: Fix it (o/r)`, `{"repo":"o\/r","title":"Fix it","url":"https:\/\/github.com\/o\/r\/pull\/2","number":2}`),
		"ready, sha id": {ID: "pr/2/ready/ec26c3e57ca3a959ca5aad62de7213c562f8c821", Source: "//github.com/o/r", Type: "github.pull_request.ready",
			Subject: "github:o/r#2", Time: "2026-12-05T03:34:46.137549154Z", Priority: "attention", Summary: "PR #2 ready: Fix it (o/r)",
			Data: `{"repo":"o\/r","title":"Fix it","head":"ec26c3e57ca3a959ca5aad62de7213c562f8c821","url":"https:\/\/github.com\/o\/r\/pull\/2","number":2,"failed":["a"]}`},
		"every data token": pr("github.pull_request.opened", "PR #2 opened: Fix it (o/r)",
			`{"repo":"o/r","number":2,"action":"opened","title":"Fix it","url":"https://github.com/o/r/pull/2","author":"me","head":"ec26","base":"main","state":"open","draft":false,"merged":false,"labels":["bug"],"sha":"ec26","pull_requests":[2],"u2":"https:\/\/github.com\/x"}`),
		"hex id, not a sha": pr("github.pull_request.opened", "PR #2 opened: Fix it (o/r)", `{"a":"ec26c3e57ca3a959ca5aad62de7213c562f8c82"}`),
		"title has repo":    pr("github.pull_request.opened", "PR #2 opened: move o/r to o/r2 (o/r)", `{"repo":"o/r","title":"move o/r to o/r2","t2":"move o\/r to o\/r2"}`),
		"repo in title":     pr("github.pull_request.opened", "PR #2 opened: o/r (o/r)", `{"repo":"o/r","title":"o/r"}`),
		"escapes":           pr("github.pull_request.opened", "PR #2 opened: \"quoted\" <b>é</b> \u2028 \\ tab\t (o/r)", `{"title":"\"quoted\" \u003cb\u003e\u00e9\u003c/b\u003e \u2028 \\ tab\t","x":"\u0001"}`),
		"short title":       pr("github.pull_request.opened", "PR #2 opened: a (o/r)", `{"title":"a"}`),
		"no summary": pr("github.pull_request.closed", "", `{ "spaced" :	[1, 2]
}`),
		"no data": pr("github.pull_request.ready", "PR #2 ready: Fix it (o/r)", ""),
		"check, sha subject": {ID: "g/2", Source: "//github.com/o/r", Type: "github.check_run.completed", Subject: "github:o/r@ec26c3e5",
			Time: "2019-05-15T15:21:12Z", Priority: "info", SessionID: "s-1", CoalesceKey: "k", Terminal: true,
			Summary: `check "lint" failed on ec26c3e (o/r)`, Data: `{"repo":"o/r","sha":"ec26c3e5"}`},
		"other source, priority": {ID: "x", Source: "//elsewhere/o/r", Type: "wakegate.link_conflict", Subject: "github:o/r#2",
			Time: "2019-05-15T15:21:12.5Z", Priority: "internal", Summary: "x: y (z)", Data: `{}`},
		"no time": {ID: "x", Source: "//github.com/o/r", Type: "github.pull_request.opened", Subject: "github:o/r#2"},
		"not github": {ID: "x", Source: "//wakegate/acme/s", Type: "session.pr_opened", Subject: "session:s",
			Time: "2019-05-15T15:21:12Z", Summary: "PR #2 opened: Fix it (o/r)", Data: `{"repo":"o/r"}`},
	}
	for name, e := range cases {
		in, _ := json.Marshal(e)
		res, err := script.Run(ctx, rdb, []string{j.StreamKey(0)}, in).StringSlice()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		compact, plain := res[0], res[1]
		plainForm := name == "not github" || name == "no time"
		if plainForm != strings.HasPrefix(compact, "{") {
			t.Errorf("%s: entry %q", name, compact)
		}
		got, err := journal.Decode(0, redis.XMessage{ID: "1-0", Values: map[string]any{"e": compact, "w": "ws"}})
		if err != nil {
			t.Fatalf("%s: decode %q: %v", name, compact, err)
		}
		want, err := journal.Decode(0, redis.XMessage{ID: "1-0", Values: map[string]any{"e": plain, "w": "ws"}})
		if err != nil {
			t.Fatalf("%s: decode %q: %v", name, plain, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: compact %q decodes to\n%+v\nits JSON %s to\n%+v", name, compact, *got, plain, *want)
		}
		if e.Data != "" && string(got.Data) != e.Data {
			t.Errorf("%s: data %s, want %s byte for byte", name, got.Data, e.Data)
		}
		if !plainForm && len(compact) >= len(plain) {
			t.Errorf("%s: compact entry %d bytes, its JSON %d", name, len(compact), len(plain))
		}
	}
}

// TestCompactEntryMalformed: a compact entry cut short or holding a byte
// that is no token is undecodable (readers skip it, docs/design.md §4).
func TestCompactEntryMalformed(t *testing.T) {
	for _, bad := range []string{"\x01o/r", "\x01o/r\x00title", "\x01o/r\x00t\x00\x05\"a\"}", "\x01o/r\x00t\x00\x00\x05\"a\"\x0d\x7f\x00}", "\x01o/r\x00t\x00\x00\x05\"a\"\x10}", "\x01\x00\x00\x00\x05"} {
		if _, err := journal.Decode(0, redis.XMessage{ID: "1-1", Values: map[string]any{"e": bad}}); err == nil {
			t.Errorf("decode of %q: no error", bad)
		}
	}
}

// FuzzDecodeEntry: any stored entry, compact or not, decodes or is
// refused as undecodable, never a panic; and an event's JSON behind an
// empty compact header (no token in it) decodes to the same event as the
// JSON itself.
func FuzzDecodeEntry(f *testing.F) {
	f.Add(`{"id":"1","source":"s","type":"session.turn_ended","subject":"session:a","time":"2026-12-05T00:00:00Z"}`)
	f.Add("\x01o/r\x00t\x00" + strings.Repeat("a", 40) + "\x00\x05\"pr/1/ready/\x01\"\x06\x07ready\"\x08\x02#1\"\x0b2026-12-05T00:00:00Z\"\x0c\x10PR #1 ready: \x04\"\x11{\x13\x02/pull/1\"}}")
	f.Add("\x01\x00\x00\x00")
	f.Fuzz(func(t *testing.T, raw string) {
		e, err := journal.Decode(0, redis.XMessage{ID: "1-0", Values: map[string]any{"e": raw, "w": "ws"}})
		if (e == nil) == (err == nil) {
			t.Fatalf("Decode(%q) = %v, %v: want one of an event or an error", raw, e, err)
		}
		if len(raw) == 0 || raw[0] != '{' || strings.ContainsFunc(raw, func(r rune) bool { return r < 0x20 && r != '\t' && r != '\n' && r != '\r' }) {
			return
		}
		compact, cerr := journal.Decode(0, redis.XMessage{ID: "1-0", Values: map[string]any{"e": "\x01\x00\x00\x00" + raw, "w": "ws"}})
		if (err == nil) != (cerr == nil) || (err == nil && !reflect.DeepEqual(e, compact)) {
			t.Fatalf("%q: JSON form %+v, %v; compact form %+v, %v", raw, e, err, compact, cerr)
		}
	})
}
