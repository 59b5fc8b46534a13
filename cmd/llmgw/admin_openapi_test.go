package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/getkin/kin-openapi/openapi3"

	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/llm/apidoc"
)

// TestOpenAPIListsEveryModule reads GET /llm/openapi.json from the real
// binary, through llm_admin and on the admin endpoint: it lists the llm
// app's routes, the MCP gateway's, the knowledge bases', the router's, llm_admin's
// sign-in routes, and the jobs and images routes of llm_jobs.
func TestOpenAPIListsEveryModule(t *testing.T) {
	g := adminSite(t)
	code, _, body := siteCall(t, g, "watcher-token", "GET", "/llm/openapi.json", "")
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &doc) != nil {
		t.Fatalf("GET /llm/openapi.json: got %d %.300s", code, body)
	}
	var local struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	g.adminGet("/llm/openapi.json", &local)
	for _, want := range [][2]string{{"get", "/llm/models"}, {"post", "/llm/keys"}, {"get", "/llm/mcp/servers"},
		{"delete", "/llm/mcp/servers/{name}/authorization"}, {"post", "/llm/auth/login"}, {"post", "/llm/auth/lang"},
		{"get", "/llm/kb/stores"}, {"post", "/llm/kb/stores/{id}/files"}, {"post", "/llm/kb/stores/{id}/search"},
		{"get", "/llm/providers/models"}, {"get", "/llm/providers/models/{name}"},
		{"post", "/v1/jobs"}, {"get", "/v1/jobs"}, {"get", "/v1/jobs/{id}"}, {"delete", "/v1/jobs/{id}"},
		{"get", "/v1/jobs/{id}/events"}, {"get", "/v1/jobs/{id}/outputs/{n}"}, {"post", "/v1/images/generations"}, {"post", "/v1/images/edits"}} {
		if _, ok := doc.Paths[want[1]][want[0]]; !ok {
			t.Errorf("the site's document lacks %s %s", want[0], want[1])
		}
		if _, ok := local.Paths[want[1]][want[0]]; !ok {
			t.Errorf("the admin endpoint's document lacks %s %s", want[0], want[1])
		}
	}
}

// TestOpenAPICoversRegisteredRoutes walks the routes the binary's admin
// modules register (every admin.api.llm* module's Routes, as llm_admin
// collects them) and fails on one the document does not describe: an
// exact pattern must be a documented path, a subtree pattern must hold
// documented paths, and on the running binary every method a documented
// path does not list must be refused (404 or 405), so that a handler
// serving one more route than its description fails here.
func TestOpenAPICoversRegisteredRoutes(t *testing.T) {
	ops := llm.DocumentedOperations()
	for _, miss := range apidoc.Undescribed(ops) {
		t.Error(miss)
	}
	methods := map[string]map[string]bool{}
	for _, op := range ops {
		if methods[op.Path] == nil {
			methods[op.Path] = map[string]bool{}
		}
		methods[op.Path][op.Method] = true
	}
	subtrees := registeredPatterns(t, methods)
	g := adminSite(t)
	for path, ms := range methods {
		under := ""
		for _, p := range subtrees {
			if strings.HasPrefix(path, p) {
				under = p
			}
		}
		if under == "" {
			continue // an exact pattern (a mux refuses other methods) or not an admin route
		}
		concrete := samplePath(path)
		for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			if ms[m] || m == "GET" && ms["HEAD"] {
				continue
			}
			code, body := adminCall(t, g, m, concrete)
			if code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
				t.Errorf("%s %s (of %s) answers %d, but the document does not list it: %.200s", m, concrete, under, code, body)
			}
		}
	}
}

