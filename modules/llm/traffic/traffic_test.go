package traffic

import (
	"context"
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// metrics stand for the router's: a registry of its own per test.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	tokens   *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	ttft     *prometheus.HistogramVec
	ready    map[string]int64 // on this node
	node     string
}

func newMetrics() *metrics {
	b := []float64{.1, .25, .5, 1, 2.5}
	m := &metrics{reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmgw_requests_total"}, []string{"model", "status"}),
		tokens:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmgw_tokens_total"}, []string{"model", "kind"}),
		latency:  prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "llmgw_request_duration_seconds", Buckets: b}, []string{"model"}),
		ttft:     prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "llmgw_time_to_first_token_seconds", Buckets: b}, []string{"model"}),
		ready:    map[string]int64{"chat": 2}}
	m.reg.MustRegister(m.requests, m.tokens, m.latency, m.ttft)
	return m
}

// answer counts an answer of model as the router does.
func (m *metrics) answer(model string, status int, secs float64, tokens int) {
	m.requests.WithLabelValues(model, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(model).Observe(secs)
	m.ttft.WithLabelValues(model).Observe(secs / 2)
	m.tokens.WithLabelValues(model, "completion").Add(float64(tokens))
}

func (m *metrics) options(now func() time.Time) Options {
	return Options{Gather: m.reg.Gather, Now: now, Status: func() []llmapi.ModelStatus {
		var out []llmapi.ModelStatus
		for model, n := range m.ready {
			s := llmapi.ModelStatus{Name: model, Replicas: []llmapi.ReplicaStatus{{State: "starting"}}}
			if m.node != "" { // in a cluster: a replica of another node, which counts it
				s.Replicas = append(s.Replicas, llmapi.ReplicaStatus{State: "ready", Node: "elsewhere"})
			}
			for range n {
				s.Replicas = append(s.Replicas, llmapi.ReplicaStatus{State: "ready", Node: m.node})
			}
			out = append(out, s)
		}
		return out
	}}
}

var hour = Range{Window: time.Hour, Step: time.Minute}

func last(s llmapi.TrafficSeries, back int) llmapi.TrafficPoint {
	return s.Points[len(s.Points)-1-back]
}

func sumRequests(s llmapi.TrafficSeries) (n int64) {
	for _, p := range s.Points {
		n += p.Requests
	}
	return n
}

// A reload opens the new config's history before the old one closes:
// the history goes on, and what the counters counted before the reload
// is not counted again. Once no config holds it, it is forgotten.
func TestTrafficAcrossReload(t *testing.T) {
	ctx := context.Background()
	m := newMetrics()
	clock := time.Date(2026, 1, 2, 15, 0, 30, 0, time.UTC)
	now := func() time.Time { return clock }
	for range 5 {
		m.answer("chat", 200, .3, 10)
	}
	old := Open(m.options(now))
	if err := old.Sample(ctx, clock); err != nil {
		t.Fatal(err)
	}
	next := Open(m.options(now))
	old.Close()
	m.answer("chat", 502, .3, 0)
	m.answer("chat", 429, .3, 0)
	m.answer("chat", 400, .3, 0)
	clock = clock.Add(3 * time.Minute)
	h, err := next.Read(ctx, hour, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := sumRequests(h.Overall); got != 8 {
		t.Errorf("after a reload the history counts %d requests, want 8", got)
	}
	then, now3 := last(h.Overall, 3), last(h.Overall, 0)
	if then.Requests != 5 || then.CompletionTokens != 50 || then.Errors != 0 {
		t.Errorf("three minutes ago: %+v, want 5 requests, 50 tokens, no errors", then)
	}
	if now3.Requests != 3 || now3.Errors != 2 || now3.ClientErrors != 1 {
		t.Errorf("now: %+v, want 3 requests, 2 errors (502, 429), 1 client error", now3)
	}
	if now3.ReplicasReady == nil || *now3.ReplicasReady != 2 {
		t.Errorf("replicas ready now: %v, want 2", now3.ReplicasReady)
	}
	if len(h.Models) != 1 || h.Models[0].Model != "chat" {
		t.Errorf("models %+v, want chat", h.Models)
	}
	next.Close()
	again := Open(Options{Gather: prometheus.NewRegistry().Gather, Now: now})
	defer again.Close()
	if h, _ := again.Read(ctx, hour, ""); len(h.Models) != 0 {
		t.Errorf("a history no config held is still there: %+v", h.Models)
	}
}

// store is a Store in memory, or one that does not answer.
type store struct {
	counts map[int64]map[string]int64
	gauges map[int64]map[[2]string]int64 // node, key
	node   string
	down   error
}

func newStore() *store {
	return &store{counts: map[int64]map[string]int64{}, gauges: map[int64]map[[2]string]int64{}}
}

func (s *store) AddTraffic(_ context.Context, minute int64, delta, gauges map[string]int64) error {
	if s.down != nil {
		return s.down
	}
	if s.counts[minute] == nil {
		s.counts[minute], s.gauges[minute] = map[string]int64{}, map[[2]string]int64{}
	}
	for k, d := range delta {
		s.counts[minute][k] += d
	}
	for k, n := range gauges {
		s.gauges[minute][[2]string{s.node, k}] = n
	}
	return nil
}

func (s *store) ReadTraffic(_ context.Context, from, to int64, add func(int64, string, string, int64)) error {
	if s.down != nil {
		return s.down
	}
	for m := from; m < to; m++ {
		for k, n := range s.counts[m] {
			add(m, "", k, n)
		}
		for k, n := range s.gauges[m] {
			add(m, k[0], k[1], n)
		}
	}
	return nil
}

// In a cluster every node adds its answers and sets its replicas ready:
// the history sums both nodes' answers and their ready replicas. A minute
// the store does not take stays on the node; a read the store does not
// answer fails with the store's error.
func TestTrafficCluster(t *testing.T) {
	ctx := context.Background()
	s := newStore()
	clock := time.Date(2026, 1, 2, 15, 0, 30, 0, time.UTC)
	now := func() time.Time { return clock }
	m1, m2 := newMetrics(), newMetrics()
	m2.ready = map[string]int64{"chat": 1}
	m1.node, m2.node = "n1", "n2"
	m1.answer("chat", 200, .3, 10)
	m2.answer("chat", 500, .3, 0)
	m2.answer("chat", 200, .3, 10)
	// Each node's record is its own process's: here one after the other.
	s.node = "n2"
	o := m2.options(now)
	o.Store, o.Node = s, "n2"
	h := Open(o)
	if err := h.Sample(ctx, clock); err != nil {
		t.Fatal(err)
	}
	h.Close()
	s.node = "n1"
	o = m1.options(now)
	o.Store, o.Node = s, "n1"
	h = Open(o)
	defer h.Close()
	got, err := h.Read(ctx, hour, "chat")
	if err != nil {
		t.Fatal(err)
	}
	p := last(got.Overall, 0)
	if p.Requests != 3 || p.Errors != 1 || p.CompletionTokens != 20 || p.ReplicasReady == nil || *p.ReplicasReady != 3 {
		t.Errorf("the cluster's minute: %+v (ready %v), want 3 requests, 1 error, 20 tokens, 3 ready", p, p.ReplicasReady)
	}
	s.down = errors.New("connection refused")
	m1.answer("chat", 200, .3, 10)
	if err := h.Sample(ctx, clock); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Read(ctx, hour, ""); err != s.down {
		t.Errorf("read with the store down: %v, want the store's error", err)
	}
	s.down = nil
	if got, err = h.Read(ctx, hour, ""); err != nil || sumRequests(got.Overall) != 4 {
		t.Errorf("the store's 3 and the node's 1: %d, %v", sumRequests(got.Overall), err)
	}
}

// The quantiles of a step come from its buckets' counts, interpolated
// inside the bucket that holds the rank as histogram_quantile does.
func TestQuantile(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    histogram
		q    float64
		want float64
	}{
		{"middle of the first bucket", histogram{.1: 10, .5: 0, math.Inf(1): 0}, .5, .05},
		{"second bucket", histogram{.1: 10, .5: 10, math.Inf(1): 0}, .75, .3},
		{"p95 in the second bucket", histogram{.1: 90, .5: 10}, .95, .3},
		{"exactly at a bound", histogram{.1: 5, .5: 5}, .5, .1},
		{"in +Inf: the highest finite bound", histogram{.1: 1, .5: 1, math.Inf(1): 8}, .95, .5},
		{"empty buckets skipped", histogram{.1: 0, .25: 0, 1: 4}, .5, .625},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.h.quantile(tc.q)
			if !ok || math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("got %v (%v), want %v", got, ok, tc.want)
			}
		})
	}
	if _, ok := (histogram{.1: 0}).quantile(.5); ok {
		t.Error("a quantile of no observations")
	}
}

