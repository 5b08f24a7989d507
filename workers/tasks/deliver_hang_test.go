package tasks

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/outbound"
)

// TestHangingEndpointKeepsOthersP99 is the "an endpoint that hangs
// for 30 s does not move the p99 of other recipients' pushes": with the
// Asynq concurrency serve runs (64), 200 pushes to 20 other recipients are timed (enqueue to receipt) once
// alone and once while 100 wakes wait for an endpoint that answers only
// after a minute — more than the server's workers. The per-endpoint bound
// (Config.PerEndpoint, 8) lets 8 attempts hang and defers the rest; the
// second p99 must stay within a second of the first: a hanging endpoint
// that took the others' workers would add its hang. The attempt timeout
// is a minute here (10 s by default), so that on a loaded machine no
// hanging attempt times out, and lets a deferred one in, during the round.
func TestHangingEndpointKeepsOthersP99(t *testing.T) {
	if testing.Short() {
		t.Skip("times 400 pushes")
	}
	e := newEnv(t, envOpts{concurrency: 64, cfg: Config{Schedule: []time.Duration{time.Minute}, Timeout: time.Minute}})
	hang := newReceiver(t, nil)
	hang.answer = func(_ int, r *http.Request, w http.ResponseWriter) int {
		select {
		case <-hang.release:
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
		w.WriteHeader(200)
		return 200
	}
	var (
		mu       sync.Mutex
		enqueued = map[string]time.Time{}
	)
	fast := newReceiver(t, statuses(200))
	const parties, each = 20, 10
	for i := range parties {
		e.endpoint(fmt.Sprintf("human:p%02d", i), fast.url(), "")
	}
	e.endpoint("human:hangs", hang.url(), "")

	// round enqueues 200 pushes to the others, one every 5 ms, and
	// answers their p99 latency from enqueue to receipt.
	round := func() time.Duration {
		t.Helper()
		start := fast.count()
		for k := range parties * each {
			party := fmt.Sprintf("human:p%02d", k%parties)
			at := time.Now()
			res, _ := e.wake(party)
			mu.Lock()
			enqueued[outbound.WebhookID(e.prefix, ws, party, res.Seq)] = at
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
		eventually(t, 60*time.Second, "every push of the round received", func() bool { return fast.count() >= start+parties*each })
		var lat []time.Duration
		mu.Lock()
		for _, r := range fast.got()[start:] {
			lat = append(lat, r.at.Sub(enqueued[r.header.Get("webhook-id")]))
		}
		mu.Unlock()
		slices.Sort(lat)
		return lat[len(lat)*99/100]
	}
	alone := round()
	// More wakes to the hanging endpoint than the server has workers (64):
	// without a per-endpoint bound they would hold every worker.
	for range 100 {
		e.wake("human:hangs")
	}
	eventually(t, 10*time.Second, "attempts hanging", func() bool { return hang.count() >= 8 })
	withHang := round()
	if n := hang.count(); n != 8 {
		t.Fatalf("%d attempts reached the hanging endpoint at once, want the per-endpoint bound, 8", n)
	}
	for _, r := range hang.got() {
		if !r.done.IsZero() {
			t.Fatal("a hanging attempt ended during the round: the round did not overlap the hang")
		}
	}
	t.Logf("p99 of 200 pushes to others: %v alone, %v while an endpoint hangs", alone, withHang)
	if withHang > alone+time.Second {
		t.Fatalf("p99 %v while an endpoint hangs, %v without: the hang moved the others", withHang, alone)
	}
}
