package llmadmin

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("llm_admin", parseCaddyfile)
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	a := new(Handler)
	err := a.UnmarshalCaddyfile(h.Dispenser)
	return a, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	llm_admin {
//		token <id> <sha256> admin|operator|viewer
//		token <id> <sha256> tenant_admin org|team|project <path>
//		max_failures   <n>
//		failure_window <duration>
//		session {
//			ttl  <duration>
//			idle <duration>
//		}
//	}
//
// <sha256> is the hex SHA-256 of the token (`llmgw hash-key --new` makes
// a token and its hash); a placeholder such as {env.CI_TOKEN_SHA256} or
// {file./etc/llmgw/ci.sha256} is read at start.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive's name
	if d.NextArg() {
		return d.ArgErr()
	}
	seen := map[string]bool{}
	for d.NextBlock(0) {
		dir := d.Val()
		if dir != "token" {
			if seen[dir] {
				return d.Errf("%s is given twice", dir)
			}
			seen[dir] = true
		}
		var err error
		switch dir {
		case "token":
			err = h.parseToken(d)
		case "session":
			err = h.parseSession(d)
		case "max_failures":
			err = parseInt(d, dir, &h.MaxFailures)
		case "failure_window":
			err = parseDuration(d, dir, &h.FailureWindow)
		default:
			return d.Errf("unknown subdirective %q; use token, session, max_failures or failure_window", dir)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (h *Handler) parseToken(d *caddyfile.Dispenser) error {
	var t Token
	if !d.Args(&t.ID, &t.SHA256, &t.Role) {
		return d.Errf("token needs <id> <sha256> <role>; roles: admin, operator, viewer, tenant_admin org|team|project <path>")
	}
	if _, err := parseRole(t.Role); err != nil {
		return d.Errf("token %s: %v", t.ID, err)
	}
	if t.Role == roleTenant.String() {
		if !d.Args(&t.Level, &t.Tenant) {
			return d.Errf("token %s: tenant_admin needs org|team|project and its path, such as: tenant_admin project acme/research/alpha", t.ID)
		}
		if _, ok := depth[t.Level]; !ok {
			return d.Errf("token %s: level %q: use org, team or project", t.ID, t.Level)
		}
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	h.Tokens = append(h.Tokens, t)
	return nil
}

func parseInt(d *caddyfile.Dispenser, name string, dst *int) error {
	var s string
	if !d.Args(&s) || d.NextArg() {
		return d.ArgErr()
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return d.Errf("%s %q: want a positive whole number", name, s)
	}
	*dst = n
	return nil
}

// parseSession reads the session block.
func (h *Handler) parseSession(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	s := new(Sessions)
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		dir := d.Val()
		if seen[dir] {
			return d.Errf("session: %s is given twice", dir)
		}
		seen[dir] = true
		switch dir {
		case "ttl":
			if err := parseDuration(d, "session ttl", &s.TTL); err != nil {
				return err
			}
		case "idle":
			if err := parseDuration(d, "session idle", &s.Idle); err != nil {
				return err
			}
		default:
			return d.Errf("session: unknown subdirective %q; use ttl or idle", dir)
		}
	}
	h.Session = s
	return nil
}

func parseDuration(d *caddyfile.Dispenser, name string, dst *caddy.Duration) error {
	var s string
	if !d.Args(&s) || d.NextArg() {
		return d.ArgErr()
	}
	dur, err := caddy.ParseDuration(s)
	if err != nil || dur <= 0 {
		return d.Errf("%s %q: want a duration such as 1m", name, s)
	}
	*dst = caddy.Duration(dur)
	return nil
}

// Interface guards
var _ caddyfile.Unmarshaler = (*Handler)(nil)
