package main

import (
	"strings"
	"testing"
)

// GET /llm/metrics serves the admin endpoint's metrics on llm_admin's
// site: to a viewer and up, never without a credential nor to a tenant
// admin (the series name every tenant's keys and costs).
func TestAdminSiteMetrics(t *testing.T) {
	g := adminSite(t)
	for _, tc := range []struct {
		name, token, method, path string
		want                      int
		says                      string
	}{
		{"no credential", "", "GET", "/llm/metrics", 401, `send \"Authorization: Bearer <token>\"`},
		{"a wrong token", "guess", "GET", "/llm/metrics", 401, "the token is not valid"},
		{"an API key, not an admin token", "secret-1", "GET", "/llm/metrics", 401, "the token is not valid"},
		{"a tenant admin", "lead-token", "GET", "/llm/metrics", 403, "alpha-lead is a tenant admin of project acme/research/alpha; GET /llm/metrics needs the viewer role"},
		{"a tenant admin, trailing slash", "lead-token", "GET", "/llm/metrics/", 403, "needs the admin role"},
		{"a tenant admin, dot segment", "lead-token", "GET", "/llm/x/../metrics", 400, "must be plain"},
		{"a tenant admin, encoded slash", "lead-token", "GET", "/llm%2Fmetrics", 400, "must be plain"},
	} {
		code, _, body := siteCall(t, g, tc.token, tc.method, tc.path, "")
		if code != tc.want || !strings.Contains(body, tc.says) || strings.Contains(body, "llmgw_") {
			t.Errorf("%s: %s %s: got %d %s, want %d saying %q and no metrics", tc.name, tc.method, tc.path, code, body, tc.want, tc.says)
		}
	}
	chatWith(t, keyClient(g, "secret-1"), "sim-chat", "count me")
	for _, token := range []string{"watcher-token", "ops-token", "root-token"} {
		code, h, body := siteCall(t, g, token, "GET", "/llm/metrics", "")
		if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") ||
			!strings.Contains(body, `llmgw_requests_total{api="chat_completions",engine="sim",model="sim-chat",status="200"} 1`) {
			t.Errorf("%s: GET /llm/metrics: got %d %q, want 200 with llmgw_requests_total of sim-chat at 1:\n%.2000s", token, code, h.Get("Content-Type"), body)
		}
	}
}
