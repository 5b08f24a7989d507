package gateway

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/agent"
	"github.com/wakegate/wakegate/providers/event"
)

// An attended party's notice never ends a plain long-poll; with
// min_priority (an explicit waiter) it does, at once; a bad min_priority
// is a 400 problem.
func TestLongPollMinPriorityEndsOnANotice(t *testing.T) {
	rdb, prefix := redistest.New(t)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 4})
	box := inbox.New(rdb, inbox.Config{Prefix: prefix})
	v, _ := agent.NewVerifier(agent.VerifierConfig{HS256Secret: []byte(testSecret)})
	s, err := New(Config{WebhookSecrets: [][]byte{[]byte(testSecret)}}, Deps{
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Redis: rdb, Journal: j, Ingest: ingest.New(rdb, j),
		Sessions: sessions.New(rdb, j, 0), Linker: tracker.New(rdb, j, tracker.Config{}), Verifier: v, Inbox: box,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.runNotifiers(ctx)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	c := agent.Claims{Workspace: "ws", Scope: "inbox"}
	c.Subject = "session:waiter"
	c.ExpiresAt = jwtTime(time.Now().Add(time.Hour))
	tok, _ := agent.Mint([]byte(testSecret), c)
	get := func(query string) (int, string, time.Duration) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/inbox?"+query, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), time.Since(start)
	}
	e := &event.Event{SpecVersion: event.SpecVersion, ID: "r1", Source: "//github.com/org/repo", Type: "github.pull_request.ready",
		Subject: "github:org/repo#1", Time: time.Now(), Seq: "1-1-0", Workspace: "ws", Priority: event.Attention}
	res, err := box.Deliver(ctx, inbox.Delivery{Workspace: "ws", Party: "session:waiter", Event: e, Via: inbox.ViaSubscription, Attended: true}, time.Now())
	if err != nil || res.Wake || res.Kind != inbox.KindNotice {
		t.Fatalf("deliver: %+v %v, want a notice", res, err)
	}
	if code, body, took := get("wait=1s"); code != 200 || took < time.Second || !strings.Contains(body, `"r1"`) {
		t.Fatalf("plain long-poll: %d after %s: %s; want the page at the timeout", code, took, body)
	}
	if code, body, took := get("wait=20s&min_priority=attention"); code != 200 || took > 5*time.Second || !strings.Contains(body, `"r1"`) {
		t.Fatalf("min_priority long-poll: %d after %s: %s; want the notice at once", code, took, body)
	}
	if code, _, took := get("wait=1s&min_priority=critical"); code != 200 || took < time.Second {
		t.Fatalf("min_priority=critical ended after %s on an attention notice", took)
	}
	if code, body, _ := get("wait=1s&min_priority=urgent"); code != 400 || !strings.Contains(body, "min_priority") {
		t.Fatalf("bad min_priority: %d %s, want a 400 problem", code, body)
	}
}
