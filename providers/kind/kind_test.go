package kind

import (
	"errors"
	"fmt"
	"testing"
)

func TestKinded(t *testing.T) {
	errGone := New(NotFound, "no such thing")
	err := fmt.Errorf("read thing 7: %w", errGone)
	if !errors.Is(err, errGone) || !errors.Is(err, NotFound) {
		t.Fatalf("%v: want both its sentinel and its kind", err)
	}
	if errors.Is(err, Invalid) || !errors.Is(Of(err), NotFound) {
		t.Fatalf("%v: kind %v, want not found only", err, Of(err))
	}
	if err.Error() != "read thing 7: no such thing" {
		t.Fatalf("text %q: a sentinel's text is its own", err)
	}
	if Of(errors.New("connection refused")) != nil {
		t.Fatal("an error of no kind has a kind")
	}
}
