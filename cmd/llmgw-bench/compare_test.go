package main

import (
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm"
)

func TestBenchTenancyHoldsBenchKey(t *testing.T) {
	if !strings.Contains(benchTenancy, llm.HashKey(benchKey)) {
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
