package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/agent"
	"github.com/wakegate/wakegate/providers/event"
)

// TestLongPollsHoldNoRedisConnections: 1,000 long-polls on one gateway are
// served from one Pub/Sub subscription, so the gateway's Redis connections
// do not grow with them; a delivery still wakes exactly its own poll.
func TestLongPollsHoldNoRedisConnections(t *testing.T) {
	base, prefix := redistest.New(t)
	name := "wgt-longpoll-" + prefix
	opt := base.Options()
	opt.ClientName, opt.PoolSize = name, 10
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
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
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2000, MaxConnsPerHost: 0}}

	connections := func() int {
		list, err := base.ClientList(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(list, "name="+name+" ")
	}
	const polls = 1000
	var wg sync.WaitGroup
	status := make([]int, polls)
	answered := make([]chan struct{}, polls)
	pollCtx, stopPolls := context.WithCancel(ctx)
	for i := range polls {
		c := agent.Claims{Workspace: "ws", Scope: "inbox"}
		c.Subject = fmt.Sprintf("session:p%d", i)
		c.ExpiresAt = jwtTime(time.Now().Add(time.Hour))
		tok, _ := agent.Mint([]byte(testSecret), c)
		answered[i] = make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(answered[i])
			req, _ := http.NewRequestWithContext(pollCtx, http.MethodGet, srv.URL+"/v1/inbox?wait=60s", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := client.Do(req)
			if err == nil {
				status[i] = resp.StatusCode
				resp.Body.Close()
			}
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.inboxes.waiting() < polls {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d long-polls waiting", s.inboxes.waiting(), polls)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := connections(); n > opt.PoolSize+2 {
		t.Fatalf("%d Redis connections for %d long-polls, want at most the pool (%d) and the two subscriptions", n, polls, opt.PoolSize)
	}
	// A delivery to p7 ends p7's poll only.
	e := &event.Event{SpecVersion: "1.0", ID: "x", Source: "//t", Type: "session.crashed", Subject: "session:q",
		Workspace: "ws", SessionID: "q", Priority: event.Critical, Time: time.Now().UTC(), Seq: "0-1-0"}
	if _, err := box.Deliver(ctx, inbox.Delivery{Workspace: "ws", Party: "session:p7", Event: e, Via: inbox.ViaController}, time.Now()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-answered[7]:
	case <-time.After(10 * time.Second):
		t.Fatal("p7's poll did not answer within 10s of its delivery")
	}
	if status[7] != http.StatusOK {
		t.Fatalf("p7's poll answered %d", status[7])
	}
	if n := s.inboxes.waiting(); n != polls-1 {
		t.Fatalf("%d polls waiting after one delivery, want the other %d", n, polls-1)
	}
	stopPolls()
	wg.Wait()
}
