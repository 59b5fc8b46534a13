package llmguard

import (
	"errors"
	"slices"
	"sync/atomic"

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
	// metricRefused counts the requests the guardrails answered before
	// the router, whose llmgw_requests_total does not see them: a prompt
	// blocked. Its labels are those of llmgw_requests_total that the
	// overview and the traffic history read (model, status), so they
	// count these requests as the answers they are.
	metricRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llmgw", Subsystem: "guardrail", Name: "refused_requests_total",
		Help: "Requests the guardrails answered with an error before the router (a blocked prompt), by catalog model and HTTP status; llmgw_requests_total does not count them.",
	}, []string{"model", "status"})
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
	for _, c := range []prometheus.Collector{metricChecks, metricFindings, metricRefused, metricDuration} {
		if err := reg.Register(c); err != nil && !errors.As(err, &are) {
			return err
		}
	}
	return nil
}

// checkMetrics are one check's counters, by stage and outcome, each
// looked up in the vector on first use and kept: WithLabelValues checks
// and hashes each value and takes the vector's lock on every call, and a
// map keyed by the three labels hashes them on every request; here a
// count is two indexes and an atomic load.
type checkMetrics struct {
	counters [2][len(outcomes)]atomic.Pointer[prometheus.Counter]
}

var outcomes = [...]string{Skipped, Passed, Flagged, Redacted, Errored, Blocked}

func stageIndex(s Stage) int {
	if s == Output {
		return 1
	}
	return 0
}

// count counts a check's outcome on a stage. A nil m (a check not
// provisioned) counts through the vector.
func (m *checkMetrics) count(check string, stage Stage, outcome string) {
	o := slices.Index(outcomes[:], outcome)
	if m == nil || o < 0 {
		metricChecks.WithLabelValues(check, string(stage), outcome).Inc()
		return
	}
	p := &m.counters[stageIndex(stage)][o]
	c := p.Load()
	if c == nil {
		v := metricChecks.WithLabelValues(check, string(stage), outcome)
		c = &v
		p.Store(c)
	}
	(*c).Inc()
}

// stageDurations are the duration histogram's children, by stage.
var stageDurations [2]atomic.Pointer[prometheus.Observer]

func observeDuration(stage Stage, seconds float64) {
	p := &stageDurations[stageIndex(stage)]
	o := p.Load()
	if o == nil {
		v := metricDuration.WithLabelValues(string(stage))
		o = &v
		p.Store(o)
	}
	(*o).Observe(seconds)
}

func countFinding(check, kind string, a Action) {
	metricFindings.WithLabelValues(check, kind, string(a)).Inc()
}
