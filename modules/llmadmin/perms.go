package llmadmin

import (
	"fmt"
	"net/http"
)

// role is what a token may do. viewer < operator < admin; a tenant admin
// is outside that order: it may do only what a rule lets tenants do.
type role int

const (
	roleNone role = iota
	roleViewer
	roleOperator
	roleAdmin
	roleTenant
)

func (r role) String() string {
	return [...]string{"none", "viewer", "operator", "admin", "tenant_admin"}[r]
}

func parseRole(s string) (role, error) {
	for r := roleViewer; r <= roleTenant; r++ {
		if r.String() == s {
			return r, nil
		}
	}
	return roleNone, fmt.Errorf("role %q: use admin, operator, viewer or tenant_admin", s)
}

// tenantAccess is how a tenant admin may use a route: not at all, or
// limited to its own part of the tenancy tree.
type tenantAccess int

const (
	tenantNone      tenantAccess = iota // refused
	tenantOpen                          // nothing of a tenant in it
	tenantModels                        // the list, filtered to models allowed to the tenant
	tenantModel                         // a model allowed to the tenant
	tenantKeys                          // the list, filtered to the tenant's keys
	tenantKeyCreate                     // the body's project is the tenant's
	tenantKey                           // the key of the path is the tenant's
	tenantUsage                         // every node of the query is the tenant's
	tenantRequests                      // the request log, narrowed to the tenant's requests
	tenantLicence                       // the body's tenant is the tenant's, or below it
)

func (t tenantAccess) filters() bool { return t == tenantModels || t == tenantKeys }

// rule is what one admin route needs: the least role of viewer, operator
// and admin, and how tenant admins may use it.
type rule struct {
	pattern string // an http.ServeMux pattern: method and path
	need    role
	tenant  tenantAccess
}

