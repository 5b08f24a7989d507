package bench

import (
	"testing"
	"time"
)

// TestWakeSplit: a fact due from a second before a sampled second to 5 s
// after it counts as near it; the others, and facts outside the
// measured window or never seen, do not count at all.
func TestWakeSplit(t *testing.T) {
	from := time.Unix(1000, 0)
	tr := newWakeTracker()
	fact := func(id string, dueAfter, latency time.Duration) {
		tr.expect(id, "sup", "k", from.Add(dueAfter))
		tr.seen[id] = from.Add(dueAfter + latency)
	}
	fact("during", 10*time.Second, 900*time.Millisecond)
	fact("just-before", 9*time.Second+500*time.Millisecond, 700*time.Millisecond)
	fact("five-after", 15*time.Second, 800*time.Millisecond)
	fact("later", 16*time.Second, 20*time.Millisecond)
	fact("early", 2*time.Second, 30*time.Millisecond)
	fact("outside", -time.Second, 5*time.Second)
	tr.expect("unseen", "sup", "k", from.Add(3*time.Second))
	in, out := tr.split(from, time.Minute, []time.Time{from.Add(10 * time.Second)}, 5*time.Second)
	if in.N != 3 || in.P50 != 800*time.Millisecond {
		t.Errorf("near: %d facts, p50 %s; want 3, 800ms", in.N, in.P50)
	}
	if out.N != 2 || out.P99 != 30*time.Millisecond {
		t.Errorf("others: %d facts, p99 %s; want 2, 30ms", out.N, out.P99)
	}
}
