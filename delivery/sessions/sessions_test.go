package sessions

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/providers/event"
)

// TestParentAndMint: a parent is recorded once, with its lineage; Mint
// creates a child's record for its parent, re-issues within the subtree
// and refuses an outsider (docs/design.md §4).
func TestParentAndMint(t *testing.T) {
	rdb, prefix := redistest.New(t)
	reg := New(rdb, journal.New(rdb, journal.Config{Prefix: prefix, Shards: 4}), time.Minute)
	ctx := context.Background()
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

	if err := reg.SetParent(ctx, "acme", "b", "a", now); err != nil {
		t.Fatal(err)
	}
	if err := reg.SetParent(ctx, "acme", "b", "z", now); err != nil {
		t.Fatal(err)
	}
	b, err := reg.Get(ctx, "acme", event.SessionSubject("b"), now)
	if err != nil {
		t.Fatal(err)
	}
	if b.Parent != "a" || !slices.Equal(b.Lineage, []string{"a"}) {
		t.Fatalf("b: parent %q lineage %q, want the first parent a, lineage [a]", b.Parent, b.Lineage)
	}

	got, err := reg.Mint(ctx, "acme", "c", event.Party("session:b"), now)
	if err != nil || !got.Created || got.Parent != "b" {
		t.Fatalf("Mint c by b = %+v, %v; want created with parent b", got, err)
	}
	c, err := reg.Get(ctx, "acme", event.SessionSubject("c"), now)
	if err != nil {
		t.Fatal(err)
	}
	if c.Parent != "b" || !slices.Equal(c.Lineage, []string{"b", "a"}) {
		t.Fatalf("c: parent %q lineage %q, want b, [b a]", c.Parent, c.Lineage)
	}
	if got, err := reg.Mint(ctx, "acme", "c", event.Party("session:a"), now); err != nil || got.Created {
		t.Fatalf("Mint c by its ancestor a = %+v, %v; want a re-issue", got, err)
	}
	if _, err := reg.Mint(ctx, "acme", "c", event.Party("session:x"), now); !errors.Is(err, ErrNotInSubtree) {
		t.Fatalf("Mint c by outsider x: %v, want ErrNotInSubtree", err)
	}
}
