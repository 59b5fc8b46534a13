package llm

import (
	"time"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// Report is what a node's heartbeat says about one fleet.
type Report struct {
	// Replicas are the fleet's replicas on this node.
	Replicas []llmapi.NodeReplica
	// Used is true when the model was used since the fleet began; only
	// then do Busy, LastUsed and Waiting count.
	Used bool
	// Busy while requests wait for a replica, and after a request found
	// every replica at its target concurrency.
	Busy     bool
	LastUsed time.Time
	Waiting  int
	// Failing says why the node cannot start a replica now ("" when it
	// can).
	Failing string
}

// TakeReport describes the fleet for the heartbeat and forgets that a
// request wanted more replicas (the heartbeat has said it).
func (f *fleet) TakeReport() Report {
	f.mu.Lock()
	defer f.mu.Unlock()
	var rp Report
	for _, r := range f.replicas {
		rp.Replicas = append(rp.Replicas, llmapi.NodeReplica{ID: r.ID, Model: r.Model, Upstream: r.UpstreamModel, Adapters: r.Adapters,
			State: r.State(), Inflight: r.inflight.Load(), Started: r.Started, GPUs: r.GPUs})
	}
	rp.Used = f.wantMore || f.waiting > 0 || f.lastUsed.After(f.created)
	rp.Busy, rp.LastUsed, rp.Waiting = f.wantMore || f.waiting > 0, f.lastUsed, f.waiting
	f.wantMore = false
	switch {
	case f.opts.unavailable != nil:
		rp.Failing = f.opts.unavailable.Error()
	case f.lastErr != nil && now().Before(f.retryAt) && len(f.replicas) == 0:
		rp.Failing = f.lastErr.Error()
	case f.waitFor != "" && len(f.replicas) == 0:
		rp.Failing = f.waitFor
	}
	return rp
}

// Stopped tells whether an administrator stopped the model.
func (f *fleet) Stopped() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stopped
}

// ReplicaCount is how many replicas the fleet runs, starting ones aside.
func (f *fleet) ReplicaCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.replicas)
}

// Short tells whether the fleet runs and starts fewer than n replicas.
func (f *fleet) Short(n int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return n > len(f.replicas)+f.starting
}

// ReadyCount is how many of its replicas are ready.
func (f *fleet) ReadyCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.replicas {
		if r.State() == ReplicaReady {
			n++
		}
	}
	return n
}

// LeastBusy is its ready replica with the fewest requests in flight, or
// nil.
func (f *fleet) LeastBusy() *Replica {
	f.mu.Lock()
	defer f.mu.Unlock()
	var best *Replica
	for _, r := range f.replicas {
		if r.State() == ReplicaReady && (best == nil || r.inflight.Load() < best.inflight.Load()) {
			best = r
		}
	}
	return best
}

// SetModel replaces the fleet's model with a changed copy (its settings
// or scaling) and has supervision look at it.
func (f *fleet) SetModel(m *catalog.Model) {
	f.model.Store(m)
}
