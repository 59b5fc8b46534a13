// Package overview reads the gateway's own metrics (those of /metrics)
// into GET /llm/overview's lines: per model, requests, errors, tokens,
// time to first token and tokens per second; and the guardrails' totals.
package overview

import (
	"math"
	"sort"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	dto "github.com/prometheus/client_model/go"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// ReadMetrics reads the running config's metrics registry, the
// one the router registers its collectors in.
func ReadMetrics(line func(string) *llmapi.ModelOverview, guard *llmapi.GuardrailOverview) error {
	ctx := caddy.ActiveContext()
	reg := ctx.GetMetricsRegistry()
	if reg == nil {
		return nil
	}
	families, err := reg.Gather()
	if err != nil {
		return err
	}
	busy := map[string]float64{} // seconds spent answering, by model
	for _, f := range families {
		readGuardrailMetrics(f, guard)
		for _, m := range f.GetMetric() {
			model := label(m, "model")
			if model == "" {
				continue
			}
			switch f.GetName() {
			case "llmgw_requests_total", "llmgw_guardrail_refused_requests_total": // the router's answers, and the prompts the guardrails blocked
				n := int64(m.GetCounter().GetValue())
				o := line(model)
				o.Requests += n
				if code, _ := strconv.Atoi(label(m, "status")); code >= 400 {
					o.Errors += n
				}
			case "llmgw_cache_requests_total": // answers the cache gave: the router never saw them
				if o := label(m, "outcome"); o == "hit-exact" || o == "hit-semantic" {
					line(model).Requests += int64(m.GetCounter().GetValue())
				}
			case "llmgw_tokens_total":
				n := int64(m.GetCounter().GetValue())
				if label(m, "kind") == "prompt" {
					line(model).PromptTokens += n
				} else {
					line(model).CompletionTokens += n
				}
			case "llmgw_time_to_first_token_seconds":
				h := m.GetHistogram()
				if c := h.GetSampleCount(); c > 0 {
					o := line(model)
					o.TTFTMillis = round1(h.GetSampleSum() / float64(c) * 1000)
					o.TTFTP50Millis = round1(median(h) * 1000)
				}
			case "llmgw_request_duration_seconds":
				busy[model] += m.GetHistogram().GetSampleSum()
			}
		}
	}
	for model, secs := range busy {
		if o := line(model); secs > 0 {
			o.TokensPerSecond = round1(float64(o.CompletionTokens) / secs)
		}
	}
	return nil
}

// readGuardrailMetrics adds the guardrails' counters of f, if it is one,
// in the order Gather sorts them (by labels).
func readGuardrailMetrics(f *dto.MetricFamily, guard *llmapi.GuardrailOverview) {
	switch f.GetName() {
	case "llmgw_guardrail_checks_total":
		idx := map[[2]string]int{}
		for _, m := range f.GetMetric() {
			k := [2]string{label(m, "check"), label(m, "stage")}
			i, ok := idx[k]
			if !ok {
				i = len(guard.Checks)
				idx[k] = i
				guard.Checks = append(guard.Checks, llmapi.GuardrailChecks{Check: k[0], Stage: k[1], Outcomes: map[string]int64{}})
			}
			guard.Checks[i].Outcomes[label(m, "outcome")] += int64(m.GetCounter().GetValue())
		}
		sort.SliceStable(guard.Checks, func(i, j int) bool {
			a, b := guard.Checks[i], guard.Checks[j]
			return a.Check < b.Check || a.Check == b.Check && a.Stage < b.Stage
		})
	case "llmgw_guardrail_findings_total":
		for _, m := range f.GetMetric() {
			guard.Findings = append(guard.Findings, llmapi.GuardrailFindings{Check: label(m, "check"), Kind: label(m, "kind"),
				Action: label(m, "action"), Count: int64(m.GetCounter().GetValue())})
		}
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// median estimates a histogram's median by linear interpolation inside
// the bucket that holds it, as Prometheus' histogram_quantile does.
func median(h *dto.Histogram) float64 {
	half := float64(h.GetSampleCount()) / 2
	lower, below := 0.0, 0.0
	for _, b := range h.GetBucket() {
		upper, n := b.GetUpperBound(), float64(b.GetCumulativeCount())
		if n >= half {
			if math.IsInf(upper, 1) || n == below {
				return lower
			}
			return lower + (upper-lower)*(half-below)/(n-below)
		}
		lower, below = upper, n
	}
	return lower
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

// GuardrailTotals reads the guardrails' counters from the running
// config's metrics registry.
func GuardrailTotals() ([]llmapi.GuardrailChecks, error) {
	var g llmapi.GuardrailOverview
	ctx := caddy.ActiveContext()
	if reg := ctx.GetMetricsRegistry(); reg != nil {
		families, err := reg.Gather()
		if err != nil {
			return nil, err
		}
		for _, f := range families {
			readGuardrailMetrics(f, &g)
		}
	}
	return g.Checks, nil
}
