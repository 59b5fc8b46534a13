package llm

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"sort"
	"strings"

	"go.uber.org/zap"
)

// stoppedStorageKey keeps the models an administrator stopped, so they
// stay stopped across restarts.
const stoppedStorageKey = "llmgw/stopped-models.json"

func (a *App) loadStopped(ctx context.Context) error {
	if a.storage == nil {
		return nil
	}
	b, err := a.storage.Load(ctx, stoppedStorageKey)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var names []string
	if err := json.Unmarshal(b, &names); err != nil {
		return err
	}
	for _, n := range names {
		if f, ok := a.v().fleets[n]; ok {
			f.SetStopped(true)
		}
	}
	return nil
}

func (a *App) saveStopped(ctx context.Context) error {
	var names []string
	for n, f := range a.v().fleets {
		if f.Stopped() {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	b, _ := json.Marshal(names)
	if a.storage == nil {
		return nil
	}
	return a.storage.Store(ctx, stoppedStorageKey, b)
}

// testModel answers POST /llm/models/<name>/test: the model's replicas
// on this node probed now, as their health checks do (fleet.Test).
func (a *App) testModel(w http.ResponseWriter, r *http.Request, name string) error {
	m, err := a.Lookup(name)
	if err != nil {
		return apiErr(http.StatusNotFound, "%v", err)
	}
	return writeJSON(w, a.v().fleets[m.Name].Test(r.Context(), &http.Client{}))
}

// modelAction answers POST /llm/models/<name>/stop|start.
func (a *App) modelAction(w http.ResponseWriter, r *http.Request, name, action string) error {
	m, err := a.Lookup(name)
	if err != nil {
		return apiErr(http.StatusNotFound, "%v", err)
	}
	f := a.v().fleets[m.Name]
	switch action {
	case "stop":
		f.SetStopped(true)
	case "start":
		f.SetStopped(false)
	default:
		return apiErr(http.StatusNotFound, "no action %q; use stop or start", action)
	}
	if err := a.saveStopped(r.Context()); err != nil {
		return apiErr(http.StatusInternalServerError, "saving the model's state: %v", err)
	}
	a.audit(r, map[string]string{"stop": "model stopped", "start": "model started"}[action], zap.String("model", m.Name))
	return writeJSON(w, f.Status())
}

// restartReplica answers POST /llm/replicas/<id>/restart.
func restartReplica(w http.ResponseWriter, r *http.Request) error {
	a, err := running()
	if err != nil {
		return err
	}
	id, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/llm/replicas/"), "/restart")
	if !ok || r.Method != http.MethodPost {
		return apiErr(http.StatusNotFound, "use POST /llm/replicas/<id>/restart")
	}
	for _, f := range a.v().fleets {
		if f.Restart(id) {
			a.audit(r, "replica restarted", zap.String("replica", id))
			return writeJSON(w, map[string]string{"restarted": id})
		}
	}
	return apiErr(http.StatusNotFound, "no replica %q; GET /llm/models lists them", id)
}
