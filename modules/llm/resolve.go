package llm

import (
	"context"
	"slices"
	"strings"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/plugins/engine"
)

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
func (a *App) Acquire(ctx context.Context, model string, sel fleet.Selector) (*fleet.Replica, func(), error) {
	return a.Reacquire(ctx, model, sel, nil)
}

// Reacquire is Acquire for a request that could not reach failed: it is
// not given failed again until the supervisor has checked it, and waits
// (bounded, like Acquire) for another replica when there is none, such as
// the replacement of a replica that died.
func (a *App) Reacquire(ctx context.Context, model string, sel fleet.Selector, failed *fleet.Replica) (*fleet.Replica, func(), error) {
	f, ok := a.v().fleets[model]
	if !ok {
		f, sel, ok = a.adapterFleet(model, sel) // an adapter: its model's replicas that loaded it
	}
	if !ok {
		return nil, nil, &catalog.UnknownModelError{Name: model}
	}
	r, err := f.Acquire(ctx, sel, failed)
	if err != nil {
		return nil, nil, err
	}
	return r, func() { f.Release(r) }, nil
}

// ReportFailure tells the app that a request could not reach r.
func (a *App) ReportFailure(r *fleet.Replica) {
	if f, ok := a.v().fleets[r.Model]; ok {
		f.ReportFailure(r)
	}
}

// Status reports every model, in catalog order.
func (a *App) Status() []llmapi.ModelStatus {
	v := a.v()
	var elsewhere map[string][]llmapi.ReplicaStatus
	if a.cluster != nil {
		elsewhere = a.cluster.RemoteUnready()
	}
	out := make([]llmapi.ModelStatus, 0, len(v.models))
	for _, m := range v.models {
		st := v.fleets[m.Name].Status()
		st.Runtime = v.runtime[m.Name]
		addElsewhere(&st, elsewhere[m.Name])
		out = append(out, st)
	}
	return out
}

// addElsewhere adds the replicas other nodes run that are not ready; a
// model none of whose replicas is ready anywhere, with one failing on
// another node, is failing for that one's reason.
func addElsewhere(st *llmapi.ModelStatus, rs []llmapi.ReplicaStatus) {
	st.Replicas = append(st.Replicas, rs...)
	for _, r := range rs {
		if r.State == string(fleet.ReplicaFailing) && st.State != "ready" && st.State != "failing" {
			st.State, st.Reason = "failing", r.Reason
		}
	}
}

// Speaks reports whether a model's replicas serve an API themselves:
// engine.CapChat, CapResponses, CapMessages or CapComfyUI, as their
// engine type declares it, or as the model's option speaks lists it (an
// outside provider that serves the Responses API: option speaks
// responses). An engine that declares none of them speaks chat
// completions (plugins written before they were declared).
func (a *App) Speaks(m *catalog.Model, api string) bool {
	if sp := m.Options["speaks"]; sp != "" && slices.Contains(strings.FieldsFunc(sp, func(r rune) bool { return r == ',' || r == ' ' }), api) {
		return true
	}
	p, ok := a.engines.Get(m.Engine)
	if !ok {
		return api == engine.CapChat
	}
	caps := p.Info().Capabilities
	if slices.Contains(caps, api) {
		return true
	}
	return api == engine.CapChat && !slices.Contains(caps, engine.CapMessages) && !slices.Contains(caps, engine.CapResponses) &&
		!slices.Contains(caps, engine.CapComfyUI)
}
