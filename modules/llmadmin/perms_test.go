package llmadmin

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/getkin/kin-openapi/openapi3"

	"github.com/llmgw/llmgw/modules/llm"
	_ "github.com/llmgw/llmgw/modules/llmjobs"
	_ "github.com/llmgw/llmgw/modules/llmkb"
	_ "github.com/llmgw/llmgw/modules/llmmcp"
	_ "github.com/llmgw/llmgw/modules/llmrouter"
)

// TestEveryRouteHasARule fails when an admin route is added without a
// decision in the permission table: every operation of the llm admin
// API, and every route pattern of every admin.api.llm* module.
func TestEveryRouteHasARule(t *testing.T) {
	paths := llm.OpenAPI()["paths"].(map[string]any)
	for p, ops := range paths {
		for method := range ops.(map[string]any) {
			m := strings.ToUpper(method)
			if !strings.HasPrefix(p, "/llm/") {
				continue // llm_mcp's own endpoint (/mcp…), on a site, not through llm_admin
			}
			if strings.HasPrefix(p, "/llm/auth/") {
				if authMethod(p) != m {
					t.Errorf("%s %s is documented but llm_admin does not serve it; add it to authRoutes", m, p)
				}
				continue // served before the permission table: no role needed
			}
			r := httptest.NewRequest(m, fill(p), nil)
			rl := ruleFor(r)
			if _, inTable := ruleByPattern[rl.pattern]; !inTable || !samePattern(rl.pattern, m+" "+p) {
				t.Errorf("%s %s has no rule in the permission table (got the default %q); add one to rules", m, p, rl.pattern)
			}
		}
	}
	mods := adminModules()
	if len(mods) < 2 {
		t.Fatalf("found admin modules %v, want admin.api.llm and admin.api.llm_mcp at least", mods)
	}
	for _, mod := range mods {
		for _, rt := range mod.New().(caddy.AdminRouter).Routes() {
			covered := false
			for _, rl := range rules {
				_, p, _ := strings.Cut(rl.pattern, " ")
				if p == rt.Pattern || (strings.HasSuffix(rt.Pattern, "/") && strings.HasPrefix(p, rt.Pattern)) {
					covered = true
				}
			}
			if !covered {
				t.Errorf("%s: route %s has no rule in the permission table", mod.ID, rt.Pattern)
			}
		}
	}
}

// TestEveryRuleIsARoute keeps the table free of routes no module serves.
func TestEveryRuleIsARoute(t *testing.T) {
	mux, err := collectRoutes(caddy.Context{})
	if err != nil {
		t.Fatal(err)
	}
	for _, rl := range rules {
		m, p, _ := strings.Cut(rl.pattern, " ")
		if _, pattern := mux.Handler(httptest.NewRequest(m, fill(p), nil)); pattern == "" {
			t.Errorf("rule %q: no admin module serves it", rl.pattern)
		}
	}
}

// fill replaces a path's {parameters} with plain names.
func fill(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if strings.HasPrefix(s, "{") {
			parts[i] = "x"
		}
	}
	return strings.Join(parts, "/")
}

func samePattern(a, b string) bool { return fill(a) == fill(b) }

