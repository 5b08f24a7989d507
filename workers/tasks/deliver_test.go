package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/outbound"
	"github.com/wakegate/wakegate/delivery/redistest"
)

// TestRetriesThenDelivers: an endpoint answering 500, 500, 200 gets
// exactly three attempts, each with the same webhook-id and body and a
// signature its receiver verifies; the 2xx acks a human's entry; a re-run
// of the routing enqueues nothing new.
func TestRetriesThenDelivers(t *testing.T) {
	e := newEnv(t, envOpts{cfg: Config{Schedule: []time.Duration{time.Second, time.Second, time.Second, time.Second}}})
	rc := newReceiver(t, statuses(500, 500, 200))
	secret := e.endpoint("human:ops", rc.url(), "")
	res, ev := e.wake("human:ops")

	eventually(t, 20*time.Second, "three attempts", func() bool { return rc.count() >= 3 })
	eventually(t, 10*time.Second, "the queue drained", e.idle)
	got := rc.got()
	if len(got) != 3 {
		t.Fatalf("%d attempts, want exactly 3", len(got))
	}
	id := outbound.WebhookID(e.prefix, ws, "human:ops", res.Seq)
	for i, r := range got {
		if r.header.Get("webhook-id") != id || string(r.body) != string(got[0].body) {
			t.Fatalf("attempt %d: id %q body %s; want id %s and the first body", i+1, r.header.Get("webhook-id"), r.body, id)
		}
		if err := outbound.Verify(secret, r.header, r.body, time.Now(), 5*time.Minute); err != nil {
			t.Fatalf("attempt %d: receiver's check: %v", i+1, err)
		}
		if r.header.Get("Content-Type") != "application/json" {
			t.Fatalf("attempt %d: content type %q", i+1, r.header.Get("Content-Type"))
		}
	}
	var body struct {
		WebhookID string          `json:"webhook_id"`
		Kind      string          `json:"kind"`
		Party     string          `json:"party"`
		Entry     inbox.Entry     `json:"entry"`
		Event     json.RawMessage `json:"event"`
	}
	if err := json.Unmarshal(got[0].body, &body); err != nil {
		t.Fatal(err)
	}
	if body.WebhookID != id || body.Kind != inbox.KindWake || body.Party != "human:ops" || body.Entry.Seq != res.Seq ||
		body.Entry.Type != ev.Type || !strings.Contains(string(body.Event), `"id":"`+ev.ID+`"`) {
		t.Fatalf("body %s", got[0].body)
	}
	// The human's entry was acked by the 2xx.
	if es, _, err := e.box.List(e.ctx, ws, "human:ops", 0, false, 10); err != nil || len(es) != 0 {
		t.Fatalf("human's inbox after the push: %+v %v", es, err)
	}
	// A re-run of the routing (Deliver answers the original result).
	if err := e.p.Enqueue(e.ctx, ws, "human:ops", res, ev); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the re-run's task worked", e.idle)
	if n := rc.count(); n != 3 {
		t.Fatalf("%d attempts after a re-run, want 3", n)
	}
}

// TestSessionAcksItself: a session's push does not ack its entry (the
// push wakes it, the read tells it why); a slack endpoint gets text.
func TestSessionAcksItself(t *testing.T) {
	e := newEnv(t, envOpts{})
	rc := newReceiver(t, statuses(200))
	e.endpoint("session:boss", rc.url(), outbound.FormatSlack)
	e.wake("session:boss")
	eventually(t, 10*time.Second, "the push", func() bool { return rc.count() == 1 })
	eventually(t, 10*time.Second, "the queue drained", e.idle)
	var slack struct{ Text string }
	if err := json.Unmarshal(rc.got()[0].body, &slack); err != nil || !strings.Contains(slack.Text, "w1 waits for input") {
		t.Fatalf("slack body %s (%v)", rc.got()[0].body, err)
	}
	if es, _, _ := e.box.List(e.ctx, ws, "session:boss", 0, false, 10); len(es) != 1 {
		t.Fatalf("session's entries %+v, want its one entry unacked", es)
	}
}

