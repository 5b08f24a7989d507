package inbox_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/providers/event"
)

// dues reads a recipient's escalation due index: coalesce key → due ms.
func dues(t *testing.T, rdb redis.UniversalClient, prefix, party string) map[string]int64 {
	t.Helper()
	zs, err := rdb.ZRangeWithScores(context.Background(), inbox.EscalationKey(prefix, ws, party), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, z := range zs {
		out[z.Member.(string)] = int64(z.Score)
	}
	return out
}

func armed(d inbox.Delivery, at time.Time) inbox.Delivery {
	d.Via, d.EscalateAt = inbox.ViaController, at
	return d
}

// TestEscalationArming: an update that may escalate arms its entry in the
// same step as the delivery when it creates the entry, raises its
// priority, or the entry was never armed; a fold of the same priority
// leaves the timer alone (so an escalated entry is not escalated again by
// it); a duplicate arms nothing; an ack disarms.
func TestEscalationArming(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		b := inbox.New(rdb, inbox.Config{Prefix: prefix})
		const p = "session:sup"
		due1, due2, due3 := t0.Add(2*time.Minute), t0.Add(3*time.Minute), t0.Add(4*time.Minute)
		ck := "session:kid"
		sess := func(id, typ string, mods ...func(*event.Event)) *event.Event {
			return ev(id, typ, ck, append([]func(*event.Event){func(e *event.Event) {
				e.Source, e.SessionID = "//wakegate/default/session:kid", "kid"
			}}, mods...)...)
		}

		// Created: armed at its due.
		r := deliver(t, b, armed(to(p, sess("k1", "session.awaiting_input")), due1))
		if !r.Armed || !r.New {
			t.Fatalf("new entry: %+v, want armed", r)
		}
		if got := dues(t, rdb, prefix, p); got[ck] != due1.UnixMilli() || len(got) != 1 {
			t.Fatalf("due index %v, want %s at %d", got, ck, due1.UnixMilli())
		}
		if e := only(t, b, p); !e.Armed || e.Escalated != nil {
			t.Fatalf("entry %+v: want armed, not escalated", e)
		}
		// A duplicate (a re-run of the routing) arms nothing.
		if r := deliver(t, b, armed(to(p, sess("k1", "session.awaiting_input")), due3)); !r.Duplicate || r.Armed {
			t.Fatalf("duplicate: %+v", r)
		}
		// A fold of the same priority keeps the timer.
		if r := deliver(t, b, armed(to(p, sess("k2", "session.turn_ended", withData(`{"idle":true}`))), due2)); r.Armed {
			t.Fatalf("same-priority fold: %+v, want not armed", r)
		}
		if got := dues(t, rdb, prefix, p); got[ck] != due1.UnixMilli() {
			t.Fatalf("after a same-priority fold: %v, want the first due kept", got)
		}
		// Once its check has run (package escalate removes it), a fold of
		// the same priority does not arm it again.
		if err := rdb.ZRem(ctx, inbox.EscalationKey(prefix, ws, p), ck).Err(); err != nil {
			t.Fatal(err)
		}
		if r := deliver(t, b, armed(to(p, sess("k3", "session.awaiting_input")), due2)); r.Armed {
			t.Fatalf("fold after the check: %+v, want not armed", r)
		}
		if got := dues(t, rdb, prefix, p); len(got) != 0 {
			t.Fatalf("after a fold past the check: %v, want empty", got)
		}
		// A raise re-arms at the raise's due.
		if r := deliver(t, b, armed(to(p, sess("k4", "session.crashed")), due3)); !r.Armed {
			t.Fatalf("raise: %+v, want armed", r)
		}
		if got := dues(t, rdb, prefix, p); got[ck] != due3.UnixMilli() {
			t.Fatalf("after a raise: %v, want %d", got, due3.UnixMilli())
		}
		// An ack disarms.
		e := only(t, b, p)
		if n, err := b.Ack(ctx, ws, p, e.Seq, nil); err != nil || n != 1 {
			t.Fatalf("ack: %d %v", n, err)
		}
		if got := dues(t, rdb, prefix, p); len(got) != 0 {
			t.Fatalf("after the ack: %v, want empty", got)
		}

		// An entry created by an update that may not escalate (a
		// subscription) is armed by the first one that may, even at the
		// same priority; without EscalateAt nothing is armed.
		pr := "github:org/repo#7"
		if r := deliver(t, b, to(p, ev("s1", "github.pull_request.opened", pr))); r.Armed {
			t.Fatalf("subscription delivery: %+v", r)
		}
		if r := deliver(t, b, armed(to(p, ev("s2", "github.pull_request.ready", pr)), due1)); !r.Armed {
			t.Fatalf("first armed update of a never-armed entry: %+v", r)
		}
		if got := dues(t, rdb, prefix, p); got[pr] != due1.UnixMilli() {
			t.Fatalf("due index %v", got)
		}
	})
}

