package llm

import (
	"errors"

	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llm/reqlog"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	replicasDesc = prometheus.NewDesc("llmgw_replicas", "Replicas by model and state.", []string{"model", "state"}, nil)

	mirrorBytesDesc = prometheus.NewDesc("llmgw_mirror_transfer_bytes_total",
		"Bytes the weights mirror moved, by kind (add, copy, fetch, download) and store.", []string{"kind", "store"}, nil)
	mirrorUpDesc = prometheus.NewDesc("llmgw_mirror_store_up",
		"Whether a store answered at the last reconciliation (1) or not (0).", []string{"store"}, nil)
	mirrorLagDesc = prometheus.NewDesc("llmgw_mirror_store_lag_versions",
		"Versions a store still lacks after the last reconciliation.", []string{"store"}, nil)
	mirrorLagBytesDesc = prometheus.NewDesc("llmgw_mirror_store_lag_bytes",
		"Bytes a store still lacks after the last reconciliation.", []string{"store"}, nil)
)

// mirrorCollector reports the running config's mirror at scrape time.
type mirrorCollector struct{ node *fleet.Node }

func (mirrorCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{mirrorBytesDesc, mirrorUpDesc, mirrorLagDesc, mirrorLagBytesDesc} {
		ch <- d
	}
}

func (c mirrorCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.node.Mirror()
	if m == nil {
		return
	}
	for k, n := range m.BytesMoved() {
		ch <- prometheus.MustNewConstMetric(mirrorBytesDesc, prometheus.CounterValue, float64(n), k[0], k[1])
	}
	for _, s := range m.Status().Stores {
		up := 0.0
		if s.Reachable {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(mirrorUpDesc, prometheus.GaugeValue, up, s.Name)
		ch <- prometheus.MustNewConstMetric(mirrorLagDesc, prometheus.GaugeValue, float64(s.LagVersions), s.Name)
		ch <- prometheus.MustNewConstMetric(mirrorLagBytesDesc, prometheus.GaugeValue, float64(s.LagBytes), s.Name)
	}
}

// fleetCollector reports each model's replicas by state at scrape time.
type fleetCollector struct{ app *App }

func (c fleetCollector) Describe(ch chan<- *prometheus.Desc) { ch <- replicasDesc }

func (c fleetCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.app.Status() {
		counts := map[fleet.State]int{fleet.ReplicaStarting: 0, fleet.ReplicaReady: 0, fleet.ReplicaDraining: 0}
		for _, r := range s.Replicas {
			counts[fleet.State(r.State)]++
		}
		if s.State == "starting" {
			counts[fleet.ReplicaStarting]++
		}
		for state, n := range counts {
			ch <- prometheus.MustNewConstMetric(replicasDesc, prometheus.GaugeValue, float64(n), s.Name, string(state))
		}
	}
}

func (a *App) registerMetrics(reg *prometheus.Registry) error {
	if reg == nil {
		return nil
	}
	for _, c := range append([]prometheus.Collector{fleet.MetricStarts, fleet.MetricQueueWait, fleetCollector{a}, mirrorCollector{a.node}}, reqlog.Collectors()...) {
		var are prometheus.AlreadyRegisteredError
		if err := reg.Register(c); err != nil && !errors.As(err, &are) {
			return err
		}
	}
	return nil
}
