package llmmcp

import (
	"slices"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("llm_mcp", parseCaddyfile)
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := new(Handler)
	err := m.UnmarshalCaddyfile(h.Dispenser)
	return m, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	llm_mcp [<matcher>] {
//		sse_path        <path>
//		session_timeout <duration>
//		separator       <sep>
//		allow_commands  <absolute path or glob...>
//		server <name> {
//			url       <http(s) url>
//			transport streamable|sse
//			header    <name> <value>
//			timeout   <duration>
//			disabled
//			tenant key|project|team|org <id or path> {
//				header <name> <value>
//			}
//			oauth {
//				grant         authorization_code|client_credentials
//				client_id     <id>
//				client_secret <secret>
//				scopes        <scope...>
//				tokens        per_tenant|shared
//				redirect_url  <public url of <llm_mcp path>/oauth/callback>
//			}
//		}
//		server <name> {
//			command <path> [<args...>]
//			env     <key> <value>
//			dir     <path>
//			timeout <duration>
//			disabled
//			tenant key|project|team|org <id or path> {
//				env <key> <value>
//			}
//		}
//	}
//
// header, env and tenant repeat; their values may use placeholders such as
// {env.TOKEN} and {file./run/secrets/token}, resolved when the config loads,
// or name a secret the llm block declares (secret:NAME). allow_commands
// repeats too: it lists the commands an admin may run as a local server
// added at run time.
func (m *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		dir := d.Val()
		if dir != "server" && dir != "allow_commands" {
			if seen[dir] {
				return d.Errf("duplicate subdirective %q", dir)
			}
			seen[dir] = true
		}
		var err error
		switch dir {
		case "server":
			err = m.parseServer(d)
		case "sse_path":
			err = oneArg(d, &m.SSEPath)
		case "session_timeout":
			err = parseDuration(d, &m.SessionTimeout)
		case "separator":
			err = oneArg(d, &m.Separator)
			if err == nil {
				if cerr := checkSeparator(m.Separator); cerr != nil || m.Separator == "" {
					err = d.Errf("separator %q: use 1 to 4 letters, digits, '-', '_' or '.', such as __", m.Separator)
				}
			}
		case "allow_commands":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			m.AllowCommands = append(m.AllowCommands, args...)
			if cerr := checkAllowCommands(args); cerr != nil {
				err = d.Err(cerr.Error())
			}
		default:
			err = d.Errf("unrecognized llm_mcp subdirective %q", dir)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (m *Handler) parseServer(d *caddyfile.Dispenser) error {
	s := &ServerConfig{}
	if err := oneArg(d, &s.Name); err != nil {
		return err
	}
	for _, o := range m.Servers {
		if o.Name == s.Name {
			return d.Errf("mcp server %q declared twice", s.Name)
		}
	}
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		dir := d.Val()
		if dir != "header" && dir != "env" && dir != "tenant" {
			if seen[dir] {
				return d.Errf("duplicate subdirective %q in server %q", dir, s.Name)
			}
			seen[dir] = true
		}
		if err := parseServerDirective(d, dir, s); err != nil {
			return err
		}
	}
	if err := s.validate(); err != nil {
		return d.Err(err.Error())
	}
	m.Servers = append(m.Servers, s)
	return nil
}

func parseServerDirective(d *caddyfile.Dispenser, dir string, s *ServerConfig) error {
	switch dir {
	case "url":
		return oneArg(d, &s.URL)
	case "transport":
		return oneArg(d, &s.Transport)
	case "header":
		return pair(d, &s.Headers)
	case "env":
		return pair(d, &s.Env)
	case "command":
		args := d.RemainingArgs()
		if len(args) == 0 {
			return d.ArgErr()
		}
		s.Command, s.Args = args[0], slices.Clip(args[1:])
		return nil
	case "dir":
		return oneArg(d, &s.Dir)
	case "timeout":
		return parseDuration(d, &s.Timeout)
	case "disabled":
		if d.NextArg() {
			return d.ArgErr()
		}
		s.Disabled = true
		return nil
	case "tenant":
		return parseTenant(d, s)
	case "oauth":
		return parseOAuth(d, s)
	}
	return d.Errf("unrecognized subdirective %q in mcp server %q", dir, s.Name)
}

// parseTenant reads "tenant <level> <name> { header|env <k> <v> }".
func parseTenant(d *caddyfile.Dispenser, s *ServerConfig) error {
	args := d.RemainingArgs()
	if len(args) != 2 {
		return d.ArgErr()
	}
	tc := &TenantCredential{Level: args[0], Name: args[1]}
	for _, o := range s.Tenants {
		if o.Level == tc.Level && o.Name == tc.Name {
			return d.Errf("tenant %s %s given twice in server %q", tc.Level, tc.Name, s.Name)
		}
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "header":
			err = pair(d, &tc.Headers)
		case "env":
			err = pair(d, &tc.Env)
		default:
			err = d.Errf("unrecognized subdirective %q in tenant %s %s; use header or env", d.Val(), tc.Level, tc.Name)
		}
		if err != nil {
			return err
		}
	}
	s.Tenants = append(s.Tenants, tc)
	return nil
}

// parseOAuth reads "oauth { … }"; every line is optional, so a bare
// "oauth" works too.
func parseOAuth(d *caddyfile.Dispenser, s *ServerConfig) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	o := &OAuthConfig{}
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		dir := d.Val()
		if seen[dir] {
			return d.Errf("duplicate subdirective %q in the oauth block of server %q", dir, s.Name)
		}
		seen[dir] = true
		var err error
		switch dir {
		case "grant":
			err = oneArg(d, &o.Grant)
		case "client_id":
			err = oneArg(d, &o.ClientID)
		case "client_secret":
			err = oneArg(d, &o.ClientSecret)
		case "tokens":
			err = oneArg(d, &o.Tokens)
		case "redirect_url":
			err = oneArg(d, &o.RedirectURL)
		case "scopes":
			o.Scopes = d.RemainingArgs()
			if len(o.Scopes) == 0 {
				err = d.ArgErr()
			}
		default:
			err = d.Errf("unrecognized subdirective %q in the oauth block of server %q; use grant, client_id, client_secret, scopes, tokens or redirect_url", dir, s.Name)
		}
		if err != nil {
			return err
		}
	}
	s.OAuth = o
	return nil
}

func oneArg(d *caddyfile.Dispenser, dst *string) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	*dst = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

func pair(d *caddyfile.Dispenser, dst *map[string]string) error {
	args := d.RemainingArgs()
	if len(args) != 2 {
		return d.ArgErr()
	}
	if *dst == nil {
		*dst = map[string]string{}
	}
	if _, dup := (*dst)[args[0]]; dup {
		return d.Errf("%q given twice", args[0])
	}
	(*dst)[args[0]] = args[1]
	return nil
}

func parseDuration(d *caddyfile.Dispenser, dst *caddy.Duration) error {
	var s string
	if err := oneArg(d, &s); err != nil {
		return err
	}
	v, err := caddy.ParseDuration(s)
	if err != nil || v <= 0 {
		return d.Errf("%q is not a positive duration such as 30s", s)
	}
	*dst = caddy.Duration(v)
	return nil
}

// Interface guards
var _ caddyfile.Unmarshaler = (*Handler)(nil)
