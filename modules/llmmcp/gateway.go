package llmmcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// gateways holds the client-facing side per llm_mcp config: the MCP
// server, its sessions and its upstreams, so an unchanged reload keeps
// every session.
var gateways = caddy.NewUsagePool()

// live lists the running gateways for the admin API.
var (
	liveMu sync.Mutex
	live   = map[*gateway]struct{}{}
)

// gateway is one llm_mcp config's MCP server in front of its upstreams.
type gateway struct {
	logger *zap.Logger
	audit  *zap.Logger
	server *mcp.Server
	sdk    http.Handler // the SDK's Streamable HTTP handler
	http   http.Handler // sdk behind the tenant check

	sessions   sync.Map // streamable session id → *session
	cancel     context.CancelFunc
	sse        sync.Map // sse session id → *sseSession
	sseTenants sync.Map // *mcp.ServerSession → *llm.Tenant

	// routes maps exposed names (server__tool, server__prompt, resource
	// URIs) to where they go; replaced whole on changes, read lock-free.
	routes atomic.Pointer[routeTable]

	sep   string                  // joins server and tool names
	allow []string                // allow_commands
	app   atomic.Pointer[llm.App] // the newest config's llm app (may hold nil)

	mu         sync.Mutex // control path only
	configured map[string]*ServerConfig
	upstreams  map[string]*upstream
	alts       map[string][]alt     // server → tenants' own sessions
	exposed    map[string]*exposure // server → what is registered on g.server
	closed     bool
}

type route struct {
	up        *upstream
	alts      []alt  // tenants' own sessions, most specific match first
	perTenant bool   // an OAuth server whose tenants each authorise: no session of its own
	name      string // the upstream's own name or URI
	perm      perm   // what tenancy tools globs are matched against
	metrics   *toolMetrics
}

// pick is the session a tenant's call goes through: its own, at the most
// specific level that has one, else the server's.
func (r *route) pick(t *tenancy.Tenant) *upstream {
	if t == nil || len(r.alts) == 0 {
		return r.up
	}
	for _, l := range t.Levels {
		for _, a := range r.alts {
			if a.kind == l.Kind && a.name == l.Name {
				return a.up
			}
		}
	}
	return r.up
}

// pickFor is pick for an OAuth server with tokens per tenant, where a
// tenant without its own session cannot call: it gets an error saying how
// to authorise it.
func (r *route) pickFor(t *tenancy.Tenant) (*upstream, error) {
	up := r.pick(t)
	if r.perTenant && up == r.up {
		return nil, needsTenantAuth(up.cfg.Name, t)
	}
	return up, nil
}

// visible reports whether a tenant may see the route's tool at all: with
// tokens per tenant, only once it is authorised.
func (r *route) visible(t *tenancy.Tenant) bool {
	if !r.perTenant {
		return true
	}
	up := r.pick(t)
	return up != r.up && up.tok != nil && up.tok.usable()
}

func needsTenantAuth(server string, t *tenancy.Tenant) error {
	ref := tenantRef{Level: "key", Name: "<key id>"}
	if t != nil {
		ref.Name = t.KeyID
	}
	e := &needsAuthError{server: server, ref: ref}
	if t == nil {
		e.reason = "the request carries no llmgw key, so no tenant's token can be chosen; put llm_quota before llm_mcp"
	}
	return e
}

type routeTable struct {
	tools     map[string]route
	prompts   map[string]route
	resources map[string]route // by URI
}

type exposure struct {
	cat       *catalog
	tools     []string
	prompts   []string
	resources []string
}

// gatewayOptions are a gateway's settings besides its servers.
type gatewayOptions struct {
	sessionTimeout time.Duration
	sep            string   // default: defaultSeparator
	allow          []string // allow_commands
	app            *llm.App
}

