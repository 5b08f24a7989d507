package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// metrics of the gateway. Labels never carry tenant, party or repo names.
type metrics struct {
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	webhooks    *prometheus.CounterVec
	pushed      *prometheus.CounterVec
	storeErrors prometheus.Counter
	panics      prometheus.Counter
	inflight    prometheus.Gauge
	unfinished  prometheus.Gauge
	// bodiesRefused counts bodies refused while they arrived: per_client,
	// timeout, budget.
	bodiesRefused *prometheus.CounterVec
	// operatorLogins counts operator password logins that failed, and
	// those refused unseen while their address was throttled.
	operatorLogins *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "wakegate_gateway_requests_total", Help: "HTTP requests by route and status class.",
		}, []string{"route", "status_class"}),
		latency: f.NewHistogramVec(prometheus.HistogramOpts{
			Name: "wakegate_gateway_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route"}),
		webhooks: f.NewCounterVec(prometheus.CounterOpts{
			Name: "wakegate_gateway_webhooks_total", Help: "GitHub deliveries by outcome.",
		}, []string{"outcome"}),
		pushed: f.NewCounterVec(prometheus.CounterOpts{
			Name: "wakegate_gateway_pushed_events_total", Help: "Agent events by outcome.",
		}, []string{"outcome"}),
		storeErrors: f.NewCounter(prometheus.CounterOpts{
			Name: "wakegate_gateway_store_errors_total", Help: "Commits that failed because Redis did not answer.",
		}),
		panics: f.NewCounter(prometheus.CounterOpts{
			Name: "wakegate_gateway_panics_total", Help: "Handler panics recovered.",
		}),
		inflight: f.NewGauge(prometheus.GaugeOpts{
			Name: "wakegate_gateway_inflight_body_bytes", Help: "Bytes of request bodies being read or committed.",
		}),
		unfinished: f.NewGauge(prometheus.GaugeOpts{
			Name: "wakegate_gateway_unfinished_bodies", Help: "Request bodies still arriving.",
		}),
		bodiesRefused: f.NewCounterVec(prometheus.CounterOpts{
			Name: "wakegate_gateway_bodies_refused_total", Help: "Request bodies refused while they arrived, by reason (per_client, timeout, budget).",
		}, []string{"reason"}),
	}
	m.operatorLogins = f.NewCounterVec(prometheus.CounterOpts{
		Name: "wakegate_gateway_operator_logins_refused_total", Help: "Operator password logins refused, by outcome (failed: a wrong password; throttled: refused unseen, too many failures from the address).",
	}, []string{"outcome"})
	for _, o := range []string{"failed", "throttled"} {
		m.operatorLogins.WithLabelValues(o)
	}
	for _, r := range []string{"per_client", "timeout", "budget"} {
		m.bodiesRefused.WithLabelValues(r)
	}
	for _, o := range []string{"accepted", "ignored", "duplicate", "unmapped", "ping", "refused"} {
		m.webhooks.WithLabelValues(o)
	}
	for _, o := range []string{"accepted", "duplicate", "refused"} {
		m.pushed.WithLabelValues(o)
	}
	return m
}