// TestGoneDisables: 410 disables the endpoint: no retry, no later push,
// and the push is a dead letter.
func TestGoneDisables(t *testing.T) {
	e := newEnv(t, envOpts{})
	rc := newReceiver(t, statuses(410))
	e.endpoint("session:s1", rc.url(), "")
	res, _ := e.wake("session:s1")
	eventually(t, 10*time.Second, "the endpoint disabled", func() bool {
		ep, err := e.endpoints.Get(e.ctx, ws, "session:s1")
		return err == nil && ep != nil && ep.Disabled()
	})
	eventually(t, 10*time.Second, "the queue drained", e.idle)
	e.wake("session:s1")
	if !e.idle() {
		t.Fatal("a push was enqueued to a disabled endpoint")
	}
	if n := rc.count(); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}
	ds, _, err := e.p.DeadLetters(e.ctx, 10)
	if err != nil || len(ds) != 1 || ds[0].ID != outbound.WebhookID(e.prefix, ws, "session:s1", res.Seq) || ds[0].Status != 410 {
		t.Fatalf("dead letters %+v %v", ds, err)
	}
}

// TestBreakerOpensAndProbes: five failures in a row open the endpoint's
// breaker; attempts wait the open period out without consuming an
// attempt; then one probe goes alone, and its success lets the rest
// through.
func TestBreakerOpensAndProbes(t *testing.T) {
	const openFor = 2 * time.Second
	e := newEnv(t, envOpts{concurrency: 1, cfg: Config{Schedule: []time.Duration{time.Second, time.Second},
		Breaker: outbound.BreakerConfig{OpenFor: openFor, ProbeFor: 5 * time.Second}}})
	probing := make(chan struct{})
	proceed := make(chan struct{})
	rc := newReceiver(t, func(n int, _ *http.Request, w http.ResponseWriter) int {
		switch {
		case n <= 5:
			w.WriteHeader(500)
			return 500
		case n == 6: // the probe: hold it while the test looks at the queue
			close(probing)
			<-proceed
		}
		w.WriteHeader(200)
		return 200
	})
	e.endpoint("human:ops", rc.url(), "")
	var ids []string
	for range 8 {
		res, _ := e.wake("human:ops")
		ids = append(ids, outbound.WebhookID(e.prefix, ws, "human:ops", res.Seq))
	}
	select {
	case <-probing:
	case <-time.After(30 * time.Second):
		t.Fatalf("no probe; %d requests", rc.count())
	}
	got := rc.got()
	if gap := got[5].at.Sub(got[4].at); gap < openFor {
		t.Fatalf("probe %v after the fifth failure, want at least the open period %v", gap, openFor)
	}
	// While the probe is out, every other push waits, and only failed
	// attempts were counted: the breaker's deferrals consumed none.
	failed := map[string]int{}
	for _, r := range got[:5] {
		failed[r.header.Get("webhook-id")]++
	}
	deferred := 0
	for _, id := range ids {
		info, err := e.insp.GetTaskInfo(e.p.QueueOf(ws, "human:ops"), id)
		if err != nil {
			t.Fatalf("task %s: %v", id, err)
		}
		if info.Retried != failed[id] {
			t.Fatalf("task %s: retried %d, want %d (its failed attempts)", id, info.Retried, failed[id])
		}
		if strings.Contains(info.LastErr, "circuit breaker open") {
			deferred++
		}
	}
	if deferred == 0 {
		t.Fatal("no push was deferred by the breaker")
	}
	close(proceed)
	eventually(t, 30*time.Second, "every push delivered", func() bool {
		ok := map[string]bool{}
		for _, r := range rc.got() {
			if r.status == 200 {
				ok[r.header.Get("webhook-id")] = true
			}
		}
		return len(ok) == len(ids)
	})
	got = rc.got()
	if got[6].at.Before(got[5].done) {
		t.Fatal("another attempt went out while the probe was pending")
	}
	if ds, _, _ := e.p.DeadLetters(e.ctx, 10); len(ds) != 0 {
		t.Fatalf("dead letters %+v", ds)
	}
}

