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
//		ldap {
//			url             ldaps://<host>[:<port>] | ldap://<host>[:<port>]
//			starttls
//			ca_file         <pem file>
//			bind_dn         <dn>
//			bind_password   <password, best a placeholder: {env.LDAP_BIND_PASSWORD}>
//			base_dn         <dn>
//			user_filter     <filter with {username}>
//			group_attribute <attribute>
//			group_base_dn   <dn>
//			group_filter    <filter with {dn} or {username}>
//			name_attribute  <attribute>
//			timeout         <duration>
//			role            admin|operator|viewer <group dn>
//			tenant_admin    org|team|project <path> <group dn>
//		}
//		oidc {
//			issuer        <issuer URL>
//			client_id     <id>
//			client_secret <secret, best a placeholder: {env.OIDC_CLIENT_SECRET}>
//			scopes        <scope...>
//			redirect_url  <URL of /llm/auth/oidc/callback>
//			name          <shown on the sign-in button>
//			role_claim    <claim>
//			ca_file       <pem file>
//			role          admin|operator|viewer <claim value>
//			tenant_admin  org|team|project <path> <claim value>
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
		case "ldap":
			err = h.parseLDAP(d)
		case "oidc":
			err = h.parseOIDC(d)
		case "max_failures":
			err = parseInt(d, dir, &h.MaxFailures)
		case "failure_window":
			err = parseDuration(d, dir, &h.FailureWindow)
		default:
			return d.Errf("unknown subdirective %q; use token, session, ldap, oidc, max_failures or failure_window", dir)
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

// parseLDAP reads the ldap block.
func (h *Handler) parseLDAP(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	l := new(LDAP)
	seen := map[string]bool{}
	strs := map[string]*string{"url": &l.URL, "ca_file": &l.CAFile, "bind_dn": &l.BindDN, "bind_password": &l.BindPassword,
		"base_dn": &l.BaseDN, "user_filter": &l.UserFilter, "group_attribute": &l.GroupAttribute,
		"group_base_dn": &l.GroupBaseDN, "group_filter": &l.GroupFilter, "name_attribute": &l.NameAttribute}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		dir := d.Val()
		if dir != "role" && dir != "tenant_admin" {
			if seen[dir] {
				return d.Errf("ldap: %s is given twice", dir)
			}
			seen[dir] = true
		}
		switch dir {
		case "starttls":
			if d.NextArg() {
				return d.ArgErr()
			}
			l.StartTLS = true
		case "timeout":
			if err := parseDuration(d, "ldap timeout", &l.Timeout); err != nil {
				return err
			}
		case "role":
			var r LDAPRole
			if !d.Args(&r.Role, &r.Group) || d.NextArg() {
				return d.Errf("ldap: role needs admin|operator|viewer and a group's DN, such as: role admin cn=llm-admins,ou=groups,dc=example,dc=com")
			}
			if rl, err := parseRole(r.Role); err != nil || rl == roleTenant {
				return d.Errf("ldap: role %q: use admin, operator or viewer; a tenant admin group is a tenant_admin line", r.Role)
			}
			l.Roles = append(l.Roles, r)
		case "tenant_admin":
			r := LDAPRole{Role: roleTenant.String()}
			if !d.Args(&r.Level, &r.Tenant, &r.Group) || d.NextArg() {
				return d.Errf("ldap: tenant_admin needs org|team|project, its path and a group's DN, such as: tenant_admin org acme cn=acme-admins,ou=groups,dc=example,dc=com")
			}
			if _, ok := depth[r.Level]; !ok {
				return d.Errf("ldap: tenant_admin level %q: use org, team or project", r.Level)
			}
			l.Roles = append(l.Roles, r)
		default:
			dst, ok := strs[dir]
			if !ok {
				return d.Errf("ldap: unknown subdirective %q; use url, starttls, ca_file, bind_dn, bind_password, base_dn, user_filter, group_attribute, group_base_dn, group_filter, name_attribute, timeout, role or tenant_admin", dir)
			}
			if !d.Args(dst) || d.NextArg() {
				return d.ArgErr()
			}
		}
	}
	if l.URL == "" || l.BaseDN == "" {
		return d.Errf("ldap: url and base_dn are required")
	}
	h.LDAP = l
	return nil
}

// parseOIDC reads the oidc block.
func (h *Handler) parseOIDC(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	o := new(OIDC)
	seen := map[string]bool{}
	strs := map[string]*string{"issuer": &o.Issuer, "client_id": &o.ClientID, "client_secret": &o.ClientSecret,
		"redirect_url": &o.RedirectURL, "name": &o.Name, "role_claim": &o.RoleClaim, "ca_file": &o.CAFile}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		dir := d.Val()
		if dir != "role" && dir != "tenant_admin" {
			if seen[dir] {
				return d.Errf("oidc: %s is given twice", dir)
			}
			seen[dir] = true
		}
		switch dir {
		case "scopes":
			o.Scopes = d.RemainingArgs()
			if len(o.Scopes) == 0 {
				return d.Errf("oidc: scopes needs at least one scope, such as: scopes openid profile email groups")
			}
		case "role":
			var r OIDCRole
			if !d.Args(&r.Role, &r.Value) || d.NextArg() {
				return d.Errf("oidc: role needs admin|operator|viewer and a value of the role claim, such as: role admin llm-admins")
			}
			if rl, err := parseRole(r.Role); err != nil || rl == roleTenant {
				return d.Errf("oidc: role %q: use admin, operator or viewer; a tenant admin value is a tenant_admin line", r.Role)
			}
			o.Roles = append(o.Roles, r)
		case "tenant_admin":
			r := OIDCRole{Role: roleTenant.String()}
			if !d.Args(&r.Level, &r.Tenant, &r.Value) || d.NextArg() {
				return d.Errf("oidc: tenant_admin needs org|team|project, its path and a value of the role claim, such as: tenant_admin org acme acme-admins")
			}
			if _, ok := depth[r.Level]; !ok {
				return d.Errf("oidc: tenant_admin level %q: use org, team or project", r.Level)
			}
			o.Roles = append(o.Roles, r)
		default:
			dst, ok := strs[dir]
			if !ok {
				return d.Errf("oidc: unknown subdirective %q; use issuer, client_id, client_secret, scopes, redirect_url, name, role_claim, ca_file, role or tenant_admin", dir)
			}
			if !d.Args(dst) || d.NextArg() {
				return d.ArgErr()
			}
		}
	}
	if o.Issuer == "" || o.ClientID == "" {
		return d.Errf("oidc: issuer and client_id are required")
	}
	h.OIDC = o
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
