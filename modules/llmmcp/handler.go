// Package llmmcp is the llm_mcp handler: an MCP gateway that serves the
// Model Context Protocol at a route's path and aggregates the tools,
// resources and prompts of upstream MCP servers under namespaced names.
package llmmcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/internal/egress"
	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/openai"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Handler is http.handlers.llm_mcp. It serves MCP over Streamable HTTP at
// the route's path (POST for requests, GET for the server's stream, DELETE
// to end a session), and the older HTTP+SSE transport under SSEPath
// (GET opens the event stream, POSTs go to the endpoint it announces).
//
// Every upstream server's tools, resources and prompts are listed under
// "<server>__<name>" (see Separator); resources keep their URIs. When
// llm_quota runs before it on the route, a key lists and calls only the
// tools its tenancy's `tools` globs allow (resources and prompts are
// matched the same way, by "<server>__<name>" or "<server>.<name>"); a
// call to another is refused with a
// JSON-RPC error naming the key and the tool. Upstream failures (a server
// down or restarting, a timeout) come back as tool errors (isError) that
// say what happened. The client's own Authorization header is never sent
// upstream: each upstream gets only its own headers or environment.
//
// It sets the access log's llm_tool field to the called tool.
type Handler struct {
	// Servers are the upstream MCP servers.
	Servers []*ServerConfig `json:"servers,omitempty"`
	// SSEPath is the path suffix, under the route's path, of the legacy
	// HTTP+SSE transport (protocol 2024-11-05). Default: /sse.
	SSEPath string `json:"sse_path,omitempty"`
	// SessionTimeout closes a client session idle this long.
	// Default: 1h.
	SessionTimeout caddy.Duration `json:"session_timeout,omitempty"`
	// Separator joins a server's name and its tool's (or prompt's) name
	// in what clients see: "<server><separator><tool>". Letters, digits,
	// '-', '_' or '.'; "." gives the names earlier llmgw used
	// ("github.search"), which OpenAI and Anthropic refuse as function
	// names. Default: "__" ("github__search"). Tenancy tools globs
	// match either way: "github.*" and "github__*" both allow every tool
	// of server github.
	Separator string `json:"separator,omitempty"`
	// AllowCommands are the commands (globs on the absolute, cleaned
	// path, such as /usr/local/bin/mcp-*) that an admin may run as a
	// local server added at run time (POST /llm/mcp/servers with a
	// command). Empty: local servers come from the config file only.
	// Only the admin role (or Caddy's own admin endpoint) may add one;
	// the operator role may add url servers only.
	AllowCommands []string `json:"allow_commands,omitempty"`

	gw     *gateway
	app    *llm.App // for the request log; nil without the llm app
	key    string
	logger *zap.Logger
}

// ServerConfig is one upstream MCP server: remote (URL) or a local
// process llmgw starts and talks to over stdio (Command).
type ServerConfig struct {
	// Name is the namespace of the server's tools: "<name>__<tool>".
	// 1 to 64 letters, digits, '-' and '_', without the separator.
	// Required.
	Name string `json:"name"`
	// URL of a remote server's MCP endpoint (http or https).
	URL string `json:"url,omitempty"`
	// Transport of a remote server: "streamable" (Streamable HTTP) or
	// "sse" (the 2024-11-05 HTTP+SSE transport). Default: streamable.
	Transport string `json:"transport,omitempty"`
	// Headers sent to a remote server on every request, such as its
	// Authorization. In the config file, values may use placeholders
	// ({env.TOKEN}, {file./run/secrets/token}), resolved when the config
	// loads; given through the admin API, a value is taken as it is, or
	// as secret:NAME for a secret the llm app declares (placeholders are
	// refused). They are never logged or shown by the admin API.
	Headers map[string]string `json:"headers,omitempty"`
	// Command starts a local server that speaks MCP on stdin/stdout.
	// It is restarted with backoff when it exits, and stopped with llmgw
	// (it runs in a process group of its own, stopped as a whole, and is
	// killed if llmgw dies). Through the admin API only the admin role
	// may add one, and only a command that AllowCommands lists.
	Command string `json:"command,omitempty"`
	// Args of Command.
	Args []string `json:"args,omitempty"`
	// Env of the local server, added to a minimal environment (PATH,
	// HOME, LANG, TMPDIR): llmgw's own environment is not passed on.
	// Values may use placeholders, resolved when the config loads.
	// Through the admin API, names that change what runs or loads
	// (LD_*, DYLD_*, PATH, NODE_OPTIONS, PYTHONPATH, ...) are refused.
	Env map[string]string `json:"env,omitempty"`
	// Dir is the local server's working directory. Default: llmgw's.
	// Through the admin API, an absolute path to a directory.
	Dir string `json:"dir,omitempty"`
	// Timeout bounds each call to this server; a call that takes longer
	// is answered with a tool error. Default: 60s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// Disabled servers are kept but not listed or called.
	Disabled bool `json:"disabled,omitempty"`
	// Tenants gives some tenants their own credential for this server:
	// their calls go through a session (for a command server, a process)
	// of their own, opened with these headers or env in place of the
	// server's. The most specific match wins (key, then project, team,
	// organisation); other tenants use the server's own credential. The
	// tools listed are the server's own session's.
	Tenants []*TenantCredential `json:"tenants,omitempty"`
	// OAuth makes llmgw get its credential for this (url) server by OAuth,
	// per tenant or shared, instead of static headers. See OAuthConfig.
	OAuth *OAuthConfig `json:"oauth,omitempty"`

	// added at run time: connects through egress (every address checked)
	runtime bool
	egress  *egress.Policy
	given   *ServerConfig // as given, before its values were resolved
}

