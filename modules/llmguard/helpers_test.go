package llmguard

import (
	"context"

	"github.com/caddyserver/caddy/v2"
)

func caddyCtx() caddy.Context {
	ctx, _ := caddy.NewContext(caddy.Context{Context: context.Background()})
	return ctx
}
