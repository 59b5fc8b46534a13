package traffic

import (
	"context"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/guardhist"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// Range is the span GET /llm/traffic asks for, as the guardrails'
// history reads it.
type Range = guardhist.Range

// ParseRange reads ?window= (default 24h, at most 24h) and ?step=
// (default 1h, whole minutes, at most the window). Its errors are the
// client's.
func ParseRange(window, step string) (Range, error) { return guardhist.ParseRange(window, step) }

// step is one model's counts in one step.
type step struct {
	counts    map[string]int64 // by counter field
	lat, ttft histogram
	ready     map[string]gauge // by node
}

// gauge is a node's last value in a step and the minute it was set.
type gauge struct{ at, n int64 }

func newStep() *step {
	return &step{counts: map[string]int64{}, lat: histogram{}, ttft: histogram{}, ready: map[string]gauge{}}
}

// steps is every model's steps while a read adds the minutes.
type steps struct {
	from, stepMin, n int64
	now              int64                // Unix seconds of the read: the last step's rates are over its part so far
	model            string               // the only model asked for, or ""
	bounds           map[string][]float64 // each histogram's bucket bounds, by field
	byModel          map[string][]*step
}

// add adds a minute's count of a key (a node's gauge when node is set)
// to its model's step.
func (s *steps) add(minute int64, node, key string, n int64) {
	model, field, ok := splitKey(key)
	if !ok || s.model != "" && model != s.model || minute < s.from {
		return
	}
	i := (minute - s.from) / s.stepMin
	if i >= s.n {
		return
	}
	if s.byModel[model] == nil {
		s.byModel[model] = make([]*step, s.n)
	}
	st := s.byModel[model][i]
	if st == nil {
		st = newStep()
		s.byModel[model][i] = st
	}
	kind, le, _ := strings.Cut(field, sep)
	switch kind {
	case fReady:
		if g, ok := st.ready[node]; !ok || minute >= g.at {
			st.ready[node] = gauge{minute, n}
		}
	case fLatency:
		st.lat.add(le, n)
	case fTTFT:
		st.ttft.add(le, n)
	default:
		st.counts[field] += n
	}
}

// Read samples now, then sums each model's answers in each step of rng,
// ending with the current minute: the cluster's, and the minutes this
// node kept itself; model, if set, keeps that model only. Its only error
// is the store's, as it is.
func (h *History) Read(ctx context.Context, rng Range, model string) (*llmapi.Traffic, error) {
	t := h.o.Now()
	if err := h.Sample(ctx, t); err != nil {
		h.o.Logger.Warn("traffic history: sampling", zap.Error(err))
	}
	stepMin := int64(rng.Step / time.Minute)
	n := int64((rng.Window + rng.Step - 1) / rng.Step)
	to := t.Unix()/60 + 1 // the current minute included
	to += (stepMin - to%stepMin) % stepMin
	from := to - n*stepMin
	s := &steps{from: from, stepMin: stepMin, n: n, now: t.Unix(), model: model, bounds: bounds(h.rec), byModel: map[string][]*step{}}
	if h.o.Store != nil {
		if err := h.o.Store.ReadTraffic(ctx, from, to, s.add); err != nil {
			return nil, err
		}
	}
	node := h.o.Node
	if node == "" {
		node = "."
	}
	// The minutes the cluster store did not take.
	h.rec.Read(from, to, func(m int64, k string, n int64) { s.add(m, "", k, n) }, func(m int64, k string, n int64) { s.add(m, node, k, n) })
	out := &llmapi.Traffic{From: time.Unix(from*60, 0).UTC(), To: time.Unix(to*60, 0).UTC(), StepSeconds: stepMin * 60,
		Models: []llmapi.TrafficSeries{}}
	total := make([]*step, n)
	for _, name := range slices.Sorted(maps.Keys(s.byModel)) {
		out.Models = append(out.Models, s.series(name, s.byModel[name]))
		for i, st := range s.byModel[name] {
			total[i] = merge(total[i], st)
		}
	}
	out.Overall = s.series("", total)
	return out, nil
}

// merge adds a model's step to the total's (nil: none yet); the total's
// replicas ready are the sum of the models'.
func merge(total, st *step) *step {
	if st == nil {
		return total
	}
	if total == nil {
		total = newStep()
	}
	for k, n := range st.counts {
		total.counts[k] += n
	}
	for le, n := range st.lat {
		total.lat[le] += n
	}
	for le, n := range st.ttft {
		total.ttft[le] += n
	}
	if r, ok := st.readyNow(); ok {
		g := total.ready[""]
		total.ready[""] = gauge{n: g.n + r}
	}
	return total
}

// readyNow is the sum over nodes of each node's last value in the step.
func (st *step) readyNow() (int64, bool) {
	var n int64
	for _, g := range st.ready {
		n += g.n
	}
	return n, len(st.ready) > 0
}

// series makes the points of a model's steps.
func (s *steps) series(model string, sts []*step) llmapi.TrafficSeries {
	out := llmapi.TrafficSeries{Model: model, Points: make([]llmapi.TrafficPoint, s.n)}
	for i := range out.Points {
		p := &out.Points[i]
		start := (s.from + int64(i)*s.stepMin) * 60
		p.At = time.Unix(start, 0).UTC()
		st := sts[i]
		if st == nil {
			continue
		}
		secs := float64(min(s.stepMin*60, max(s.now-start, 1)))
		p.Requests, p.Errors, p.ClientErrors, p.CompletionTokens = st.counts[fRequests], st.counts[fErrors], st.counts[fClientErrors], st.counts[fTokens]
		p.RequestsPerSecond, p.ErrorsPerSecond = rate(p.Requests, secs), rate(p.Errors, secs)
		p.ClientErrorsPerSecond, p.TokensPerSecond = rate(p.ClientErrors, secs), rate(p.CompletionTokens, secs)
		st.lat.bounds(s.bounds[fLatency])
		st.ttft.bounds(s.bounds[fTTFT])
		p.LatencyP50Millis, p.LatencyP95Millis = millis(st.lat, .5), millis(st.lat, .95)
		p.TTFTP50Millis, p.TTFTP95Millis = millis(st.ttft, .5), millis(st.ttft, .95)
		if r, ok := st.readyNow(); ok {
			p.ReplicasReady = &r
		}
	}
	return out
}

func rate(n int64, secs float64) float64 { return math.Round(float64(n)/secs*1000) / 1000 }

// millis is a quantile of h in milliseconds, rounded to a tenth; nil
// without observations.
func millis(h histogram, q float64) *float64 {
	v, ok := h.quantile(q)
	if !ok {
		return nil
	}
	ms := math.Round(v*10000) / 10
	return &ms
}
