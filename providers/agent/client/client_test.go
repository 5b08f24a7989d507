package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/integration/stack/stacktest"
	"github.com/wakegate/wakegate/providers/agent/client"
	"github.com/wakegate/wakegate/providers/event"
)

const allScopes = "events:push events:push:any events:read events:read:any inbox subscribe supervise spawn admin"

func newClient(t *testing.T, url, token string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(url, token, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// journaled reads every event of the workspace with id (an
// events:read:any reader).
func journaled(t *testing.T, c *client.Client, id string) []event.Event {
	t.Helper()
	var out []event.Event
	after := ""
	for {
		page, err := c.Events(ctxT(t, 10*time.Second), client.EventsQuery{After: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Events {
			if e.ID == id {
				out = append(out, e)
			}
		}
		if len(page.Events) == 0 {
			return out
		}
		after = page.Next
	}
}

func TestPushKeepsTheCallersIDAndARepeatIsADuplicate(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	w := newClient(t, g.URL, g.Token("session:w1", "events:push"))
	reader := newClient(t, g.URL, g.Token("human:ops", allScopes))
	ctx := ctxT(t, 10*time.Second)

	e := &event.Event{Type: "session.turn_started", Summary: "turn 1"}
	res, err := w.Push(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	if e.ID == "" || e.SpecVersion != "1.0" || e.Time.IsZero() {
		t.Fatalf("Push did not fill the event in place: %+v", e)
	}
	if len(res.Accepted) != 1 || res.Accepted[0].ID != e.ID || res.Accepted[0].Seq == "" || len(res.Duplicates) != 0 {
		t.Fatalf("first push: %+v", res)
	}
	again, err := w.Push(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Accepted) != 0 || len(again.Duplicates) != 1 || again.Duplicates[0] != e.ID {
		t.Fatalf("the same event again: %+v, want only a duplicate of %s", again, e.ID)
	}
	got := journaled(t, reader, e.ID)
	if len(got) != 1 {
		t.Fatalf("journal has %d events with id %s, want 1", len(got), e.ID)
	}
	if got[0].Subject != "session:w1" || got[0].Source != "//wakegate/default/session:w1" || got[0].Summary != "turn 1" {
		t.Fatalf("journaled %+v", got[0])
	}
}

// A push whose answer is lost (the gateway committed it, the client saw a
// 503) is retried with the same bytes: the gateway answers a duplicate and
// the journal holds the event once.
func TestPushRetrySendsTheSameBody(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	target, _ := url.Parse(g.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	var bodies [][]byte
	lost := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/events" {
			proxy.ServeHTTP(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, b)
		first := len(bodies) == 1
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		if first { // forward it, then lose the answer
			rec := httptest.NewRecorder()
			proxy.ServeHTTP(rec, r)
			lost = rec.Code
			w.Header().Set("Retry-After", "0")
			http.Error(w, "upstream answer lost", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	w := newClient(t, srv.URL, g.Token("session:w2", "events:push"))
	e := &event.Event{Type: "session.turn_ended", Data: json.RawMessage(`{"idle":true}`)}
	res, err := w.Push(ctxT(t, 10*time.Second), e)
	if err != nil {
		t.Fatal(err)
	}
	if lost != http.StatusAccepted {
		t.Fatalf("the first attempt was answered %d upstream, want 202 (committed)", lost)
	}
	if len(res.Duplicates) != 1 || res.Duplicates[0] != e.ID || len(res.Accepted) != 0 {
		t.Fatalf("retry answered %+v, want a duplicate of %s", res, e.ID)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 || !bytes.Equal(bodies[0], bodies[1]) {
		t.Fatalf("attempts sent %d bodies, identical=%v; want 2 identical", len(bodies), len(bodies) == 2 && bytes.Equal(bodies[0], bodies[1]))
	}
	reader := newClient(t, g.URL, g.Token("human:ops", allScopes))
	if n := len(journaled(t, reader, e.ID)); n != 1 {
		t.Fatalf("journal holds %d events with id %s, want 1", n, e.ID)
	}
}

func TestBatchIsAllOrNothingWithPerEventErrors(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	w := newClient(t, g.URL, g.Token("session:w3", "events:push"))
	reader := newClient(t, g.URL, g.Token("human:ops", allScopes))
	good := &event.Event{Type: "session.turn_started"}
	bad := &event.Event{Type: "github.pull_request.opened"} // the server's alone
	_, err := w.PushBatch(ctxT(t, 10*time.Second), []*event.Event{good, bad})
	var pe *client.Error
	if !errors.As(err, &pe) {
		t.Fatalf("batch with a forbidden event: %v, want *client.Error", err)
	}
	if pe.Status != http.StatusForbidden || pe.Code() != "forbidden" || len(pe.Errors) != 1 || pe.Errors[0].Index != 1 || pe.Errors[0].ID != bad.ID {
		t.Fatalf("problem %+v", pe)
	}
	if !strings.Contains(pe.Error(), "event 1:") {
		t.Fatalf("error text %q does not name the event", pe.Error())
	}
	if n := len(journaled(t, reader, good.ID)); n != 0 {
		t.Fatalf("a refused batch committed its good event (%d)", n)
	}
	res, err := w.PushBatch(ctxT(t, 10*time.Second), []*event.Event{good, {Type: "session.prompted"}})
	if err != nil || len(res.Accepted) != 2 {
		t.Fatalf("valid batch: %+v, %v", res, err)
	}
}

func TestProblemsAreTyped(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	ctx := ctxT(t, 10*time.Second)

	_, err := newClient(t, g.URL, "not-a-token").Inbox(ctx, client.InboxQuery{})
	var pe *client.Error
	if !errors.As(err, &pe) || pe.Status != 401 || pe.Code() != "unauthenticated" || pe.Title != "Unauthenticated" || pe.Instance == "" {
		t.Fatalf("bad token: %#v", err)
	}
	if client.Temporary(err) {
		t.Fatal("a 401 is not temporary")
	}

	_, err = newClient(t, g.URL, g.Token("session:x", "events:push")).Inbox(ctx, client.InboxQuery{})
	if client.StatusOf(err) != 403 {
		t.Fatalf("missing scope: %v, want 403", err)
	}

	boss := newClient(t, g.URL, g.Token("session:boss", allScopes))
	other := newClient(t, g.URL, g.Token("session:other", allScopes))
	if _, err := boss.Supervise(ctx, "w9", "controller", "self", false); err != nil {
		t.Fatal(err)
	}
	_, err = other.Supervise(ctx, "w9", "controller", "self", false)
	if !errors.As(err, &pe) || pe.Status != 409 || pe.Holder != "session:boss" || pe.Epoch < 1 {
		t.Fatalf("held lease: %#v, want 409 naming session:boss", err)
	}
}

// The inbox round trip: a long-poll open before the event returns as soon
// as it is routed; an ack empties the inbox; the brief reflects both.
func TestInboxLongPollAckAndBrief(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	alice := newClient(t, g.URL, g.Token("human:alice", "inbox subscribe"))
	w := newClient(t, g.URL, g.Token("session:w4", "events:push"))
	ctx := ctxT(t, 30*time.Second)

	sub, err := alice.Subscribe(ctx, client.SubscriptionRequest{Subjects: []string{"session:w4"}, MinPriority: "attention"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := alice.Inbox(ctx, client.InboxQuery{})
	if err != nil || len(first.Entries) != 0 {
		t.Fatalf("empty inbox: %+v, %v", first, err)
	}

	type result struct {
		page *client.InboxPage
		err  error
		took time.Duration
	}
	done := make(chan result, 1)
	go func() {
		start := time.Now()
		p, err := alice.Inbox(ctx, client.InboxQuery{After: first.Next, Wait: 20 * time.Second})
		done <- result{p, err, time.Since(start)}
	}()
	select { // it waits: nothing has decided a wake yet
	case r := <-done:
		t.Fatalf("the long-poll returned before any event: %+v, %v", r.page, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	e := &event.Event{Type: "session.turn_ended", Summary: "w4 is idle", Data: json.RawMessage(`{"idle":true}`)}
	if _, err := w.Push(ctx, e); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.took > 10*time.Second || len(r.page.Entries) != 1 {
		t.Fatalf("long-poll took %s with %d entries, want the routed entry well before its 20 s", r.took, len(r.page.Entries))
	}
	got := r.page.Entries[0]
	if got.Subject != "session:w4" || got.Type != "session.turn_ended" || got.Priority != event.Attention ||
		got.Kind != "wake" || got.Event == nil || got.Event.ID != e.ID || got.Summary != "w4 is idle" {
		t.Fatalf("entry %+v", got)
	}

	b, err := alice.Brief(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b.Party != "human:alice" || b.UnackedCount != 1 || len(b.Unacked) != 1 || b.Unacked[0].Seq != got.Seq ||
		len(b.Subscriptions) != 1 || b.Subscriptions[0].ID != sub.ID || b.Cursor == "" {
		t.Fatalf("brief %+v", b)
	}

	n, err := alice.AckThrough(ctx, r.page.Next)
	if err != nil || n != 1 {
		t.Fatalf("ack through %d: %d, %v", r.page.Next, n, err)
	}
	after, err := alice.Inbox(ctx, client.InboxQuery{})
	if err != nil || len(after.Entries) != 0 {
		t.Fatalf("after the ack: %+v, %v", after, err)
	}
	_, err = alice.AckThrough(ctx, r.page.Next+100)
	if client.StatusOf(err) != 400 {
		t.Fatalf("ack beyond the last seq: %v, want 400", err)
	}
}

func TestEventsLongPoll(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	reader := newClient(t, g.URL, g.Token("human:ops", allScopes))
	w := newClient(t, g.URL, g.Token("session:w5", "events:push"))
	ctx := ctxT(t, 30*time.Second)
	page, err := reader.Events(ctx, client.EventsQuery{Types: []string{"session.*"}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *client.EventsPage, 1)
	go func() {
		p, err := reader.Events(ctx, client.EventsQuery{After: page.Next, Types: []string{"session.*"}, Wait: 20 * time.Second})
		if err != nil {
			t.Error(err)
		}
		done <- p
	}()
	e := &event.Event{Type: "session.prompted", Data: json.RawMessage(`{"source":"human:terminal"}`)}
	if _, err := w.Push(ctx, e); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-done:
		if p == nil || len(p.Events) != 1 || p.Events[0].ID != e.ID || p.Next == page.Next {
			t.Fatalf("long-poll page %+v", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the events long-poll did not return within 10 s of the push")
	}
}

func TestSubscriptionsSupervisionMessagesPresenceQuietTokens(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	ctx := ctxT(t, 30*time.Second)
	boss := newClient(t, g.URL, g.Token("session:boss", allScopes))
	human := newClient(t, g.URL, g.Token("human:gera", allScopes))

	// Subscriptions.
	s, err := boss.Subscribe(ctx, client.SubscriptionRequest{Types: []string{"github.pull_request.*"}, Subjects: []string{"github:org/repo#*"}})
	if err != nil || s.ID == "" || s.Owner != "session:boss" {
		t.Fatalf("subscribe: %+v, %v", s, err)
	}
	if _, err := boss.Subscribe(ctx, client.SubscriptionRequest{}); client.StatusOf(err) != 400 {
		t.Fatalf("a subscription without filters: %v, want 400", err)
	}
	list, err := boss.Subscriptions(ctx)
	if err != nil || len(list) != 1 || list[0].ID != s.ID {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if err := boss.Unsubscribe(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if err := boss.Unsubscribe(ctx, s.ID); client.StatusOf(err) != 404 {
		t.Fatalf("unsubscribe twice: %v, want 404", err)
	}

	// A child token makes boss the child's parent and controller.
	ct, err := boss.ChildToken(ctx, "kid", client.ChildTokenRequest{Scope: "events:push inbox", TTL: 10 * time.Minute})
	if err != nil || ct.Sub != "session:kid" || ct.Parent != "boss" || ct.Scope != "events:push inbox" || ct.Token == "" {
		t.Fatalf("child token: %+v, %v", ct, err)
	}
	kid := newClient(t, g.URL, ct.Token)
	if _, err := kid.Push(ctx, &event.Event{Type: "session.spawned"}); err != nil {
		t.Fatal(err)
	}
	view, err := boss.Supervision(ctx, "kid")
	if err != nil || view.EffectiveController.Party != "session:boss" {
		t.Fatalf("supervision of kid: %+v, %v", view, err)
	}

	// A message reaches the target's inbox.
	m, err := boss.SendMessage(ctx, "kid", client.Message{Text: "rebase on main", Intent: "control"})
	if err != nil || m.ID == "" {
		t.Fatalf("message: %+v, %v", m, err)
	}
	stacktest.Eventually(t, 10*time.Second, "the message in kid's inbox", func() (bool, string) {
		p, err := kid.Inbox(ctx, client.InboxQuery{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range p.Entries {
			if e.Type == "message.sent" && e.Event != nil && e.Event.ID == m.ID {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d entries", len(p.Entries))
	})

	if err := boss.Release(ctx, "kid", "controller"); err != nil {
		t.Fatal(err)
	}

	// Presence.
	p, err := kid.SetPresence(ctx, client.PresenceRequest{Attended: true, For: 5 * time.Minute})
	if err != nil || !p.Attended || p.AttendedUntil == nil {
		t.Fatalf("presence: %+v, %v", p, err)
	}
	if p, err = kid.GetPresence(ctx); err != nil || !p.Attended || p.Party != "session:kid" {
		t.Fatalf("get presence: %+v, %v", p, err)
	}

	// Quiet: a human sets it for all; status lists it; off lifts it.
	until := time.Now().Add(time.Hour).Truncate(time.Second)
	q, err := human.QuietOn(ctx, client.QuietRequest{Scope: "all", Reason: "deploy freeze", Until: until})
	if err != nil || q.Scope != "all" || q.By != "human:gera" || !q.Until.Equal(until) {
		t.Fatalf("quiet on: %+v, %v", q, err)
	}
	if _, err := kid.QuietOn(ctx, client.QuietRequest{Scope: "all", Until: until}); client.StatusOf(err) != 403 {
		t.Fatalf("a session setting quiet for all: %v, want 403", err)
	}
	qs, err := kid.QuietStatus(ctx)
	if err != nil || len(qs) != 1 || qs[0].Reason != "deploy freeze" {
		t.Fatalf("quiet status: %+v, %v", qs, err)
	}
	lifted, err := human.QuietOff(ctx, "all")
	if err != nil || lifted.Scope != "all" {
		t.Fatalf("quiet off: %+v, %v", lifted, err)
	}
	if _, err := human.QuietOff(ctx, "all"); client.StatusOf(err) != 404 {
		t.Fatalf("quiet off twice: %v, want 404", err)
	}
}

// GET /v1/health/supervision is another piece of work: the client says
// so with ErrNoHealthRoute on a 404, and reads the report when it is there.
func TestHealth(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	ctx := ctxT(t, 10*time.Second)
	h, err := newClient(t, g.URL, g.Token("human:ops", allScopes)).Health(ctx)
	switch {
	case errors.Is(err, client.ErrNoHealthRoute):
		if client.StatusOf(err) != 404 {
			t.Fatalf("ErrNoHealthRoute without its 404: %v", err)
		}
	case err != nil:
		t.Fatalf("health: %v", err)
	case len(h.Raw) == 0:
		t.Fatal("health answered without a body")
	}

	for name, body := range map[string]string{
		"list":   `{"workspace":"default","ok":false,"invariants":[{"id":"I2","name":"unreached","ok":false,"count":2,"unit":"entries","examples":["session:a",{"seq":3}]},{"id":"I1","title":"no supervisor","count":0}]}`,
		"object": `{"invariants":{"I2":{"description":"unreached","count":2,"examples":["session:a",{"seq":3}]},"I1":{"name":"no supervisor","count":0}}}`,
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, body)
		}))
		h, err := newClient(t, srv.URL, "t").Health(ctx)
		srv.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == "list" && (h.Workspace != "default" || h.OK == nil || *h.OK || byID0(h, "I2").Unit != "entries") {
			t.Fatalf("list: top-level fields %+v", h)
		}
		byID := map[string]client.Invariant{}
		for _, inv := range h.Invariants {
			byID[inv.ID] = inv
		}
		if len(h.Invariants) != 2 || byID["I2"].Name != "unreached" || byID["I2"].Count != 2 || len(byID["I2"].Examples) != 2 ||
			byID["I1"].Name != "no supervisor" || string(h.Raw) != body || !byID["I2"].Failing() || byID["I1"].Failing() {
			t.Fatalf("%s: %+v", name, h)
		}
	}
}

// Unreachable and hanging gateways: a transport error, temporary, within
// the caller's deadline even with retries.
func TestTransportFailures(t *testing.T) {
	t.Parallel()
	down := newClient(t, "http://"+stacktest.FreeAddr(t), "t", client.WithRetries(2))
	_, err := down.Inbox(ctxT(t, 5*time.Second), client.InboxQuery{})
	var te *client.TransportError
	if !errors.As(err, &te) || !client.Temporary(err) || client.StatusOf(err) != 0 {
		t.Fatalf("unreachable: %#v", err)
	}

	hang := newClient(t, stacktest.Hanging(t), "t", client.WithRetries(5))
	start := time.Now()
	_, err = hang.Push(ctxT(t, 700*time.Millisecond), &event.Event{Type: "session.turn_started"})
	if took := time.Since(start); err == nil || took > 1500*time.Millisecond {
		t.Fatalf("hanging gateway: %v after %s, want an error within the 700 ms deadline", err, took)
	}

	attempt := newClient(t, stacktest.Hanging(t), "t", client.WithTimeout(200*time.Millisecond), client.WithRetries(0))
	start = time.Now()
	_, err = attempt.Brief(context.Background())
	if took := time.Since(start); !errors.As(err, &te) || took > time.Second {
		t.Fatalf("attempt timeout: %v after %s, want a transport error after about 200 ms", err, took)
	}

	if _, err := client.New("ftp://x", "t"); err == nil {
		t.Fatal("New accepted a base URL that is not http(s)")
	}
}

// A non-problem error page (a proxy's) still yields a typed error.
func TestNonProblemErrorAnswer(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
	}))
	t.Cleanup(srv.Close)
	_, err := newClient(t, srv.URL, "t", client.WithRetries(0)).Brief(ctxT(t, 5*time.Second))
	var pe *client.Error
	if !errors.As(err, &pe) || pe.Status != 502 || pe.Title != "Bad Gateway" || pe.RetryAfter != 7*time.Second ||
		!strings.Contains(pe.Detail, "bad gateway") || pe.Method != "GET" || pe.Path != "/v1/brief" {
		t.Fatalf("proxy error page: %#v", err)
	}
}

func byID0(h *client.Health, id string) client.Invariant {
	for _, inv := range h.Invariants {
		if inv.ID == id {
			return inv
		}
	}
	return client.Invariant{}
}