// registeredPatterns checks the patterns of the binary's admin modules
// against the documented paths and returns the subtree patterns.
func registeredPatterns(t *testing.T, methods map[string]map[string]bool) []string {
	t.Helper()
	var subtrees []string
	for _, m := range caddy.GetModules("admin.api") {
		router, ok := m.New().(caddy.AdminRouter)
		if !ok || !strings.HasPrefix(string(m.ID), "admin.api.llm") {
			continue
		}
		for _, r := range router.Routes() {
			p := r.Pattern
			if _, method, ok := strings.Cut(p, " "); ok {
				p = method // "METHOD /path" of a mux
			}
			if !strings.HasSuffix(p, "/") {
				if methods[p] == nil {
					t.Errorf("%s serves %s, which the document does not describe", m.ID, r.Pattern)
				}
				continue
			}
			subtrees = append(subtrees, p)
			found := false
			for path := range methods {
				found = found || strings.HasPrefix(path, p)
			}
			if !found {
				t.Errorf("%s serves the subtree %s, which the document has no path of", m.ID, p)
			}
		}
	}
	if len(subtrees) == 0 {
		t.Fatal("no admin module registered a subtree: the walk found no routes")
	}
	return subtrees
}

// samplePath fills a documented path's parameters with names the
// adminSite config has.
func samplePath(p string) string {
	return strings.NewReplacer("{name}", "sim-chat", "{id}", "k1", "{org}", "acme", "{team}", "research",
		"{project}", "alpha", "{model}", "m", "{version}", "v1").Replace(p)
}

// adminCall sends a request without a body to the admin endpoint.
func adminCall(t *testing.T, g *gateway, method, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d%s", g.admin, path), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestOpenAPIAnswersMatchSchemas asks the running binary for a sample of
// GET routes and validates each answer against the response schema the
// document gives it, as a generated client would read it.
func TestOpenAPIAnswersMatchSchemas(t *testing.T) {
	g := adminSite(t)
	_, _, raw := siteCall(t, g, "root-token", "GET", "/llm/openapi.json", "")
	doc, err := openapi3.NewLoader().LoadFromData([]byte(raw))
	if err != nil {
		t.Fatalf("loading the document: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the served document is not valid OpenAPI 3: %v", err)
	}
	checked := 0
	for _, tc := range [][2]string{
		{"/llm/models", ""}, {"/llm/models/{name}", "/llm/models/sim-chat"}, {"/llm/engines", ""}, {"/llm/node", ""},
		{"/llm/keys", ""}, {"/llm/keys", "/llm/keys?limit=1"}, {"/llm/keys/{id}", "/llm/keys/k1"}, {"/llm/usage", "/llm/usage?org=acme"},
		{"/llm/cache", ""}, {"/llm/tenants", ""}, {"/llm/tenants/orgs", ""}, {"/llm/tenants/orgs/{org}", "/llm/tenants/orgs/acme"},
		{"/llm/tenants/orgs/{org}/teams", "/llm/tenants/orgs/acme/teams"}, {"/llm/audit", ""}, {"/llm/overview", ""},
		{"/llm/traffic", ""}, {"/llm/guardrails/history", ""}, {"/llm/requests", ""}, {"/llm/weights", ""},
		{"/llm/mcp/servers", ""}, {"/llm/openapi.json", ""}, {"/llm/auth/methods", ""},
	} {
		url := cmp.Or(tc[1], tc[0])
		code, _, body := siteCall(t, g, "root-token", "GET", url, "")
		if code != http.StatusOK {
			t.Errorf("GET %s: got %d %.200s, want 200", url, code, body)
			continue
		}
		op := doc.Paths.Find(tc[0]).GetOperation("GET")
		mt := op.Responses.Value("200").Value.Content.Get("application/json")
		var v any
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Errorf("GET %s: not JSON: %v", url, err)
			continue
		}
		if err := mt.Schema.Value.VisitJSON(v); err != nil {
			t.Errorf("GET %s: the answer does not match its schema: %v\n%.300s", url, err, body)
		}
		checked++
	}
	if checked < 15 {
		t.Errorf("checked %d answers, want at least 15", checked)
	}
}
