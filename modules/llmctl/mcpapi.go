package llmctl

import (
	"time"

	"github.com/caddyserver/caddy/v2"
)

// The JSON shapes of /llm/mcp/*. The llm_mcp handler's package imports
// the llm app, which this package never does, so the shapes the commands
// read and send are declared here; mcpapi_test.go checks them against
// llmmcp's, field by field, so the two cannot drift apart.

// mcpServerConfig is a server as llm_mcp's JSON config and POST
// /llm/mcp/servers take it (llmmcp.ServerConfig). ctl mcp add decodes the
// file into it and sends it again, so a field it does not know is dropped,
// as it always was.
type mcpServerConfig struct {
	Name      string                 `json:"name"`
	URL       string                 `json:"url,omitempty"`
	Transport string                 `json:"transport,omitempty"`
	Headers   map[string]string      `json:"headers,omitempty"`
	Command   string                 `json:"command,omitempty"`
	Args      []string               `json:"args,omitempty"`
	Env       map[string]string      `json:"env,omitempty"`
	Dir       string                 `json:"dir,omitempty"`
	Timeout   caddy.Duration         `json:"timeout,omitempty"`
	Disabled  bool                   `json:"disabled,omitempty"`
	Tenants   []*mcpTenantCredential `json:"tenants,omitempty"`
	OAuth     *mcpOAuthConfig        `json:"oauth,omitempty"`
}

// mcpTenantCredential is llmmcp.TenantCredential.
type mcpTenantCredential struct {
	Level   string            `json:"level"`
	Name    string            `json:"name"`
	Headers map[string]string `json:"headers,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// mcpOAuthConfig is llmmcp.OAuthConfig.
type mcpOAuthConfig struct {
	Grant        string   `json:"grant,omitempty"`
	ClientID     string   `json:"client_id,omitempty"`
	ClientSecret string   `json:"client_secret,omitempty"`
	Scopes       []string `json:"scopes,omitempty"`
	Tokens       string   `json:"tokens,omitempty"`
	RedirectURL  string   `json:"redirect_url,omitempty"`
}

// mcpServerStatus is what ctl mcp servers and tools read of
// GET /llm/mcp/servers (llmmcp.ServerStatus).
type mcpServerStatus struct {
	Name      string   `json:"name"`
	Transport string   `json:"transport"`
	Target    string   `json:"target"`
	Up        bool     `json:"up"`
	Enabled   bool     `json:"enabled"`
	Runtime   bool     `json:"runtime,omitempty"`
	Restarts  int      `json:"restarts"`
	LastError string   `json:"last_error,omitempty"`
	Tools     []string `json:"tools"`
}

// mcpAuthorizeRequest is the body of POST …/authorize
// (llmmcp.AuthorizeRequest).
type mcpAuthorizeRequest struct {
	Level string `json:"level,omitempty"`
	Name  string `json:"name,omitempty"`
}

// mcpAuthorizeResponse is its answer (llmmcp.AuthorizeResponse).
type mcpAuthorizeResponse struct {
	Server           string    `json:"server"`
	Tenant           string    `json:"tenant"`
	AuthorizationURL string    `json:"authorization_url,omitempty"`
	ExpiresAt        time.Time `json:"expires_at,omitzero"`
	RedirectURL      string    `json:"redirect_url,omitempty"`
	Authorized       bool      `json:"authorized,omitempty"`
}

// mcpAuthStatus is what ctl mcp authorization reads of
// GET …/authorization (llmmcp.AuthStatus).
type mcpAuthStatus struct {
	Server   string          `json:"server"`
	Grant    string          `json:"grant"`
	Tokens   string          `json:"tokens"`
	Issuer   string          `json:"issuer,omitempty"`
	ClientID string          `json:"client_id,omitempty"`
	Tenants  []mcpTenantAuth `json:"tenants"`
}

// mcpTenantAuth is llmmcp.TenantAuth, as far as the table shows it.
type mcpTenantAuth struct {
	Level           string    `json:"level"`
	Name            string    `json:"name,omitempty"`
	State           string    `json:"state"`
	ExpiresAt       time.Time `json:"expires_at,omitzero"`
	HasRefreshToken bool      `json:"has_refresh_token"`
	Refreshes       int       `json:"refreshes"`
	LastError       string    `json:"last_error,omitempty"`
}
