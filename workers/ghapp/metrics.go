package ghapp

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics of the App side, one group per component (each is built once per
// registry). Labels never carry repository, GUID or tenant names.

type sweepMetrics struct {
	sweeps  *prometheus.CounterVec // outcome: ok | error | busy
	guids   *prometheus.CounterVec // outcome per failed GUID: redelivered | redeliver_failed | refused_on_purpose | already_redelivered
	scanned prometheus.Counter
}

func newSweepMetrics(reg prometheus.Registerer) *sweepMetrics {
	f := promauto.With(reg)
	m := &sweepMetrics{
		sweeps: f.NewCounterVec(prometheus.CounterOpts{Name: "wakegate_github_sweeps_total",
			Help: "Missed-delivery sweeps by outcome (busy: another sweep held the lease)."}, []string{"outcome"}),
		guids: f.NewCounterVec(prometheus.CounterOpts{Name: "wakegate_github_failed_deliveries_total",
			Help: "GUIDs found with no successful delivery, by what the sweep did."}, []string{"outcome"}),
		scanned: f.NewCounter(prometheus.CounterOpts{Name: "wakegate_github_sweep_scanned_deliveries_total",
			Help: "App webhook deliveries read by sweeps."}),
	}
	for _, o := range []string{"ok", "error", "busy"} {
		m.sweeps.WithLabelValues(o)
	}
	for _, o := range []string{skipRedelivered, skipRedeliverFailed, skipRefused, skipAlready} {
		m.guids.WithLabelValues(o)
	}
	return m
}

type reconcileMetrics struct {
	ticks    *prometheus.CounterVec // outcome: ok | error
	calls    prometheus.Counter
	closed   *prometheus.CounterVec // via: reconcile | baseline
	watched  prometheus.Gauge
	baseline *prometheus.CounterVec // outcome: closed | open | seen | error
}

func newReconcileMetrics(reg prometheus.Registerer) *reconcileMetrics {
	f := promauto.With(reg)
	m := &reconcileMetrics{
		ticks: f.NewCounterVec(prometheus.CounterOpts{Name: "wakegate_github_reconcile_ticks_total",
			Help: "Reconciliation passes by outcome (error: at least one repository failed)."}, []string{"outcome"}),
		calls: f.NewCounter(prometheus.CounterOpts{Name: "wakegate_github_reconcile_calls_total",
			Help: "API calls listing a watched repository's closed pull requests."}),
		closed: f.NewCounterVec(prometheus.CounterOpts{Name: "wakegate_github_reconciled_closed_total",
			Help: "github.pull_request.closed events journaled from the API because no webhook had brought them."}, []string{"via"}),
		watched: f.NewGauge(prometheus.GaugeOpts{Name: "wakegate_github_watched_repositories",
			Help: "Repositories the last reconciliation pass polled."}),
		baseline: f.NewCounterVec(prometheus.CounterOpts{Name: "wakegate_github_baseline_fetches_total",
			Help: "Pull requests fetched as a baseline when first subscribed to, by what they were."}, []string{"outcome"}),
	}
	for _, o := range []string{"ok", "error"} {
		m.ticks.WithLabelValues(o)
	}
	for _, v := range []string{"reconcile", "baseline"} {
		m.closed.WithLabelValues(v)
	}
	for _, o := range []string{"closed", "open", "error"} {
		m.baseline.WithLabelValues(o)
	}
	return m
}

// RegisterOffMetrics registers, at zero, the App metrics the alert rules
// read (the sweep's and the reconciliation's), for a process whose App is
// off: the series exist with every outcome, as they do with the App on,
// so a rule comparing outcomes never meets an absent one.
func RegisterOffMetrics(reg prometheus.Registerer) {
	newSweepMetrics(reg)
	newReconcileMetrics(reg)
}
