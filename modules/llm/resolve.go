package llm

import (
	"context"
	"slices"
	"strings"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/plugins/engine"
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

// Lookup resolves a name or alias to its catalog model.
func (a *App) Lookup(name string) (*catalog.Model, error) {
	cat := a.v().cat
	if m, ok := cat.ByName[name]; ok {
		return m, nil
	}
	if m, ok := cat.Adapters[name]; ok {
		return m, nil
	}
	if catalog.CheckName("", name) != nil {
		return nil, &catalog.UnknownModelError{Name: name} // no catalog name is like it
	}
	return nil, &catalog.UnknownModelError{Name: name, Similar: cat.Closest(name, 3)}
}

// Acquire returns a ready replica of the model (by catalog name), held
// until release is called. It starts the model if none runs and waits,
// bounded, for a replica; it fails with *NoCapacityError otherwise.
func (a *App) Acquire(ctx context.Context, model string, sel Selector) (*Replica, func(), error) {
	return a.Reacquire(ctx, model, sel, nil)
}

// Reacquire is Acquire for a request that could not reach failed: it is
// not given failed again until the supervisor has checked it, and waits
// (bounded, like Acquire) for another replica when there is none, such as
// the replacement of a replica that died.
func (a *App) Reacquire(ctx context.Context, model string, sel Selector, failed *Replica) (*Replica, func(), error) {
	f, ok := a.v().fleets[model]
	if !ok {
		f, sel, ok = a.adapterFleet(model, sel) // an adapter: its model's replicas that loaded it
	}
	if !ok {
		return nil, nil, &catalog.UnknownModelError{Name: model}
	}
	r, err := f.acquire(ctx, sel, failed)
	if err != nil {
		return nil, nil, err
	}
	return r, func() { f.release(r) }, nil
}

// ReportFailure tells the app that a request could not reach r.
func (a *App) ReportFailure(r *Replica) {
	if f, ok := a.v().fleets[r.Model]; ok {
		f.reportFailure(r)
	}
}

// Status reports every model, in catalog order.
func (a *App) Status() []llmapi.ModelStatus {
	v := a.v()
	out := make([]llmapi.ModelStatus, 0, len(v.models))
	for _, m := range v.models {
		st := v.fleets[m.Name].status()
		st.Runtime = v.runtime[m.Name]
		out = append(out, st)
	}
	return out
}

func (f *fleet) status() llmapi.ModelStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.m()
	s := llmapi.ModelStatus{Name: m.Name, Aliases: m.Aliases, Engine: m.Engine, Source: m.Source,
		Min: m.Scaling.MinReplicas(), Max: m.Scaling.MaxReplicas(), Replicas: []llmapi.ReplicaStatus{},
		Class: m.Class, Owner: m.Owner, Resources: m.Resources, Fallbacks: m.Fallbacks, Canary: m.Canary,
		Adapters: m.Adapters}
	if s.Class == "" {
		s.Class = catalog.ClassStandard
	}
	for _, r := range slices.Concat(f.replicas, f.opts.node.Draining(m.Name)) {
		s.Replicas = append(s.Replicas, llmapi.ReplicaStatus{ID: r.ID, State: r.State(), URL: r.BaseURL, Node: f.node,
			PID: r.PID, CPUs: r.CPUs, GPUs: r.GPUs, Inflight: r.inflight.Load(), Started: r.Started})
	}
	for _, r := range f.remote {
		s.Replicas = append(s.Replicas, llmapi.ReplicaStatus{ID: r.ID, State: r.State(), URL: r.BaseURL, Node: r.Node,
			GPUs: r.GPUs, Inflight: r.inflight.Load(), Started: r.Started})
	}
	switch {
	case f.stopped:
		s.State, s.Reason = "stopped", "an administrator stopped it"
	case m.Scaling.Kept():
		s.State, s.Reason = "stopped", keptReason(m.Name)
	case len(f.replicas) > 0 || len(f.remote) > 0:
		s.State = "ready"
		// Why it has fewer than it should (an owner's capacity, say).
		if f.clustered && f.planWhy != "" {
			s.Reason = f.planWhy
		} else if !f.clustered && f.waitFor != "" && f.starting == 0 {
			s.Reason = f.waitFor
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

// Speaks reports whether a model's replicas serve an API themselves:
// engine.CapChat, CapResponses or CapMessages, as their engine type
// declares it, or as the model's option speaks lists it (an outside
// provider that serves the Responses API: option speaks responses). An
// engine that declares none of them speaks chat completions (plugins
// written before they were declared).
func (a *App) Speaks(m *catalog.Model, api string) bool {
	if sp := m.Options["speaks"]; sp != "" && slices.Contains(strings.FieldsFunc(sp, func(r rune) bool { return r == ',' || r == ' ' }), api) {
		return true
	}
	p, ok := a.engines.get(m.Engine)
	if !ok {
		return api == engine.CapChat
	}
	caps := p.Info().Capabilities
	if slices.Contains(caps, api) {
		return true
	}
	return api == engine.CapChat && !slices.Contains(caps, engine.CapMessages) && !slices.Contains(caps, engine.CapResponses)
}