// TenantCredential is one tenancy level's own credential for a server.
type TenantCredential struct {
	// Level is "key", "project", "team" or "org".
	Level string `json:"level"`
	// Name is the key's id, or the level's path: "acme",
	// "acme/research", "acme/research/alpha".
	Name string `json:"name"`
	// Headers replace or add to the server's headers (url servers).
	// Placeholders are resolved when the config loads.
	Headers map[string]string `json:"headers,omitempty"`
	// Env replaces or adds to the server's env (command servers).
	Env map[string]string `json:"env,omitempty"`
}

// kind is the level's name in llm.Level.Kind.
func (tc *TenantCredential) kind() string {
	if tc.Level == "org" {
		return "organisation"
	}
	return tc.Level
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.llm_mcp",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision resolves the servers' secrets and joins (or starts) the
// gateway for this config, which survives reloads that leave it unchanged.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	if h.SSEPath == "" {
		h.SSEPath = "/sse"
	}
	if h.SessionTimeout == 0 {
		h.SessionTimeout = caddy.Duration(time.Hour)
	}
	if h.Separator == "" {
		h.Separator = defaultSeparator
	}
	if err := registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return err
	}
	setStorage(ctx)
	var app *llm.App
	if a, err := ctx.AppIfConfigured("llm"); err == nil {
		app, _ = a.(*llm.App)
	}
	if err := h.Validate(); err != nil {
		return err
	}
	resolved, err := h.resolveServers(app)
	if err != nil {
		return err
	}
	h.app = app
	warnToolGlobs(h.logger, app, h.Servers, h.Separator) // names.go
	opts := gatewayOptions{sessionTimeout: time.Duration(h.SessionTimeout), sep: h.Separator, allow: h.AllowCommands, app: app}
	v, _, err := gateways.LoadOrNew(h.key, func() (caddy.Destructor, error) {
		return newGateway(h.logger, resolved, opts)
	})
	if err != nil {
		return fmt.Errorf("starting the mcp gateway: %w", err)
	}
	h.gw = v.(*gateway)
	h.gw.app.Store(app) // the newest config's: its secrets and runtime_hosts
	// Open event streams would hold a stopping server forever: when the
	// process exits (not on a reload, which keeps the sessions), they end.
	if srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok {
		gw := h.gw
		srv.RegisterOnShutdown(func() {
			if caddy.Exiting() {
				gw.closeSessions()
			}
		})
	}
	return nil
}

// resolveServers resolves the config file's servers (placeholders, and
// secret:NAME of app's secrets) and sets h.key, the hash of everything
// the gateway is built from.
func (h *Handler) resolveServers(app *llm.App) ([]*ServerConfig, error) {
	fileValue := func(v string) (string, error) { return app.FileValue(caddy.NewReplacer(), v) }
	resolved := make([]*ServerConfig, 0, len(h.Servers))
	for _, s := range h.Servers {
		r, err := s.resolve(fileValue)
		if err != nil {
			return nil, err
		}
		resolved = append(resolved, r)
	}
	raw, _ := json.Marshal(struct {
		S    []*ServerConfig
		P    string
		T    caddy.Duration
		Sep  string
		Cmds []string
	}{resolved, h.SSEPath, h.SessionTimeout, h.Separator, h.AllowCommands})
	sum := sha256.Sum256(raw)
	h.key = hex.EncodeToString(sum[:])
	return resolved, nil
}

