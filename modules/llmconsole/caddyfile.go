package llmconsole

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("llm_console", parseCaddyfile)
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	c := new(Handler)
	err := c.UnmarshalCaddyfile(h.Dispenser)
	return c, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	llm_console {
//		path <path>
//	}
//
// Without a block the console is at /console. Its route must match the
// path and what is below it, e.g. route /console* { llm_console }.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive's name
	if d.NextArg() {
		return d.ArgErr()
	}
	seen := map[string]bool{}
	for d.NextBlock(0) {
		dir := d.Val()
		if seen[dir] {
			return d.Errf("%s is given twice", dir)
		}
		seen[dir] = true
		switch dir {
		case "path":
			if !d.Args(&h.Path) || d.NextArg() {
				return d.ArgErr()
			}
			if len(h.Path) < 2 || h.Path[0] != '/' {
				return d.Errf("path %q: give an absolute path such as /console", h.Path)
			}
		default:
			return d.Errf("unknown subdirective %q; use path", dir)
		}
	}
	return nil
}

// Interface guards
var _ caddyfile.Unmarshaler = (*Handler)(nil)
