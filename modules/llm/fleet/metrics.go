package fleet

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The fleet's metrics; the app registers them.
var (
	MetricStarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llmgw", Name: "replica_starts_total",
		Help: "Replica starts by model and outcome (ok or failed).",
	}, []string{"model", "outcome"})
	MetricQueueWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "llmgw", Name: "queue_wait_seconds",
		Help:    "How long requests waited for a replica (on-demand starts, restarts, full replicas).",
		Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
	}, []string{"model"})
)

// initMetrics makes a model's series, reading 0, when its fleet is made:
// starts that succeeded and failed, and the queue's wait. An alert on
// increase(llmgw_replica_starts_total{outcome="failed"}[…]) then fires on
// a model's first failed start too.
func initMetrics(model string) {
	MetricStarts.WithLabelValues(model, "ok")
	MetricStarts.WithLabelValues(model, "failed")
	MetricQueueWait.WithLabelValues(model)
}