// TestEscalatedCopy: an escalated copy is its own delivery (the party may
// have the event already), is marked in the entry JSON, wakes even as a
// same-type fold (an alert when attended), arms the entry, and is itself
// deduplicated.
func TestEscalatedCopy(t *testing.T) {
	backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		b := inbox.New(rdb, inbox.Config{Prefix: prefix})
		const gp = "session:gp"
		e := ev("k1", "session.awaiting_input", "session:kid", func(e *event.Event) { e.SessionID = "kid" })
		// gp observes kid: it has the event already, without a wake-worthy
		// change left (the same type woke it).
		if r := deliver(t, b, inbox.Delivery{Workspace: ws, Party: gp, Event: e, Via: inbox.ViaObserver}); !r.Wake {
			t.Fatalf("observer delivery: %+v", r)
		}
		x := &inbox.Escalation{Level: 1, From: "session:mid", Path: []string{"session:mid"}, Rung: "controller:mid", Reason: "unreached"}
		cp := inbox.Delivery{Workspace: ws, Party: gp, Event: e, Via: inbox.ViaEscalation, Escalation: x,
			Attended: true, EscalateAt: t0.Add(time.Minute)}
		r := deliver(t, b, cp)
		if r.Duplicate || r.New || !r.Wake || r.Kind != inbox.KindAlert || !r.Armed {
			t.Fatalf("escalated copy: %+v, want a fold that alerts and arms", r)
		}
		got := only(t, b, gp)
		if got.Escalated == nil || got.Escalated.Level != 1 || got.Escalated.From != "session:mid" ||
			got.Escalated.Rung != "controller:mid" || got.Escalated.Reason != "unreached" || got.Via != inbox.ViaEscalation {
			t.Fatalf("entry %+v escalated %+v", got, got.Escalated)
		}
		raw, _ := json.Marshal(got)
		if !strings.Contains(string(raw), `"escalated":{"level":1,"from":"session:mid","path":["session:mid"],"rung":"controller:mid","reason":"unreached"}`) {
			t.Fatalf("entry JSON %s does not show the escalation", raw)
		}
		if strings.Contains(string(raw), "armed") {
			t.Fatalf("entry JSON %s shows internal state", raw)
		}
		// The copy again (a re-run of the escalation) is a duplicate.
		if r := deliver(t, b, cp); !r.Duplicate || r.Seq != got.Seq {
			t.Fatalf("copy again: %+v", r)
		}
		// A later routed update keeps the mark.
		e2 := ev("k2", "session.turn_ended", "session:kid", withData(`{"idle":true}`))
		deliver(t, b, inbox.Delivery{Workspace: ws, Party: gp, Event: e2, Via: inbox.ViaObserver})
		if got := only(t, b, gp); got.Escalated == nil || got.Escalated.Level != 1 {
			t.Fatalf("after a routed fold: %+v", got)
		}

		// Get and CoalesceKeyAt read one entry.
		ent, err := b.Get(ctx, ws, gp, "session:kid")
		if err != nil || ent == nil || ent.Escalated == nil || !ent.Armed {
			t.Fatalf("Get: %+v %v", ent, err)
		}
		if ck, err := b.CoalesceKeyAt(ctx, ws, gp, ent.Seq); err != nil || ck != "session:kid" {
			t.Fatalf("CoalesceKeyAt(%d) = %q %v", ent.Seq, ck, err)
		}
		if ck, err := b.CoalesceKeyAt(ctx, ws, gp, 1); err != nil || ck != "" {
			t.Fatalf("CoalesceKeyAt of a seq folded past = %q %v", ck, err)
		}
		if ent, err := b.Get(ctx, ws, gp, "nothing"); err != nil || ent != nil {
			t.Fatalf("Get of no entry: %+v %v", ent, err)
		}

		// An escalation must be well formed.
		bad := cp
		bad.Escalation = &inbox.Escalation{Level: 0, From: "session:mid", Path: []string{"session:mid"}}
		if _, err := b.Deliver(ctx, bad, t0); err == nil {
			t.Fatal("level 0 accepted")
		}
		bad.Escalation = nil
		if _, err := b.Deliver(ctx, bad, t0); err == nil {
			t.Fatal("via escalation without an Escalation accepted")
		}
	})
}
