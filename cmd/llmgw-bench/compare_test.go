package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

func TestBenchTenancyHoldsBenchKey(t *testing.T) {
	if !strings.Contains(benchTenancy, tenancy.HashKey(benchKey)) {
		t.Error("benchTenancy does not declare the hash of benchKey")
	}
}

func TestPercentile(t *testing.T) {
	d := []time.Duration{5, 1, 4, 2, 3, 6, 8, 7, 10, 9}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{.5, 6}, {.9, 10}, {.99, 10}, {0, 1}} {
		if got := pct(d, tc.p); got != tc.want {
			t.Errorf("pct(%v): got %v, want %v", tc.p, got, tc.want)
		}
	}
}

func TestGeoMeanCI(t *testing.T) {
	if m, f := geoMeanCI([]float64{1.1, 1.1, 1.1}); math.Abs(m-1.1) > 1e-9 || math.Abs(f-1) > 1e-9 {
		t.Errorf("equal ratios: mean %v, factor %v; want 1.1 and 1", m, f)
	}
	m, f := geoMeanCI([]float64{2, 0.5, 2, 0.5})
	if math.Abs(m-1) > 1e-9 || f <= 1.5 {
		t.Errorf("spread ratios: mean %v, factor %v; want 1 and a wide interval", m, f)
	}
	if _, f := geoMeanCI([]float64{1.2}); !math.IsInf(f, 1) {
		t.Errorf("one ratio: factor %v, want +Inf", f)
	}
}

func TestUniqueBodiesDiffer(t *testing.T) {
	cfg := loadConfig{Model: "bench", MaxTokens: 1, Unique: true}
	seen := map[string]bool{}
	for range 1000 {
		b := string(cfg.uniqueBody())
		if seen[b] {
			t.Fatalf("a unique body repeats: %s", b)
		}
		seen[b] = true
	}
	if gs := pipelineGateways("10000,100000", "llm {}", true, ""); len(gs) != 3 || gs[1].fill != 10000 || gs[2].fill != 100000 {
		t.Errorf("pipelineGateways: %+v", gs)
	}
}
