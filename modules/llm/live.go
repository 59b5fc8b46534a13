package llm

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/llmgw/llmgw/modules/llm/catalog"
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
func (a *App) checkReshape(m, next *catalog.Model, f *fleet) error {
	p, _, err := a.loadEngine(next.Engine)
	if a.cluster != nil {
		// Each node replaces its own replicas in place (rollInPlace), so
		// the new shape needs the room the old one leaves on that node;
		// a node that cannot start it says why in the answer. This node
		// need not have the engine.
		if err == nil {
			if err := catalog.CheckEngineSettings(next, p.Info()); err != nil {
				return apiErr(http.StatusBadRequest, "%v", err)
			}
		}
		return nil
	}
	if err != nil {
		return apiErr(http.StatusBadRequest, "model %q: %v", m.Name, err)
	}
	if err := catalog.CheckEngineSettings(next, p.Info()); err != nil {
		return apiErr(http.StatusBadRequest, "%v", err)
	}
	n := next.Scaling.MinReplicas()
	if f != nil {
		f.mu.Lock()
		n = max(n, len(f.replicas))
		f.mu.Unlock()
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

// roll replaces each replica the fleet has now with a new one started
// from the fleet's model as it is now. The new one starts beside the old
// when the node has room; the old one drains once the new one is ready.
func (f *fleet) roll(ctx context.Context, reason string) (llmapi.Rollout, error) {
	return f.rollWith(ctx, reason, true)
}

// rollInPlace replaces each of the fleet's replicas: the old one drains
// first and a new one takes its place, so that the node keeps the count
// the cluster's plan gives it.
func (f *fleet) rollInPlace(ctx context.Context, reason string) (llmapi.Rollout, error) {
	return f.rollWith(ctx, reason, false)
}

// rollWith is roll, starting new replicas beside the old only when
// beside is allowed (and the node has room).
func (f *fleet) rollWith(ctx context.Context, reason string, besideOK bool) (llmapi.Rollout, error) {
	f.rolling.Lock()
	defer f.rolling.Unlock()
	f.mu.Lock()
	old := slices.Clone(f.replicas)
	f.mu.Unlock()
	out := llmapi.Rollout{Replaced: []string{}, Started: []string{}}
	known := map[*Replica]bool{}
	for _, r := range old {
		known[r] = true
	}
	for _, o := range old {
		f.mu.Lock()
		beside := besideOK && f.canStartLocked() && f.startLocked()
		f.mu.Unlock()
		if !beside {
			out.OneAtATime = true
			f.retire(o, reason)
			out.Replaced = append(out.Replaced, o.ID)
			if err := f.startWhenRoom(ctx); err != nil {
				return out, err
			}
		}
		r, err := f.awaitNew(ctx, known)
		if err != nil {
			return out, err
		}
		known[r] = true
		out.Started = append(out.Started, r.ID)
		if beside {
			f.retire(o, reason)
			out.Replaced = append(out.Replaced, o.ID)
		}
	}
	return out, nil
}

// startWhenRoom starts a replica as soon as the node has room (a drained
// replica freed it), unless one is already starting.
func (f *fleet) startWhenRoom(ctx context.Context) error {
	for {
		f.mu.Lock()
		if f.starting > 0 {
			f.mu.Unlock()
			return nil
		}
		if f.canStartLocked() && f.startLocked() {
			f.mu.Unlock()
			return nil
		}
		why := f.waitFor
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("model %q: no room for its new replica: %s", f.m().Name, why)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// awaitNew waits for a ready replica not in known.
func (f *fleet) awaitNew(ctx context.Context, known map[*Replica]bool) (*Replica, error) {
	for {
		f.mu.Lock()
		for _, r := range f.replicas {
			if !known[r] && r.State() == ReplicaReady {
				f.mu.Unlock()
				return r, nil
			}
		}
		if f.starting == 0 {
			err := f.lastErr
			f.mu.Unlock()
			if err == nil {
				err = fmt.Errorf("no new replica is starting")
			}
			return nil, fmt.Errorf("model %q: its new replica did not start: %w", f.m().Name, err)
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("model %q: its new replica was not ready in time", f.m().Name)
		}
	}
}

// rollModel replaces the model's replicas after a change (or none, for a
// restart) and answers with the rollout.
func (a *App) rollModel(w http.ResponseWriter, r *http.Request, f *fleet, reason, note string) error {
	f.mu.Lock()
	n := len(f.replicas)
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), a.rollTimeout(n))
	defer cancel()
	out, err := f.roll(ctx, reason)
	out.ModelStatus, out.Note = f.status(), note
	if err != nil {
		return apiErr(http.StatusBadGateway, "%v; replaced so far: %v, started: %v (the model keeps what runs; retry with POST /llm/models/%s/restart)", err, out.Replaced, out.Started, f.m().Name)
	}
	return writeJSON(w, out)
}

// restartModel answers POST /llm/models/<name>/restart: every replica is
// replaced as a live change replaces them, with no change.
func (a *App) restartModel(w http.ResponseWriter, r *http.Request, name string) error {
	a.mu.Lock()
	m, ok := a.v().cat.ByName[name]
	var f *fleet
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
func (a *App) rollClusterAnswer(w http.ResponseWriter, r *http.Request, m *catalog.Model, f *fleet, reason, note string) error {
	n := 1
	if f != nil {
		f.mu.Lock()
		n = max(len(f.replicas), 1)
		f.mu.Unlock()
	}
	a.cluster.mu.Lock()
	nodes := len(a.cluster.nodes) + 1
	a.cluster.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), time.Duration(nodes)*a.rollTimeout(n))
	defer cancel()
	out, err := a.rollCluster(ctx, m, f, reason)
	out.ModelStatus = llmapi.ModelStatus{Name: m.Name}
	if f != nil {
		out.ModelStatus = f.status()
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
func (a *App) rekey(f *fleet, m *catalog.Model) {
	_, pkey, err := a.loadEngine(m.Engine)
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
	if v.(*fleet) != f {
		// Another config with that shape still runs its own fleet.
		_, _ = fleets.Delete(key)
		return
	}
	f.rekeyed.Add(1)
	a.fkeys[m.Name] = key
	_, _ = fleets.Delete(old)
}