// rules is the permission table. A route that is not in it needs the
// admin role, so a route added to an admin module is admin-only until it
// is given a line here (TestEveryRouteHasARule names it).
var rules = []rule{
	{"GET /llm/openapi.json", roleViewer, tenantOpen},

	{"GET /llm/models", roleViewer, tenantModels},
	{"POST /llm/models", roleOperator, tenantNone},
	{"GET /llm/models/{name}", roleViewer, tenantModel},
	{"DELETE /llm/models/{name}", roleOperator, tenantNone},
	{"POST /llm/models/{name}/scale", roleOperator, tenantNone},
	{"POST /llm/models/{name}/settings", roleOperator, tenantNone},
	{"POST /llm/models/{name}/restart", roleOperator, tenantNone},
	{"POST /llm/models/{name}/stop", roleOperator, tenantNone},
	{"POST /llm/models/{name}/start", roleOperator, tenantNone},
	{"POST /llm/models/{name}/test", roleOperator, tenantNone},
	{"POST /llm/models/{name}/retry", roleOperator, tenantNone},
	// A licence: the operator accepts it for anyone; a tenant admin for
	// its own part of the tenancy.
	{"POST /llm/models/{name}/licence/accept", roleOperator, tenantLicence},
	{"GET /llm/licences", roleViewer, tenantOpen},
	// Presets: the operator adds one, as any model.
	{"GET /llm/presets", roleViewer, tenantNone},
	{"GET /llm/presets/{name}", roleViewer, tenantNone},
	{"POST /llm/presets/{name}/add", roleOperator, tenantNone},
	{"GET /llm/jobs/models", roleViewer, tenantNone},
	{"POST /llm/plan", roleOperator, tenantNone},
	{"POST /llm/replicas/{id}/restart", roleOperator, tenantNone},
	{"GET /llm/engines", roleViewer, tenantNone},
	{"GET /llm/overview", roleViewer, tenantNone},
	{"GET /llm/guardrails/history", roleViewer, tenantNone},
	{metricsPattern, roleViewer, tenantNone},
	{"GET /llm/traffic", roleViewer, tenantNone},

	{"GET /llm/nodes", roleViewer, tenantNone},
	{"POST /llm/nodes/{name}/drain", roleOperator, tenantNone},
	{"POST /llm/nodes/{name}/undrain", roleOperator, tenantNone},
	// A release for a node: admin only (it replaces the binary, with a
	// release signed by a key the node's config trusts, and restarts it).
	{"POST /llm/nodes/{name}/upgrade", roleAdmin, tenantNone},
	{"GET /llm/node", roleViewer, tenantNone},
	{"GET /llm/peers", roleViewer, tenantNone},
	// The process: its build, and its restart in place (admin only: it
	// stops the node's serving for as long as its open requests last).
	{"GET /llm/version", roleViewer, tenantNone},
	{"POST /llm/restart", roleAdmin, tenantNone},

	{"GET /llm/keys", roleViewer, tenantKeys},
	{"POST /llm/keys", roleAdmin, tenantKeyCreate},
	{"GET /llm/keys/{id}", roleViewer, tenantKey},
	{"DELETE /llm/keys/{id}", roleAdmin, tenantKey},
	{"POST /llm/keys/{id}/rotate", roleAdmin, tenantKey},
	{"PUT /llm/keys/{id}/limits", roleAdmin, tenantKey},
	{"GET /llm/usage", roleViewer, tenantUsage},
	{"GET /llm/audit", roleViewer, tenantNone},
	{"GET /llm/requests", roleViewer, tenantRequests},
	{"GET /llm/requests/{id}", roleViewer, tenantRequests},

	{"GET /llm/cache", roleViewer, tenantNone},
	{"POST /llm/cache/purge", roleOperator, tenantNone},

	{"GET /llm/mirror", roleViewer, tenantNone},
	{"GET /llm/mirror/versions", roleViewer, tenantNone},
	{"POST /llm/mirror/versions", roleOperator, tenantNone},
	{"GET /llm/mirror/versions/{model}/{version}", roleViewer, tenantNone},
	{"DELETE /llm/mirror/versions/{model}/{version}", roleOperator, tenantNone},
	{"POST /llm/mirror/versions/{model}/{version}/verify", roleOperator, tenantNone},
	{"POST /llm/mirror/sync", roleOperator, tenantNone},
	{"GET /llm/weights", roleViewer, tenantNone},
	{"POST /llm/weights/prune", roleOperator, tenantNone},

	{"GET /llm/mcp/servers", roleViewer, tenantNone},
	{"POST /llm/mcp/servers", roleOperator, tenantNone},
	{"GET /llm/mcp/servers/{name}", roleViewer, tenantNone},
	{"DELETE /llm/mcp/servers/{name}", roleOperator, tenantNone},
	{"POST /llm/mcp/servers/{name}/enable", roleOperator, tenantNone},
	{"POST /llm/mcp/servers/{name}/disable", roleOperator, tenantNone},
	{"POST /llm/mcp/servers/{name}/authorize", roleOperator, tenantNone},
	{"GET /llm/mcp/servers/{name}/authorization", roleViewer, tenantNone},
	{"DELETE /llm/mcp/servers/{name}/authorization", roleOperator, tenantNone},

	// Knowledge bases (llm_kb's routes, served by the llm app).
	{"GET /llm/kb/stores", roleViewer, tenantNone},
	{"POST /llm/kb/stores", roleOperator, tenantNone},
	{"GET /llm/kb/stores/{id}", roleViewer, tenantNone},
	{"DELETE /llm/kb/stores/{id}", roleOperator, tenantNone},
	{"POST /llm/kb/stores/{id}/files", roleOperator, tenantNone},
	{"POST /llm/kb/stores/{id}/reindex", roleOperator, tenantNone},
	{"POST /llm/kb/stores/{id}/search", roleViewer, tenantNone},

	// The live state of models' providers (llm_router's routes, served
	// by the llm app): nothing of a tenant in it, but the deployment's
	// providers and their limits.
	{"GET /llm/providers/models", roleViewer, tenantNone},
	{"GET /llm/providers/models/{name}", roleViewer, tenantNone},

	// Registry updates.
	{"GET /llm/models/{name}/updates", roleViewer, tenantModel},
	{"POST /llm/models/{name}/update", roleOperator, tenantNone},
	{"POST /llm/models/{name}/rollback", roleOperator, tenantNone},
	// The tenancy tree changed at runtime, and owners' capacities: read by
	// viewers, changed by admins only (tenant admins neither).
	{"GET /llm/tenants", roleViewer, tenantNone},
	{"GET /llm/tenants/orgs", roleViewer, tenantNone},
	{"POST /llm/tenants/orgs", roleAdmin, tenantNone},
	{"GET /llm/tenants/orgs/{org}", roleViewer, tenantNone},
	{"PUT /llm/tenants/orgs/{org}", roleAdmin, tenantNone},
	{"PATCH /llm/tenants/orgs/{org}", roleAdmin, tenantNone},
	{"DELETE /llm/tenants/orgs/{org}", roleAdmin, tenantNone},
	{"GET /llm/tenants/orgs/{org}/teams", roleViewer, tenantNone},
	{"POST /llm/tenants/orgs/{org}/teams", roleAdmin, tenantNone},
	{"GET /llm/tenants/orgs/{org}/teams/{team}", roleViewer, tenantNone},
	{"PUT /llm/tenants/orgs/{org}/teams/{team}", roleAdmin, tenantNone},
	{"PATCH /llm/tenants/orgs/{org}/teams/{team}", roleAdmin, tenantNone},
	{"DELETE /llm/tenants/orgs/{org}/teams/{team}", roleAdmin, tenantNone},
	{"GET /llm/tenants/orgs/{org}/teams/{team}/projects", roleViewer, tenantNone},
	{"POST /llm/tenants/orgs/{org}/teams/{team}/projects", roleAdmin, tenantNone},
	{"GET /llm/tenants/orgs/{org}/teams/{team}/projects/{project}", roleViewer, tenantNone},
	{"PUT /llm/tenants/orgs/{org}/teams/{team}/projects/{project}", roleAdmin, tenantNone},
	{"PATCH /llm/tenants/orgs/{org}/teams/{team}/projects/{project}", roleAdmin, tenantNone},
	{"DELETE /llm/tenants/orgs/{org}/teams/{team}/projects/{project}", roleAdmin, tenantNone},
}

