package openai

import (
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

// Read timeouts for the servers that serve the API, where the operator's
// config leaves them unset (Caddy's servers { timeouts { … } } global
// option, or read_header_timeout, read_timeout, read_idle_timeout and
// read_min_rate in JSON). Without them a client that sends its request a
// byte a second holds a connection for ever.
const (
	// DefaultReadHeaderTimeout bounds reading a request's headers.
	// Caddy's own default is 1m.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadMinRate is the slowest a request body may arrive, in
	// bytes per second averaged over the request, after a grace of
	// Caddy's read_idle_timeout (default 1m). A body of 32 MiB at this
	// rate takes nine hours, so real clients never meet it; a trickle of
	// a byte a second is cut after the grace.
	DefaultReadMinRate = 1024
)

// ApplyServerDefaults sets DefaultReadHeaderTimeout and DefaultReadMinRate
// on the HTTP server whose routes are being provisioned, where its config
// leaves them unset. Call it from a handler's Provision: Caddy provisions a
// server's handlers before it fills in its own defaults, so an unset field
// is still zero then, and each config load (reload) builds its servers
// anew. It does nothing outside a server's provisioning.
//
// A hard read_timeout (read_body) is not set on purpose: it bounds the
// whole upload, which a large body on a slow link can need, and a minimum
// rate catches the trickle without that cost. No write timeout is set
// either, since it would cut long streamed answers.
func ApplyServerDefaults(ctx caddy.Context, logger *zap.Logger) {
	srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if !ok || srv == nil {
		return
	}
	var set []zap.Field
	if srv.ReadHeaderTimeout == 0 {
		srv.ReadHeaderTimeout = caddy.Duration(DefaultReadHeaderTimeout)
		set = append(set, zap.Duration("read_header_timeout", DefaultReadHeaderTimeout))
	}
	if srv.ReadTimeout == 0 && srv.ReadIdleTimeout == 0 && srv.ReadMinRate == 0 {
		srv.ReadMinRate = DefaultReadMinRate
		set = append(set, zap.Int64("read_min_rate", DefaultReadMinRate))
	}
	if len(set) > 0 && logger != nil {
		logger.Info("server read timeouts set to llm defaults; set servers { timeouts { … } } to change them",
			append(set, zap.Strings("listen", srv.Listen))...)
	}
}
