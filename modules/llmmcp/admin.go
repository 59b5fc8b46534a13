package llmmcp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/llmgw/llmgw/modules/llm"
)

func init() {
	caddy.RegisterModule(Admin{})
}

// Admin is admin.api.llm_mcp: the MCP gateway's routes on Caddy's admin
// endpoint.
//
//	GET    /llm/mcp/servers                 servers with health and tools
//	POST   /llm/mcp/servers                 add a server (a ServerConfig as JSON)
//	DELETE /llm/mcp/servers/<name>          remove a server added at runtime
//	POST   /llm/mcp/servers/<name>/disable  stop listing and calling it
//	POST   /llm/mcp/servers/<name>/enable   list and call it again
//	POST   /llm/mcp/servers/<name>/authorize      start OAuth: {"level":"key","name":"k1"} → authorization_url
//	GET    /llm/mcp/servers/<name>/authorization  tenants and their token state (never the tokens)
//	DELETE /llm/mcp/servers/<name>/authorization?level=key&name=k1  revoke and forget a tenant's tokens
//
// Changes apply to every llm_mcp handler at once, survive reloads and are
// kept in Caddy's storage so they survive restarts.
type Admin struct{}

// CaddyModule returns the Caddy module information.
func (Admin) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.llm_mcp",
		New: func() caddy.Module { return new(Admin) },
	}
}

// Routes returns the admin routes.
func (Admin) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{
		{Pattern: "/llm/mcp/servers", Handler: caddy.AdminHandlerFunc(servers)},
		{Pattern: "/llm/mcp/servers/", Handler: caddy.AdminHandlerFunc(server)},
	}
}

