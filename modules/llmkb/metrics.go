package llmkb

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var metricSearch = prometheus.NewHistogram(prometheus.HistogramOpts{
	Namespace: "llmgw", Subsystem: "kb", Name: "search_seconds",
	Help:    "Time of knowledge-base searches (the search endpoint and retrieval for file_search and chat), embedding the query included.",
	Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
})

var metricIngested = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "llmgw", Subsystem: "kb", Name: "ingested_files_total",
	Help: "Files of vector stores whose ingestion ended, by status (completed, failed).",
}, []string{"status"})

func observeSearch(d time.Duration) { metricSearch.Observe(d.Seconds()) }

// registerMetrics registers the package's metrics and the gauges of the
// service's index and queue (read when scraped).
func registerMetrics(reg *prometheus.Registry, s *service) error {
	if reg == nil {
		return nil
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "llmgw", Subsystem: "kb", Name: name, Help: help}, f)
	}
	for _, c := range []prometheus.Collector{
		metricSearch, metricIngested,
		gauge("chunks", "Chunks searchable in the knowledge bases' index on this node.", func() float64 { return float64(s.index().Stats().Chunks) }),
		gauge("files", "Files of vector stores searchable on this node.", func() float64 { return float64(s.index().Stats().Files) }),
		gauge("index_bytes", "Approximate memory the knowledge bases' index holds.", func() float64 { return float64(s.index().Stats().Bytes) }),
		gauge("ingest_queue", "Files waiting to be ingested on this node.", func() float64 { return float64(s.queue.len()) }),
	} {
		var are prometheus.AlreadyRegisteredError
		if err := reg.Register(c); err != nil && !errors.As(err, &are) {
			return err
		}
	}
	return nil
}
