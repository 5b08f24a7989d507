package journal_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/github"
)

var update = flag.Bool("update", false, "rewrite testdata/api.golden")

// TestGoldenAPI: what the journal's readers hand the API (every HTTP
// response, SSE frame, inbox copy and push body encodes these events)
// stays byte for byte what it was before the journal's storage changed
// (docs/design.md §14, journal entries). The events: the PR tracker's
// over the octokit fixtures (its own events and the ready, checks_failed
// it derives, the settler's ready), and events appended from Go with
// every envelope field, extensions and binary data. testdata/api.golden
// was written by the code before the compact entry; seq is left out (it
// is the entry's position, not its content).
func TestGoldenAPI(t *testing.T) {
	ctx := context.Background()
	rdb, prefix := redistest.New(t)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 4})
	tr := tracker.New(rdb, j, tracker.Config{Settle: time.Second})
	now := time.Date(2026, 12, 5, 3, 0, 0, 123456789, time.UTC)
	steps := []struct{ event, path string }{
		{"pull_request", "octokit/pull_request/opened.payload.json"},
		{"check_suite", "octokit/check_suite/completed.payload.json"},
		{"check_suite", "octokit/check_suite/completed.1.payload.json"},
		{"check_run", "octokit/check_run/completed.payload.json"},
		{"check_run", "octokit/check_run/completed.1.payload.json"},
		{"status", "octokit/status/payload.json"},
		{"pull_request", "octokit/pull_request/closed.payload.json"},
		{"pull_request", "octokit/pull_request/opened.with-organization.payload.json"},
		{"pull_request", "octokit/pull_request/labeled.payload.json"},
		{"pull_request_review", "derived/pull_request_review.submitted.changes_requested.json"},
	}
	for i, s := range steps {
		body, err := os.ReadFile(filepath.Join("..", "..", "testdata", "github", s.path))
		if err != nil {
			t.Fatal(err)
		}
		f, err := github.Normalize(s.event, body)
		if err != nil {
			t.Fatalf("Normalize(%s): %v", s.path, err)
		}
		guid := "0000000" + string(rune('a'+i)) + "-9b2c-11ee-8c90-0242ac120002"
		if _, err := tr.Apply(ctx, "acme", guid, &f, now.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatalf("Apply(%s): %v", s.path, err)
		}
	}
	// the settler's ready of the organization's PR (no checks reported)
	if _, err := tr.SettleDue(ctx, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	full := &event.Event{SpecVersion: "1.0", ID: "pr/7/closed/2026-11-30T10:00:00Z", Source: "//github.com/o/r",
		Type: "github.pull_request.closed", Subject: "github:o/r#7", Time: time.Date(2026, 11, 30, 10, 0, 0, 123456789, time.UTC),
		DataContentType: "application/json", Workspace: "acme", SessionID: "s-1", Lineage: []string{"boss", "kid"},
		Priority: event.Attention, CoalesceKey: "github:o/r#7", Terminal: true, Summary: "merged \"fix\" <b>é</b> \u2028 \x01",
		Replay: true, Data: json.RawMessage(`{"merged":true,"n":1.50,"s":"\u00e9\n","u":"https:\/\/x"}`),
		Extensions: map[string]json.RawMessage{"zeta": json.RawMessage(`"z"`), "alpha": json.RawMessage(`7`)}}
	agent := &event.Event{SpecVersion: "1.0", ID: "a-1", Source: "wakegate:acme/s", Type: "session.turn_ended",
		Subject: "session:s", Time: time.Date(2026, 11, 30, 10, 0, 1, 0, time.UTC), Workspace: "acme",
		SessionID: "s", Priority: event.Info, Data: json.RawMessage(`{ "idle" : false }`)}
	bin := &event.Event{SpecVersion: "1.0", ID: "b-1", Source: "//github.com/o/r", Type: "github.pull_request.opened",
		Subject: "github:o/r#9", Time: time.Date(2026, 11, 30, 10, 0, 2, 0, time.UTC), Workspace: "acme",
		DataContentType: "application/octet-stream", DataBase64: []byte{0, 1, 2, 250}}
	for _, e := range []*event.Event{full, agent, bin} {
		if _, _, err := j.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	cur, _ := journal.ParseCursor("", 4)
	var lines [][]byte
	for {
		evs, next, err := j.Read(ctx, cur, journal.Filter{Workspace: "acme"}, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			e.Seq = ""
			b, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, append(b, '\n'))
		}
		cur = next
	}
	// in the order of their ids: across shards, the order of entries
	// appended in the same millisecond is the shards'
	sort.Slice(lines, func(a, b int) bool {
		return bytes.Compare(lines[a][bytes.Index(lines[a], []byte(`"id"`)):], lines[b][bytes.Index(lines[b], []byte(`"id"`)):]) < 0
	})
	var out bytes.Buffer
	for _, l := range lines {
		out.Write(l)
	}
	golden := filepath.Join("testdata", "api.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("the API's events differ from %s; got:\n%s", golden, out.Bytes())
	}
}