func TestAuthorize(t *testing.T) {
	s := &scope{level: "project", path: "acme/research/alpha", parts: []string{"acme", "research", "alpha"}}
	ids := map[string]*identity{
		"admin":    {id: "a", role: roleAdmin},
		"operator": {id: "o", role: roleOperator},
		"viewer":   {id: "v", role: roleViewer},
		"tenant":   {id: "t", role: roleTenant, scope: s},
	}
	for _, tc := range []struct {
		method, path string
		allowed      []string
	}{
		{"GET", "/llm/models", []string{"admin", "operator", "viewer", "tenant"}},
		{"POST", "/llm/models", []string{"admin", "operator"}},
		{"POST", "/llm/models/m/scale", []string{"admin", "operator"}},
		{"POST", "/llm/models/m/stop", []string{"admin", "operator"}},
		{"POST", "/llm/models/m/retry", []string{"admin", "operator"}},
		{"POST", "/llm/replicas/r/restart", []string{"admin", "operator"}},
		{"POST", "/llm/nodes/n/drain", []string{"admin", "operator"}},
		{"GET", "/llm/keys", []string{"admin", "operator", "viewer", "tenant"}},
		{"DELETE", "/llm/keys/k", []string{"admin"}}, // the tenant's check needs the app: see TestTenantChecks
		{"POST", "/llm/cache/purge", []string{"admin", "operator"}},
		{"POST", "/llm/mirror/sync", []string{"admin", "operator"}},
		{"POST", "/llm/mcp/servers", []string{"admin", "operator"}},
		{"GET", "/llm/mcp/servers/x/authorization", []string{"admin", "operator", "viewer"}},
		{"GET", "/llm/engines", []string{"admin", "operator", "viewer"}},
		{"GET", "/llm/peers", []string{"admin", "operator", "viewer"}}, // the peers' tenants table: not a tenant's
		// the process: a restart in place stops the node's serving for a while
		{"POST", "/llm/restart", []string{"admin"}},
		{"GET", "/llm/version", []string{"admin", "operator", "viewer"}},
		// not in the table: admin only
		{"PUT", "/llm/models", []string{"admin"}},
		{"POST", "/llm/some/new/route", []string{"admin"}},
		{"GET", "/llm/models/m/extra", []string{"admin"}},
	} {
		h := &Handler{}
		for name, id := range ids {
			if name == "tenant" && tc.method == "DELETE" {
				continue
			}
			r := httptest.NewRequest(tc.method, tc.path, nil)
			err := h.authorize(id, ruleFor(r), r)
			want := contains(tc.allowed, name)
			if (err == nil) != want {
				t.Errorf("%s %s as %s: got %v, want allowed=%v", tc.method, tc.path, name, err, want)
			}
			if err != nil {
				if e, ok := err.(caddy.APIError); !ok || e.HTTPStatus != http.StatusForbidden || !strings.Contains(e.Err.Error(), "role") {
					t.Errorf("%s %s as %s: got %v, want 403 naming the role needed", tc.method, tc.path, name, err)
				}
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestEveryRouteIsDocumented fails when GET /llm/openapi.json misses an
// admin route: a route pattern of any admin.api.llm* module, a line of
// the permission table, or one of llm_admin's own /llm/auth routes.
func TestEveryRouteIsDocumented(t *testing.T) {
	paths := llm.OpenAPI()["paths"].(map[string]any)
	documented := func(method, path string) bool {
		for p, ops := range paths {
			if _, ok := ops.(map[string]any)[strings.ToLower(method)]; ok && samePattern(p, path) {
				return true
			}
		}
		return false
	}
	for _, mod := range adminModules() {
		for _, rt := range mod.New().(caddy.AdminRouter).Routes() {
			covered := false
			for p := range paths {
				if p == rt.Pattern || (strings.HasSuffix(rt.Pattern, "/") && strings.HasPrefix(p, rt.Pattern)) {
					covered = true
				}
			}
			if !covered {
				t.Errorf("%s: route %s is not in the OpenAPI document; describe it (llm.DescribeAdminOperations)", mod.ID, rt.Pattern)
			}
		}
	}
	for _, rl := range rules {
		m, p, _ := strings.Cut(rl.pattern, " ")
		if !documented(m, p) {
			t.Errorf("rule %q: the route is not in the OpenAPI document", rl.pattern)
		}
	}
	for _, op := range authRoutes {
		if !documented(op.Method, op.Path) {
			t.Errorf("%s %s: llm_admin serves it but the OpenAPI document does not list it", op.Method, op.Path)
		}
	}
	// The whole document, other modules' routes included, is valid
	// OpenAPI 3.
	b, err := json.Marshal(llm.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		t.Fatalf("loading the document: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Errorf("the document is not valid OpenAPI 3: %v", err)
	}
}
