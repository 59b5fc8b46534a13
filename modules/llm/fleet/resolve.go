package fleet

import (
	"slices"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// Selector chooses one of a model's ready replicas for a request. The
// router's policies implement it.
type Selector interface {
	Select(ready []*Replica) *Replica
}

// LeastOutstanding picks the replica with the fewest requests in flight,
// the first of them on a tie.
type LeastOutstanding struct{}

// Select implements Selector.
func (LeastOutstanding) Select(ready []*Replica) *Replica {
	best := ready[0]
	for _, r := range ready[1:] {
		if r.inflight.Load() < best.inflight.Load() {
			best = r
		}
	}
	return best
}

// Status describes the fleet for GET /llm/models.
func (f *Fleet) Status() llmapi.ModelStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.Model()
	s := llmapi.ModelStatus{Name: m.Name, Aliases: m.Aliases, Engine: m.Engine, Source: m.Source,
		Min: m.Scaling.MinReplicas(), Max: m.Scaling.MaxReplicas(), Replicas: []llmapi.ReplicaStatus{},
		Class: m.Class, Owner: m.Owner, Resources: m.Resources, Fallbacks: m.Fallbacks, Canary: m.Canary,
		Adapters: m.Adapters, ContextLength: m.ContextLength, MaxOutput: m.MaxOutput,
		Providers: m.Providers, Routing: m.Routing, Profiles: profileStatus(m), Prefer: m.Prefer}
	if s.Class == "" {
		s.Class = catalog.ClassStandard
	}
	for _, r := range slices.Concat(f.replicas, f.opts.Node.Draining(m.Name)) {
		s.Replicas = append(s.Replicas, llmapi.ReplicaStatus{ID: r.ID, State: string(r.State()), URL: r.BaseURL, Node: f.node,
			PID: r.PID, CPUs: r.CPUs, GPUs: r.GPUs, Inflight: r.inflight.Load(), Started: r.Started, Reason: r.Reason(),
			Profile: r.Profile, ProfileNote: r.ProfileNote})
	}
	for _, r := range f.remote {
		s.Replicas = append(s.Replicas, llmapi.ReplicaStatus{ID: r.ID, State: string(r.State()), URL: r.BaseURL, Node: r.Node,
			GPUs: r.GPUs, Inflight: r.inflight.Load(), Started: r.Started, Profile: r.Profile})
	}
	switch {
	case f.stopped:
		s.State, s.Reason = "stopped", "an administrator stopped it"
	case m.Scaling.Kept():
		s.State, s.Reason = "stopped", keptReason(m.Name)
	case f.failingLocked() != "":
		s.State, s.Reason = "failing", f.failingLocked()
	case len(f.replicas) > 0 || len(f.remote) > 0:
		s.State = "ready"
		// Why it has fewer than it should (an owner's capacity, say).
		if f.clustered && f.planWhy != "" {
			s.Reason = f.planWhy
		} else if !f.clustered && f.waitFor != "" && f.starting == 0 {
			s.Reason = f.waitFor
		} else if r := f.laterProfileLocked(); r != nil {
			s.Reason = "replica " + r.ID + " runs on profile " + r.Profile + ", " + r.ProfileNote
		}
	case f.clustered && f.planWhy != "":
		s.State, s.Reason = "waiting", f.planWhy
	case f.waitFor != "" && f.starting == 0:
		s.State, s.Reason = "waiting", f.waitFor
	case f.starting > 0:
		s.State, s.Reason = "starting", "a replica is starting"
	case f.lastErr != nil:
		s.State, s.Reason = "failed", "last start failed: "+f.lastErr.Error()
	case m.Scaling.MinReplicas() == 0:
		s.State, s.Reason = "idle", "starts on its first request"
	default:
		s.State, s.Reason = "stopped", "no replica is running"
	}
	return s
}