// ruleMux finds a request's rule by the same matching as net/http.
var ruleMux, ruleByPattern = func() (*http.ServeMux, map[string]rule) {
	mux, by := http.NewServeMux(), map[string]rule{}
	for _, rl := range rules {
		mux.Handle(rl.pattern, http.NotFoundHandler())
		by[rl.pattern] = rl
	}
	return mux, by
}()

// adminOnly is the rule of a route the table does not name.
var adminOnly = rule{need: roleAdmin, tenant: tenantNone}

// ruleFor returns the rule of a request: default deny, that is admin
// only, for what the table does not name.
func ruleFor(r *http.Request) rule {
	_, pattern := ruleMux.Handler(r)
	if rl, ok := ruleByPattern[pattern]; ok {
		return rl
	}
	rl := adminOnly
	rl.pattern = r.Method + " " + r.URL.Path
	return rl
}

// authorize says whether id may make request r under rule rl; a tenant
// admin's request is checked against its scope.
func (h *Handler) authorize(id *identity, rl rule, r *http.Request) error {
	if id.role == roleTenant {
		if rl.tenant == tenantNone {
			return forbidden("%s is a tenant admin of %s; %s needs the %s role", id.actor, id.scope, rl.pattern, rl.need)
		}
		return h.checkTenant(id, rl.tenant, r)
	}
	if id.role < rl.need {
		return forbidden("%s has the %s role; %s needs the %s role", id.actor, id.role, rl.pattern, rl.need)
	}
	return nil
}
