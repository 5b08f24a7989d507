package health

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/wakegate/wakegate/providers/event"
)

// metrics of the sweep. Labels are invariant ids, event types of the
// vocabulary and kinds of work: never a tenant, party or repository.
type metrics struct {
	violations  *prometheus.GaugeVec
	repairs     *prometheus.CounterVec
	synthesized *prometheus.CounterVec
	evaluations *prometheus.CounterVec
	fed         prometheus.Counter
	passSeconds prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		violations: f.NewGaugeVec(prometheus.GaugeOpts{Name: "wakegate_health_violations",
			Help: "What each invariant of docs/design.md §9 counts across workspaces after the last periodic sweep (I3: unacked entries, a measure)."},
			[]string{"invariant"}),
		repairs: f.NewCounterVec(prometheus.CounterOpts{Name: "wakegate_health_repairs_total",
			Help: "Repairs the health sweep made, by invariant (I2: escalation timers scheduled again, I6: watches closed)."},
			[]string{"invariant"}),
		synthesized: f.NewCounterVec(prometheus.CounterOpts{Name: "wakegate_health_synthesized_total",
			Help: "Events the health sweep synthesized and journaled, by type."}, []string{"type"}),
		evaluations: f.NewCounterVec(prometheus.CounterOpts{Name: "wakegate_health_evaluations_total",
			Help: "Subjects and parties the health sweep evaluated (unchanged ones are skipped), by kind."}, []string{"kind"}),
		fed: f.NewCounter(prometheus.CounterOpts{Name: "wakegate_health_feed_entries_total",
			Help: "Journal and delivery-ledger entries the health sweep filed."}),
		passSeconds: f.NewHistogram(prometheus.HistogramOpts{Name: "wakegate_health_pass_seconds",
			Help: "Duration of a periodic health sweep.", Buckets: prometheus.ExponentialBuckets(0.005, 3, 9)}),
	}
	for _, inv := range invariants {
		m.violations.WithLabelValues(inv.id)
		m.repairs.WithLabelValues(inv.id)
	}
	for _, t := range []string{event.TypeSessionStalled, event.TypeGitHubPullRequestStuck} {
		m.synthesized.WithLabelValues(t)
	}
	for _, k := range []string{"session", "pull_request", "party"} {
		m.evaluations.WithLabelValues(k)
	}
	return m
}
