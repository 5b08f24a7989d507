package app

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics of the App side, one group per component (each is built once per
// registry). Labels never carry repository, GUID or tenant names.

type requiredMetrics struct {
	fetches   *prometheus.CounterVec // outcome: ok | error | not_installed
	fallbacks prometheus.Counter
}

func newRequiredMetrics(reg prometheus.Registerer) *requiredMetrics {
	f := promauto.With(reg)
	m := &requiredMetrics{
		fetches: f.NewCounterVec(prometheus.CounterOpts{Name: "wakegate_github_required_checks_fetches_total",
			Help: "Fetches of required checks (branch protection and rulesets) by outcome."}, []string{"outcome"}),
		fallbacks: f.NewCounter(prometheus.CounterOpts{Name: "wakegate_github_required_checks_fallbacks_total",
			Help: "Lookups answered without GitHub's required checks (a fetch failed): WAKEGATE_REQUIRED_CHECKS, or the last known set."}),
	}
	for _, o := range []string{"ok", "error", "not_installed"} {
		m.fetches.WithLabelValues(o)
	}
	return m
}
