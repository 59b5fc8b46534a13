package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape parses the admin endpoint's /metrics with Prometheus's parser.
func scrape(t *testing.T, g *gateway) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := adminDo(t, g, "GET", "/metrics", "")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// value finds a series by its labels and returns its counter, gauge or
// histogram-count value.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

func TestMetrics(t *testing.T) {
	g := startGatewayBefore(t, cacheModels, "\t\tllm_cache")
	c := g.client()
	chatWith(t, c, "sim-chat", "count me")
	chatWith(t, c, "sim-chat", "count me") // a cache hit: the router does not see it
	post(t, g.base+"/v1/chat/completions", `{"model":"sim-chat","stream":true,"messages":[{"role":"user","content":"stream me"}]}`)
	post(t, g.base+"/v1/chat/completions", `{"model":"broken","messages":[{"role":"user","content":"x"}]}`)
	before := scrape(t, g)
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"llmgw_requests_total", map[string]string{"model": "sim-chat", "engine": "sim", "status": "200"}, 2},
		{"llmgw_requests_total", map[string]string{"model": "broken", "status": "500"}, 1},
		{"llmgw_tokens_total", map[string]string{"model": "sim-chat", "kind": "completion"}, 16},
		{"llmgw_time_to_first_token_seconds", map[string]string{"model": "sim-chat"}, 1},
		{"llmgw_inter_token_latency_seconds", map[string]string{"model": "sim-chat"}, 1},
		{"llmgw_request_duration_seconds", map[string]string{"model": "sim-chat"}, 2},
		{"llmgw_replicas", map[string]string{"model": "sim-chat", "state": "ready"}, 1},
		{"llmgw_replica_starts_total", map[string]string{"model": "sim-chat", "outcome": "ok"}, 1},
		{"llmgw_cache_requests_total", map[string]string{"model": "sim-chat", "outcome": "hit-exact"}, 1},
		{"llmgw_cache_requests_total", map[string]string{"model": "sim-chat", "outcome": "miss"}, 2},
	} {
		if got, ok := value(before, tc.name, tc.labels); !ok || got != tc.want {
			t.Errorf("%s%v: got %v (present %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	// The access log names the engine and the cache outcome.
	waitFor(t, 5*time.Second, "llm_engine and llm_cache in the access log", func() bool {
		l := g.logs.String()
		return strings.Contains(l, `"llm_engine":"sim"`) && strings.Contains(l, `"llm_cache":"hit-exact"`) && strings.Contains(l, `"llm_cache":"miss"`)
	})
	// And they move.
	chatWith(t, c, "sim-chat", "count me again")
	after := scrape(t, g)
	if got, _ := value(after, "llmgw_requests_total", map[string]string{"model": "sim-chat", "status": "200"}); got != 3 {
		t.Errorf("requests after one more: %v, want 3", got)
	}
}

func TestTracePropagatesToTheEngine(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "none") // spans are made, not exported
	// A stand-in provider that records the trace context it receives.
	var got atomic.Value
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Traceparent"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	defer provider.Close()
	models := fmt.Sprintf(`
		model remote {
			engine openai
			option base_url %s/v1
		}`, provider.URL)
	plain := startGateway(t, models, "")
	chatOnce(t, plain, "remote")
	if tp, _ := got.Load().(string); tp != "" {
		t.Errorf("without tracing the engine got a traceparent %q", tp)
	}
	traced := startGatewayBefore(t, models, "\t\ttracing {\n\t\t\tspan llmgw\n\t\t}")
	chatOnce(t, traced, "remote")
	tp, _ := got.Load().(string)
	if !regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$`).MatchString(tp) || strings.Contains(tp, strings.Repeat("0", 32)) {
		t.Errorf("the engine got traceparent %q, want a W3C trace context", tp)
	}
}

// A configured model's series are there, at 0, before its first request:
// a dashboard shows it, and rates have a sample to start from.
func TestMetricsZeroBeforeFirstRequest(t *testing.T) {
	g := startGateway(t, simModels, "")
	checkZeroSeries(t, scrape(t, g), "sim-chat", "sim-embed")
	// A model added at runtime: from the next scrape on.
	if code, body := adminDo(t, g, "POST", "/llm/models", `{"name":"added","engine":"sim","scaling":{"min":0,"max":1}}`); code != 200 && code != 201 {
		t.Fatalf("adding a model: %d %s", code, body)
	}
	scrape(t, g)
	checkZeroSeries(t, scrape(t, g), "added")
}

// checkZeroSeries asserts that the models' series are there at 0 (starts
// that succeeded may have happened).
func checkZeroSeries(t *testing.T, fams map[string]*dto.MetricFamily, models ...string) {
	t.Helper()
	for _, model := range models {
		for _, tc := range []struct {
			name   string
			labels map[string]string
		}{
			{"llmgw_requests_total", map[string]string{"model": model, "engine": "sim", "api": "chat_completions", "status": "200"}},
			{"llmgw_tokens_total", map[string]string{"model": model, "kind": "prompt"}},
			{"llmgw_tokens_total", map[string]string{"model": model, "kind": "completion"}},
			{"llmgw_request_duration_seconds", map[string]string{"model": model}},
			{"llmgw_upstream_duration_seconds", map[string]string{"model": model}},
			{"llmgw_time_to_first_token_seconds", map[string]string{"model": model}},
			{"llmgw_inter_token_latency_seconds", map[string]string{"model": model}},
			{"llmgw_replica_starts_total", map[string]string{"model": model, "outcome": "ok"}},
			{"llmgw_replica_starts_total", map[string]string{"model": model, "outcome": "failed"}},
			{"llmgw_queue_wait_seconds", map[string]string{"model": model}},
		} {
			got, ok := value(fams, tc.name, tc.labels)
			if !ok {
				t.Errorf("%s%v: missing before the first request, want it at 0", tc.name, tc.labels)
			} else if got != 0 && tc.labels["outcome"] != "ok" { // a replica may have started at boot
				t.Errorf("%s%v: got %v, want 0", tc.name, tc.labels, got)
			}
		}
	}
}

// llmgw_quota_store_up follows the Redis store: 1 while it answers, 0
// from the first request that could not reach it, 1 once it is back. The
// label names the store without its password.
func TestQuotaStoreUpMetric(t *testing.T) {
	redis := startRedis(t)
	store := fmt.Sprintf("redis://:hunter2@127.0.0.1:%d/0", redis.port)
	g := startQuotaGateway(t, quotaModels+tenancyBlock("", "", "", ""), "\t\t\tstore "+store)
	labels := map[string]string{"store": fmt.Sprintf("redis://127.0.0.1:%d/0", redis.port)}
	up := func() float64 {
		v, ok := value(scrape(t, g), "llmgw_quota_store_up", labels)
		if !ok {
			t.Fatalf("llmgw_quota_store_up%v is missing", labels)
		}
		return v
	}
	if _, e := chatErr(keyClient(g, "secret-1"), "sim-chat"); e != nil {
		t.Fatalf("before the outage: %v", e)
	}
	if v := up(); v != 1 {
		t.Errorf("while Redis answers: got %v, want 1", v)
	}
	redis.stop()
	if _, e := chatErr(keyClient(g, "secret-1"), "sim-chat"); e == nil || e.StatusCode != 503 {
		t.Fatalf("during the outage: got %+v, want 503", e)
	}
	if v := up(); v != 0 {
		t.Errorf("during the outage: got %v, want 0", v)
	}
	redis.start()
	waitFor(t, 10*time.Second, "the store to be up again", func() bool { return up() == 1 })
	if _, body := adminDo(t, g, "GET", "/metrics", ""); bytes.Contains(body, []byte("hunter2")) {
		t.Error("/metrics shows the store's password")
	}
}
