package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/outbound"
)

// pushLog is a push endpoint on loopback that records every request and
// holds each for a while, so that a worker killed mid-stream has pushes in
// flight.
type pushLog struct {
	mu     sync.Mutex
	secret string
	reqs   []pushReq
	hold   time.Duration
}

type pushReq struct {
	webhookID string
	eventID   string
	seq       int64
	body      string
	verifyErr error
}

func (pl *pushLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var b struct {
		Entry inbox.Entry `json:"entry"`
		Event struct {
			ID string `json:"id"`
		} `json:"event"`
	}
	_ = json.Unmarshal(body, &b)
	pl.mu.Lock()
	secret := pl.secret
	pl.mu.Unlock()
	req := pushReq{webhookID: r.Header.Get("webhook-id"), eventID: b.Event.ID, seq: b.Entry.Seq, body: string(body),
		verifyErr: outbound.Verify(secret, r.Header, body, time.Now(), 5*time.Minute)}
	pl.mu.Lock()
	pl.reqs = append(pl.reqs, req)
	pl.mu.Unlock()
	select {
	case <-time.After(pl.hold):
	case <-r.Context().Done():
	}
	w.WriteHeader(http.StatusNoContent)
}

func (pl *pushLog) snapshot() []pushReq {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return append([]pushReq(nil), pl.reqs...)
}

// TestPushWorkerKillEveryWakeOnce: a gateway and one worker route 300
// attention events (one per session) to the workspace default controller,
// whose push endpoint is a local receiver that holds every request 300 ms;
// once about 80 pushes have arrived the worker is SIGKILLed with pushes in
// flight, and a second worker is started. Every wake must reach the
// receiver at least once, each under exactly one webhook-id (the one
// derived from its inbox seq), with a body that never changes and a
// signature the receiver verifies. Duplicates of one webhook-id are
// allowed (a push whose 2xx the killed worker never read is sent again).
//
// Recovery of the killed worker's in-flight pushes: Asynq hands a task
// back only when its lease (30 s, extended by the worker's heartbeat) has
// been expired for 30 s more, and its recoverer looks every minute (and
// once when a server starts) — in production a killed worker's in-flight
// pushes go out again 60 to 120 s after the kill, from any live worker.
// The test does not wait for that: once the worker is dead it moves the
// dead leases' expiry into the past (the lease zset, Asynq's own record of
// them) and starts the second worker, whose recoverer runs at once. Only
// the timing is shortcut: the recovery path (ErrLeaseExpired, a retry
// that consumes no attempt, the same task id and payload) is Asynq's own.
func TestPushWorkerKillEveryWakeOnce(t *testing.T) { t.Parallel(); pushWorkerStop(t, false) }

// TestPushWorkerGracefulStop is the graceful stop under load: the
// same 300 wakes, but the worker gets SIGTERM with pushes in flight. It
// must exit 0 within its shutdown bound (Asynq lets in-flight pushes
// finish, 15 s at most, and hands back what it had not started), and
// after a second worker starts every wake is pushed exactly once — a
// graceful stop sends nothing twice.
func TestPushWorkerGracefulStop(t *testing.T) { t.Parallel(); pushWorkerStop(t, true) }

