package route

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/providers/event"
)

// TestShardLags: a shard with an entry past its cursor lags by that
// entry's age, a routed (cursor moved) or empty shard by 0, and the
// collector exports one gauge per shard.
func TestShardLags(t *testing.T) {
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 4})
	e := &event.Event{SpecVersion: event.SpecVersion, ID: "1", Source: "//wakegate/acme/session:a", Type: "session.turn_ended",
		Subject: "session:a", Workspace: "acme", SessionID: "a", Time: time.Now(), Priority: event.Attention}
	seq, _, err := j.Append(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	shard, id, err := journal.ParseSeq(seq)
	if err != nil {
		t.Fatal(err)
	}
	later := streamTime(id).Add(90 * time.Second)
	lags, err := ShardLags(ctx, rdb, j, later)
	if err != nil {
		t.Fatal(err)
	}
	for s, lag := range lags {
		want := time.Duration(0)
		if s == shard {
			want = 90 * time.Second
		}
		if lag != want {
			t.Fatalf("shard %d lags %v, want %v", s, lag, want)
		}
	}
	if err := rdb.Set(ctx, cursorKey(j, shard), id, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if lags, err = ShardLags(ctx, rdb, j, later); err != nil || lags[shard] != 0 {
		t.Fatalf("after routing: %v, %v; want 0", lags, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewLagCollector(rdb, j))
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "wakegate_journal_shard_lag_seconds" || len(mfs[0].GetMetric()) != 4 {
		t.Fatalf("gathered %v (%v), want 4 series of wakegate_journal_shard_lag_seconds", mfs, err)
	}
}

// TestDecisionMetrics: the router counts what each new delivery decided
// (an idle turn end wakes its controller, a second one folds into the
// entry as a notice, without waking again; an info event is a digest).
func TestDecisionMetrics(t *testing.T) {
	w := newWorld(t)
	reg := prometheus.NewRegistry()
	w.r.m = newRouterMetrics(reg)
	w.settings(`{"default_controller": "session:boss"}`)
	w.push("session:w", "w", "session.turn_ended", `{"idle": true}`)
	w.push("session:w", "w", "session.turn_ended", `{"idle": true}`)
	w.push("session:w", "w", "session.turn_started", "")
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "wakegate_route_decisions_total" {
			for _, m := range mf.GetMetric() {
				got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	if got["wake"] != 1 || got["notice"] != 1 || got["digest"] != 1 || got["alert"] != 0 {
		t.Fatalf("decisions %v, want one wake, one notice, one digest", got)
	}
}
