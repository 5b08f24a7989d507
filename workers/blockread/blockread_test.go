package blockread

import (
	"context"
	"errors"
	"testing"
)

func TestDoReturnsTheAnswer(t *testing.T) {
	v, err := Do(context.Background(), func() (int, error) { return 7, nil })
	if v != 7 || err != nil {
		t.Fatalf("Do = %d, %v", v, err)
	}
}

// A read that never answers does not hold its caller past the context.
func TestDoStopsWithItsContext(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Do(ctx, func() (int, error) { <-release; return 1, nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
