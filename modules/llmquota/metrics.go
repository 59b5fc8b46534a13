package llmquota

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// The collectors live for the process, so their counts survive reloads;
// each config's registry (served at the admin endpoint's /metrics)
// registers them again.
var (
	usageLabels    = []string{"org", "team", "project", "key", "model"}
	metricRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llmgw", Subsystem: "usage", Name: "requests_total",
		Help: "Requests admitted and settled, by tenant and model.",
	}, usageLabels)
	metricTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llmgw", Subsystem: "usage", Name: "tokens_total",
		Help: "Tokens used, by tenant, model and direction (input or output).",
	}, append(append([]string{}, usageLabels...), "direction"))
	metricCost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llmgw", Subsystem: "usage", Name: "cost_total",
		Help: "Cost of the tokens used, in the currency of the catalog's prices.",
	}, usageLabels)
	metricDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "llmgw", Subsystem: "quota", Name: "settlements_dropped_total",
		Help: "Settlements dropped because Redis was away so long that more than a million waited.",
	})
	metricRejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llmgw", Subsystem: "quota", Name: "rejections_total",
		Help: "Requests refused, by the level and the limit that refused them.",
	}, []string{"level", "limit"})
)

func registerMetrics(reg *prometheus.Registry) error {
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{metricRequests, metricTokens, metricCost, metricRejections, metricDropped} {
		var are prometheus.AlreadyRegisteredError
		if err := reg.Register(c); err != nil && !errors.As(err, &are) {
			return err
		}
	}
	return nil
}

func recordUsage(t *tenancy.Tenant, model string, s *settlement) {
	c := countersFor(t, model)
	c.requests.Inc()
	if s.costMicros > 0 {
		c.cost.Add(float64(s.costMicros) / 1e6)
	}
	c.input.Add(float64(s.prompt))
	c.output.Add(float64(s.completion))
}
