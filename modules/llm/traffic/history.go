package traffic

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

const (
	minutes = 24 * 60 // a day of minutes
	// TTL is how long the cluster's store keeps a minute.
	TTL = 25 * time.Hour
)

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

// record is the process's last totals and, on a single node (or when the
// cluster's store did not take a minute), its minutes. It outlives
// configs, as the counters do.
type record struct {
	mu   sync.Mutex
	last map[string]int64 // the totals at the last sample, by key
	mins [minutes]minute
}

// minute is one minute's increase and last gauges by key; at is its Unix
// minute.
type minute struct {
	at             int64
	counts, gauges map[string]int64
}

// Destruct does nothing: the record is memory only.
func (r *record) Destruct() error { return nil }

// records holds the one record: the counters it follows are the
// process's.
var records = caddy.NewUsagePool()

const recordKey = "traffic"

// History is the traffic's history as one config samples and reads it.
type History struct {
	o     Options
	rec   *record
	taken bool // rec is held in records
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
	v, _, _ := records.LoadOrNew(recordKey, func() (caddy.Destructor, error) {
		return &record{last: map[string]int64{}}, nil
	})
	return &History{o: o, rec: v.(*record), taken: true}
}

// Close lets go of the record; the last config's close forgets it.
func (h *History) Close() {
	if h != nil && h.taken {
		_, _ = records.Delete(recordKey)
		h.taken = false
	}
}

// Run samples once a minute until ctx is done.
func (h *History) Run(ctx context.Context) {
	defer func() {
		if v := recover(); v != nil {
			h.o.Logger.Error("traffic history: sampling stopped", zap.Any("panic", v), zap.Stack("stack"))
		}
	}()
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := h.Sample(ctx, h.o.Now()); err != nil {
				h.o.Logger.Warn("traffic history: sampling", zap.Error(err))
			}
		}
	}
}

// Sample reads the metrics and adds their increase since the last sample
// to the minute of t, with this node's replicas ready: in the cluster's
// store, or on this node when there is none or it does not take it.
func (h *History) Sample(ctx context.Context, t time.Time) error {
	families, err := h.o.Gather()
	if err != nil {
		return err
	}
	delta := h.rec.increase(totals(families))
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
	h.rec.add(at, delta, gauges)
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

// increase is what the totals counted since the last sample, by key. A
// key a config lacks keeps its last total, so that it does not count
// twice when it comes back.
func (r *record) increase(now map[string]int64) map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	delta := map[string]int64{}
	for k, n := range now {
		d := n - r.last[k]
		if d < 0 {
			d = n // a counter that started again
		}
		r.last[k] = n
		if d > 0 {
			delta[k] = d
		}
	}
	return delta
}

// add adds a minute's increase to the minutes kept on this node and sets
// its gauges.
func (r *record) add(at int64, delta, gauges map[string]int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := &r.mins[at%minutes]
	if m.at != at || m.counts == nil {
		*m = minute{at: at, counts: map[string]int64{}, gauges: map[string]int64{}}
	}
	for k, d := range delta {
		m.counts[k] += d
	}
	for k, n := range gauges {
		m.gauges[k] = n
	}
}

// read adds the minutes in [from, to) (Unix minutes) kept on this node;
// its gauges are those of node.
func (r *record) read(from, to int64, node string, add func(minute int64, node, key string, n int64)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.mins {
		m := &r.mins[i]
		if m.at < from || m.at >= to {
			continue
		}
		for k, n := range m.counts {
			add(m.at, "", k, n)
		}
		for k, n := range m.gauges {
			add(m.at, node, k, n)
		}
	}
}

// bounds are the buckets' upper bounds of each histogram field the
// process's metrics have: a minute keeps only the buckets that counted,
// and a quantile interpolates from the bound below its bucket, counted
// or not.
func (r *record) bounds() map[string][]float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]float64{}
	seen := map[string]bool{}
	for k := range r.last {
		_, field, _ := splitKey(k)
		kind, le, ok := strings.Cut(field, sep)
		if !ok || seen[field] {
			continue
		}
		seen[field] = true
		if f, err := strconv.ParseFloat(le, 64); err == nil {
			out[kind] = append(out[kind], f)
		}
	}
	return out
}

// Interface guards
var _ caddy.Destructor = (*record)(nil)
