package llmctl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMCP(t *testing.T) {
	file := filepath.Join(t.TempDir(), "server.json")
	// A duration as a string is sent as Caddy's nanoseconds; a field the
	// config does not have is dropped, as decoding it always did.
	if err := os.WriteFile(file, []byte(`{"name": "docs", "url": "https://mcp.example.com/mcp", "timeout": "30s", "typo": 1,
		"oauth": {"grant": "client_credentials", "client_id": "llmgw"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	expires := time.Date(2026, 5, 1, 12, 30, 0, 0, time.UTC)
	a := newAdmin(t, map[string]answer{
		"GET /llm/mcp/servers": {body: []mcpServerStatus{
			{Name: "docs", Transport: "streamable", Target: "https://mcp.example.com/mcp", Up: true, Enabled: true, Runtime: true, Tools: []string{"docs.search", "docs.get"}},
			{Name: "fs", Transport: "stdio", Target: "mcp-fs", Enabled: true, Restarts: 2, LastError: "exited 1", Tools: []string{"fs.read"}},
			{Name: "off", Transport: "sse", Target: "https://x", Up: true},
		}},
		"POST /llm/mcp/servers":                {status: 201, body: ""},
		"POST /llm/mcp/servers/fs/disable":     {body: ""},
		"DELETE /llm/mcp/servers/docs":         {status: 204, body: ""},
		"POST /llm/mcp/servers/docs/authorize": {body: mcpAuthorizeResponse{Server: "docs", Tenant: "key:k1", AuthorizationURL: "https://idp.example.com/authorize?x=1", ExpiresAt: expires, RedirectURL: "https://gw.example.com/mcp/oauth/callback"}},
		"GET /llm/mcp/servers/docs/authorization": {body: mcpAuthStatus{Server: "docs", Grant: "authorization_code", Tokens: "per_tenant", ClientID: "llmgw", Issuer: "https://idp.example.com",
			Tenants: []mcpTenantAuth{{Level: "key", Name: "k1", State: "authorized", ExpiresAt: expires, HasRefreshToken: true, Refreshes: 2}, {Level: "shared", State: "needs_authorization"}}}},
		"DELETE /llm/mcp/servers/docs/authorization?level=key&name=k1": {status: 204, body: ""},
	})
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"mcp", "servers"}, lines(
			"SERVER  TRANSPORT   TARGET                       STATE     RESTARTS  TOOLS  FROM     LAST ERROR",
			"docs    streamable  https://mcp.example.com/mcp  up        0         2      runtime  ",
			"fs      stdio       mcp-fs                       down      2         1      config   exited 1",
			"off     sse         https://x                    disabled  0         0      config   ")},
		{[]string{"mcp", "tools", "docs"}, "docs.search\ndocs.get\n"},
		{[]string{"mcp", "add", "-f", file}, "mcp server docs added\n"},
		{[]string{"mcp", "disable", "fs"}, "mcp server fs disabled\n"},
		{[]string{"mcp", "remove", "docs"}, "mcp server docs removed\n"},
		{[]string{"mcp", "authorize", "docs", "--tenant", "key:k1"}, "https://idp.example.com/authorize?x=1\n"},
		{[]string{"mcp", "authorization", "docs"}, "mcp server docs: grant authorization_code, tokens per_tenant, client llmgw at https://idp.example.com\n" + lines(
			"TENANT  STATE                EXPIRES              REFRESH TOKEN  REFRESHES  LAST ERROR",
			"key:k1  authorized           "+expires.Local().Format("2006-01-02 15:04:05")+"  true           2          ",
			"shared  needs_authorization  -                    false          0          ")},
		{[]string{"mcp", "deauthorize", "docs", "--tenant", "key:k1"}, "mcp server docs: tokens of key:k1 forgotten\n"},
	}
	for _, tt := range tests {
		out, errOut, err := run(t, a, tt.args...)
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		check(t, strings.Join(tt.args, " "), out, tt.want)
		if tt.args[1] == "authorize" {
			// What to do goes to stderr, the URL alone to stdout.
			check(t, "authorize, stderr", errOut, "Open this URL in a browser to authorise mcp server docs for key:k1 (good until "+
				expires.Local().Format("15:04:05")+"; it comes back to https://gw.example.com/mcp/oauth/callback):\n")
		}
	}
	checkSent(t, a,
		"GET /llm/mcp/servers",
		"GET /llm/mcp/servers",
		`POST /llm/mcp/servers {"name":"docs","url":"https://mcp.example.com/mcp","timeout":30000000000,"oauth":{"grant":"client_credentials","client_id":"llmgw"}}`,
		"POST /llm/mcp/servers/fs/disable",
		"DELETE /llm/mcp/servers/docs",
		`POST /llm/mcp/servers/docs/authorize {"level":"key","name":"k1"}`,
		"GET /llm/mcp/servers/docs/authorization",
		"DELETE /llm/mcp/servers/docs/authorization?level=key&name=k1")
	if _, _, err := run(t, a, "mcp", "authorize", "docs", "--tenant", "k1"); err == nil ||
		err.Error() != `--tenant "k1": use <level>:<id>, such as key:k1, team:acme/research or org:acme` {
		t.Errorf("bad --tenant: got %v", err)
	}
}
