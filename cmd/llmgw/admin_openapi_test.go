package main

import (
	"encoding/json"
	"testing"
)

// TestOpenAPIListsEveryModule reads GET /llm/openapi.json from the real
// binary, through llm_admin and on the admin endpoint: it lists the llm
// app's routes, the MCP gateway's, the knowledge bases' and llm_admin's
// sign-in routes.
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
		{"get", "/llm/kb/stores"}, {"post", "/llm/kb/stores/{id}/files"}, {"post", "/llm/kb/stores/{id}/search"}} {
		if _, ok := doc.Paths[want[1]][want[0]]; !ok {
			t.Errorf("the site's document lacks %s %s", want[0], want[1])
		}
		if _, ok := local.Paths[want[1]][want[0]]; !ok {
			t.Errorf("the admin endpoint's document lacks %s %s", want[0], want[1])
		}
	}
}
