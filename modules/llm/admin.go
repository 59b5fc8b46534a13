package llm

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/modules/llm/enginelist"
	"github.com/llmgw/llmgw/plugins/engine"
)

func init() {
	caddy.RegisterModule(Admin{})
}

// Admin is admin.api.llm: the llm app's routes under /llm/ on Caddy's
// admin endpoint. GET /llm/openapi.json describes every one of them (see
// operations).
type Admin struct{}

// CaddyModule returns the Caddy module information.
func (Admin) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.llm",
		New: func() caddy.Module { return new(Admin) },
	}
}

func current(r *http.Request) (*App, error) {
	if r.Method != http.MethodGet {
		return nil, caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed; use GET", r.Method)}
	}
	return running()
}

func running() (*App, error) {
	a := runningApp()
	if a == nil {
		return nil, caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("the llm app is not running; add an llm global option to the config")}
	}
	return a, nil
}

func getModels(w http.ResponseWriter, r *http.Request) error {
	if r.Method == http.MethodPost {
		a, err := running()
		if err != nil {
			return err
		}
		return a.addModel(w, r)
	}
	a, err := current(r)
	if err != nil {
		return err
	}
	return writeJSON(w, a.Status())
}

func getModel(w http.ResponseWriter, r *http.Request) error {
	rest := strings.TrimPrefix(r.URL.Path, "/llm/models/")
	if name, action, ok := strings.Cut(rest, "/"); ok {
		if handled, err := updatesRoute(w, r, name, action); handled { // updates.go
			return err
		}
	}
	if name, action, ok := strings.Cut(rest, "/"); ok && r.Method == http.MethodPost {
		a, err := running()
		if err != nil {
			return err
		}
		switch action {
		case "scale":
			return a.scaleModel(w, r, name)
		case "settings":
			return a.setModel(w, r, name)
		case "restart":
			return a.restartModel(w, r, name)
		case "test":
			return a.testModel(w, r, name)
		case "retry":
			return a.retryModel(w, r, name)
		case "licence/accept":
			return a.acceptLicence(w, r, name) // licences.go
		}
		return a.modelAction(w, r, name, action)
	}
	if r.Method == http.MethodDelete {
		a, err := running()
		if err != nil {
			return err
		}
		return a.removeModel(w, r, rest)
	}
	a, err := current(r)
	if err != nil {
		return err
	}
	name := rest
	m, err := a.Lookup(name)
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: err}
	}
	return writeJSON(w, a.v().fleets[m.Name].Status())
}

func getNode(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return apiErr(http.StatusMethodNotAllowed, "use GET")
	}
	a, err := running()
	if err != nil {
		return err
	}
	return writeJSON(w, a.node.Ledger.Status())
}

// getEngines lists every engine: those running for a model, and the
// others installed (built in, configured, plugin files) as they describe
// themselves.
func getEngines(w http.ResponseWriter, r *http.Request) error {
	a, err := current(r)
	if err != nil {
		return err
	}
	types := enginelist.Installed(slices.Collect(maps.Keys(firstParty)), slices.Collect(maps.Keys(a.Engines)), a.PluginDir)
	return writeJSON(w, enginelist.List(r.Context(), types, enginelist.Source{Command: a.engineCommand, Cache: a.described,
		Running: func(typ string) (engine.Info, int, bool) {
			if p, ok := a.engines.Get(typ); ok {
				return p.Info(), p.PID(), true
			}
			return engine.Info{}, 0, false
		}}))
}

func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(v)
}

// Interface guards
var _ caddy.AdminRouter = (*Admin)(nil)
