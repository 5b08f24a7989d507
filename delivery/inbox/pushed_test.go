package inbox_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/inbox"
)

// A push's 2xx (Pushed) acks the entry still at the pushed seq; an entry
// that folded a same-type attention update past it (a notice the wake-again
// rule kept) decides a wake at a new seq; one whose fold woke by itself,
// or was info, is left as it is.
func TestPushedCatchesUp(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		b := inbox.New(rdb, inbox.Config{Prefix: prefix})
		const human = "human:ops"
		idle := withData(`{"idle":true}`)
		turn := func(id string) *inbox.Delivery {
			d := to(human, ev(id, "session.turn_ended", "session:x", idle))
			return &d
		}

		// Still at the pushed seq: acked.
		r1 := deliver(t, b, *turn("a1"))
		if !r1.Wake {
			t.Fatalf("first turn end did not wake: %+v", r1)
		}
		re, acked, err := b.Pushed(ctx, ws, human, "session:x", r1.Seq, t0)
		if err != nil || !acked || re.Wake {
			t.Fatalf("Pushed at the entry's seq: %+v acked %v err %v, want acked", re, acked, err)
		}
		if es := list(t, b, human); len(es) != 0 {
			t.Fatalf("entries after the 2xx: %d, want none", len(es))
		}

		// Folded a same-type update past the push: a wake at a new seq.
		p1 := deliver(t, b, *turn("b1"))
		p2 := deliver(t, b, *turn("b2"))
		if p2.Wake || p2.Kind != inbox.KindNotice {
			t.Fatalf("a same-type fold woke again: %+v (the rule under test must keep it a notice)", p2)
		}
		re, acked, err = b.Pushed(ctx, ws, human, "session:x", p1.Seq, t0)
		if err != nil || acked || !re.Wake || re.Seq <= p2.Seq {
			t.Fatalf("Pushed past a fold: %+v acked %v err %v, want a wake at a seq above %d", re, acked, err, p2.Seq)
		}
		es := list(t, b, human)
		if len(es) != 1 || es[0].Seq != re.Seq || !es[0].Wake || es[0].WakeSeq != re.Seq || es[0].Count != 2 {
			t.Fatalf("entry after the re-wake: %+v", es)
		}
		// The same 2xx again (a retry after a storage error) does nothing more.
		if again, acked, err := b.Pushed(ctx, ws, human, "session:x", p1.Seq, t0); err != nil || acked || again.Wake {
			t.Fatalf("Pushed again: %+v acked %v err %v, want nothing", again, acked, err)
		}
		// The re-wake's own 2xx acks it.
		if _, acked, err := b.Pushed(ctx, ws, human, "session:x", re.Seq, t0); err != nil || !acked {
			t.Fatalf("the re-wake's 2xx: acked %v err %v", acked, err)
		}

		// An info fold past the push wakes nobody.
		q1 := deliver(t, b, *turn("c1"))
		deliver(t, b, to(human, ev("c2", "session.turn_started", "session:x")))
		if re, acked, err := b.Pushed(ctx, ws, human, "session:x", q1.Seq, t0); err != nil || acked || re.Wake {
			t.Fatalf("Pushed past an info fold: %+v acked %v err %v, want nothing", re, acked, err)
		}
	})
}