// valueFunc gives what a configured value stands for: placeholders
// resolved for the config file's servers; for those added at run time,
// the value itself or a declared secret (llm.App.RuntimeValue).
type valueFunc func(string) (string, error)

// resolve returns a copy with defaults applied and values resolved.
func (s *ServerConfig) resolve(value valueFunc) (*ServerConfig, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	c := *s
	c.given = s
	if c.URL != "" && c.Transport == "" {
		c.Transport = "streamable"
	}
	if c.Timeout == 0 {
		c.Timeout = caddy.Duration(60 * time.Second)
	}
	var err error
	if c.Headers, err = resolveAll(value, s.Name, "header", s.Headers); err != nil {
		return nil, err
	}
	if c.Env, err = resolveAll(value, s.Name, "env", s.Env); err != nil {
		return nil, err
	}
	if s.OAuth != nil {
		o := *s.OAuth
		for _, f := range []struct {
			name string
			v    *string
		}{{"client_id", &o.ClientID}, {"client_secret", &o.ClientSecret}, {"redirect_url", &o.RedirectURL}} {
			if *f.v, err = value(*f.v); err != nil {
				return nil, fmt.Errorf("mcp server %q: oauth %s: %w", s.Name, f.name, err)
			}
		}
		c.OAuth = &o
	}
	c.Tenants = nil
	for _, tc := range s.Tenants {
		r := &TenantCredential{Level: tc.Level, Name: tc.Name}
		what := "tenant " + tc.Level + " " + tc.Name
		if r.Headers, err = resolveAll(value, s.Name, what+" header", tc.Headers); err != nil {
			return nil, err
		}
		if r.Env, err = resolveAll(value, s.Name, what+" env", tc.Env); err != nil {
			return nil, err
		}
		c.Tenants = append(c.Tenants, r)
	}
	return &c, nil
}

// base is the server's own connection config; forTenant a tenant's.
func (s *ServerConfig) base() *ServerConfig {
	c := *s
	c.Tenants = nil
	return &c
}

func (s *ServerConfig) forTenant(tc *TenantCredential) *ServerConfig {
	c := s.base()
	c.Headers, c.Env = merge(s.Headers, tc.Headers), merge(s.Env, tc.Env)
	return c
}

