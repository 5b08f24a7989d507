package gateway

import (
	"testing"

	"github.com/wakegate/wakegate/delivery/inbox"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// An update that decided no wake wakes the waiters that read every update
// (SSE, min_priority), not those only a wake concerns (a long-poll);
// a wake wakes both, and every waiter is woken once.
func TestFanoutUpdateSkipsWakeOnlyWaiters(t *testing.T) {
	f := newFanout(nil, "", nil, nil)
	all, stopAll := f.wait("k")
	wakeOnly, stopWake := f.waitWake("k")
	other, stopOther := f.waitWake("other")
	defer stopAll()
	defer stopWake()
	defer stopOther()

	f.wake("k", inbox.UpdatePayload)
	if !closed(all) {
		t.Fatal("an update did not wake a waiter of every update")
	}
	if closed(wakeOnly) {
		t.Fatal("an update woke a waiter only a wake concerns")
	}
	if n := f.waiting(); n != 2 {
		t.Fatalf("waiting = %d after the update, want 2 (the wake-only waiters)", n)
	}
	f.wake("k", "wake")
	if !closed(wakeOnly) {
		t.Fatal("a wake did not wake a wake-only waiter")
	}
	if closed(other) {
		t.Fatal("a wake for k woke a waiter of another key")
	}
	if n := f.waiting(); n != 1 {
		t.Fatalf("waiting = %d after the wake, want 1", n)
	}
}
