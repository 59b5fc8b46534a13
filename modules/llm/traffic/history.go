package traffic

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/minutes"
)

// TTL is how long the cluster's store keeps a minute.
const TTL = 25 * time.Hour

// ring names the history's minutes kept on this node (package minutes).
const ring = "traffic"

// Store is the cluster's history, which every node adds its increase to
// and sets its gauges in. The cluster member implements it.
type Store interface {
	// AddTraffic adds a minute's increase by key (see Key) to the
	// minute's counts and sets this node's gauges of the minute; minute
	// is a Unix minute.
	AddTraffic(ctx context.Context, minute int64, delta, gauges map[string]int64) error
	// ReadTraffic calls add for each count of each minute in [from, to)
	// (node empty) and for each node's gauges.
	ReadTraffic(ctx context.Context, from, to int64, add func(minute int64, node, key string, n int64)) error
}

// Options are what a config's History is made of.
type Options struct {
	// Gather reads the process's metrics, whose counters count from its
	// start; nil means the running config's registry.
	Gather func() ([]*dto.MetricFamily, error)
	// Status is the models' state, whose ready replicas on this node
	// (Node; in a cluster, not those of the other nodes it routes to)
	// the history counts.
	Status func() []llmapi.ModelStatus
	// Store is the cluster's history; nil on a single node.
	Store Store
	// Node names this node in the cluster: its gauges kept here when the
	// store did not take them are its own.
	Node string
	// Logger takes the failures of sampling.
	Logger *zap.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// History is the traffic's history as one config samples and reads it.
type History struct {
	o     Options
	rec   *minutes.Ring
	taken bool // rec is held
}

// Open returns the history of a config; Close lets go of it when the
// config stops.
func Open(o Options) *History {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Gather == nil {
		o.Gather = gatherActive
	}
	if o.Status == nil {
		o.Status = func() []llmapi.ModelStatus { return nil }
	}
	return &History{o: o, rec: minutes.Acquire(ring), taken: true}
}

// Close lets go of the record; the last config's close forgets it.
func (h *History) Close() {
	if h != nil && h.taken {
		minutes.Release(ring)
		h.taken = false
	}
}

// Run samples once a minute until ctx is done.
func (h *History) Run(ctx context.Context) {
	minutes.Run(ctx, "traffic history", h.o.Logger, h.o.Now, h.Sample)
}

// Sample reads the metrics and adds their increase since the last sample
// to the minute of t, with this node's replicas ready: in the cluster's
// store, or on this node when there is none or it does not take it.
func (h *History) Sample(ctx context.Context, t time.Time) error {
	families, err := h.o.Gather()
	if err != nil {
		return err
	}
	delta := h.rec.Increase(totals(families))
	gauges := map[string]int64{}
	for _, s := range h.o.Status() {
		n := int64(0)
		for _, r := range s.Replicas {
			if r.State == "ready" && (h.o.Store == nil || r.Node == h.o.Node) {
				n++
			}
		}
		gauges[Key(s.Name, fReady)] = n
	}
	at := t.Unix() / 60
	if h.o.Store != nil {
		err := h.o.Store.AddTraffic(ctx, at, delta, gauges)
		if err == nil {
			return nil
		}
		h.o.Logger.Warn("traffic history: the cluster store did not take this minute; kept on this node only", zap.Error(err))
	}
	h.rec.Add(at, delta, gauges)
	return nil
}

// gatherActive reads the running config's metrics registry, which the
// router registers its collectors in.
func gatherActive() ([]*dto.MetricFamily, error) {
	ctx := caddy.ActiveContext()
	if reg := ctx.GetMetricsRegistry(); reg != nil {
		return reg.Gather()
	}
	return nil, nil
}

// bounds are the buckets' upper bounds of each histogram field the
// process's metrics have: a minute keeps only the buckets that counted,
// and a quantile interpolates from the bound below its bucket, counted
// or not.
// bounds are the buckets' upper bounds of each histogram field the
// process's metrics have: a minute keeps only the buckets that counted,
// and a quantile interpolates from the bound below its bucket, counted
// or not.
func bounds(r *minutes.Ring) map[string][]float64 {
	out := map[string][]float64{}
	seen := map[string]bool{}
	r.Keys(func(k string) {
		_, field, _ := splitKey(k)
		kind, le, ok := strings.Cut(field, sep)
		if !ok || seen[field] {
			return
		}
		seen[field] = true
		if f, err := strconv.ParseFloat(le, 64); err == nil {
			out[kind] = append(out[kind], f)
		}
	})
	return out
}
