package holds

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/event"
)

// TestDeliverAndDecide: the delivery and the holds decision in one script
// call answer and record what Deliver then Decide do — the results, the
// decisions, the held items a digest lists — for a wake pushed, a wake
// the rate cap holds, an update that wakes nobody, a re-run of the
// routing, and a quiet recipient; on Redis and on the embedded Redis
// serve runs by default.
func TestDeliverAndDecide(t *testing.T) {
	redistest.Backends(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		s, box := New(rdb, prefix), inbox.New(rdb, inbox.Config{Prefix: prefix})
		const ws = "acme"
		now := time.Now().Truncate(time.Millisecond)
		settings := supervision.Defaults()
		settings.Rate = supervision.Rate{Per: supervision.Duration(time.Minute), Burst: 1}
		ev := func(id, typ string) *event.Event {
			return &event.Event{SpecVersion: event.SpecVersion, ID: id, Source: "//t", Type: typ, Subject: "session:w1",
				Workspace: ws, Time: now, Summary: "about " + id, Priority: event.DefaultPriority(typ, nil)}
		}
		steps := []struct {
			e     *event.Event
			quiet bool
		}{
			{e: ev("e1", "session.awaiting_input")},       // wakes, pushed
			{e: ev("e2", "session.crashed")},              // wakes again, held by the rate cap
			{e: ev("e3", "session.turn_ended")},           // info: wakes nobody
			{e: ev("e2", "session.crashed")},              // a re-run: the original answers
			{e: ev("e4", "session.permission_requested")}, // quiet
		}
		for i, st := range steps {
			quiet := st.quiet || i == 4
			var got [2]inbox.Result
			var dec [2]Decision
			for k, party := range []string{"human:separate", "human:fused"} {
				d := inbox.Delivery{Workspace: ws, Party: party, Event: st.e, Via: inbox.ViaSubscription}
				r := Request{Workspace: ws, Party: party, Event: st.e, Settings: settings, Quiet: &quiet, Now: now}
				var err error
				if k == 0 {
					if got[k], err = box.Deliver(ctx, d, now); err == nil && got[k].Wake {
						r.Result = got[k]
						dec[k], err = s.Decide(ctx, r)
					}
				} else {
					got[k], dec[k], err = s.DeliverAndDecide(ctx, box, d, r)
				}
				if err != nil {
					t.Fatalf("step %d, %s: %v", i, party, err)
				}
			}
			if got[0] != got[1] || dec[0] != dec[1] {
				t.Fatalf("step %d (%s): Deliver then Decide %+v %+v; DeliverAndDecide %+v %+v", i, st.e.ID, got[0], dec[0], got[1], dec[1])
			}
			want := map[int]string{0: "push", 1: ReasonRate, 3: ReasonRate, 4: ReasonQuiet}[i]
			switch {
			case want == "push" && !dec[1].Push, want != "push" && dec[1].Reason != want, i == 2 && got[1].Wake:
				t.Fatalf("step %d (%s): %+v %+v, want %q", i, st.e.ID, got[1], dec[1], want)
			}
		}
		for _, reason := range []string{ReasonRate, ReasonQuiet} {
			a, errA := s.Held(ctx, ws, "human:separate", reason)
			b, errB := s.Held(ctx, ws, "human:fused", reason)
			if errA != nil || errB != nil || len(a) != 1 || !reflect.DeepEqual(a, b) {
				t.Fatalf("held for %s: %+v (%v) and %+v (%v), want the same one item", reason, a, errA, b, errB)
			}
			if b[0].Seq == 0 || b[0].Kind != inbox.KindWake || string(b[0].Event) == "" {
				t.Fatalf("held for %s: %+v, want its seq, kind and event", reason, b[0])
			}
		}
		if held, err := s.QuietHeldParties(ctx, ws); err != nil || fmt.Sprint(held) != "[human:fused human:separate]" {
			t.Fatalf("quiet-held parties %v, %v", held, err)
		}
		// Bad input is the inbox's (the router sets such an event aside).
		bad := inbox.Delivery{Workspace: ws, Party: "nobody", Event: ev("e5", "session.crashed"), Via: inbox.ViaSubscription}
		if _, _, err := s.DeliverAndDecide(ctx, box, bad, Request{Workspace: ws, Party: "nobody", Now: now}); !errors.Is(err, inbox.ErrInvalid) {
			t.Fatalf("a malformed party: %v, want inbox.ErrInvalid", err)
		}
	})
}

// The held item's tail a caller builds once from the event's JSON (one
// event delivered to several parties) is the one DeliverAndDecide builds
// from the event itself.
func TestItemTailFromEventJSON(t *testing.T) {
	now := time.Now()
	e := &event.Event{SpecVersion: event.SpecVersion, ID: "1", Source: "//t", Type: "github.pull_request.closed",
		Subject: "github:o/r#1", Workspace: "acme", Time: now, Summary: "merged <b>", Priority: event.Attention,
		Data: []byte(`{"merged": true, "n": 1}`)}
	want, err := ItemTail(e, now, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ItemTail(e, now, string(b))
	if err != nil || got != want {
		t.Fatalf("ItemTail from the event's JSON = %s, %v; want %s", got, err, want)
	}
	if !strings.Contains(want, `"merged":true`) {
		t.Errorf("tail %s does not say merged", want)
	}
}
