package llmmcp

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The collectors live for the process, so counts survive reloads; each
// config's registry (the admin endpoint's /metrics) registers them again.
var (
	metricCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llmgw", Subsystem: "mcp", Name: "tool_calls_total",
		Help: "MCP tool calls through llm_mcp, by server, namespaced tool and outcome (ok, tool_error: the tool answered isError, failed: the server did not answer).",
	}, []string{"server", "tool", "outcome"})
	metricLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "llmgw", Subsystem: "mcp", Name: "tool_call_duration_seconds",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		Help:    "From llm_mcp receiving a tool call to its result, by server and namespaced tool.",
	}, []string{"server", "tool"})
	metricUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "llmgw", Subsystem: "mcp", Name: "upstream_up",
		Help: "1 while llmgw holds a session with the upstream MCP server, 0 while it is down or reconnecting.",
	}, []string{"server"})
	metricAuth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "llmgw", Subsystem: "mcp", Name: "oauth_tenants",
		Help: "Tenants holding OAuth tokens for an upstream MCP server, by state: authorized, or needs_authorization (a refresh or the server refused them; authorise again).",
	}, []string{"server", "state"})
)

func registerMetrics(reg *prometheus.Registry) error {
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{metricCalls, metricLatency, metricUp, metricAuth} {
		var are prometheus.AlreadyRegisteredError
		if err := reg.Register(c); err != nil && !errors.As(err, &are) {
			return err
		}
	}
	return nil
}

// toolMetrics are one tool's children, looked up once per tool.
type toolMetrics struct {
	ok, toolErr, failed prometheus.Counter
	latency             prometheus.Observer
}

var byTool sync.Map // server__tool → *toolMetrics

func toolMetricsFor(server, full string) *toolMetrics {
	if v, ok := byTool.Load(full); ok {
		return v.(*toolMetrics)
	}
	m := &toolMetrics{ok: metricCalls.WithLabelValues(server, full, "ok"), toolErr: metricCalls.WithLabelValues(server, full, "tool_error"),
		failed: metricCalls.WithLabelValues(server, full, "failed"), latency: metricLatency.WithLabelValues(server, full)}
	v, _ := byTool.LoadOrStore(full, m)
	return v.(*toolMetrics)
}

func (m *toolMetrics) observe(outcome string, d time.Duration) {
	switch outcome {
	case "ok":
		m.ok.Inc()
	case "tool_error":
		m.toolErr.Inc()
	default:
		m.failed.Inc()
	}
	m.latency.Observe(d.Seconds())
}

func setUp(server string, up bool) {
	v := 0.0
	if up {
		v = 1
	}
	metricUp.WithLabelValues(server).Set(v)
}

// countTokens sets the oauth_tenants gauges of a server.
func countTokens(oc *oauthClient) {
	ok, needs := 0, 0
	for _, e := range oc.tenants() {
		if rec := e.record(); rec != nil && rec.NeedsAuth {
			needs++
		} else if rec != nil {
			ok++
		}
	}
	metricAuth.WithLabelValues(oc.server, "authorized").Set(float64(ok))
	metricAuth.WithLabelValues(oc.server, "needs_authorization").Set(float64(needs))
}
