package journal_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/providers/event"
)

// TestDecodeAsEncodingJSON: a journal entry decodes (sonic) to exactly
// what encoding/json makes of it — every field, the Lua-rendered entries'
// escapes, raw data kept byte for byte — and a corrupt one is an error.
func TestDecodeAsEncodingJSON(t *testing.T) {
	full := &event.Event{SpecVersion: "1.0", ID: "pr/7/closed/2026-11-30T10:00:00Z", Source: "//github.com/o/r",
		Type: "github.pull_request.closed", Subject: "github:o/r#7", Time: time.Date(2026, 11, 30, 10, 0, 0, 123456789, time.UTC),
		DataContentType: "application/json", Workspace: "ws", SessionID: "s-1", Lineage: []string{"boss", "kid"},
		Priority: event.Attention, CoalesceKey: "github:o/r#7", Terminal: true, Summary: "merged \"fix\" <b>é</b> \u2028",
		Replay: true, Data: json.RawMessage(`{"merged":true,"n":1.50,"s":"\u00e9\n"}`)}
	fullJSON, err := journal.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	entries := []string{
		string(fullJSON),
		`{"specversion":"1.0","id":"g-1","source":"//github.com/o/r","type":"github.pull_request.opened","subject":"github:o/r#1","time":"2026-11-30T10:00:00Z","workspace":"ws"}`,
		// as tracker.lua renders it: cjson escapes '/' and key order is its own
		`{"specversion":"1.0","id":"pr\/1\/ready","source":"\/\/github.com\/o\/r","type":"github.pull_request.ready","subject":"github:o\/r#1","time":"2026-11-30T10:00:00.5Z","datacontenttype":"application/json","workspace":"ws","priority":"attention","data":{"url":"https:\/\/github.com\/o\/r\/pull\/1","number":1}}`,
	}
	for _, raw := range entries {
		got, err := journal.Decode(3, redis.XMessage{ID: "1-2", Values: map[string]any{"e": raw}})
		if err != nil {
			t.Fatalf("decode %s: %v", raw, err)
		}
		var want event.Event
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatal(err)
		}
		want.Seq = journal.FormatSeq(3, "1-2")
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("decode of %s:\n got %+v\nwant %+v", raw, *got, want)
		}
	}
	for _, bad := range []string{``, `{"id":`, `{"time":"yesterday"}`, `[]`} {
		if _, err := journal.Decode(0, redis.XMessage{ID: "1-1", Values: map[string]any{"e": bad}}); err == nil || !strings.Contains(err.Error(), "journal entry 0-1-1") {
			t.Errorf("decode of %q: %v, want an error naming the entry", bad, err)
		}
	}
}

// TestDecodeCompactForm: an entry in the PR tracker's compact form
// (docs/design.md §14: no specversion, datacontenttype or workspace, no
// coalescekey when it is the subject) decodes to the event its full form
// decodes to; a full entry keeps what it says.
func TestDecodeCompactForm(t *testing.T) {
	for _, c := range []struct{ compact, full string }{
		{`{"id":"pr\/1\/ready","source":"\/\/github.com\/o\/r","type":"github.pull_request.ready","subject":"github:o\/r#1","time":"2026-11-30T10:00:00.5Z","priority":"attention","data":{"number":1}}`,
			`{"specversion":"1.0","id":"pr\/1\/ready","source":"\/\/github.com\/o\/r","type":"github.pull_request.ready","subject":"github:o\/r#1","time":"2026-11-30T10:00:00.5Z","datacontenttype":"application/json","workspace":"ws","priority":"attention","coalescekey":"github:o\/r#1","data":{"number":1}}`},
		{`{"id":"g","source":"\/\/github.com\/o\/r","type":"github.check_run.completed","subject":"github:o\/r@abc","time":"2026-11-30T10:00:00Z","sessionid":"s","coalescekey":"k","terminal":true,"summary":"x"}`,
			`{"specversion":"1.0","id":"g","source":"\/\/github.com\/o\/r","type":"github.check_run.completed","subject":"github:o\/r@abc","time":"2026-11-30T10:00:00Z","datacontenttype":"application/json","workspace":"ws","sessionid":"s","coalescekey":"k","terminal":true,"summary":"x"}`},
	} {
		got, err := journal.Decode(1, redis.XMessage{ID: "5-0", Values: map[string]any{"e": c.compact, "w": "ws"}})
		if err != nil {
			t.Fatal(err)
		}
		want, err := journal.Decode(1, redis.XMessage{ID: "5-0", Values: map[string]any{"e": c.full, "w": "ws"}})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("compact %s:\n got %+v\nwant %+v", c.compact, *got, *want)
		}
	}
	// a full entry without coalescekey or datacontenttype stays without them
	agent := `{"specversion":"1.0","id":"a","source":"wakegate:ws\/s","type":"session.turn_ended","subject":"session:s","time":"2026-11-30T10:00:00Z","workspace":"ws"}`
	got, err := journal.Decode(1, redis.XMessage{ID: "5-1", Values: map[string]any{"e": agent, "w": "ws"}})
	if err != nil || got.CoalesceKey != "" || got.DataContentType != "" {
		t.Fatalf("full entry %+v %v, want it as written", got, err)
	}
}
