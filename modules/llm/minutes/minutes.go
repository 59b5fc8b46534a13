// Package minutes is what the app's histories over time (the guardrails'
// outcomes, the traffic) keep on a node: the totals of the process's
// counters at the last sample, and a day of minutes, each with the
// counters' increase and the gauges' last values by key. A Ring lives in
// a pool under its name, so a reload neither loses the minutes nor counts
// an increase twice; the last config to let go of it forgets it. Run
// samples once a minute. It imports no part of the app.
package minutes

import (
	"context"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
)

// Day is how many minutes a Ring keeps.
const Day = 24 * 60

// Ring is a day of minutes and the totals last sampled. Its methods may
// be called from several goroutines.
type Ring struct {
	mu   sync.Mutex
	last map[string]int64 // the totals at the last sample, by key
	mins [Day]minute
}

// minute is one minute's increase and last gauges by key; at is its Unix
// minute.
type minute struct {
	at             int64
	counts, gauges map[string]int64
}

// Destruct does nothing: a Ring is memory only.
func (r *Ring) Destruct() error { return nil }

// rings holds each history's Ring: the counters they follow are the
// process's.
var rings = caddy.NewUsagePool()

// Acquire returns the Ring of name, made on first use; Release it when
// the config that acquired it stops.
func Acquire(name string) *Ring {
	v, _, _ := rings.LoadOrNew(name, func() (caddy.Destructor, error) { return &Ring{last: map[string]int64{}}, nil })
	return v.(*Ring)
}

// Release lets go of the Ring of name.
func Release(name string) { _, _ = rings.Delete(name) }

// Increase is what the totals counted since the last sample, by key. A
// key a config lacks keeps its last total, so that it does not count
// twice when it comes back; a total below the last is a counter that
// started again.
func (r *Ring) Increase(now map[string]int64) map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	delta := map[string]int64{}
	for k, n := range now {
		d := n - r.last[k]
		if d < 0 {
			d = n
		}
		r.last[k] = n
		if d > 0 {
			delta[k] = d
		}
	}
	return delta
}

// Add adds a minute's increase (at is a Unix minute) and sets its gauges.
func (r *Ring) Add(at int64, delta, gauges map[string]int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := &r.mins[at%Day]
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

// Read calls count for each increase and gauge (when not nil) for each
// gauge of the minutes in [from, to) (Unix minutes).
func (r *Ring) Read(from, to int64, count, gauge func(minute int64, key string, n int64)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.mins {
		m := &r.mins[i]
		if m.at < from || m.at >= to {
			continue
		}
		for k, n := range m.counts {
			count(m.at, k, n)
		}
		for k, n := range m.gauges {
			if gauge != nil {
				gauge(m.at, k, n)
			}
		}
	}
}

// Keys calls fn with each key the totals have.
func (r *Ring) Keys(fn func(key string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.last {
		fn(k)
	}
}

// Run calls sample once a minute until ctx is done; what (such as
// "traffic history") names the history in the log.
func Run(ctx context.Context, what string, log *zap.Logger, now func() time.Time, sample func(context.Context, time.Time) error) {
	defer func() {
		if v := recover(); v != nil {
			log.Error(what+": sampling stopped", zap.Any("panic", v), zap.Stack("stack"))
		}
	}()
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := sample(ctx, now()); err != nil {
				log.Warn(what+": sampling", zap.Error(err))
			}
		}
	}
}

// Interface guards
var _ caddy.Destructor = (*Ring)(nil)