// TestHangingEndpointDoesNotDelayOthers: pushes to an endpoint that never
// answers hold their own attempts only.
func TestHangingEndpointDoesNotDelayOthers(t *testing.T) {
	e := newEnv(t, envOpts{cfg: Config{Timeout: time.Minute}})
	hang := newReceiver(t, nil)
	hang.answer = func(_ int, r *http.Request, w http.ResponseWriter) int {
		select {
		case <-hang.release:
		case <-r.Context().Done():
		}
		w.WriteHeader(503)
		return 503
	}
	fast := newReceiver(t, statuses(200))
	e.endpoint("human:slow", hang.url(), "")
	e.endpoint("human:fast", fast.url(), "")
	for range 3 {
		e.wake("human:slow")
	}
	eventually(t, 10*time.Second, "three hanging attempts", func() bool { return hang.count() == 3 })
	e.wake("human:fast")
	eventually(t, 10*time.Second, "the other endpoint's push", func() bool { return fast.count() == 1 })
	for _, r := range hang.got() {
		if !r.done.IsZero() {
			t.Fatal("a hanging attempt ended before the other push went out")
		}
	}
}

// TestRetryAfter: a 429's Retry-After is honoured instead of the schedule.
func TestRetryAfter(t *testing.T) {
	e := newEnv(t, envOpts{cfg: Config{Schedule: []time.Duration{time.Hour}}})
	rc := newReceiver(t, func(n int, _ *http.Request, w http.ResponseWriter) int {
		if n == 1 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(429)
			return 429
		}
		w.WriteHeader(200)
		return 200
	})
	e.endpoint("human:ops", rc.url(), "")
	e.wake("human:ops")
	eventually(t, 15*time.Second, "the retry after Retry-After", func() bool { return rc.count() == 2 })
	got := rc.got()
	if gap := got[1].at.Sub(got[0].at); gap < time.Second { // Asynq keeps retry times in whole seconds
		t.Fatalf("retried %v after a Retry-After of 2s", gap)
	}
}

// TestRedirectIsAFailure: a 3xx is not followed; it is a failed attempt.
func TestRedirectIsAFailure(t *testing.T) {
	e := newEnv(t, envOpts{})
	rc := newReceiver(t, func(n int, r *http.Request, w http.ResponseWriter) int {
		if n == 1 {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return 302
		}
		w.WriteHeader(200)
		return 200
	})
	e.endpoint("human:ops", rc.url(), "")
	e.wake("human:ops")
	eventually(t, 15*time.Second, "the retry", func() bool { return rc.count() == 2 })
	for _, r := range rc.got() {
		if r.path != "/hook" {
			t.Fatalf("a redirect was followed to %s", r.path)
		}
	}
}

