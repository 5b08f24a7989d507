package integration

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestIngestLimitHoldsAcrossGateways: two gateway processes on one Redis
// share one ingest limit (docs/design.md §4). A flood alternating between them
// gets one burst (twice the rate, plus one) and the rate, not one of each
// per gateway; every refusal is a 429 with Retry-After.
func TestIngestLimitHoldsAcrossGateways(t *testing.T) {
	t.Parallel()
	const rate, burst = 5, 11
	s := newStack(t, map[string]string{"WAKEGATE_INGEST_LIMITS": fmt.Sprintf("workspace=%d/s,token=1000/s", rate)})
	gs := []*client{s.client(s.start("gateway-a", "gateway", nil)), s.client(s.start("gateway-b", "gateway", nil))}
	tok := s.token(t, "session:flood", "default", "events:push")
	admitted, refused := 0, 0
	start := time.Now()
	for i := range 60 {
		r := gs[i%2].mustPush(t, tok, ctEvent, ce(fmt.Sprintf("flood-%d", i), "session.turn_started", nil))
		switch r.Status {
		case http.StatusAccepted:
			admitted++
		case http.StatusTooManyRequests:
			refused++
			if r.Header.Get("Retry-After") == "" {
				t.Errorf("a 429 without Retry-After: %s", r)
			}
		default:
			t.Fatalf("push %d: %s", i, r)
		}
	}
	took := time.Since(start)
	allowed := burst + int(rate*took.Seconds()) + 1
	if admitted > allowed {
		t.Fatalf("two gateways admitted %d of 60 in %s, want at most %d (one burst and the rate, shared)", admitted, took, allowed)
	}
	if admitted < burst {
		t.Fatalf("two gateways admitted %d, want at least the burst %d", admitted, burst)
	}
	t.Logf("admitted %d, refused %d in %s", admitted, refused, took)
}
