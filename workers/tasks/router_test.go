package tasks

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/workers/route"
)

// TestRouterPushesWakes: the router enqueues a push for a delivery that
// decided a wake to a party with an endpoint — again on a re-run (a crash
// between the inbox write and the enqueue), where the task id keeps it to
// one push — and none to a party without an endpoint.
func TestRouterPushesWakes(t *testing.T) {
	e := newEnv(t, envOpts{})
	j := journal.New(e.rdb, journal.Config{Prefix: e.prefix, Shards: 4})
	reg := sessions.New(e.rdb, j, time.Minute)
	sup := supervision.New(e.rdb, e.prefix, func(context.Context, string, string) (bool, error) { return false, nil })
	r := route.NewRouter(e.rdb, j, reg, subscriptions.New(e.rdb, e.prefix), sup, e.box, prometheus.NewRegistry()).WithPusher(e.p)
	if _, err := sup.MergeSettings(e.ctx, ws, []byte(`{"fallback": {"party": "human:ops"}}`)); err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t, statuses(200))
	e.endpoint("human:ops", rc.url(), "")
	ev := func(id string) *event.Event {
		return &event.Event{SpecVersion: event.SpecVersion, ID: id, Source: event.AgentSource(ws, "session:w"),
			Type: "session.awaiting_input", Subject: "session:w" + id, Time: time.Now().UTC(), Workspace: ws,
			SessionID: "w" + id, Priority: event.Attention, Summary: "waits"}
	}
	first := ev("1")
	for range 2 { // the second Handle is a re-run: the inbox answers the original result
		if err := r.Handle(e.ctx, 0, first); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "the fallback's push", func() bool { return rc.count() == 1 })
	eventually(t, 10*time.Second, "the queue drained", e.idle)
	if err := r.Handle(e.ctx, 0, first); err != nil { // a late re-run, after the push was delivered
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the queue drained", e.idle)
	if n := rc.count(); n != 1 {
		t.Fatalf("%d pushes for one wake, want 1", n)
	}
	// The fallback without an endpoint: the inbox only.
	if _, err := e.endpoints.Delete(e.ctx, ws, "human:ops"); err != nil {
		t.Fatal(err)
	}
	if err := r.Handle(e.ctx, 0, ev("2")); err != nil {
		t.Fatal(err)
	}
	if !e.idle() {
		t.Fatal("a push was enqueued for a party without an endpoint")
	}
	if es, _, _ := e.box.List(e.ctx, ws, "human:ops", 0, false, 10); len(es) != 1 {
		t.Fatalf("fallback's inbox %+v, want the second event's entry", es)
	}
}
