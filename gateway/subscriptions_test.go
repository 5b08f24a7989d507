package gateway

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/providers/event"
)

const subScope = "subscribe"

func TestSubscriptionsCreateListDelete(t *testing.T) {
	e := newEnv(t)
	a := e.do("POST", "/v1/subscriptions", "session:w1", subScope,
		`{"types":["github.pull_request.*"],"subjects":["github:org/repo#*"],"session":{"id":"abc","scope":"subtree"},
		  "labels":["team-a"],"min_priority":"attention","delivery":"inbox"}`).want(t, 201)
	id := a.str("id")
	if id == "" || a.str("owner") != "session:w1" || a.str("workspace") != tws || a.str("delivery") != "inbox" ||
		a.str("session.scope") != "subtree" || a.str("closed") != "" {
		t.Fatalf("created: %s", a.raw)
	}
	// A session filter naming an id another workspace also has is just an
	// id of this one.
	e.do("POST", "/v1/subscriptions", "session:w1", subScope, `{"session":{"id":"kid"}}`).want(t, 201)

	list := func(sub string) []any {
		a := e.do("GET", "/v1/subscriptions", sub, subScope, "").want(t, 200)
		subs, ok := a.body["subscriptions"].([]any)
		if !ok {
			t.Fatalf("list: %s", a.raw)
		}
		return subs
	}
	if n := len(list("session:w1")); n != 2 {
		t.Fatalf("owner lists %d", n)
	}
	if n := len(list("session:w2")); n != 0 {
		t.Fatalf("another party lists %d", n)
	}
	e.do("DELETE", "/v1/subscriptions/"+id, "session:w2", subScope, "").want(t, 404) // not its own
	e.do("DELETE", "/v1/subscriptions/"+id, "session:w1", subScope, "").want(t, 204)
	e.do("DELETE", "/v1/subscriptions/"+id, "session:w1", subScope, "").want(t, 404)
	e.do("DELETE", "/v1/subscriptions/nope", "session:w1", subScope, "").want(t, 404)
	if subs := list("session:w1"); len(subs) != 1 {
		t.Fatalf("after delete: %v", subs)
	}
}

// Bad input → problem+json, nothing applied.
func TestSubscriptionsRefuseBadInput(t *testing.T) {
	e := newEnv(t)
	for name, tc := range map[string]struct {
		scope, body string
		status      int
	}{
		"malformed glob":            {subScope, `{"subjects":["github:org/*#1"]}`, 400},
		"type glob in the middle":   {subScope, `{"types":["github.*.ready"]}`, 400},
		"party id with a slash":     {subScope, `{"session":{"id":"a/b"}}`, 400},
		"party id with a newline":   {subScope, `{"session":{"id":"a\nb"}}`, 400},
		"party id of 200 chars":     {subScope, `{"session":{"id":"` + strings.Repeat("a", 200) + `"}}`, 400},
		"subject with a slash id":   {subScope, `{"subjects":["session:a/b"]}`, 400},
		"no filter":                 {subScope, `{"min_priority":"info"}`, 400},
		"unknown field":             {subScope, `{"types":["x.y"],"owner":"session:boss"}`, 400},
		"not json":                  {subScope, `{"types":`, 400},
		"bad delivery":              {subScope, `{"types":["x.y"],"delivery":"shout"}`, 400},
		"until terminal, wildcard":  {subScope, `{"subjects":["github:org/repo#*"],"until":"subject_terminal"}`, 422},
		"until terminal, two":       {subScope, `{"subjects":["github:org/repo#1","github:org/repo#2"],"until":"subject_terminal"}`, 422},
		"until in the past":         {subScope, `{"types":["x.y"],"until":"2001-01-01T00:00:00Z"}`, 422},
		"missing scope":             {"inbox", `{"types":["x.y"]}`, 403},
		"missing scope for listing": {"inbox", "", 403},
	} {
		t.Run(name, func(t *testing.T) {
			method := "POST"
			if tc.body == "" {
				method = "GET"
			}
			e.do(method, "/v1/subscriptions", "session:w1", tc.scope, tc.body).want(t, tc.status)
		})
	}
	if subs, _ := e.subs.List(e.ctx, tws, "session:w1"); len(subs) != 0 {
		t.Fatalf("refused requests created %v", subs)
	}
}

