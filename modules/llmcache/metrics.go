package llmcache

import (
	"errors"
	"net/http"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmgw/llmgw/modules/openai"
)

var metricOutcomes = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "llmgw", Subsystem: "cache", Name: "requests_total",
	Help: "Requests llm_cache saw, by model and outcome (hit-exact, hit-semantic, miss, bypass).",
}, []string{"model", "outcome"})

func registerMetrics(reg *prometheus.Registry) error {
	if reg == nil {
		return nil
	}
	var are prometheus.AlreadyRegisteredError
	if err := reg.Register(metricOutcomes); err != nil && !errors.As(err, &are) {
		return err
	}
	return nil
}

// outcomeCounters keeps the children counted on every request, as the
// router's metrics do (WithLabelValues takes the vector's lock): a
// model's, made together when it is first seen, found by its name.
var outcomeCounters sync.Map // model → *[len(outcomes)]prometheus.Counter

var outcomes = [...]string{"miss", "bypass", "hit-exact", "hit-semantic"}

func countOutcome(model, outcome string) {
	o := slices.Index(outcomes[:], outcome)
	if o < 0 {
		metricOutcomes.WithLabelValues(model, outcome).Inc()
		return
	}
	m, ok := outcomeCounters.Load(model)
	if !ok {
		var cs [len(outcomes)]prometheus.Counter
		for i, name := range outcomes {
			cs[i] = metricOutcomes.WithLabelValues(model, name)
		}
		m, _ = outcomeCounters.LoadOrStore(model, &cs)
	}
	m.(*[len(outcomes)]prometheus.Counter)[o].Inc()
}

// logOutcome adds the cache outcome to the request's access log entry.
func logOutcome(r *http.Request, outcome string) {
	openai.Log(r).Cache = outcome
}
