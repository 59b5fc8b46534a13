package llmmcp

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// verifyTenant gives the SDK the tenant llm_quota found as the session's
// user, so a session stays with the key that opened it and each request
// carries its tenant. Without a tenant the request goes on anonymous.
func verifyTenant(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
	t, _ := tenancy.TenantOf(r)
	return t.Memo(tokenMemo{}, func() any {
		return &auth.TokenInfo{UserID: t.KeyID, Extra: map[string]any{"tenant": t}}
	}).(*auth.TokenInfo), nil
}

type tokenMemo struct{}

func (g *gateway) serveStreamable(w http.ResponseWriter, r *http.Request, t *tenancy.Tenant) {
	if t == nil {
		g.sdk.ServeHTTP(w, r)
		return
	}
	if !strings.HasPrefix(strings.ToLower(r.Header.Get("Authorization")), "bearer ") {
		// the key came as x-api-key; the SDK's check wants a bearer
		r.Header.Set("Authorization", "Bearer -")
	}
	g.http.ServeHTTP(w, r)
}

// tenantOf is the tenant of a JSON-RPC request: from the HTTP request
// (Streamable HTTP) or the SSE session it came on.
func (g *gateway) tenantOf(req mcp.Request) *tenancy.Tenant {
	if ex := req.GetExtra(); ex != nil && ex.TokenInfo != nil {
		t, _ := ex.TokenInfo.Extra["tenant"].(*tenancy.Tenant)
		return t
	}
	if v, ok := g.sseTenants.Load(req.GetSession()); ok {
		return v.(*tenancy.Tenant)
	}
	return nil
}

// permit filters lists and refuses calls the request's key may not make.
func (g *gateway) permit(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/call", "tools/list", "prompts/get", "prompts/list", "resources/read", "resources/list", "initialize":
		default:
			return next(ctx, method, req)
		}
		t := g.tenantOf(req)
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok && req.GetExtra() != nil {
			g.track(ss, t)
		}
		rt := g.routes.Load()
		if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && allowed(t, g.permOf(p.Name, rt.tools), g.sep) {
			if _, known := rt.tools[p.Name]; !known {
				if err := g.unauthorised(p.Name, t); err != nil {
					// nobody has authorised it yet, so its tools are unknown
					return failure(err), nil
				}
			}
		}
		if t == nil {
			res, err := next(ctx, method, req)
			if err == nil {
				hideUnauthorised(rt, nil, res)
			}
			return res, err
		}
		switch p := req.GetParams().(type) {
		case *mcp.CallToolParamsRaw:
			if !allowed(t, g.permOf(p.Name, rt.tools), g.sep) {
				return nil, refused(t, "tool", p.Name)
			}
		case *mcp.GetPromptParams:
			if !allowed(t, g.permOf(p.Name, rt.prompts), g.sep) {
				return nil, refused(t, "prompt", p.Name)
			}
		case *mcp.ReadResourceParams:
			if r, ok := rt.resources[p.URI]; ok && !allowed(t, r.perm, g.sep) {
				return nil, refused(t, "resource", g.full(r.perm.server, r.perm.name))
			}
		}
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		hideUnauthorised(rt, t, res)
		switch l := res.(type) {
		case *mcp.ListToolsResult:
			l.Tools = filter(l.Tools, func(x *mcp.Tool) bool { return allowed(t, g.permOf(x.Name, rt.tools), g.sep) })
		case *mcp.ListPromptsResult:
			l.Prompts = filter(l.Prompts, func(x *mcp.Prompt) bool { return allowed(t, g.permOf(x.Name, rt.prompts), g.sep) })
		case *mcp.ListResourcesResult:
			l.Resources = filter(l.Resources, func(x *mcp.Resource) bool {
				r, ok := rt.resources[x.URI]
				return ok && allowed(t, r.perm, g.sep)
			})
		}
		return res, nil
	}
}

func filter[T any](xs []*T, keep func(*T) bool) []*T {
	out := xs[:0:0]
	for _, x := range xs {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}

func refused(t *tenancy.Tenant, kind, name string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
		Message: fmt.Sprintf("key %q may not use the %s %q; its tenancy's tools globs do not allow it: ask an admin to add it", t.KeyID, kind, name)}
}

// hideUnauthorised drops from a list what an OAuth server with tokens per
// tenant offers, unless the tenant has authorised it.
func hideUnauthorised(rt *routeTable, t *tenancy.Tenant, res mcp.Result) {
	switch l := res.(type) {
	case *mcp.ListToolsResult:
		l.Tools = filter(l.Tools, func(x *mcp.Tool) bool { r, ok := rt.tools[x.Name]; return !ok || r.visible(t) })
	case *mcp.ListPromptsResult:
		l.Prompts = filter(l.Prompts, func(x *mcp.Prompt) bool { r, ok := rt.prompts[x.Name]; return !ok || r.visible(t) })
	case *mcp.ListResourcesResult:
		l.Resources = filter(l.Resources, func(x *mcp.Resource) bool { r, ok := rt.resources[x.URI]; return !ok || r.visible(t) })
	}
}

// unauthorised says how to authorise the OAuth server whose namespace a
// name is in, when it waits for an authorisation; nil otherwise.
func (g *gateway) unauthorised(name string, t *tenancy.Tenant) error {
	server := g.permOf(name, nil).server
	if server == "" {
		return nil
	}
	g.mu.Lock()
	u := g.upstreams[server]
	g.mu.Unlock()
	switch {
	case u == nil:
		return nil
	case u.dormant:
		return needsTenantAuth(server, t)
	case u.tok != nil && !u.tok.usable():
		_, err := u.live()
		return err
	}
	return nil
}
