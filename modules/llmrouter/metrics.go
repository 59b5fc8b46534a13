package llmrouter

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/openai"
)

// The collectors live for the process, so counts survive reloads; each
// config's registry (the admin endpoint's /metrics) registers them again.
var (
	latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	tokenBuckets   = []float64{.001, .0025, .005, .01, .02, .04, .08, .16, .32, .64}

	metricRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llmgw", Name: "requests_total",
		Help: "Requests the router answered, by catalog model, engine, API (chat_completions, completions, embeddings, responses, messages) and HTTP status.",
	}, []string{"model", "engine", "api", "status"})
	metricTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llmgw", Name: "tokens_total",
		Help: "Tokens in answers the router served, by model and kind (prompt or completion).",
	}, []string{"model", "kind"})
	metricTTFT = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "llmgw", Name: "time_to_first_token_seconds", Buckets: latencyBuckets,
		Help: "From the request's arrival to the first streamed event of the answer.",
	}, []string{"model"})
	metricITL = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "llmgw", Name: "inter_token_latency_seconds", Buckets: tokenBuckets,
		Help: "Mean time between streamed events, one observation per stream.",
	}, []string{"model"})
	metricUpstream = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "llmgw", Name: "upstream_duration_seconds", Buckets: latencyBuckets,
		Help: "From sending to the replica to the answer's last byte.",
	}, []string{"model"})
	metricTotal = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "llmgw", Name: "request_duration_seconds", Buckets: latencyBuckets,
		Help: "From the router receiving the request to the answer's last byte.",
	}, []string{"model"})
	metricProviderRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llmgw", Name: "provider_requests_total",
		Help: "Tries of a model's providers, by model, provider and outcome: ok (an answer), 429, 5xx, error (not reached).",
	}, []string{"model", "provider", "outcome"})
	metricProviderTTFB = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "llmgw", Name: "provider_time_to_first_byte_seconds", Buckets: latencyBuckets,
		Help: "From sending to a model's provider to its answer's headers, by model and provider: what the cost and latency policies measure.",
	}, []string{"model", "provider"})
)

func registerMetrics(reg *prometheus.Registry, app *llm.App) error {
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{metricRequests, metricTokens, metricTTFT, metricITL, metricUpstream, metricTotal,
		metricPrefixTokens, metricPrefixPicks, metricProviderRequests, metricProviderTTFB, catalogSeries{app}} {
		var are prometheus.AlreadyRegisteredError
		if err := reg.Register(c); err != nil && !errors.As(err, &are) {
			return err
		}
	}
	return nil
}

// modelMetrics are one model's children, looked up once.
type modelMetrics struct {
	prompt, completion         prometheus.Counter
	ttft, itl, upstream, total prometheus.Observer
}

var (
	byModel  sync.Map // model → *modelMetrics
	byStatus sync.Map // statusKey → prometheus.Counter
)

type statusKey struct {
	model, engine, api string
	status             int
}

func metricsFor(model string) *modelMetrics {
	if v, ok := byModel.Load(model); ok {
		return v.(*modelMetrics)
	}
	m := &modelMetrics{prompt: metricTokens.WithLabelValues(model, "prompt"), completion: metricTokens.WithLabelValues(model, "completion"),
		ttft: metricTTFT.WithLabelValues(model), itl: metricITL.WithLabelValues(model),
		upstream: metricUpstream.WithLabelValues(model), total: metricTotal.WithLabelValues(model)}
	v, _ := byModel.LoadOrStore(model, m)
	return v.(*modelMetrics)
}

// countRequest counts an answer; api is the API's name (Request.API, or
// the endpoint for chat completions' family).
func countRequest(model, engine, api string, status int) {
	requestCounter(model, engine, api, status).Inc()
}

// requestCounter is the child of llmgw_requests_total for an answer,
// made on first use.
func requestCounter(model, engine, api string, status int) prometheus.Counter {
	k := statusKey{model, engine, api, status}
	v, ok := byStatus.Load(k)
	if !ok {
		v, _ = byStatus.LoadOrStore(k, metricRequests.WithLabelValues(model, engine, apiLabel(api), strconv.Itoa(status)))
	}
	return v.(prometheus.Counter)
}

// catalogSeries makes the series of models added at runtime (POST
// /llm/models, which does not provision the router again) when the
// registry is scraped: they read 0 from the next scrape on. It reports
// no metric of its own.
type catalogSeries struct{ app *llm.App }

func (catalogSeries) Describe(chan<- *prometheus.Desc) {}

func (c catalogSeries) Collect(chan<- prometheus.Metric) { initModelMetrics(c.app) }

// initModelMetrics makes the series of every catalog model, reading 0,
// when a config is provisioned: a model's successful chat completions,
// its tokens and its latency histograms. A dashboard then shows a model
// no one asked yet, and rates and ratios have a first sample to start
// from (a counter that appears at 1 has no increase for Prometheus).
func initModelMetrics(app *llm.App) {
	for _, s := range app.Status() {
		engine := ""
		if m, err := app.Lookup(s.Name); err == nil {
			engine = m.Engine
		}
		metricsFor(s.Name)
		requestCounter(s.Name, engine, openai.ChatCompletions, http.StatusOK)
	}
}

// observe records one served answer.
func observe(model string, start, sent time.Time, st *streamState, prompt, completion int64) {
	m := metricsFor(model)
	end := time.Now()
	m.total.Observe(end.Sub(start).Seconds())
	m.upstream.Observe(end.Sub(sent).Seconds())
	m.prompt.Add(float64(prompt))
	m.completion.Add(float64(completion))
	if st == nil || st.first.IsZero() {
		return
	}
	m.ttft.Observe(st.first.Sub(start).Seconds())
	if st.events > 1 {
		m.itl.Observe(st.last.Sub(st.first).Seconds() / float64(st.events-1))
	}
}

// apiLabel names an API for metrics: chat_completions, completions,
// embeddings, responses or messages.
func apiLabel(api string) string {
	if api == openai.ChatCompletions {
		return "chat_completions"
	}
	return api
}
