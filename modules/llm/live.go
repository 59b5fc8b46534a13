package llm

import (
	"context"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"go.uber.org/zap"
)

// Live changes: a model's shape (context length, resources, engine
// options, args) changed through POST /llm/models/<name>/settings, and
// POST /llm/models/<name>/restart, replace its replicas one by one: a new
// replica starts with the model as it is now, takes requests once ready,
// and only then does an old one drain (finishing its requests and
// streams) and stop. When the node has no room for one more replica, the
// old one drains first and the new one starts once it has stopped; the
// answer says so (one_at_a_time).

// reshapes reports whether the settings change what a replica runs with,
// so the model's replicas are replaced.
func (s ModelSettings) reshapes() bool {
	return s.ContextLength != nil || s.Options != nil || s.Args != nil || s.Resources != nil || s.Adapters != nil
}

// checkReshape checks, before anything changes, that next (the model m
// with its new shape) is one its engine takes and that its replicas fit
// on the node once m's replicas are gone. a.mu is held.
func (a *App) checkReshape(m, next *catalog.Model, f *fleet.Fleet) error {
	ps, _, err := a.loadShapes(next) // each profile's engine
	if err != nil && a.cluster == nil {
		return apiErr(http.StatusBadRequest, "model %q: %v", m.Name, err)
	}
	for i, p := range ps { // in a cluster this node need not have the engine
		if err := catalog.CheckEngineSettings(next.Shape(i), p.Info()); err != nil {
			return apiErr(http.StatusBadRequest, "%v", err)
		}
	}
	if a.cluster != nil {
		// Each node replaces its own replicas in place (rollInPlace), so
		// the new shape needs the room the old one leaves on that node;
		// a node that cannot start it says why in the answer.
		return nil
	}
	n := next.Scaling.MinReplicas()
	if f != nil {
		n = max(n, f.ReplicaCount())
	}
	if n == 0 || next.Scaling.Kept() {
		n = 1
	}
	pl := a.node.Ledger.PlanWithout(next, n, a.nodeName(), f)
	if !pl.Fits {
		return apiErr(http.StatusConflict, "model %q cannot be changed: %d replica(s) of its new shape (%s each) do not fit on the node even in place of its current ones: %s; nothing was changed",
			m.Name, n, next.Needs(), pl.Reason)
	}
	return nil
}

// rollTimeout bounds a whole rolling replacement.
func (a *App) rollTimeout(n int) time.Duration {
	return time.Duration(n+1) * (time.Duration(a.StartTimeout) + time.Minute)
}

// rollModel replaces the model's replicas after a change (or none, for a
// restart) and answers with the rollout.
func (a *App) rollModel(w http.ResponseWriter, r *http.Request, f *fleet.Fleet, reason, note string) error {
	n := f.ReplicaCount()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), a.rollTimeout(n))
	defer cancel()
	out, err := f.Roll(ctx, reason)
	out.ModelStatus, out.Note = f.Status(), note
	if err != nil {
		return apiErr(http.StatusBadGateway, "%v; replaced so far: %v, started: %v (the model keeps what runs; retry with POST /llm/models/%s/restart)", err, out.Replaced, out.Started, f.Model().Name)
	}
	return writeJSON(w, out)
}

// restartModel answers POST /llm/models/<name>/restart: every replica is
// replaced as a live change replaces them, with no change.
func (a *App) restartModel(w http.ResponseWriter, r *http.Request, name string) error {
	a.mu.Lock()
	m, ok := a.v().cat.ByName[name]
	var f *fleet.Fleet
	if ok {
		f = a.v().fleets[m.Name]
	}
	a.mu.Unlock()
	if !ok || f == nil && a.cluster == nil {
		return apiErr(http.StatusNotFound, "no model %q", name)
	}
	a.audit(r, "model restarted", zap.String("model", m.Name))
	const reason = "its model was restarted by an administrator"
	if a.cluster == nil {
		return a.rollModel(w, r, f, reason, "")
	}
	return a.rollClusterAnswer(w, r, m, f, reason, "")
}

// rollClusterAnswer replaces the model's replicas on every live node in
// turn, each old one draining before its replacement starts (the node
// keeps the count the cluster's plan gives it) while the other nodes'
// serve, and answers with the rollout.
func (a *App) rollClusterAnswer(w http.ResponseWriter, r *http.Request, m *catalog.Model, f *fleet.Fleet, reason, note string) error {
	n := 1
	if f != nil {
		n = max(f.ReplicaCount(), 1)
	}
	nodes := a.cluster.NodeCount()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), time.Duration(nodes)*a.rollTimeout(n))
	defer cancel()
	out, err := a.rollCluster(ctx, m, f, reason)
	out.ModelStatus = llmapi.ModelStatus{Name: m.Name}
	if f != nil {
		out.ModelStatus = f.Status()
	}
	if note != "" {
		out.Note = note + "; " + out.Note
	}
	if err != nil {
		return apiErr(http.StatusBadGateway, "%v; replaced so far: %v, started: %v (the model keeps what runs; retry with POST /llm/models/%s/restart)", err, out.Replaced, out.Started, m.Name)
	}
	return writeJSON(w, out)
}

// rekey files the fleet of m, changed live, under the key its new shape
// gives in the fleet pool, so a later reload of a config with the change
// (laid over the file, or from storage) keeps the fleet and its replicas
// instead of replacing them again. a.mu is held.
func (a *App) rekey(f *fleet.Fleet, m *catalog.Model) {
	_, pkey, err := a.loadShapes(m) // as provisionModel keys it
	old := a.fkeys[m.Name]
	if err != nil || old == "" {
		return
	}
	key := m.Key(pkey)
	if key == old {
		return
	}
	v, _, err := fleets.LoadOrNew(key, func() (caddy.Destructor, error) { return f, nil })
	if err != nil {
		return
	}
	if v.(*fleet.Fleet) != f {
		// Another config with that shape still runs its own fleet.
		_, _ = fleets.Delete(key)
		return
	}
	f.MarkRekeyed()
	a.fkeys[m.Name] = key
	_, _ = fleets.Delete(old)
}
