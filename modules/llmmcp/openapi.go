package llmmcp

import (
	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/llm/apidoc"
)

// The admin routes of admin.api.llm_mcp, for GET /llm/openapi.json.
func init() {
	llm.DescribeAdminOperations(
		llm.AdminOperation{Method: "GET", Path: "/llm/mcp/servers", Response: []ServerStatus{}, Summary: "List the MCP servers of every llm_mcp handler: transport, target, up or not, enabled, restarts, last error, their tools, resources and prompts, and per-tenant sessions (never header or environment values)"},
		llm.AdminOperation{Method: "POST", Path: "/llm/mcp/servers", Request: ServerConfig{}, Response: named("added"), Code: 201, Summary: "Add an MCP server (a server block as JSON); kept in Caddy storage and attached to every llm_mcp handler, no reload needed; 201. 409 when the config or an earlier add has that name", Body: `{"name":"tickets","url":"https://mcp.example.com/mcp"}`},
		llm.AdminOperation{Method: "GET", Path: "/llm/mcp/servers/{name}", Response: ServerStatus{}, Summary: "One MCP server, as the list shows it; 404 when no handler has it"},
		llm.AdminOperation{Method: "DELETE", Path: "/llm/mcp/servers/{name}", Response: named("removed"), Summary: "Remove an MCP server added through the API; 409 for one of the config (remove it there, or disable it)"},
		llm.AdminOperation{Method: "POST", Path: "/llm/mcp/servers/{name}/enable", Response: named("enabled"), Summary: "List and call a disabled MCP server again; kept across restarts"},
		llm.AdminOperation{Method: "POST", Path: "/llm/mcp/servers/{name}/disable", Response: named("disabled"), Summary: "Stop listing and calling an MCP server, config or runtime; kept across restarts"},
		llm.AdminOperation{Method: "POST", Path: "/llm/mcp/servers/{name}/authorize", Request: AuthorizeRequest{}, Response: AuthorizeResponse{}, Summary: "Start the OAuth authorization of an MCP server for a tenancy level (key, project, team or org; none for a shared token): answers the authorization_url to open in a browser", Body: `{"level":"key","name":"k1"}`},
		llm.AdminOperation{Method: "GET", Path: "/llm/mcp/servers/{name}/authorization", Response: AuthStatus{}, Summary: "The OAuth token state of an MCP server per tenant (never the tokens)"},
		llm.AdminOperation{Method: "DELETE", Path: "/llm/mcp/servers/{name}/authorization", Response: map[string]any{"type": "object", "required": []string{"forgotten", "server"}, "properties": map[string]any{"forgotten": map[string]any{"type": "string"}, "server": map[string]any{"type": "string"}}}, Summary: "Revoke and forget a tenant's OAuth tokens for an MCP server: ?level=key&name=k1"},
	)
	llm.DescribeAdminOperations(endpointOperations...)
}

// endpointOperations are the MCP endpoint's own routes, on a site under
// the path of llm_mcp's route (/mcp in the manual's examples), called
// with an API key.
var endpointOperations = []llm.AdminOperation{
	{Method: "POST", Path: "/mcp", Request: rpcSchema, Response: rpcSchema, Body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		Summary: "llm_mcp (Streamable HTTP): one JSON-RPC message of MCP (initialize, tools/list, tools/call, resources/*, prompts/*); the answer is JSON, or Server-Sent Events when the client accepts them and the call reports progress; Mcp-Session-Id names the session after initialize"},
	{Method: "GET", Path: "/mcp", Response: apidoc.Stream, Summary: "llm_mcp (Streamable HTTP): the session's stream of server messages (notifications), as Server-Sent Events; needs Mcp-Session-Id"},
	{Method: "DELETE", Path: "/mcp", Response: apidoc.NoContent, Summary: "llm_mcp (Streamable HTTP): end the session named by Mcp-Session-Id"},
	{Method: "GET", Path: "/mcp/sse", Response: apidoc.Stream, Summary: "llm_mcp, the older HTTP+SSE transport (protocol 2024-11-05) under sse_path (default /sse): opens the event stream, whose first event announces the endpoint to POST messages to"},
	{Method: "GET", Path: "/mcp/oauth/callback", Response: apidoc.HTML, Summary: "llm_mcp: where an authorization server sends the browser back (?code=&state=) after 'llmgw ctl mcp authorize'; a page saying whether the server is now authorised"},
}

// rpcSchema is a JSON-RPC 2.0 message.
var rpcSchema = map[string]any{"type": "object", "required": []string{"jsonrpc"}, "properties": map[string]any{
	"jsonrpc": map[string]any{"type": "string", "enum": []string{"2.0"}},
	"id":      map[string]any{"description": "a number or a string; absent in a notification"},
	"method":  map[string]any{"type": "string"},
	"params":  map[string]any{"type": "object"},
	"result":  map[string]any{"type": "object"},
	"error": map[string]any{"type": "object", "properties": map[string]any{"code": map[string]any{"type": "integer"},
		"message": map[string]any{"type": "string"}, "data": map[string]any{}}},
}}

// named is the answer {"<verb>": "<server name>"} of a change.
func named(verb string) map[string]any {
	return map[string]any{"type": "object", "required": []string{verb}, "properties": map[string]any{verb: map[string]any{"type": "string"}}}
}