// TestDeadLetterAndRedeliver: after the last attempt the push is a dead
// letter; a redelivery sends the same webhook-id and body, and its 2xx
// clears the dead letter and acks the human's entry.
func TestDeadLetterAndRedeliver(t *testing.T) {
	e := newEnv(t, envOpts{cfg: Config{Schedule: []time.Duration{time.Second}}})
	healthy := make(chan struct{})
	rc := newReceiver(t, func(int, *http.Request, http.ResponseWriter) int { return 0 })
	rc.answer = func(_ int, _ *http.Request, w http.ResponseWriter) int {
		select {
		case <-healthy:
			w.WriteHeader(204)
			return 204
		default:
			w.WriteHeader(500)
			return 500
		}
	}
	e.endpoint("human:ops", rc.url(), "")
	res, _ := e.wake("human:ops")
	id := outbound.WebhookID(e.prefix, ws, "human:ops", res.Seq)
	var ds []outbound.DeadLetter
	eventually(t, 15*time.Second, "a dead letter", func() bool {
		ds, _, _ = e.p.DeadLetters(e.ctx, 10)
		return len(ds) == 1
	})
	d := ds[0]
	if d.ID != id || d.Attempts != 2 || d.Status != 500 || d.Seq != res.Seq || d.Body != string(rc.got()[0].body) {
		t.Fatalf("dead letter %+v", d)
	}
	eventually(t, 10*time.Second, "the queue drained", e.idle)
	if n := rc.count(); n != 2 {
		t.Fatalf("%d attempts, want 2 (one retry)", n)
	}
	if _, err := e.p.Redeliver(e.ctx, "msg_nope"); !errors.Is(err, outbound.ErrNotFound) {
		t.Fatalf("redeliver unknown: %v", err)
	}
	close(healthy)
	if _, err := e.p.Redeliver(e.ctx, id); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the redelivery", func() bool { return rc.count() == 3 })
	got := rc.got()
	if got[2].header.Get("webhook-id") != id || string(got[2].body) != string(got[0].body) {
		t.Fatalf("redelivery: id %q body %s", got[2].header.Get("webhook-id"), got[2].body)
	}
	eventually(t, 10*time.Second, "the dead letter cleared", func() bool {
		ds, _, _ := e.p.DeadLetters(e.ctx, 10)
		return len(ds) == 0
	})
	if es, _, _ := e.box.List(e.ctx, ws, "human:ops", 0, false, 10); len(es) != 0 {
		t.Fatalf("human's entry not acked by the redelivery: %+v", es)
	}
	// No endpoint, no redelivery.
	e.wake("human:ops")
	eventually(t, 10*time.Second, "the second push", func() bool { return rc.count() == 4 })
	if _, err := e.endpoints.Delete(e.ctx, ws, "human:ops"); err != nil {
		t.Fatal(err)
	}
	if err := e.p.dead.Put(e.ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.Redeliver(e.ctx, id); !errors.Is(err, outbound.ErrEndpointUnavailable) {
		t.Fatalf("redeliver without an endpoint: %v", err)
	}
}

// TestRefusedAtDial: an endpoint whose name resolves to a private address
// at send time (DNS rebinding) is refused at the dial: no packet leaves,
// and the push ends a dead letter.
func TestRefusedAtDial(t *testing.T) {
	dialed := make(chan string, 10)
	guard := &outbound.Guard{
		Resolver: resolverFunc(func(host string) []netip.Addr {
			return []netip.Addr{netip.MustParseAddr("10.0.0.1")}
		}),
		Dial: func(_ context.Context, _, addr string) (net.Conn, error) {
			dialed <- addr
			return nil, errors.New("test: not dialing")
		},
	}
	e := newEnv(t, envOpts{cfg: Config{Guard: guard, Schedule: []time.Duration{time.Second}}})
	// The endpoint was created while the name resolved to a public address.
	open := outbound.NewEndpoints(e.rdb, e.prefix, &outbound.Guard{Resolver: resolverFunc(func(string) []netip.Addr {
		return []netip.Addr{netip.MustParseAddr("93.184.215.14")}
	})})
	if _, _, _, err := open.Put(e.ctx, ws, "human:ops", outbound.Put{URL: "https://rebind.example/hook"}); err != nil {
		t.Fatal(err)
	}
	e.wake("human:ops")
	var ds []outbound.DeadLetter
	eventually(t, 15*time.Second, "a dead letter", func() bool {
		ds, _, _ = e.p.DeadLetters(e.ctx, 10)
		return len(ds) == 1
	})
	if !strings.Contains(ds[0].Error, "address refused") || ds[0].Status != 0 {
		t.Fatalf("dead letter %+v", ds[0])
	}
	select {
	case a := <-dialed:
		t.Fatalf("dialed %s", a)
	default:
	}
}

type resolverFunc func(host string) []netip.Addr

func (f resolverFunc) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return f(host), nil
}

// TestEnqueueSkips: no endpoint, or no wake, enqueues nothing.
func TestEnqueueSkips(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.wake("human:nobody")
	res, ev := e.wake("human:nobody")
	rc := newReceiver(t, statuses(200))
	e.endpoint("human:nobody", rc.url(), "")
	res.Wake = false
	if err := e.p.Enqueue(e.ctx, ws, "human:nobody", res, ev); err != nil {
		t.Fatal(err)
	}
	if !e.idle() {
		t.Fatal("enqueued a push for no endpoint or no wake")
	}
}

// TestOnMiniredis: the embedded mode runs the same Asynq code: a push is
// retried and delivered on miniredis.
func TestOnMiniredis(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	e := newEnv(t, envOpts{rdb: rdb, prefix: redistest.Prefix()})
	rc := newReceiver(t, statuses(500, 200))
	secret := e.endpoint("human:ops", rc.url(), "")
	e.wake("human:ops")
	eventually(t, 15*time.Second, "two attempts", func() bool { return rc.count() == 2 })
	for _, r := range rc.got() {
		if err := outbound.Verify(secret, r.header, r.body, time.Now(), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "the human's entry acked", func() bool {
		es, _, _ := e.box.List(e.ctx, ws, "human:ops", 0, false, 10)
		return len(es) == 0
	})
}
