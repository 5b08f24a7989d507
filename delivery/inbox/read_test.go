package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/inbox"
)

func seqsOf(es []inbox.Entry) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.Seq
	}
	return out
}

func sameSeqs(a, b []int64) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func TestList(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		b := inbox.New(rdb, inbox.Config{Prefix: prefix})
		const p = "human:ops"
		if es, next, err := b.List(ctx, ws, p, 0, false, 0); err != nil || len(es) != 0 || next != 0 {
			t.Fatalf("empty inbox: %v %d %v", es, next, err)
		}
		for i := 1; i <= 5; i++ {
			deliver(t, b, to(p, ev(fmt.Sprint(i), "github.pull_request.opened", fmt.Sprintf("github:org/repo#%d", i))))
		}
		page := func(after int64, hasAfter bool, limit int, want []int64, wantNext int64) {
			t.Helper()
			es, next, err := b.List(ctx, ws, p, after, hasAfter, limit)
			if err != nil || !sameSeqs(seqsOf(es), want) || next != wantNext {
				t.Fatalf("List(%d, %v, %d) = %v next %d (%v), want %v next %d", after, hasAfter, limit, seqsOf(es), next, err, want, wantNext)
			}
		}
		page(0, false, 2, []int64{1, 2}, 2)
		page(2, true, 0, []int64{3, 4, 5}, 5)
		page(5, true, 10, nil, 5)
		page(9, true, 10, nil, 9)
		page(0, true, 10, []int64{1, 2, 3, 4, 5}, 5)

		// A fold moves its entry to the end.
		deliver(t, b, to(p, ev("1b", "github.pull_request.ready", "github:org/repo#1")))
		page(0, false, 100, []int64{2, 3, 4, 5, 6}, 6)
		page(5, true, 100, []int64{6}, 6)

		if n, err := b.Ack(ctx, ws, p, 6, nil); err != nil || n != 5 {
			t.Fatalf("ack all: %d %v", n, err)
		}
		// Nothing unacked: next is the last seq, to long-poll from.
		page(0, false, 100, nil, 6)
	})
}

func TestAck(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		b := inbox.New(rdb, inbox.Config{Prefix: prefix})
		const p = "session:sup"
		for i := 1; i <= 4; i++ {
			deliver(t, b, to(p, ev(fmt.Sprint(i), "session.awaiting_input", fmt.Sprintf("session:w%d", i))))
		}
		unacked := func(want ...int64) {
			t.Helper()
			if got := seqsOf(list(t, b, p)); !sameSeqs(got, want) {
				t.Fatalf("unacked %v, want %v", got, want)
			}
		}
		if n, err := b.Ack(ctx, ws, p, 0, []int64{2}); err != nil || n != 1 {
			t.Fatalf("ack seq 2: %d %v", n, err)
		}
		if n, err := b.Ack(ctx, ws, p, 0, []int64{2}); err != nil || n != 0 {
			t.Fatalf("ack seq 2 again: %d %v", n, err)
		}
		if _, err := b.Ack(ctx, ws, p, 5, nil); !errors.Is(err, inbox.ErrBeyondLast) {
			t.Fatalf("ack through beyond last: %v", err)
		}
		if _, err := b.Ack(ctx, ws, p, 0, []int64{1, 9}); !errors.Is(err, inbox.ErrBeyondLast) {
			t.Fatalf("ack a seq beyond last: %v", err)
		}
		if _, err := b.Ack(ctx, ws, p, 1, []int64{5}); !errors.Is(err, inbox.ErrBeyondLast) {
			t.Fatalf("ack through and a seq beyond last: %v", err)
		}
		unacked(1, 3, 4) // nothing acked by the refused calls
		if n, err := b.Ack(ctx, ws, p, 0, nil); err != nil || n != 0 {
			t.Fatalf("ack nothing: %d %v", n, err)
		}
		if n, err := b.Ack(ctx, ws, p, 1, []int64{1, 4}); err != nil || n != 2 {
			t.Fatalf("ack through 1 and seqs 1, 4: %d %v", n, err)
		}
		unacked(3)
		if !wakeAfter(t, b, p, 0, false) || wakeAfter(t, b, p, 3, true) {
			t.Fatal("WakeAfter with seq 3 unacked")
		}
		if n, err := b.Ack(ctx, ws, p, 4, nil); err != nil || n != 1 {
			t.Fatalf("ack through 4: %d %v", n, err)
		}
		if wakeAfter(t, b, p, 0, false) {
			t.Fatal("an acked wake still counts")
		}

		// A fresh Inbox on the same Redis (a restart) sees the same state;
		// acked entries do not come back, redelivered events are duplicates.
		b2 := inbox.New(rdb, inbox.Config{Prefix: prefix})
		if last, err := b2.Last(ctx, ws, p); err != nil || last != 4 {
			t.Fatalf("last after restart: %d %v", last, err)
		}
		for i := 1; i <= 4; i++ {
			if r := deliver(t, b2, to(p, ev(fmt.Sprint(i), "session.awaiting_input", fmt.Sprintf("session:w%d", i)))); !r.Duplicate {
				t.Fatalf("redelivered %d after restart: %+v", i, r)
			}
		}
		if es := list(t, b2, p); len(es) != 0 {
			t.Fatalf("acked entries came back: %+v", es)
		}
		// Other recipients are untouched by all of this.
		if last, _ := b2.Last(ctx, ws, "session:nobody"); last != 0 {
			t.Fatalf("last of an empty inbox: %d", last)
		}
		if _, err := b2.Ack(ctx, ws, "session:nobody", 1, nil); !errors.Is(err, inbox.ErrBeyondLast) {
			t.Fatalf("ack in an empty inbox: %v", err)
		}
	})
}
