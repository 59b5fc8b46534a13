package llmmcp

import "github.com/llmgw/llmgw/modules/llm"

// The admin routes of admin.api.llm_mcp, for GET /llm/openapi.json.
func init() {
	llm.DescribeAdminOperations(
		llm.AdminOperation{Method: "GET", Path: "/llm/mcp/servers", Summary: "List the MCP servers of every llm_mcp handler: transport, target, up or not, enabled, restarts, last error, their tools, resources and prompts, and per-tenant sessions (never header or environment values)"},
		llm.AdminOperation{Method: "POST", Path: "/llm/mcp/servers", Summary: "Add an MCP server (a server block as JSON); kept in Caddy storage and attached to every llm_mcp handler, no reload needed; 201. 409 when the config or an earlier add has that name", Body: `{"name":"tickets","url":"https://mcp.example.com/mcp"}`},
		llm.AdminOperation{Method: "GET", Path: "/llm/mcp/servers/{name}", Summary: "One MCP server, as the list shows it; 404 when no handler has it"},
		llm.AdminOperation{Method: "DELETE", Path: "/llm/mcp/servers/{name}", Summary: "Remove an MCP server added through the API; 409 for one of the config (remove it there, or disable it)"},
		llm.AdminOperation{Method: "POST", Path: "/llm/mcp/servers/{name}/enable", Summary: "List and call a disabled MCP server again; kept across restarts"},
		llm.AdminOperation{Method: "POST", Path: "/llm/mcp/servers/{name}/disable", Summary: "Stop listing and calling an MCP server, config or runtime; kept across restarts"},
		llm.AdminOperation{Method: "POST", Path: "/llm/mcp/servers/{name}/authorize", Summary: "Start the OAuth authorization of an MCP server for a tenancy level (key, project, team or org; none for a shared token): answers the authorization_url to open in a browser", Body: `{"level":"key","name":"k1"}`},
		llm.AdminOperation{Method: "GET", Path: "/llm/mcp/servers/{name}/authorization", Summary: "The OAuth token state of an MCP server per tenant (never the tokens)"},
		llm.AdminOperation{Method: "DELETE", Path: "/llm/mcp/servers/{name}/authorization", Summary: "Revoke and forget a tenant's OAuth tokens for an MCP server: ?level=key&name=k1"},
	)
}
