package traffic

import (
	"math"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// The fields of a model's minute: counters, each minute's increase.
const (
	fRequests     = "requests"
	fErrors       = "errors"        // status >= 500 or 429
	fClientErrors = "client_errors" // the other statuses >= 400
	fTokens       = "tokens"        // completion tokens
	fLatency      = "latency"       // + sep + a bucket's upper bound
	fTTFT         = "ttft"          // + sep + a bucket's upper bound
	// fReady is a gauge: this node's last value of the minute.
	fReady = "ready"
	sep    = "\x1f"
)

// Key joins a model and a field: the key of Store's counts and gauges.
func Key(model, field string) string { return model + sep + field }

// splitKey is Key's inverse: the model and the field.
func splitKey(k string) (model, field string, ok bool) {
	return strings.Cut(k, sep)
}

// totals reads the counters the history follows: the router's
// (llmgw_requests_total, llmgw_request_duration_seconds,
// llmgw_time_to_first_token_seconds, llmgw_tokens_total), the
// guardrails' refusals (llmgw_guardrail_refused_requests_total) and the
// cache's hits (llmgw_cache_requests_total): every answer a model's
// request got, as llm_quota's usage counts them.
func totals(families []*dto.MetricFamily) map[string]int64 {
	out := map[string]int64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			model := label(m, "model")
			if model == "" {
				continue
			}
			switch f.GetName() {
			case "llmgw_requests_total", "llmgw_guardrail_refused_requests_total":
				n := int64(m.GetCounter().GetValue())
				out[Key(model, fRequests)] += n
				if k := statusField(label(m, "status")); k != "" {
					out[Key(model, k)] += n
				}
			case "llmgw_cache_requests_total": // answers the cache gave: the router never saw them
				if o := label(m, "outcome"); o == "hit-exact" || o == "hit-semantic" {
					out[Key(model, fRequests)] += int64(m.GetCounter().GetValue())
				}
			case "llmgw_tokens_total":
				if label(m, "kind") == "completion" {
					out[Key(model, fTokens)] += int64(m.GetCounter().GetValue())
				}
			case "llmgw_request_duration_seconds":
				buckets(out, model, fLatency, m.GetHistogram())
			case "llmgw_time_to_first_token_seconds":
				buckets(out, model, fTTFT, m.GetHistogram())
			}
		}
	}
	return out
}

// statusField says which error an answer's status is, if any.
func statusField(status string) string {
	code, _ := strconv.Atoi(status)
	switch {
	case code >= 500 || code == 429:
		return fErrors
	case code >= 400:
		return fClientErrors
	}
	return ""
}

// buckets adds a histogram's count in each bucket (not cumulative; the
// last is +Inf) by its upper bound.
func buckets(out map[string]int64, model, field string, h *dto.Histogram) {
	below := uint64(0)
	for _, b := range h.GetBucket() {
		n := b.GetCumulativeCount()
		out[Key(model, field+sep+bound(b.GetUpperBound()))] += int64(n - below)
		below = n
	}
	if c := h.GetSampleCount(); c > below {
		out[Key(model, field+sep+"+Inf")] += int64(c - below)
	}
}

func bound(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