func pushWorkerStop(t *testing.T, graceful bool) {
	const (
		ws       = "default"
		boss     = "session:boss7"
		nWakes   = 300
		killAt   = 80
		deadline = 45 * time.Second
	)
	s := newStack(t, map[string]string{
		"WAKEGATE_ALLOW_PRIVATE_ENDPOINTS": "true",
		"WAKEGATE_PUSH_RETRY":              "1s,1s,1s",
	})
	queue := pushQueueOf(s.prefix, ws, boss)              // every push here is to boss
	t.Cleanup(func() { dropPushQueues(s.rdb, s.prefix) }) // runs after the processes' own cleanups have stopped them
	recv := &pushLog{hold: 300 * time.Millisecond}
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)

	g := s.start("gateway", "gateway", nil)
	wa := s.start("worker-a", "worker", nil)
	c := s.client(g)
	admin := s.token(t, "human:admin", ws, "admin")
	c.putSettings(t, admin, map[string]any{"default_controller": boss, "rate": map[string]any{"per": "1s", "burst": 10000}})
	r := c.send(t, http.MethodPut, "/v1/endpoints/"+boss, admin, map[string]any{"url": srv.URL + "/hook"})
	if r.Status != 201 {
		t.Fatalf("PUT endpoint: %s", r)
	}
	var ep struct{ Secret string }
	r.decode(t, &ep)
	recv.mu.Lock()
	recv.secret = ep.Secret
	recv.mu.Unlock()

	feeder := s.token(t, "human:feeder", ws, "events:push events:push:any")
	for b := 0; b < nWakes; b += 100 {
		var evs [][]byte
		for i := b; i < b+100; i++ {
			evs = append(evs, idleTurn(fmt.Sprintf("k7-%03d", i), map[string]any{"subject": fmt.Sprintf("session:k7-%03d", i)}))
		}
		if r := c.mustPush(t, feeder, ctBatch, batch(evs...)); r.Status != 202 {
			t.Fatalf("batch at %d: %s", b, r)
		}
	}
	waitFor(t, 30*time.Second, fmt.Sprintf("%d pushes received before the kill", killAt), func() (bool, string) {
		n := len(recv.snapshot())
		return n >= killAt, fmt.Sprintf("%d received", n)
	})
	leaseKey := "asynq:{" + queue + "}:lease"
	if graceful {
		inFlight, err := s.rdb.ZCard(bg(), leaseKey).Result()
		if err != nil || inFlight == 0 {
			t.Fatalf("no push in flight at the SIGTERM (%v)", err)
		}
		code, err := wa.stop(20 * time.Second)
		if err != nil || code != 0 {
			t.Fatalf("the worker stopped with %d, %v; want exit 0 within its shutdown bound", code, err)
		}
		t.Logf("SIGTERM with %d of %d pushes received, %d in flight; exited 0", len(recv.snapshot()), nWakes, inFlight)
	} else {
		wa.kill()
		if _, err := wa.waitExit(stopTimeout); err != nil {
			t.Fatal(err)
		}
	}
	before := recv.snapshot()
	atKill := len(before)
	inFlight, err := s.rdb.ZRange(bg(), leaseKey, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if graceful && len(inFlight) > 0 {
		t.Fatalf("%d pushes still leased after a graceful stop: it left work half done", len(inFlight))
	}
	if !graceful && len(inFlight) == 0 {
		t.Fatalf("no push was in flight when the worker died (%d received): the kill was not mid-push", atKill)
	}
	// Test-only: the dead worker's leases expired long ago (see above).
	past := float64(time.Now().Add(-2 * time.Minute).Unix())
	for _, id := range inFlight {
		s.rdb.ZAddXX(bg(), leaseKey, redis.Z{Score: past, Member: id})
	}
	if !graceful {
		t.Logf("SIGKILL with %d of %d pushes received, %d in flight", atKill, nWakes, len(inFlight))
	}
	killed := time.Now()
	s.start("worker-b", "worker", nil)

	// Done when every wake has reached the receiver and no push is left
	// to work: the recovered pushes (retried about 5 s after the recovery)
	// have been worked too.
	insp := asynq.NewInspectorFromRedisClient(s.rdb)
	var reqs []pushReq
	waitFor(t, deadline, "every wake pushed and the push queue empty", func() (bool, string) {
		reqs = recv.snapshot()
		seen := map[string]bool{}
		for _, q := range reqs {
			seen[q.eventID] = true
		}
		qi, err := insp.GetQueueInfo(queue)
		if err != nil {
			return false, err.Error()
		}
		// Scheduled tasks are timers (escalation checks), not pushes; the
		// recovered pushes wait in Retry.
		left := qi.Pending + qi.Active + qi.Retry
		return len(seen) == nWakes && left == 0, fmt.Sprintf("%d of %d wakes received (%d requests), %d tasks pending, active or retrying",
			len(seen), nWakes, len(reqs), left)
	})
	t.Logf("every wake received %s after the kill", time.Since(killed).Round(100*time.Millisecond))

	idsOf := map[string]map[string]bool{} // event id → webhook-ids
	bodyOf := map[string]string{}         // webhook-id → body
	dups := 0
	for _, q := range reqs {
		if q.verifyErr != nil {
			t.Errorf("push %s: the receiver's signature check failed: %v", q.webhookID, q.verifyErr)
		}
		if want := outbound.WebhookID(s.prefix, ws, boss, q.seq); q.webhookID != want {
			t.Errorf("push of %s at seq %d has webhook-id %s, want %s", q.eventID, q.seq, q.webhookID, want)
		}
		if idsOf[q.eventID] == nil {
			idsOf[q.eventID] = map[string]bool{}
		}
		idsOf[q.eventID][q.webhookID] = true
		if prev, ok := bodyOf[q.webhookID]; ok {
			dups++
			if prev != q.body {
				t.Errorf("push %s sent again with another body:\n%s\n%s", q.webhookID, prev, q.body)
			}
		}
		bodyOf[q.webhookID] = q.body
	}
	for id, ids := range idsOf {
		if len(ids) != 1 {
			t.Errorf("wake %s pushed under %d webhook-ids %v, want one", id, len(ids), ids)
		}
	}
	for i := range nWakes {
		if idsOf["k7-"+fmt.Sprintf("%03d", i)] == nil {
			t.Errorf("wake k7-%03d never pushed", i)
		}
	}
	// The pushes in flight at the kill whose request had reached the
	// receiver: their answer died with the worker, so they are sent again
	// (unless the worker read the 2xx and recorded it in its last
	// instant — possible for a few, not for all).
	reached, times := map[string]bool{}, map[string]int{}
	for _, q := range before {
		reached[q.webhookID] = true
	}
	for _, q := range reqs {
		times[q.webhookID]++
	}
	cut, again := 0, 0
	for _, id := range inFlight {
		if reached[id] {
			cut++
			if times[id] >= 2 {
				again++
			}
		}
	}
	t.Logf("%d requests for %d wakes (%d repeats of a webhook-id); %d pushes cut by the kill, %d of them sent again",
		len(reqs), nWakes, dups, cut, again)
	if graceful && dups > 0 {
		t.Errorf("a graceful stop sent %d pushes twice", dups)
	}
	if !graceful && cut > 0 && again == 0 {
		t.Errorf("none of the %d pushes the kill cut was sent again: the killed worker's in-flight pushes were not recovered", cut)
	}
}