// DeathWatch: a subscription on a subject that has already ended gets its
// terminal event at once, and "until: subject_terminal" closes at once —
// from the journal while it retains the event, else from the compact
// terminal record.
func TestDeathWatch(t *testing.T) {
	e := newEnv(t)
	const pr = "github:org/repo#42"
	closed := &event.Event{SpecVersion: "1.0", ID: "guid-1", Source: event.GitHubSource("org/repo"),
		Type: "github.pull_request.closed", Subject: pr, Time: time.Now().UTC(), Workspace: tws, SessionID: "author",
		Priority: event.Attention, Terminal: true, Summary: "#42 merged", Data: json.RawMessage(`{"merged":true}`)}
	seq, _, err := e.j.Append(e.ctx, closed)
	if err != nil {
		t.Fatal(err)
	}

	// The PR's author session subscribes: a waiter delivery.
	a := e.do("POST", "/v1/subscriptions", "session:author", subScope, `{"subjects":["`+pr+`"],"until":"subject_terminal"}`).want(t, 201)
	if a.str("closed") != "true" || a.str("id") == "" {
		t.Fatalf("closed at once: %s", a.raw)
	}
	got := e.inbox("session:author")
	if len(got) != 1 || got[0].Type != "github.pull_request.closed" || got[0].Via != inbox.ViaSubscription || !got[0].Waiter || !got[0].Wake {
		t.Fatalf("author's inbox: %+v", got)
	}
	var ev event.Event
	_ = json.Unmarshal(got[0].Event, &ev)
	if ev.ID != "guid-1" || ev.Seq != seq {
		t.Fatalf("delivered %+v, want the journaled event", ev)
	}
	if subs, _ := e.subs.List(e.ctx, tws, "session:author"); len(subs) != 0 {
		t.Fatalf("still open: %v", subs)
	}
	// A standing subscription stays; one whose filters do not match the
	// terminal event gets nothing.
	e.do("POST", "/v1/subscriptions", "human:ops", subScope, `{"subjects":["`+pr+`"]}`).want(t, 201)
	e.do("POST", "/v1/subscriptions", "human:dev", subScope, `{"subjects":["`+pr+`"],"types":["github.pull_request.ready"]}`).want(t, 201)
	if got := e.inbox("human:ops"); len(got) != 1 || got[0].Waiter {
		t.Fatalf("ops: %+v", got)
	}
	if got := e.inbox("human:dev"); len(got) != 0 {
		t.Fatalf("a non-matching subscription got %+v", got)
	}

	// Past the journal's retention: synthesized from the terminal record.
	shard, sid, err := journal.ParseSeq(seq)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.XDel(e.ctx, e.j.StreamKey(shard), sid).Err(); err != nil {
		t.Fatal(err)
	}
	e.do("POST", "/v1/subscriptions", "session:late", subScope, `{"subjects":["`+pr+`"],"until":"subject_terminal"}`).want(t, 201)
	got = e.inbox("session:late")
	if len(got) != 1 {
		t.Fatalf("late: %+v", got)
	}
	_ = json.Unmarshal(got[0].Event, &ev)
	if ev.ID != "terminal/"+pr || ev.Source != event.ServerSource(tws) || ev.Type != "github.pull_request.closed" ||
		!ev.Terminal || ev.Summary != "#42 merged" || ev.Subject != pr {
		t.Fatalf("synthesized: %+v", ev)
	}
	// Again: one entry, the delivery is deduplicated.
	e.do("POST", "/v1/subscriptions", "session:late", subScope, `{"subjects":["`+pr+`"],"until":"subject_terminal"}`).want(t, 201)
	if got := e.inbox("session:late"); len(got) != 1 || got[0].Count != 1 {
		t.Fatalf("twice: %+v", got)
	}
}
