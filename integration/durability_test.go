package integration

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/providers/event"
)

// retryFor bounds how long a client keeps retrying one request through
// kills and restarts.
const retryFor = 90 * time.Second

// TestDurabilityKillServe pushes from 16 clients, each event a unique id,
// SIGKILLs `serve` after 300 acknowledgements, restarts it on the same
// Redis prefix while the clients keep retrying, and checks that every
// acknowledged id is in the journal exactly once (at the seq it was
// acknowledged with) and that no id is there twice.
func TestDurabilityKillServe(t *testing.T) {
	t.Parallel()
	const clients, perClient, killAt = 16, 100, 300
	s := newStack(t, nil)
	p := s.start("serve", "serve", nil)
	c := s.client(p)

	var (
		mu       sync.Mutex
		ackSeq   = map[string]string{} // id → seq of its 202 ("" when acknowledged as a duplicate)
		acks     atomic.Int64
		failures []string
		wg       sync.WaitGroup
		killNow  = make(chan struct{})
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	for g := range clients {
		tok := s.token(t, fmt.Sprintf("session:dur-%02d", g), "default", "events:push")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perClient {
				id := fmt.Sprintf("dur-%02d-%03d", g, i)
				body := ce(id, "session.turn_started", nil)
				deadline := time.Now().Add(retryFor)
				for {
					r, err := c.push(tok, ctEvent, body)
					if err == nil && (r.Status == 202 || r.Status == 200) {
						var a pushAnswer
						if json.Unmarshal(r.Body, &a) != nil {
							fail("%s: 2xx answer %s", id, r)
							return
						}
						seq := ""
						switch {
						case r.Status == 202 && len(a.Accepted) == 1 && a.Accepted[0].ID == id && a.Accepted[0].Seq != "":
							seq = a.Accepted[0].Seq
						case r.Status == 200 && len(a.Duplicates) == 1 && a.Duplicates[0] == id:
						default:
							fail("%s: 2xx answer %s does not acknowledge it", id, r)
							return
						}
						mu.Lock()
						ackSeq[id] = seq
						mu.Unlock()
						if acks.Add(1) == killAt {
							close(killNow)
						}
						break
					}
					if err == nil && r.Status != 503 {
						fail("%s: %s", id, r) // only "down" and "storage unavailable" are retried
						return
					}
					if time.Now().After(deadline) {
						fail("%s: no 2xx within %s (last: %v %v)", id, retryFor, r, err)
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}

	select {
	case <-killNow:
	case <-time.After(60 * time.Second):
		t.Fatalf("%d acknowledged pushes after 60s, want %d", acks.Load(), killAt)
	}
	p.kill()
	atKill := acks.Load()
	p.restart()
	wg.Wait()
	t.Logf("SIGKILL after %d of %d acknowledgements; restarted", atKill, clients*perClient)
	if atKill >= clients*perClient {
		t.Errorf("every push was acknowledged before the kill: the kill was not mid-stream")
	}
	for _, f := range failures {
		t.Error(f)
	}

	if code, err := p.stop(stopTimeout); err != nil || code != 0 {
		t.Errorf("restarted serve: exit %d, %v; want 0", code, err)
	}
	evs := s.journalEvents(t)
	count := countIDs(evs)
	seqOf := map[string]string{}
	for _, e := range evs {
		seqOf[e.ID] = e.Seq
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ackSeq) != clients*perClient {
		t.Errorf("%d of %d ids acknowledged", len(ackSeq), clients*perClient)
	}
	for id, seq := range ackSeq {
		switch {
		case count[id] != 1:
			t.Errorf("acknowledged %s is in the journal %d times, want 1", id, count[id])
		case seq != "" && seqOf[id] != seq:
			t.Errorf("acknowledged %s at seq %s, journal has it at %s", id, seq, seqOf[id])
		}
	}
	for id, n := range count {
		if n > 1 {
			t.Errorf("%s is in the journal %d times", id, n)
		}
	}
}

// TestDurabilityKillWorker runs gateway and worker as separate processes
// and sends signed pull_request.opened deliveries (distinct GUIDs, distinct
// bodies: each its own PR number) from 16 clients. It SIGKILLs the worker
// (the gateway keeps committing what nobody derives), then SIGKILLs and
// restarts the gateway while clients retry, then restarts the worker; every
// acknowledged delivery must yield its journal event exactly once once the
// new worker and its relay (records left pending by the dead consumer are
// re-run after 15 s idle) have caught up.
func TestDurabilityKillWorker(t *testing.T) {
	t.Parallel()
	const clients, perClient = 16, 20
	const killWorkerAt, killGatewayAt, restartWorkerAt = 80, 160, 240
	s := newStack(t, map[string]string{"WAKEGATE_READY_SETTLE": "1h"})
	gw := s.start("gateway", "gateway", nil)
	wk := s.start("worker", "worker", nil)
	c := s.client(gw)

	opened := fixture(t, "octokit/pull_request/opened.payload.json")
	type delivery struct {
		guid   string
		number int
		body   []byte
	}
	work := make([][]delivery, clients)
	for g := range clients {
		for i := range perClient {
			n := 1000 + g*100 + i
			work[g] = append(work[g], delivery{newGUID(), n, editJSON(t, opened, func(m map[string]any) {
				m["number"] = n
				pr := obj(m, "pull_request")
				pr["number"], pr["id"] = n, 279147437+n
			})})
		}
	}

	var (
		mu       sync.Mutex
		acked    = map[string]int{} // guid → PR number
		acks     atomic.Int64
		failures []string
		wg       sync.WaitGroup
		reached  = map[int64]chan struct{}{killWorkerAt: make(chan struct{}), killGatewayAt: make(chan struct{}), restartWorkerAt: make(chan struct{})}
	)
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, d := range work[g] {
				deadline := time.Now().Add(retryFor)
				for {
					r, err := c.webhook("pull_request", d.guid, d.body)
					if err == nil && (r.Status == 202 || r.Status == 200) {
						var a deliveryAnswer
						_ = json.Unmarshal(r.Body, &a)
						if a.Delivery != d.guid || !(r.Status == 202 && a.Status == "accepted" || r.Status == 200 && a.Duplicate) {
							mu.Lock()
							failures = append(failures, fmt.Sprintf("%s: 2xx answer %s", d.guid, r))
							mu.Unlock()
							return
						}
						mu.Lock()
						acked[d.guid] = d.number
						mu.Unlock()
						if ch, ok := reached[acks.Add(1)]; ok {
							close(ch)
						}
						break
					}
					if (err == nil && r.Status != 503) || time.Now().After(deadline) {
						mu.Lock()
						failures = append(failures, fmt.Sprintf("%s: %v %v", d.guid, r, err))
						mu.Unlock()
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}

	waitAcks := func(n int64) {
		select {
		case <-reached[n]:
		case <-time.After(60 * time.Second):
			t.Fatalf("%d acknowledged deliveries after 60s, want %d", acks.Load(), n)
		}
	}
	waitAcks(killWorkerAt)
	wk.kill()
	t.Logf("worker SIGKILLed after %d acks; %d records it had read but not acknowledged", acks.Load(), s.pendingDerive(t))
	waitAcks(killGatewayAt)
	gw.kill()
	t.Logf("gateway SIGKILLed after %d acks", acks.Load())
	gw.restart()
	waitAcks(restartWorkerAt)
	wk.restart()
	t.Logf("worker restarted after %d acks", acks.Load())
	wg.Wait()
	mu.Lock()
	for _, f := range failures {
		t.Error(f)
	}
	want := map[string]int{}
	for k, v := range acked {
		want[k] = v
	}
	mu.Unlock()
	if len(want) != clients*perClient {
		t.Errorf("%d of %d deliveries acknowledged", len(want), clients*perClient)
	}

	// Every acknowledged delivery is derived, by the new worker or its relay.
	s.waitEvents(t, 75*time.Second, "an opened event for every acknowledged delivery", func(evs []*event.Event) bool {
		got := countIDs(byType(evs, "github.pull_request.opened", ""))
		for guid := range want {
			if got[guid] == 0 {
				return false
			}
		}
		return true
	})
	s.waitDerived(t, 60*time.Second)
	evs := s.journalEvents(t)
	byID := map[string][]*event.Event{}
	for _, e := range evs {
		byID[e.ID] = append(byID[e.ID], e)
	}
	for guid, n := range want {
		got := byID[guid]
		if len(got) != 1 {
			t.Errorf("delivery %s journaled %d times, want 1", guid, len(got))
			continue
		}
		if subj := fmt.Sprintf("github:%s#%d", repo, n); got[0].Type != "github.pull_request.opened" || got[0].Subject != subj {
			t.Errorf("delivery %s journaled as %s about %s, want github.pull_request.opened about %s", guid, got[0].Type, got[0].Subject, subj)
		}
	}
	for id, es := range byID {
		if len(es) > 1 {
			t.Errorf("%s is in the journal %d times", id, len(es))
		}
	}
}

// pendingDerive counts ingest records read by a derive consumer and not
// acknowledged.
func (s *stack) pendingDerive(t testing.TB) int64 {
	t.Helper()
	store := ingest.New(s.rdb, s.journalLayout())
	var n int64
	for sh := range shards {
		p, err := s.rdb.XPending(bg(), store.StreamKey(sh), "derive").Result()
		if err == nil {
			n += p.Count
		}
	}
	return n
}