// A step's quantiles sum the minutes' buckets: 9 fast answers in one
// minute and 1 slow in the next give a p50 among the fast and a p95
// in the slow one's bucket.
func TestTrafficQuantilesOverSteps(t *testing.T) {
	ctx := context.Background()
	m := newMetrics()
	clock := time.Date(2026, 1, 2, 15, 0, 30, 0, time.UTC)
	h := Open(m.options(func() time.Time { return clock }))
	defer h.Close()
	for range 9 {
		m.answer("chat", 200, .05, 1)
	}
	if err := h.Sample(ctx, clock); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(time.Minute)
	m.answer("chat", 200, 2, 1)
	got, err := h.Read(ctx, Range{Window: time.Hour, Step: 5 * time.Minute}, "")
	if err != nil {
		t.Fatal(err)
	}
	p := last(got.Overall, 0)
	if p.Requests != 10 || p.LatencyP50Millis == nil || *p.LatencyP50Millis != 55.6 || *p.LatencyP95Millis != 1750 {
		t.Errorf("step %+v p50 %v p95 %v, want 10 requests, p50 55.6 ms, p95 1750 ms", p, deref(p.LatencyP50Millis), deref(p.LatencyP95Millis))
	}
	if p.TTFTP50Millis == nil || *p.TTFTP50Millis != 55.6 || *p.TTFTP95Millis != 750 {
		t.Errorf("ttft p50 %v p95 %v, want 55.6 and 750 ms", deref(p.TTFTP50Millis), deref(p.TTFTP95Millis))
	}
	if e := last(got.Overall, 1); e.LatencyP50Millis != nil || e.ReplicasReady != nil {
		t.Errorf("a step with nothing in it has quantiles or replicas: %+v", e)
	}
}

func deref(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}

// The sampler reads histograms as counts per bucket.
func TestTotalsBuckets(t *testing.T) {
	m := newMetrics()
	m.answer("chat", 200, .3, 1)
	m.answer("chat", 200, 9, 1)
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := totals(fams)
	if got[Key("chat", fLatency+sep+"0.5")] != 1 || got[Key("chat", fLatency+sep+"+Inf")] != 1 || got[Key("chat", fLatency+sep+"0.1")] != 0 {
		t.Errorf("buckets %v", got)
	}
	_ = dto.MetricFamily{}
}
