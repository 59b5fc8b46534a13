package llm

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	metricStarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llmgw", Name: "replica_starts_total",
		Help: "Replica starts by model and outcome (ok or failed).",
	}, []string{"model", "outcome"})
	metricQueueWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "llmgw", Name: "queue_wait_seconds",
		Help:    "How long requests waited for a replica (on-demand starts, restarts, full replicas).",
		Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
	}, []string{"model"})
	replicasDesc = prometheus.NewDesc("llmgw_replicas", "Replicas by model and state.", []string{"model", "state"}, nil)
)

// fleetCollector reports each model's replicas by state at scrape time.
type fleetCollector struct{ app *App }

func (c fleetCollector) Describe(ch chan<- *prometheus.Desc) { ch <- replicasDesc }

func (c fleetCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.app.Status() {
		counts := map[string]int{ReplicaStarting: 0, ReplicaReady: 0, ReplicaDraining: 0}
		for _, r := range s.Replicas {
			counts[r.State]++
		}
		if s.State == "starting" {
			counts[ReplicaStarting]++
		}
		for state, n := range counts {
			ch <- prometheus.MustNewConstMetric(replicasDesc, prometheus.GaugeValue, float64(n), s.Name, state)
		}
	}
}

func (a *App) registerMetrics(reg *prometheus.Registry) error {
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{metricStarts, metricQueueWait, fleetCollector{a}} {
		var are prometheus.AlreadyRegisteredError
		if err := reg.Register(c); err != nil && !errors.As(err, &are) {
			return err
		}
	}
	return nil
}
