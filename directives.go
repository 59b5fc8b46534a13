package llmgw

import "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

// The llm_* directives run in this order, all before reverse_proxy, so a
// site needs no order option. Caddy orders plugin directives only against
// its standard ones, so they are registered here, together, in sequence:
// each goes just before reverse_proxy, after the ones before it.
func init() {
	for _, dir := range []string{"llm_quota", "llm_kb", "llm_guardrails", "llm_cache", "llm_router", "llm_mcp", "llm_admin", "llm_console"} {
		httpcaddyfile.RegisterDirectiveOrder(dir, httpcaddyfile.Before, "reverse_proxy")
	}
}
