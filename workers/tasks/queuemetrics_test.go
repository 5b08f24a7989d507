package tasks

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/delivery/holds"
)

// TestQueueCollector: before any task the push queue reads all zero;
// a scheduled release shows as one scheduled task.
func TestQueueCollector(t *testing.T) {
	e := newEnv(t, envOpts{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewQueueCollector(e.rdb, e.p))
	states := func() map[string]float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil || len(mfs) != 1 {
			t.Fatalf("gather: %v %v", mfs, err)
		}
		out := map[string]float64{}
		for _, m := range mfs[0].GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
		return out
	}
	if got := states(); len(got) != 5 || got["pending"]+got["scheduled"]+got["active"]+got["retry"]+got["archived"] != 0 {
		t.Fatalf("an empty queue reads %v", got)
	}
	rel := NewReleaser(e.p, holds.New(e.rdb, e.prefix), nil)
	if err := rel.Schedule(t.Context(), ws, "human:h", holds.ReasonRate, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := states(); got["scheduled"] != 1 {
		t.Fatalf("after scheduling a release: %v", got)
	}
}