func newGateway(logger *zap.Logger, servers []*ServerConfig, o gatewayOptions) (*gateway, error) {
	if o.sep == "" {
		o.sep = defaultSeparator
	}
	if o.sessionTimeout <= 0 {
		o.sessionTimeout = time.Hour
	}
	g := &gateway{logger: logger, audit: logger.Named("audit"), configured: map[string]*ServerConfig{},
		upstreams: map[string]*upstream{}, alts: map[string][]alt{}, exposed: map[string]*exposure{}, sep: o.sep, allow: o.allow}
	g.app.Store(o.app)
	g.routes.Store(&routeTable{tools: map[string]route{}, prompts: map[string]route{}, resources: map[string]route{}})
	g.server = mcp.NewServer(&mcp.Implementation{Name: "llmgw", Version: "1"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{ListChanged: true},
			Prompts:   &mcp.PromptCapabilities{ListChanged: true},
		},
	})
	g.server.AddReceivingMiddleware(g.permit)
	sh := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server },
		&mcp.StreamableHTTPOptions{})
	g.sdk = sh
	g.http = auth.RequireBearerToken(verifyTenant, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(sh)
	for _, c := range servers {
		g.configured[c.Name] = c
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	go g.reap(ctx, o.sessionTimeout)
	all := g.mergeRuntime(servers)
	for _, c := range all {
		if err := g.attach(c); err != nil {
			g.Destruct()
			return nil, err
		}
	}
	liveMu.Lock()
	live[g] = struct{}{}
	liveMu.Unlock()
	return g, nil
}

// alt is a tenant's own session with a server.
type alt struct {
	kind, name string // the tenancy level it is for
	up         *upstream
}

// attach connects (or joins) an upstream, and the sessions of the tenants
// with their own credential, and exposes what it offers.
func (g *gateway) attach(c *ServerConfig) error {
	if c.OAuth != nil {
		return g.attachOAuth(c)
	}
	u, err := acquire(g.logger, c.base())
	if err != nil {
		return err
	}
	var alts []alt
	for _, tc := range c.Tenants {
		a, err := acquire(g.logger, c.forTenant(tc))
		if err != nil {
			u.release()
			releaseAlts(g, alts)
			return err
		}
		alts = append(alts, alt{tc.kind(), tc.Name, a})
	}
	g.install(c.Name, u, alts, false)
	return nil
}

// attachOAuth connects an OAuth server: through its shared tokens, or
// through one session per tenant that has tokens.
func (g *gateway) attachOAuth(c *ServerConfig) error {
	oc := oauthFor(c)
	go countTokens(oc)
	var u *upstream
	var alts []alt
	var err error
	if c.OAuth.shared() {
		u, err = acquireAs(g.logger, c.base(), oc.entry(sharedRef), false)
	} else {
		u, err = acquireAs(g.logger, c.base(), nil, true)
		for _, e := range oc.tenants() {
			a, aerr := acquireAs(g.logger, c.base(), e, false)
			if aerr != nil {
				err = aerr
				break
			}
			alts = append(alts, alt{e.ref.kind(), e.ref.Name, a})
		}
	}
	if err != nil {
		if u != nil {
			u.release()
		}
		releaseAlts(g, alts)
		return err
	}
	g.install(c.Name, u, alts, true)
	return nil
}

// install puts a server's upstream and tenant sessions in place of the
// ones it had, releasing those, and follows the new ones' lists (the
// tenant sessions' too with altLists).
func (g *gateway) install(name string, u *upstream, alts []alt, altLists bool) {
	g.mu.Lock()
	old, oldAlts := g.upstreams[name], g.alts[name]
	g.upstreams[name], g.alts[name] = u, alts
	g.mu.Unlock()
	if old != nil {
		old.subscribe(g, false)
		old.release()
	}
	releaseAlts(g, oldAlts)
	u.subscribe(g, true)
	if altLists {
		for _, a := range alts {
			a.up.subscribe(g, true)
		}
	}
	g.sync(name)
}

// oauthChanged brings a server's tenant sessions in line with its tokens
// after an authorisation or a revocation.
func (g *gateway) oauthChanged(server string, e *tokenEntry) {
	g.mu.Lock()
	u := g.upstreams[server]
	if u == nil || u.cfg.OAuth == nil || g.closed {
		g.mu.Unlock()
		return
	}
	if u.cfg.OAuth.shared() {
		g.mu.Unlock()
		if e.record() == nil {
			if s := u.session.Load(); s != nil {
				_ = s.Close() // forgotten: reconnects once authorised again
			}
		}
		return
	}
	alts := g.alts[server]
	i := slices.IndexFunc(alts, func(a alt) bool { return a.up.tok == e })
	var gone *upstream
	switch {
	case i < 0 && e.record() != nil:
		a, err := acquireAs(g.logger, u.cfg, e, false)
		if err != nil {
			g.mu.Unlock()
			g.logger.Error("opening a tenant's mcp session", zap.String("server", server), zap.Error(err))
			return
		}
		a.subscribe(g, true)
		g.alts[server] = append(slices.Clip(alts), alt{e.ref.kind(), e.ref.Name, a})
	case i >= 0 && e.record() == nil:
		gone = alts[i].up
		g.alts[server] = slices.Delete(slices.Clone(alts), i, i+1)
	}
	g.mu.Unlock()
	if gone != nil {
		gone.subscribe(g, false)
		gone.release()
	}
	g.sync(server)
}

func releaseAlts(g *gateway, alts []alt) {
	for _, a := range alts {
		a.up.subscribe(g, false)
		a.up.release()
	}
}

// detach stops exposing a server and releases its upstreams.
func (g *gateway) detach(name string) {
	g.mu.Lock()
	u, alts := g.upstreams[name], g.alts[name]
	delete(g.upstreams, name)
	delete(g.alts, name)
	g.mu.Unlock()
	if u != nil {
		u.subscribe(g, false)
		u.release()
	}
	releaseAlts(g, alts)
	g.sync(name)
}

// Destruct releases the upstreams and ends the sessions.
func (g *gateway) Destruct() error {
	if g.cancel != nil {
		g.cancel()
	}
	liveMu.Lock()
	delete(live, g)
	liveMu.Unlock()
	g.mu.Lock()
	g.closed = true
	ups, alts := g.upstreams, g.alts
	g.upstreams, g.alts = map[string]*upstream{}, map[string][]alt{}
	g.mu.Unlock()
	for _, a := range alts {
		releaseAlts(g, a)
	}
	for _, u := range ups {
		u.subscribe(g, false)
		u.release()
	}
	g.closeSessions()
	return nil
}

// closeSessions ends every client session, and so their event streams.
func (g *gateway) closeSessions() {
	for ss := range g.server.Sessions() {
		_ = ss.Close()
	}
}

// sync brings what g.server lists for one server in line with its
// upstream's catalog (nothing if it is gone or disabled).
func (g *gateway) sync(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	u := g.upstreams[name]
	var cat *catalog
	if u != nil && !u.cfg.Disabled && !isDisabled(name) {
		cat = u.catalog.Load()
		if u.dormant {
			// what the tenants' sessions offer: the first one's that is up
			cat = nil
			for _, a := range g.alts[name] {
				if a.up.session.Load() != nil {
					cat = a.up.catalog.Load()
					break
				}
			}
			if old := g.exposed[name]; cat == nil && old != nil {
				cat = old.cat // keep it listed (to the authorised) while sessions reconnect
				if len(g.alts[name]) == 0 {
					cat = nil
				}
			}
		}
	}
	old := g.exposed[name]
	if old != nil && old.cat == cat {
		return
	}
	if old != nil {
		g.server.RemoveTools(old.tools...)
		g.server.RemovePrompts(old.prompts...)
		g.server.RemoveResources(old.resources...)
		delete(g.exposed, name)
	}
	if cat != nil && !g.closed {
		g.exposed[name] = g.expose(name, u, cat)
	}
	g.rebuildRoutes()
}

// expose registers a server's catalog on g.server under namespaced names.
func (g *gateway) expose(name string, u *upstream, cat *catalog) *exposure {
	e := &exposure{cat: cat}
	for _, t := range cat.tools {
		if !objectSchema(t.InputSchema) {
			g.logger.Warn("mcp tool skipped: its input schema is not an object", zap.String("server", name), zap.String("tool", t.Name))
			continue
		}
		nt := *t
		nt.Name = g.full(name, t.Name)
		g.server.AddTool(&nt, g.toolHandler(name, t.Name))
		e.tools = append(e.tools, nt.Name)
	}
	for _, p := range cat.prompts {
		np := *p
		np.Name = g.full(name, p.Name)
		g.server.AddPrompt(&np, g.promptHandler(name, p.Name))
		e.prompts = append(e.prompts, np.Name)
	}
	for _, r := range cat.resources {
		nr := *r
		nr.Name = g.full(name, r.Name)
		g.server.AddResource(&nr, g.resourceHandler(name))
		e.resources = append(e.resources, r.URI)
	}
	return e
}

func objectSchema(s any) bool {
	switch v := s.(type) {
	case map[string]any:
		return v["type"] == "object"
	case nil:
		return false
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return false
	}
	var m struct{ Type any }
	return json.Unmarshal(raw, &m) == nil && m.Type == "object"
}

func (g *gateway) rebuildRoutes() {
	rt := &routeTable{tools: map[string]route{}, prompts: map[string]route{}, resources: map[string]route{}}
	for name, e := range g.exposed {
		u, alts := g.upstreams[name], g.alts[name]
		if u == nil {
			continue
		}
		for _, t := range e.cat.tools {
			rt.tools[g.full(name, t.Name)] = route{up: u, alts: alts, perTenant: u.dormant, name: t.Name, perm: perm{name, t.Name},
				metrics: toolMetricsFor(name, g.full(name, t.Name))}
		}
		for _, p := range e.cat.prompts {
			rt.prompts[g.full(name, p.Name)] = route{up: u, alts: alts, perTenant: u.dormant, name: p.Name, perm: perm{name, p.Name}}
		}
		for _, r := range e.cat.resources {
			rt.resources[r.URI] = route{up: u, alts: alts, perTenant: u.dormant, name: r.URI, perm: perm{name, r.Name}}
		}
	}
	g.routes.Store(rt)
}

// toolHandler proxies one namespaced tool to its upstream.
func (g *gateway) toolHandler(server, tool string) mcp.ToolHandler {
	full := g.full(server, tool)
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		r, ok := g.routes.Load().tools[full]
		if !ok {
			return nil, fmt.Errorf("tool %q is no longer offered by mcp server %q", full, server)
		}
		var progress func(*mcp.ProgressNotificationParams)
		if tok := req.Params.GetProgressToken(); tok != nil {
			ss := req.Session
			progress = func(p *mcp.ProgressNotificationParams) {
				q := *p
				q.ProgressToken = tok
				_ = ss.NotifyProgress(ctx, &q)
			}
		}
		return g.call(ctx, g.tenantOf(req), r, req.Params.Arguments, progress), nil
	}
}

