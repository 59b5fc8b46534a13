// Package routeorder checks the order of the llm handlers in a config's
// routes: an order that would serve requests without a key, or a handler
// that never runs, is refused when the config loads.
package routeorder

import (
	"fmt"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Module IDs of the handlers whose order matters.
const (
	quotaID  = "http.handlers.llm_quota"
	routerID = "http.handlers.llm_router"
	kbID     = "http.handlers.llm_kb"
)

// Check refuses a config in which llm_router (or llm_kb) comes before
// llm_quota in the same route: the router answers the request, so the
// quota handler never runs and every request is served without a key
// (llm_kb would serve files and stores without one). llm_kb after
// llm_router never runs, and is refused too.
// A route with a router and no quota at all is allowed (an open route
// on purpose); so are routes whose quota and router are in separate
// branches.
func Check(ctx caddy.Context) error {
	app, err := ctx.AppIfConfigured("http")
	if err != nil || app == nil {
		return nil
	}
	h, ok := app.(*caddyhttp.App)
	if !ok {
		return nil
	}
	for name, srv := range h.Servers {
		if err := checkRoutes(srv.Routes); err != nil {
			return fmt.Errorf("server %s (%s): %w", name, strings.Join(srv.Listen, ", "), err)
		}
	}
	return nil
}

// checkRoutes checks one list of routes, which run in order, and the
// lists nested in it.
func checkRoutes(routes caddyhttp.RouteList) error {
	router, kb := false, false
	for _, rt := range routes {
		for _, hd := range rt.Handlers {
			if sr, ok := hd.(*caddyhttp.Subroute); ok {
				if err := checkRoutes(sr.Routes); err != nil {
					return err
				}
				continue
			}
			m, ok := hd.(caddy.Module)
			if !ok {
				continue
			}
			switch m.CaddyModule().ID {
			case routerID:
				router = true
			case kbID:
				if router {
					return fmt.Errorf("llm_kb comes after llm_router in the same route, so it never runs (the router answers first); put it before: route { llm_quota … llm_kb … llm_router }")
				}
				kb = true
			case quotaID:
				if router {
					return fmt.Errorf("llm_router comes before llm_quota in the same route, so llm_quota never runs and every request would be served without a key; put llm_quota first: route { llm_quota … llm_router }")
				}
				if kb {
					return fmt.Errorf("llm_kb comes before llm_quota in the same route, so its files and vector stores would be served without a key and belong to no tenant; put llm_quota first: route { llm_quota … llm_kb … llm_router }")
				}
			}
		}
	}
	return nil
}
