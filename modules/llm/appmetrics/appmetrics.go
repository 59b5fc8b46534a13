// Package appmetrics is the llm app's Prometheus collectors that read
// its state at scrape time: the replicas of each model by state, and the
// weights mirror's transfers and stores.
package appmetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
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

// Mirror reports the node's mirror at scrape time.
func Mirror(node *fleet.Node) prometheus.Collector { return mirrorCollector{node} }

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
type fleetCollector struct{ status func() []llmapi.ModelStatus }

// Fleets reports each model's replicas by state, from status, at scrape
// time.
func Fleets(status func() []llmapi.ModelStatus) prometheus.Collector { return fleetCollector{status} }

func (c fleetCollector) Describe(ch chan<- *prometheus.Desc) { ch <- replicasDesc }

func (c fleetCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.status() {
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
