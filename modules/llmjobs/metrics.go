package llmjobs

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// The counters live for the process, so their counts survive reloads;
// each config's registry (the admin endpoint's /metrics) registers them
// again.
var (
	metricFinished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llmgw", Subsystem: "jobs", Name: "finished_total",
		Help: "Jobs that ended, by model and state (succeeded, failed, cancelled).",
	}, []string{"model", "state"})
	metricRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llmgw", Subsystem: "jobs", Name: "refused_total",
		Help: "Jobs refused before they were queued, by reason (job_quota_exceeded, queue_full).",
	}, []string{"reason"})
	metricRunSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "llmgw", Subsystem: "jobs", Name: "run_seconds",
		Help:    "How long jobs ran on a replica, by model.",
		Buckets: []float64{0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800},
	}, []string{"model"})
	jobsDesc = prometheus.NewDesc("llmgw_jobs", "Jobs queued and running now, by model and state.", []string{"model", "state"}, nil)
)

// jobsCollector reports the service's queued and running jobs at scrape
// time.
type jobsCollector struct{ s *service }

func (jobsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- jobsDesc }

func (c jobsCollector) Collect(ch chan<- prometheus.Metric) {
	for model, byState := range c.s.counts() {
		for state, n := range byState {
			ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(n), model, state)
		}
	}
}

// registerMetrics registers the jobs' collectors with reg.
func registerMetrics(reg *prometheus.Registry, s *service) error {
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{metricFinished, metricRefused, metricRunSeconds, jobsCollector{s}} {
		var are prometheus.AlreadyRegisteredError
		if err := reg.Register(c); err != nil && !errors.As(err, &are) {
			return err
		}
	}
	return nil
}
