package stack

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRunStopsInOrder: the stop goes front, consumers, queue, admin, each
// stage's context cancelled once the stages before it returned, and the
// joined error names each failing component.
func TestRunStopsInOrder(t *testing.T) {
	var mu sync.Mutex
	var order []string
	comp := func(name string, stage Stage, err error) Component {
		return Component{Name: name, Stage: stage, Run: func(ctx context.Context) error {
			<-ctx.Done()
			// A slow stop: a later stage that stopped at the same time
			// would be recorded first.
			if stage == StageFront {
				time.Sleep(50 * time.Millisecond)
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			return err
		}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []Component{
			comp("asynq", StageQueue, errors.New("queue broke")),
			comp("admin", StageAdmin, nil),
			comp("route", StageConsumers, nil),
			comp("gateway", StageFront, errors.New("drain broke")),
			comp("derive", StageConsumers, nil),
		})
	}()
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	pos := map[string]int{}
	for i, n := range order {
		pos[n] = i
	}
	if len(order) != 5 || pos["gateway"] != 0 || pos["route"] > 2 || pos["derive"] > 2 || pos["asynq"] != 3 || pos["admin"] != 4 {
		t.Errorf("stop order %v, want gateway, the consumers, asynq, admin", order)
	}
	for _, want := range []string{"gateway: drain broke", "asynq: queue broke"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to name %q", err, want)
		}
	}
}

// TestRunStopsWhenAComponentEnds: one component returning stops the
// others (in order) and Run returns its error.
func TestRunStopsWhenAComponentEnds(t *testing.T) {
	waiting := func(ctx context.Context) error { <-ctx.Done(); return nil }
	err := Run(context.Background(), []Component{
		{"gateway", StageFront, waiting},
		{"derive", StageConsumers, func(context.Context) error { return errors.New("no group") }},
		{"asynq", StageQueue, waiting},
	})
	if err == nil || err.Error() != "derive: no group" {
		t.Errorf("error %v, want derive: no group", err)
	}
}