// call makes one tool call upstream, counts it and audits it. Failures
// become tool errors that say what happened.
func (g *gateway) call(ctx context.Context, t *tenancy.Tenant, r route, args json.RawMessage, progress func(*mcp.ProgressNotificationParams)) *mcp.CallToolResult {
	start := now()
	up, err := r.pickFor(t)
	var res *mcp.CallToolResult
	if err == nil {
		res, err = up.callTool(ctx, r.name, args, progress)
	}
	outcome := "ok"
	switch {
	case err != nil:
		outcome = "failed"
		res = failure(err)
	case res.IsError:
		outcome = "tool_error"
	}
	g.record(t, r, outcome, now().Sub(start))
	return res
}

func failure(err error) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
}

// record counts a call and writes its audit line.
func (g *gateway) record(t *tenancy.Tenant, r route, outcome string, d time.Duration) {
	r.metrics.observe(outcome, d)
	key := ""
	if t != nil {
		key = t.KeyID
	}
	g.audit.Info("mcp tool call", zap.String("key", key), zap.String("server", r.up.cfg.Name), zap.String("tool", r.name),
		zap.String("outcome", outcome), zap.Duration("duration", d))
}

func (g *gateway) promptHandler(server, prompt string) mcp.PromptHandler {
	full := g.full(server, prompt)
	return func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		r, ok := g.routes.Load().prompts[full]
		if !ok {
			return nil, fmt.Errorf("prompt %q is no longer offered by mcp server %q", full, server)
		}
		up, err := r.pickFor(g.tenantOf(req))
		if err != nil {
			return nil, err
		}
		s, err := up.live()
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(ctx, time.Duration(up.cfg.Timeout))
		defer cancel()
		res, err := s.GetPrompt(ctx, &mcp.GetPromptParams{Name: r.name, Arguments: req.Params.Arguments})
		return res, up.wrap(ctx, "prompts/get "+r.name, err)
	}
}

func (g *gateway) resourceHandler(server string) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		r, ok := g.routes.Load().resources[req.Params.URI]
		if !ok {
			return nil, mcp.ResourceNotFoundError(req.Params.URI)
		}
		up, err := r.pickFor(g.tenantOf(req))
		if err != nil {
			return nil, err
		}
		s, err := up.live()
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(ctx, time.Duration(up.cfg.Timeout))
		defer cancel()
		res, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: r.name})
		return res, up.wrap(ctx, "resources/read "+r.name, err)
	}
}

// servers returns the gateway's servers by name, sorted.
func (g *gateway) serverNames() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	names := make([]string, 0, len(g.upstreams))
	for n := range g.upstreams {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Interface guards
var _ caddy.Destructor = (*gateway)(nil)