// ServerStatus is one upstream as the admin API shows it: never its
// headers' or environment's values.
type ServerStatus struct {
	Name      string `json:"name"`
	Transport string `json:"transport"`
	Target    string `json:"target"`
	// Headers and Env are the server's, as given, each value masked:
	// "secret:NAME" as is, any other value as "*** sha256:<8 hex>" (it
	// tells two values apart, never shows one).
	Headers   map[string]string `json:"headers,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Up        bool              `json:"up"`
	Enabled   bool              `json:"enabled"`
	Runtime   bool              `json:"runtime,omitempty"`
	Since     time.Time         `json:"since,omitzero"`
	Restarts  int               `json:"restarts"`
	LastError string            `json:"last_error,omitempty"`
	Tools     []string          `json:"tools"`
	Resources []string          `json:"resources,omitempty"`
	Prompts   []string          `json:"prompts,omitempty"`
	// Tenants are the sessions of tenants with their own credential.
	Tenants []TenantSession `json:"tenants,omitempty"`
	// OAuth is how the server's tokens are kept, for an OAuth server:
	// "per_tenant" or "shared"; see .../authorization for their state.
	OAuth string `json:"oauth,omitempty"`
}

// TenantSession is the state of one tenant's own session with a server.
type TenantSession struct {
	Level     string `json:"level"`
	Name      string `json:"name"`
	Up        bool   `json:"up"`
	LastError string `json:"last_error,omitempty"`
}

func gatewaysNow() []*gateway {
	liveMu.Lock()
	defer liveMu.Unlock()
	out := make([]*gateway, 0, len(live))
	for g := range live {
		out = append(out, g)
	}
	return out
}

// Status lists every server of every running llm_mcp handler, by name.
func Status() []ServerStatus {
	seen := map[string]bool{}
	out := []ServerStatus{} // [] when there is none, never null
	for _, g := range gatewaysNow() {
		g.mu.Lock()
		for name, u := range g.upstreams {
			if seen[name] {
				continue
			}
			seen[name] = true
			_, rt := g.configured[name]
			st := statusOf(u, !rt, g.sep)
			for _, a := range g.alts[name] {
				up, lastErr, _, _ := a.up.status()
				st.Tenants = append(st.Tenants, TenantSession{Level: a.kind, Name: a.name, Up: up, LastError: lastErr})
				if u.dormant && up {
					// tokens per tenant: up while any tenant's session is
					st.Up, st.LastError = true, ""
				}
			}
			if e := g.exposed[name]; u.dormant && e != nil {
				st.Tools, st.Resources, st.Prompts = catalogNames(name, e.cat, g.sep)
			}
			out = append(out, st)
		}
		g.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func statusOf(u *upstream, runtime bool, sep string) ServerStatus {
	up, lastErr, restarts, since := u.status()
	s := ServerStatus{Name: u.cfg.Name, Transport: u.cfg.Transport, Target: targetOf(u.cfg), Up: up, Runtime: runtime,
		Enabled: !u.cfg.Disabled && !isDisabled(u.cfg.Name), Since: since, Restarts: restarts, LastError: lastErr, Tools: []string{}}
	if u.cfg.Command != "" {
		s.Transport = "stdio"
	}
	given := u.cfg
	if u.cfg.given != nil {
		given = u.cfg.given
	}
	s.Headers, s.Env = masked(given.Headers), masked(given.Env)
	if o := u.cfg.OAuth; o != nil {
		s.OAuth = "per_tenant"
		if o.shared() {
			s.OAuth = "shared"
		}
	}
	s.Tools, s.Resources, s.Prompts = catalogNames(u.cfg.Name, u.catalog.Load(), sep)
	return s
}

func catalogNames(server string, cat *catalog, sep string) (tools, resources, prompts []string) {
	tools = []string{}
	for _, t := range cat.tools {
		tools = append(tools, server+sep+t.Name)
	}
	for _, r := range cat.resources {
		resources = append(resources, r.URI)
	}
	for _, p := range cat.prompts {
		prompts = append(prompts, server+sep+p.Name)
	}
	return tools, resources, prompts
}

func servers(w http.ResponseWriter, r *http.Request) error {
	switch r.Method {
	case http.MethodGet:
		return writeJSON(w, Status())
	case http.MethodPost:
		return addServer(w, r)
	}
	return apiErr(http.StatusMethodNotAllowed, "method %s not allowed; use GET or POST", r.Method)
}

// addServer adds a server at run time. What it may reach and run is the
// config file's decision: a url is checked against the llm app's egress
// policy (runtime_hosts), values are taken as they are or as secret:NAME,
// and a command must be in a handler's allow_commands and be added by
// the admin role.
func addServer(w http.ResponseWriter, r *http.Request) error {
	var c ServerConfig
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return apiErr(http.StatusBadRequest, "decoding the server: %v", err)
	}
	if err := c.validate(); err != nil {
		return apiErr(http.StatusBadRequest, "%v", err)
	}
	gws := gatewaysNow()
	if len(gws) == 0 {
		return apiErr(http.StatusNotFound, "no llm_mcp handler is running; add one to a site's route")
	}
	targets, err := runtimeTargets(r, &c, gws)
	if err != nil {
		return err
	}
	app := appOf(gws)
	resolved, err := resolveRuntime(app, &c)
	if err != nil {
		return apiErr(http.StatusBadRequest, "%v", err)
	}
	if c.URL != "" {
		if _, err := app.Egress().CheckURL(r.Context(), resolved.URL); err != nil {
			return apiErr(http.StatusBadRequest, "mcp server %q: url: %v", c.Name, err)
		}
	}
	if err := storeAdded(&c); err != nil {
		return err
	}
	for _, g := range targets {
		if err := g.attach(resolved); err != nil {
			return apiErr(http.StatusInternalServerError, "%v", err)
		}
	}
	audit(r, "mcp server added", zap.String("server", c.Name), zap.String("target", targetOf(resolved)))
	w.WriteHeader(http.StatusCreated)
	return writeJSON(w, map[string]string{"added": c.Name})
}

// storeAdded keeps a server added at run time as it was given (its
// secret:NAME references, or its values), in memory and storage.
func storeAdded(c *ServerConfig) error {
	rtMu.Lock()
	defer rtMu.Unlock()
	if _, ok := rtAdded[c.Name]; ok {
		return apiErr(http.StatusConflict, "mcp server %q exists; remove it first", c.Name)
	}
	rtAdded[c.Name] = c
	if err := save(); err != nil {
		return apiErr(http.StatusInternalServerError, "storing the server: %v", err)
	}
	return nil
}

// runtimeTargets are the gateways a server added at run time goes to, or
// the error saying why it may not be added: a command server needs the
// admin role and a handler whose allow_commands lists its command.
func runtimeTargets(r *http.Request, c *ServerConfig, gws []*gateway) ([]*gateway, error) {
	if c.Command != "" && !llm.HostOwner(r.Context()) {
		return nil, apiErr(http.StatusForbidden, "adding a command server needs the admin role: it runs a program on the host; an operator may add url servers, or an admin adds it (or it goes in the config file)")
	}
	var out []*gateway
	var why error
	for _, g := range gws {
		if _, ok := g.configured[c.Name]; ok {
			return nil, apiErr(http.StatusConflict, "mcp server %q is in the config; change it there", c.Name)
		}
		if err := g.runtimeAllowed(c); err != nil {
			why = err
			continue
		}
		out = append(out, g)
	}
	if len(out) == 0 {
		if c.Command != "" {
			return nil, apiErr(http.StatusForbidden, "%v", why)
		}
		return nil, apiErr(http.StatusBadRequest, "%v", why)
	}
	return out, nil
}

// masked is m with every value masked (llm.Masked).
func masked(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = llm.Masked(v)
	}
	return out
}

// appOf is the llm app of the running gateways: the newest config's.
func appOf(gws []*gateway) *llm.App {
	for _, g := range gws {
		if a := g.app.Load(); a != nil {
			return a
		}
	}
	return nil
}

// targetOf is where a server is, as the admin API and the audit log show
// it: a URL without its user info, query or fragment (they may hold a
// credential), or the command.
func targetOf(c *ServerConfig) string {
	if c.Command != "" {
		return c.Command
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return ""
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

func server(w http.ResponseWriter, r *http.Request) error {
	name, action, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/llm/mcp/servers/"), "/")
	if err := checkName("mcp server", name); err != nil {
		return apiErr(http.StatusBadRequest, "%v; see GET /llm/mcp/servers for the servers", err)
	}
	gws := gatewaysNow()
	known := false
	for _, g := range gws {
		g.mu.Lock()
		_, ok := g.upstreams[name]
		g.mu.Unlock()
		known = known || ok
	}
	rtMu.Lock()
	_, added := rtAdded[name]
	rtMu.Unlock()
	if !known && !added {
		return apiErr(http.StatusNotFound, "no mcp server %q; see GET /llm/mcp/servers", name)
	}
	switch {
	case action == "authorize" || action == "authorization":
		return oauthRoute(w, r, name, action)
	case r.Method == http.MethodGet && action == "":
		for _, s := range Status() {
			if s.Name == name {
				return writeJSON(w, s)
			}
		}
		return apiErr(http.StatusNotFound, "no mcp server %q", name)
	case r.Method == http.MethodDelete && action == "":
		if !added {
			return apiErr(http.StatusConflict, "mcp server %q is in the config: remove it there, or disable it", name)
		}
		rtMu.Lock()
		delete(rtAdded, name)
		delete(rtOff, name)
		err := save()
		rtMu.Unlock()
		for _, g := range gws {
			if _, ok := g.configured[name]; !ok {
				g.detach(name)
			}
		}
		audit(r, "mcp server removed", zap.String("server", name))
		return errOr(err, w, map[string]string{"removed": name})
	case r.Method == http.MethodPost && (action == "enable" || action == "disable"):
		rtMu.Lock()
		if action == "disable" {
			rtOff[name] = true
		} else {
			delete(rtOff, name)
		}
		err := save()
		rtMu.Unlock()
		for _, g := range gws {
			g.sync(name)
		}
		audit(r, "mcp server "+action+"d", zap.String("server", name))
		return errOr(err, w, map[string]string{action + "d": name})
	}
	return apiErr(http.StatusMethodNotAllowed, "%s %s is not a route; see the llm_mcp admin routes", r.Method, r.URL.Path)
}

func errOr(err error, w http.ResponseWriter, v any) error {
	if err != nil {
		return apiErr(http.StatusInternalServerError, "storing the change: %v", err)
	}
	return writeJSON(w, v)
}

func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(v)
}

func apiErr(status int, format string, args ...any) error {
	return caddy.APIError{HTTPStatus: status, Err: fmt.Errorf(format, args...)}
}

// audit logs an administrative change with who made it, as the llm app's
// admin routes do.
func audit(r *http.Request, msg string, fields ...zap.Field) {
	actor := r.Header.Get("X-Llmgw-Actor")
	if actor == "" {
		actor = "unknown"
	}
	if len(actor) > 200 {
		actor = actor[:200]
	}
	fields = append(fields, zap.String("actor", actor), zap.Time("at", time.Now()))
	for i, f := range fields {
		if f.Type == zapcore.StringType && len(f.String) > 200 {
			fields[i].String = f.String[:200]
		}
	}
	caddy.Log().Named("audit").Info(msg, fields...)
}

// Interface guards
var _ caddy.AdminRouter = (*Admin)(nil)

func caddyLog() *zap.Logger { return caddy.Log().Named("llm_mcp") }
