package llm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
)

func init() {
	caddy.RegisterModule(Admin{})
}

// Admin is admin.api.llm: the llm app's routes under /llm/ on Caddy's
// admin endpoint.
//
//	GET /llm/models          every model with its state and replicas
//	GET /llm/models/<name>   one model
//	GET /llm/engines         the engine plugins
//	GET /llm/keys            API keys (never their secrets)
//	POST /llm/keys           create a key: {"project":"org/team/project","id":"…"}; the secret is shown once
//	GET /llm/keys/<id>       one key with its levels and effective limits
//	DELETE /llm/keys/<id>    revoke a key created here
//	POST /llm/keys/<id>/rotate  replace a key's secret; the old one stops working
//	GET /llm/usage?project=…&from=&to=  usage by model (also org=, team=, key=)
//	GET /llm/cache           cache entries and outcomes
//	POST /llm/cache/purge    remove entries: {"model":…,"scope":…} (both optional)
type Admin struct{}

// CaddyModule returns the Caddy module information.
func (Admin) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.llm",
		New: func() caddy.Module { return new(Admin) },
	}
}

// Routes returns the admin routes.
func (Admin) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{
		{Pattern: "/llm/models", Handler: caddy.AdminHandlerFunc(getModels)},
		{Pattern: "/llm/models/", Handler: caddy.AdminHandlerFunc(getModel)},
		{Pattern: "/llm/engines", Handler: caddy.AdminHandlerFunc(getEngines)},
		{Pattern: "/llm/keys", Handler: caddy.AdminHandlerFunc(handleKeys)},
		{Pattern: "/llm/keys/", Handler: caddy.AdminHandlerFunc(handleKey)},
		{Pattern: "/llm/usage", Handler: caddy.AdminHandlerFunc(getUsage)},
		{Pattern: "/llm/cache", Handler: caddy.AdminHandlerFunc(getCacheStats)},
		{Pattern: "/llm/cache/purge", Handler: caddy.AdminHandlerFunc(purgeCache)},
	}
}

func current(r *http.Request) (*App, error) {
	if r.Method != http.MethodGet {
		return nil, caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed; use GET", r.Method)}
	}
	return running()
}

func running() (*App, error) {
	a := active.Load()
	if a == nil {
		return nil, caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("the llm app is not running; add an llm global option to the config")}
	}
	return a, nil
}

func getModels(w http.ResponseWriter, r *http.Request) error {
	a, err := current(r)
	if err != nil {
		return err
	}
	return writeJSON(w, a.Status())
}

func getModel(w http.ResponseWriter, r *http.Request) error {
	a, err := current(r)
	if err != nil {
		return err
	}
	name := strings.TrimPrefix(r.URL.Path, "/llm/models/")
	m, err := a.Lookup(name)
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: err}
	}
	return writeJSON(w, a.fleets[m.Name].status())
}

// EngineStatus describes one engine plugin.
type EngineStatus struct {
	Type         string   `json:"type"`
	Version      string   `json:"version"`
	PID          int      `json:"pid"`
	Capabilities []string `json:"capabilities"`
	Formats      []string `json:"formats"`
}

func getEngines(w http.ResponseWriter, r *http.Request) error {
	a, err := current(r)
	if err != nil {
		return err
	}
	out := []EngineStatus{}
	for typ, p := range a.engines {
		i := p.Info()
		out = append(out, EngineStatus{Type: typ, Version: i.Version, PID: p.PID(),
			Capabilities: i.Capabilities, Formats: i.Formats})
	}
	return writeJSON(w, out)
}

func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(v)
}

// Interface guards
var _ caddy.AdminRouter = (*Admin)(nil)
