package overview

import (
	"fmt"
	"testing"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestOverviewMedian(t *testing.T) {
	for _, tc := range []struct {
		name string
		obs  []float64
		want float64
	}{
		{"one bucket", []float64{0.05, 0.05}, 0.05},
		{"spread", []float64{0.05, 0.05, 0.2, 0.2}, 0.1},
		{"above the last bound", []float64{100, 100}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h", Buckets: []float64{0.1, 0.5, 10}})
			for _, v := range tc.obs {
				h.Observe(v)
			}
			var m dto.Metric
			if err := h.Write(&m); err != nil {
				t.Fatal(err)
			}
			if got := median(m.GetHistogram()); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOverviewGuardrails(t *testing.T) {
	reg := prometheus.NewRegistry()
	checks := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmgw_guardrail_checks_total"}, []string{"check", "stage", "outcome"})
	findings := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "llmgw_guardrail_findings_total"}, []string{"check", "kind", "action"})
	reg.MustRegister(checks, findings)
	checks.WithLabelValues("topics", "input", "blocked").Add(2)
	checks.WithLabelValues("topics", "input", "passed").Add(5)
	checks.WithLabelValues("pii", "output", "passed").Add(1)
	checks.WithLabelValues("pii", "input", "redacted").Add(3)
	findings.WithLabelValues("pii", "EMAIL", "redact").Add(4)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var g llmapi.GuardrailOverview
	for _, f := range families {
		readGuardrailMetrics(f, &g)
	}
	got := fmt.Sprint(g)
	want := "{[{pii input map[redacted:3]} {pii output map[passed:1]} {topics input map[blocked:2 passed:5]}] [{pii EMAIL redact 4}]}"
	if got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}
