package integration

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/providers/event"
)

const (
	repo   = "Codertocat/Hello-World"
	prSubj = "github:Codertocat/Hello-World#2"
)

// TestSmoke runs the same end-to-end smoke test against `serve` on real
// Redis and against `serve` with its embedded in-memory Redis.
func TestSmoke(t *testing.T) {
	t.Parallel()
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		smoke(t, newStack(t, nil))
	})
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		smoke(t, newEmbeddedStack(t, nil))
	})
}

func smoke(t *testing.T, s *stack) {
	p := s.start("serve", "serve", nil)
	c := s.client(p)

	if r := c.get(t, "/healthz", ""); r.Status != 200 {
		t.Errorf("/healthz: %s", r)
	}
	if r := c.get(t, "/readyz", ""); r.Status != 200 {
		t.Errorf("/readyz: %s", r)
	}
	if s.env["WAKEGATE_REDIS_URL"] == "" && !strings.Contains(p.logs.String(), "EMBEDDED") {
		t.Errorf("embedded serve does not say loudly that its state is in memory:\n%s", p.logs.tail(10))
	}

	// An agent push is committed and answered with its id and seq…
	push := s.token(t, "session:smoke", "default", "events:push events:read")
	r := c.mustPush(t, push, ctEvent, ce("smoke-1", "session.turn_ended",
		map[string]any{"summary": "smoke turn over", "data": map[string]any{"idle": true}}))
	if r.Status != 202 {
		t.Fatalf("push: %s, want 202", r)
	}
	var ans pushAnswer
	r.decode(t, &ans)
	if len(ans.Accepted) != 1 || ans.Accepted[0].ID != "smoke-1" || ans.Accepted[0].Seq == "" || len(ans.Duplicates) != 0 {
		t.Fatalf("push answer %s, want accepted [{id smoke-1, seq}] and no duplicates", r)
	}

	// …and is visible in GET /v1/events, as the server stamped it.
	op := s.token(t, "human:operator", "default", "events:read events:read:any")
	page := readPage(t, c, op, "limit=1000")
	got := find(page.Events, "smoke-1")
	switch {
	case got == nil:
		t.Fatalf("smoke-1 not in GET /v1/events: %+v", page.Events)
	case got.Seq != ans.Accepted[0].Seq:
		t.Errorf("seq %q in the journal, %q in the answer", got.Seq, ans.Accepted[0].Seq)
	case got.Source != "//wakegate/default/session:smoke" || got.Subject != "session:smoke" ||
		got.SessionID != "smoke" || got.Workspace != "default" || got.Type != "session.turn_ended" ||
		got.Priority != event.Attention:
		t.Errorf("journaled event %+v: want source //wakegate/default/session:smoke, subject session:smoke, sessionid smoke, workspace default, priority attention", got)
	}
	if page.Next == "" {
		t.Error("GET /v1/events answered no next cursor")
	}

	// A signed pull_request.opened is accepted and becomes
	// github.pull_request.opened about PR #2.
	guid := newGUID()
	r = c.mustWebhook(t, "pull_request", guid, fixture(t, "octokit/pull_request/opened.payload.json"))
	var del deliveryAnswer
	r.decode(t, &del)
	if r.Status != 202 || del.Delivery != guid || del.Status != "accepted" {
		t.Fatalf("webhook: %s, want 202 {delivery: %s, status: accepted}", r, guid)
	}
	var opened *event.Event
	cursor := page.Next
	deadline := time.Now().Add(30 * time.Second)
	for opened == nil {
		pg := readPage(t, c, op, "types=github.pull_request.opened&wait=5s&after="+url.QueryEscape(cursor))
		opened = find(pg.Events, guid)
		cursor = pg.Next
		if opened == nil && time.Now().After(deadline) {
			t.Fatalf("github.pull_request.opened %s not in GET /v1/events after 30s", guid)
		}
	}
	if opened.Type != "github.pull_request.opened" || opened.Subject != prSubj ||
		opened.Source != "//github.com/"+repo || opened.Workspace != "default" || opened.Priority != event.Attention {
		t.Errorf("opened event %+v: want type github.pull_request.opened, subject %s, source //github.com/%s, workspace default, priority attention", opened, prSubj, repo)
	}

	r = c.get(t, "/metrics", "")
	if r.Status != 200 {
		t.Fatalf("/metrics: %d", r.Status)
	}
	m := string(r.Body)
	for _, want := range []string{
		"wakegate_gateway_requests_total",
		`wakegate_gateway_webhooks_total{outcome="accepted"} 1`,
		`wakegate_gateway_pushed_events_total{outcome="accepted"} 1`,
		`wakegate_derive_records_total{outcome="journaled"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// A script or a transaction over keys of two slots fails on a Redis
	// Cluster only: say so wherever it would show.
	if logs := p.logs.String(); strings.Contains(logs, "CROSSSLOT") || strings.Contains(logs, `"level":"ERROR"`) {
		t.Errorf("serve logged an error:\n%s", p.logs.tail(20))
	}
}

// page is the answer of GET /v1/events.
type page struct {
	Events []*event.Event `json:"events"`
	Next   string         `json:"next"`
}

func readPage(t testing.TB, c *client, token, query string) page {
	t.Helper()
	r := c.get(t, "/v1/events?"+query, token)
	if r.Status != 200 {
		t.Fatalf("GET /v1/events?%s: %s", query, r)
	}
	var p page
	r.decode(t, &p)
	return p
}

func find(evs []*event.Event, id string) *event.Event {
	for _, e := range evs {
		if e.ID == id {
			return e
		}
	}
	return nil
}
