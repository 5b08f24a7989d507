package health

import (
	"context"
	"testing"
	"time"
)

// TestPacerWaitsTwiceTheStep: a periodic pass waits twice as long as each
// step took until its spread is over; a report's pass (nil) and a pass
// past its spread do not wait, nor does a cancelled one.
func TestPacerWaitsTwiceTheStep(t *testing.T) {
	ctx := context.Background()
	step := time.Now().Add(-20 * time.Millisecond)
	start := time.Now()
	(&pacer{until: start.Add(time.Minute)}).wait(ctx, step)
	if waited := time.Since(start); waited < 40*time.Millisecond {
		t.Fatalf("waited %s after a 20ms step, want at least 40ms", waited)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for name, f := range map[string]func(){
		"nil":       func() { (*pacer)(nil).wait(ctx, step) },
		"past":      func() { (&pacer{until: time.Now().Add(-time.Second)}).wait(ctx, time.Now().Add(-time.Hour)) },
		"cancelled": func() { (&pacer{until: time.Now().Add(time.Hour)}).wait(cancelled, time.Now().Add(-time.Hour)) },
	} {
		start := time.Now()
		f()
		if waited := time.Since(start); waited > time.Second {
			t.Errorf("%s pacer waited %s", name, waited)
		}
	}
}
