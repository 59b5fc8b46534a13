package llmguard

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	metricChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llmgw", Subsystem: "guardrail", Name: "checks_total",
		Help: "Guardrail check outcomes by check, stage (input, output) and outcome (passed, redacted, blocked, flagged, skipped, errored).",
	}, []string{"check", "stage", "outcome"})
	metricFindings = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llmgw", Subsystem: "guardrail", Name: "findings_total",
		Help: "Values guardrail checks found, by check, kind (EMAIL, CARD, a pattern's name …) and action.",
	}, []string{"check", "kind", "action"})
	metricDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "llmgw", Subsystem: "guardrail", Name: "duration_seconds",
		Help:    "Time guardrails took per request and stage (output: summed over a stream's chunks).",
		Buckets: []float64{0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5},
	}, []string{"stage"})
)

func registerMetrics(reg *prometheus.Registry) error {
	if reg == nil {
		return nil
	}
	var are prometheus.AlreadyRegisteredError
	for _, c := range []prometheus.Collector{metricChecks, metricFindings, metricDuration} {
		if err := reg.Register(c); err != nil && !errors.As(err, &are) {
			return err
		}
	}
	return nil
}

// checkCounters and stageDurations keep the children counted on every
// request, as the router's metrics do: WithLabelValues checks and hashes
// each value and takes the vector's lock on every call (185ns a count
// from both processors, 60ns through the map).
var (
	checkCounters  sync.Map // [3]string{check, stage, outcome} → prometheus.Counter
	stageDurations sync.Map // Stage → prometheus.Observer
)

func countCheck(check string, stage Stage, outcome string) {
	k := [3]string{check, string(stage), outcome}
	c, ok := checkCounters.Load(k)
	if !ok {
		c, _ = checkCounters.LoadOrStore(k, metricChecks.WithLabelValues(check, string(stage), outcome))
	}
	c.(prometheus.Counter).Inc()
}

func observeDuration(stage Stage, seconds float64) {
	o, ok := stageDurations.Load(stage)
	if !ok {
		o, _ = stageDurations.LoadOrStore(stage, metricDuration.WithLabelValues(string(stage)))
	}
	o.(prometheus.Observer).Observe(seconds)
}

func countFinding(check, kind string, a Action) {
	metricFindings.WithLabelValues(check, kind, string(a)).Inc()
}
