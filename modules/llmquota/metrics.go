package llmquota

import (
	"errors"
	"net/url"

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

// registerMetrics registers the package's collectors and the store's
// gauge: handlers sharing a store share its gauge.
func registerMetrics(reg *prometheus.Registry, up storeUp) error {
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{metricRequests, metricTokens, metricCost, metricRejections, metricDropped, up} {
		var are prometheus.AlreadyRegisteredError
		if err := reg.Register(c); err != nil && !errors.As(err, &are) {
			return err
		}
	}
	return nil
}

// storeUp reports at scrape time whether a counter store is up: 0 while
// a Redis store is marked down (breaker.go), that is from a failed use
// until a probe reaches Redis again; 1 otherwise.
type storeUp struct {
	desc *prometheus.Desc
	st   store
}

func newStoreUp(addr string, st store) storeUp {
	return storeUp{prometheus.NewDesc("llmgw_quota_store_up",
		"Whether llm_quota's counter store is up (1) or marked down after a failed use (0; probed every second until it answers), by store (memory, or a Redis URL without its credentials).",
		nil, prometheus.Labels{"store": storeLabel(addr)}), st}
}

func (c storeUp) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c storeUp) Collect(ch chan<- prometheus.Metric) {
	up := 1.0
	if r, ok := c.st.(*redisStore); ok && r.isDown() != nil {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, up)
}

// storeLabel names a store for metrics: memory, or its Redis URL's
// scheme, host and database, never its user, password or query.
func storeLabel(addr string) string {
	if addr == "" || addr == "memory" {
		return "memory"
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "redis"
	}
	return u.Scheme + "://" + u.Host + u.Path
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
