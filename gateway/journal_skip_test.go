package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// deepData is a data object nesting n levels.
func deepData(n int) string {
	return strings.Repeat(`{"a":`, n-1) + `{}` + strings.Repeat(`}`, n-1)
}

// An event's data nests at most 64 levels: deeper is refused at the door
// (422, nothing committed), 64 is accepted (docs/design.md §4).
func TestPushRefusesDeepData(t *testing.T) {
	e := newMCPEnv(t)
	tok := mcpToken(t, "acme", "session:deep", "events:push events:read")
	for i, c := range []struct {
		depth  int
		batch  bool
		status int
	}{{64, false, 202}, {65, false, 422}, {5000, false, 422}, {64, true, 202}, {65, true, 422}, {9999, true, 422}} {
		ev := `{"specversion":"1.0","id":"d` + strconv.Itoa(i) + `","source":"t","type":"session.turn_ended","data":` + deepData(c.depth) + `}`
		ct := "application/cloudevents+json"
		if c.batch {
			ev, ct = "["+ev+"]", "application/cloudevents-batch+json"
		}
		status, body := e.rest(http.MethodPost, "/v1/events", tok, ct, []byte(ev))
		if status != c.status {
			t.Fatalf("data nesting %d levels (batch %v): %d %s, want %d", c.depth, c.batch, status, body, c.status)
		}
		if status == 422 && !strings.Contains(string(body), "64 levels") {
			t.Fatalf("data nesting %d levels: %s, want the limit named", c.depth, body)
		}
	}
}

// A journal entry that cannot be decoded — one nesting far deeper than
// the limit, as main accepted, and one that is not JSON at all, written
// into every shard — never fails a read: GET /v1/events of every
// workspace, MCP events_read and a subject_terminal subscription whose
// subject's terminal event is that entry answer as if it were not there;
// a metric counts it.
func TestUndecodableJournalEntryIsSkipped(t *testing.T) {
	e := newMCPEnv(t)
	ctx := context.Background()
	j := e.st.Journal
	toks := map[string]string{}
	for _, ws := range []string{"acme", "other"} {
		toks[ws] = mcpToken(t, ws, "session:w-"+ws, "events:push events:read events:read:any subscribe inbox")
		e.push(toks[ws], "before", "session.turn_started", "before-"+ws)
	}
	e.push(toks["acme"], "exit", "session.exited", "exited-acme")
	bad := []string{
		`{"specversion":"1.0","id":"deep","source":"t","type":"session.turn_ended","subject":"session:w-acme","time":"2026-12-04T10:00:00Z","workspace":"acme","sessionid":"w-acme","data":` + deepData(5000) + `}`,
		`not json`,
	}
	var termSid string
	for shard := range j.Config().Shards {
		for _, raw := range bad {
			id, err := e.st.Redis.XAdd(ctx, &redis.XAddArgs{Stream: j.StreamKey(shard), Values: map[string]any{"e": raw}}).Result()
			if err != nil {
				t.Fatal(err)
			}
			if shard == j.ShardOf("acme", "session:w-acme") && raw != "not json" {
				termSid = id
			}
		}
	}
	// The session's terminal record names the deep entry, as a terminal
	// event journaled with such data would.
	termKey := j.Tag(j.ShardOf("acme", "session:w-acme")) + ":term:acme:session:w-acme"
	if n, err := e.st.Redis.Exists(ctx, termKey).Result(); err != nil || n != 1 {
		t.Fatalf("the terminal record %s: %d %v", termKey, n, err)
	}
	if err := e.st.Redis.HSet(ctx, termKey, "sid", termSid).Err(); err != nil {
		t.Fatal(err)
	}
	for _, ws := range []string{"acme", "other"} {
		e.push(toks[ws], "after", "session.turn_ended", "after-"+ws)
	}

	for _, ws := range []string{"acme", "other"} {
		status, body := e.rest(http.MethodGet, "/v1/events?limit=1000", toks[ws], "", nil)
		if status != http.StatusOK || !strings.Contains(string(body), "before-"+ws) || !strings.Contains(string(body), "after-"+ws) {
			t.Fatalf("GET /v1/events in %s: %d %.300s, want both of its events", ws, status, body)
		}
		// Paging one event at a time passes over the bad entries too.
		seen, cursor := "", ""
		for range 20 {
			status, body := e.rest(http.MethodGet, "/v1/events?limit=1&after="+cursor, toks[ws], "", nil)
			var pg struct {
				Events []struct{ Summary string }
				Next   string
			}
			if status != http.StatusOK || json.Unmarshal(body, &pg) != nil {
				t.Fatalf("GET /v1/events?limit=1 in %s: %d %s", ws, status, body)
			}
			for _, ev := range pg.Events {
				seen += ev.Summary + " "
			}
			if len(pg.Events) == 0 {
				break
			}
			cursor = pg.Next
		}
		if !strings.Contains(seen, "after-"+ws) {
			t.Fatalf("paging %s's events one by one saw %q, want through after-%s", ws, seen, ws)
		}
	}
	var read struct {
		Events []struct{ Summary string } `json:"events"`
	}
	cs := e.client(toks["other"])
	ok(t, cs, "events_read", map[string]any{"limit": 1000}, &read)
	if b, _ := json.Marshal(read); !strings.Contains(string(b), "after-other") {
		t.Fatalf("MCP events_read: %s", b)
	}
	status, body := e.rest(http.MethodPost, "/v1/subscriptions", toks["acme"], "application/json",
		[]byte(`{"subjects": ["session:w-acme"], "until": "subject_terminal"}`))
	if status != http.StatusCreated {
		t.Fatalf("a subject_terminal subscription on a subject whose terminal entry cannot be decoded: %d %s", status, body)
	}
	status, body = e.rest(http.MethodGet, "/metrics", "", "", nil)
	if status != 200 || !strings.Contains(string(body), "wakegate_journal_undecodable_entries_total") ||
		strings.Contains(string(body), "wakegate_journal_undecodable_entries_total 0") {
		t.Fatalf("metrics: %d, want wakegate_journal_undecodable_entries_total counting the entries", status)
	}
}
