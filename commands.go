package llmgw

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	"github.com/llmgw/llmgw/modules/llmctl"
)

// The operator commands (llmgw ctl, llmgw mirror) live in modules/llmctl;
// registering them here keeps them in every build that imports this
// package, an xcaddy build --with github.com/llmgw/llmgw among them.
func init() {
	for _, cmd := range llmctl.Commands() {
		caddycmd.RegisterCommand(cmd)
	}
}