func merge(a, b map[string]string) map[string]string {
	if len(b) == 0 {
		return a
	}
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func resolveAll(value valueFunc, server, what string, m map[string]string) (map[string]string, error) {
	if m == nil {
		return nil, nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		r, err := value(v)
		if err != nil {
			return nil, fmt.Errorf("mcp server %q: %s %s: %w", server, what, k, err)
		}
		out[k] = r
	}
	return out, nil
}

func (s *ServerConfig) validate() error {
	if err := checkName("mcp server", s.Name); err != nil {
		return err
	}
	switch {
	case (s.URL == "") == (s.Command == ""):
		return fmt.Errorf("mcp server %q: set either url (a remote server) or command (a local stdio server)", s.Name)
	case s.URL != "":
		if err := checkURL(s.Name, s.URL); err != nil {
			return err
		}
	}
	switch {
	case s.Transport != "" && s.Transport != "streamable" && s.Transport != "sse":
		return fmt.Errorf("mcp server %q: transport %q: use streamable or sse", s.Name, s.Transport)
	case s.Command != "" && (s.Transport != "" || len(s.Headers) > 0):
		return fmt.Errorf("mcp server %q: transport and header apply to url servers only", s.Name)
	case s.URL != "" && (len(s.Args) > 0 || len(s.Env) > 0 || s.Dir != ""):
		return fmt.Errorf("mcp server %q: args, env and dir apply to command servers only", s.Name)
	case s.Timeout < 0:
		return fmt.Errorf("mcp server %q: timeout must be positive", s.Name)
	}
	if s.OAuth != nil {
		switch {
		case s.URL == "":
			return fmt.Errorf("mcp server %q: oauth applies to url servers only", s.Name)
		case len(s.Tenants) > 0:
			return fmt.Errorf("mcp server %q: oauth and tenant credentials do not mix; with oauth each tenant authorises on its own (tokens per_tenant)", s.Name)
		}
		if err := s.OAuth.validate(s.Name); err != nil {
			return err
		}
	}
	for _, tc := range s.Tenants {
		switch {
		case tc.Level != "key" && tc.Level != "project" && tc.Level != "team" && tc.Level != "org":
			return fmt.Errorf("mcp server %q: tenant level %q: use key, project, team or org", s.Name, tc.Level)
		case tc.Name == "":
			return fmt.Errorf("mcp server %q: a tenant credential needs the key id or the level's path", s.Name)
		case checkTenantName(tc.Level, tc.Name) != nil:
			return fmt.Errorf("mcp server %q: %w", s.Name, checkTenantName(tc.Level, tc.Name))
		case s.Command != "" && len(tc.Headers) > 0:
			return fmt.Errorf("mcp server %q: tenant %s %s: a command server's tenants take env, not header", s.Name, tc.Level, tc.Name)
		case s.URL != "" && len(tc.Env) > 0:
			return fmt.Errorf("mcp server %q: tenant %s %s: a url server's tenants take header, not env", s.Name, tc.Level, tc.Name)
		}
	}
	return nil
}

// Validate checks the servers, that their names are unique, and the
// separator and allow_commands.
func (h *Handler) Validate() error {
	if err := checkSeparator(h.Separator); err != nil {
		return err
	}
	if err := checkAllowCommands(h.AllowCommands); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, s := range h.Servers {
		if err := s.validate(); err != nil {
			return err
		}
		if seen[s.Name] {
			return fmt.Errorf("mcp server %q declared twice", s.Name)
		}
		seen[s.Name] = true
		if strings.Contains(s.Name, h.sep()) {
			return fmt.Errorf("mcp server %q: its name holds the tool name separator %q; rename it, or set another separator", s.Name, h.sep())
		}
	}
	if !strings.HasPrefix(h.SSEPath, "/") {
		return fmt.Errorf("sse_path %q must start with /", h.SSEPath)
	}
	return nil
}

func (h *Handler) sep() string {
	if h.Separator == "" {
		return defaultSeparator
	}
	return h.Separator
}

// Cleanup releases this config's hold on the gateway.
func (h *Handler) Cleanup() error {
	if h.key != "" {
		_, _ = gateways.Delete(h.key)
	}
	return nil
}

// maxBody bounds a POSTed JSON-RPC message, as the SDK does.
const maxBody = 4 << 20

// ServeHTTP serves MCP; it never calls next.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	if strings.HasSuffix(r.URL.Path, callbackSuffix) {
		serveCallback(w, r)
		return nil
	}
	learnRedirect(r, h.SSEPath)
	if h.app != nil {
		var tracked *openai.Tracked
		if w, tracked = openai.Track(w, r); tracked != nil {
			defer h.app.RecordRequest(tracked)
		}
	}
	t, _ := tenancy.TenantOf(r)
	var call *rpcCall
	if r.Method == http.MethodPost {
		var err error
		if call, err = noteTool(r); err != nil {
			return caddyhttp.Error(http.StatusRequestEntityTooLarge, err)
		}
	}
	if strings.HasSuffix(r.URL.Path, h.SSEPath) {
		h.gw.serveSSE(w, r, t)
		return nil
	}
	if call != nil && h.gw.fastCall(w, r, t, call) {
		return nil
	}
	h.gw.serveStreamable(w, r, t)
	return nil
}

// noteTool reads a POSTed message and, for a tools/call, puts its tool in
// the access log and returns it parsed; the body is put back for the SDK.
func noteTool(r *http.Request) (*rpcCall, error) {
	if r.Body == nil {
		return nil, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	if len(b) > maxBody {
		return nil, fmt.Errorf("mcp message larger than %d bytes", maxBody)
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	if !bytes.Contains(b, []byte(`"tools/call"`)) {
		return nil, nil
	}
	m := new(rpcCall)
	if json.Unmarshal(b, m) != nil || m.Method != "tools/call" {
		return nil, nil
	}
	openai.Log(r).Tool = m.Params.Name
	return m, nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
