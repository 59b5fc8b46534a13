package llmcache

import (
	"errors"
	"net/http"
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
// router's metrics do (WithLabelValues takes the vector's lock).
var outcomeCounters sync.Map // [2]string{model, outcome} → prometheus.Counter

func countOutcome(model, outcome string) {
	k := [2]string{model, outcome}
	c, ok := outcomeCounters.Load(k)
	if !ok {
		c, _ = outcomeCounters.LoadOrStore(k, metricOutcomes.WithLabelValues(model, outcome))
	}
	c.(prometheus.Counter).Inc()
}

// logOutcome adds the cache outcome to the request's access log entry.
func logOutcome(r *http.Request, outcome string) {
	openai.Log(r).Cache = outcome
}
