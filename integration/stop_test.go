package integration

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestIdleServeStopsPromptly: an idle serve (its route consumers and
// deriver blocked reading empty streams) exits 0 within half a second of
// SIGTERM, instead of waiting out its blocking reads.
func TestIdleServeStopsPromptly(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	p := s.start("serve", "serve", nil)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.logs.String(), "shards taken") {
		if time.Now().After(deadline) {
			t.Fatal("serve took no shards within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // deliberately: let every consumer enter its blocking read
	start := time.Now()
	p.signal(syscall.SIGTERM)
	code, err := p.waitExit(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); code != 0 || took > 500*time.Millisecond {
		t.Errorf("exit %d after %v, want 0 within 0.5 s", code, took)
	}
}
