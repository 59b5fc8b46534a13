package llmadmin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/go-ldap/ldap/v3"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm"
)

// LDAP signs people in against a directory such as OpenLDAP or Active
// Directory: llm_admin binds with the service account, finds the user
// with UserFilter under BaseDN, binds as that user with the password
// given, reads the user's groups and maps them to a role with Roles.
// A person whose groups map to no role is refused (403); an unknown user
// and a wrong password answer the same 401. The session's identity, and
// so the audit log's actor, is "ldap:<username>", the username as the
// directory spells it.
type LDAP struct {
	// URL is the directory's address: ldaps://host[:636] (TLS from the
	// start) or ldap://host[:389], best with StartTLS. Required.
	URL string `json:"url"`
	// StartTLS upgrades an ldap:// connection to TLS before any bind.
	// Without it, and without ldaps://, passwords cross the network in
	// clear text: llmgw warns unless the host is a loopback address.
	StartTLS bool `json:"starttls,omitempty"`
	// CAFile is a PEM file of the CA certificates that sign the
	// directory's certificate. Default: the system's roots.
	CAFile string `json:"ca_file,omitempty"`
	// BindDN is the service account that searches for users and
	// groups, such as cn=llmgw,ou=services,dc=example,dc=com. Default:
	// none, the searches are anonymous.
	BindDN string `json:"bind_dn,omitempty"`
	// BindPassword is the service account's password; use a
	// placeholder such as {env.LDAP_BIND_PASSWORD} or
	// {file./etc/llmgw/ldap.pw}, replaced at start.
	BindPassword string `json:"bind_password,omitempty"`
	// BaseDN is where users are searched, the whole subtree. Required.
	BaseDN string `json:"base_dn"`
	// UserFilter finds the user; {username} is replaced by the username
	// given, escaped (RFC 4515). Default: (uid={username}); for Active
	// Directory use (sAMAccountName={username}).
	UserFilter string `json:"user_filter,omitempty"`
	// GroupAttribute is the user's attribute that lists the DNs of its
	// groups. Default: memberOf. Not used when GroupBaseDN is set.
	GroupAttribute string `json:"group_attribute,omitempty"`
	// GroupBaseDN, when set, finds the user's groups by a search there
	// with GroupFilter instead of GroupAttribute.
	GroupBaseDN string `json:"group_base_dn,omitempty"`
	// GroupFilter finds the user's groups under GroupBaseDN; {dn} is
	// replaced by the user's DN and {username} by the username, both
	// escaped. Default: (member={dn}).
	GroupFilter string `json:"group_filter,omitempty"`
	// NameAttribute is the attribute shown as the person's name.
	// Default: displayName, then cn.
	NameAttribute string `json:"name_attribute,omitempty"`
	// Timeout bounds connecting and each operation. Default: 10s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// Roles map groups to roles. A person in several of them gets the
	// highest: admin, then operator, then tenant_admin (the first that
	// matches, in this order), then viewer.
	Roles []LDAPRole `json:"roles,omitempty"`
}

// LDAPRole maps the members of one group to a role.
type LDAPRole struct {
	// Role is admin, operator, viewer or tenant_admin. Required.
	Role string `json:"role"`
	// Group is the group's DN, compared without regard to case or
	// spacing. Required.
	Group string `json:"group"`
	// Level and Tenant name what a tenant_admin manages: org, team or
	// project and its path. Only for tenant_admin.
	Level  string `json:"level,omitempty"`
	Tenant string `json:"tenant,omitempty"`
}

// ldapDirectory is a provisioned LDAP block.
type ldapDirectory struct {
	cfg       LDAP
	password  string
	tls       *tls.Config
	timeout   time.Duration
	userAttr  string // the attribute user_filter compares to {username}
	nameAttrs []string
	roles     []ldapRole // in order of precedence
	logger    *zap.Logger
}

type ldapRole struct {
	group *ldap.DN
	role  role
	scope *scope
}

var filterAttr = regexp.MustCompile(`\(([A-Za-z][A-Za-z0-9-]*)=\{username\}\)`)

// newLDAP checks the block and prepares what sign-ins need.
func newLDAP(cfg LDAP, app *llm.App, repl *caddy.Replacer, logger *zap.Logger) (*ldapDirectory, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "ldap" && u.Scheme != "ldaps") || u.Host == "" {
		return nil, fmt.Errorf("ldap url %q: use ldaps://host:636 or ldap://host:389", cfg.URL)
	}
	if cfg.StartTLS && u.Scheme == "ldaps" {
		return nil, fmt.Errorf("ldap: starttls is for ldap:// URLs; %s already uses TLS", cfg.URL)
	}
	if cfg.BaseDN == "" {
		return nil, fmt.Errorf("ldap: base_dn is required: where to search for users, such as ou=people,dc=example,dc=com")
	}
	d := &ldapDirectory{cfg: cfg, timeout: 10 * time.Second, logger: logger}
	if cfg.Timeout > 0 {
		d.timeout = time.Duration(cfg.Timeout)
	}
	if d.cfg.UserFilter == "" {
		d.cfg.UserFilter = "(uid={username})"
	}
	if !strings.Contains(d.cfg.UserFilter, "{username}") {
		return nil, fmt.Errorf("ldap: user_filter %q must contain {username}, such as (uid={username})", d.cfg.UserFilter)
	}
	if _, err := ldap.CompileFilter(strings.ReplaceAll(d.cfg.UserFilter, "{username}", "x")); err != nil {
		return nil, fmt.Errorf("ldap: user_filter %q: %w", d.cfg.UserFilter, err)
	}
	if m := filterAttr.FindStringSubmatch(d.cfg.UserFilter); m != nil {
		d.userAttr = m[1]
	}
	if d.cfg.GroupAttribute == "" {
		d.cfg.GroupAttribute = "memberOf"
	}
	if d.cfg.GroupFilter == "" {
		d.cfg.GroupFilter = "(member={dn})"
	}
	if cfg.GroupBaseDN != "" {
		if _, err := ldap.CompileFilter(strings.NewReplacer("{dn}", "x", "{username}", "x").Replace(d.cfg.GroupFilter)); err != nil {
			return nil, fmt.Errorf("ldap: group_filter %q: %w", d.cfg.GroupFilter, err)
		}
	}
	d.nameAttrs = []string{"displayName", "cn"}
	if cfg.NameAttribute != "" {
		d.nameAttrs = []string{cfg.NameAttribute}
	}
	if cfg.BindDN != "" {
		d.password = repl.ReplaceAll(cfg.BindPassword, "")
		if d.password == "" {
			return nil, fmt.Errorf("ldap: bind_dn %q has no bind_password (a placeholder such as {env.LDAP_BIND_PASSWORD} that is empty counts as none)", cfg.BindDN)
		}
	}
	host := u.Hostname()
	d.tls = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ldap: reading ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ldap: ca_file %s holds no PEM certificate", cfg.CAFile)
		}
		d.tls.RootCAs = pool
	}
	if u.Scheme == "ldap" && !cfg.StartTLS {
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			logger.Warn("ldap without TLS: passwords cross the network in clear text; use ldaps:// or starttls", zap.String("url", cfg.URL))
		}
	}
	if len(cfg.Roles) == 0 {
		return nil, fmt.Errorf("ldap: map at least one group to a role, such as: role admin cn=llm-admins,ou=groups,dc=example,dc=com")
	}
	for _, rank := range []role{roleAdmin, roleOperator, roleTenant, roleViewer} {
		for _, r := range cfg.Roles {
			rl, err := parseRole(r.Role)
			if err != nil {
				return nil, fmt.Errorf("ldap: %w", err)
			}
			if rl != rank {
				continue
			}
			dn, err := ldap.ParseDN(r.Group)
			if err != nil || len(dn.RDNs) == 0 {
				return nil, fmt.Errorf("ldap: role %s: group %q is not a DN such as cn=llm-admins,ou=groups,dc=example,dc=com", r.Role, r.Group)
			}
			lr := ldapRole{group: dn, role: rl}
			if rl == roleTenant {
				if lr.scope, err = newScope(r.Level, r.Tenant, app); err != nil {
					return nil, fmt.Errorf("ldap: group %s: %w", r.Group, err)
				}
			} else if r.Level != "" || r.Tenant != "" {
				return nil, fmt.Errorf("ldap: group %s: only a tenant_admin names a level and tenant", r.Group)
			}
			d.roles = append(d.roles, lr)
		}
	}
	return d, nil
}

// maxUsername bounds the usernames llm_admin sends to the directory.
const maxUsername = 256

// authenticate signs a person in: errBadCredentials for an unknown user
// or a wrong password, an error wrapping errNoRole for a person in no
// mapped group, another error when the directory fails.
func (d *ldapDirectory) authenticate(ctx context.Context, username, password string) (*identity, error) {
	// An empty password would make an unauthenticated bind, which
	// directories answer with success (RFC 4513 5.1.2).
	if username == "" || password == "" || len(username) > maxUsername || strings.ContainsRune(username, 0) {
		return nil, errBadCredentials
	}
	conn, err := d.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if err := d.serviceBind(conn); err != nil {
		return nil, err
	}
	attrs := append([]string{d.cfg.GroupAttribute}, d.nameAttrs...)
	if d.userAttr != "" {
		attrs = append(attrs, d.userAttr)
	}
	filter := strings.ReplaceAll(d.cfg.UserFilter, "{username}", ldap.EscapeFilter(username))
	res, err := conn.Search(ldap.NewSearchRequest(d.cfg.BaseDN, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases,
		2, int(d.timeout/time.Second), false, filter, attrs, nil))
	switch {
	case ldap.IsErrorWithCode(err, ldap.LDAPResultSizeLimitExceeded) || (err == nil && len(res.Entries) > 1):
		d.logger.Warn("ldap user_filter matches several entries; refusing the sign-in", zap.String("filter", filter))
		return nil, errBadCredentials
	case ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject):
		return nil, fmt.Errorf("ldap: base_dn %q does not exist in the directory", d.cfg.BaseDN)
	case err != nil:
		return nil, fmt.Errorf("ldap: searching for the user: %w", err)
	}
	if len(res.Entries) == 0 {
		// Bind anyway, to a DN that does not exist, so that an unknown
		// user takes as long to refuse as a wrong password.
		_ = conn.Bind("cn=no such user,"+d.cfg.BaseDN, password)
		return nil, errBadCredentials
	}
	user := res.Entries[0]
	if err := conn.Bind(user.DN, password); err != nil {
		if ldap.IsErrorWithCode(err, ldap.LDAPResultInvalidCredentials) {
			return nil, errBadCredentials
		}
		return nil, fmt.Errorf("ldap: binding as the user: %w", err)
	}
	uid := username
	if d.userAttr != "" {
		for _, v := range user.GetAttributeValues(d.userAttr) {
			if strings.EqualFold(v, username) {
				uid = v
			}
		}
	}
	groups, err := d.groups(conn, user, username)
	if err != nil {
		return nil, err
	}
	id := &identity{actor: "ldap:" + uid, name: uid}
	for _, a := range d.nameAttrs {
		if v := user.GetAttributeValue(a); v != "" {
			id.name = v
			break
		}
	}
	for _, r := range d.roles {
		for _, g := range groups {
			if r.group.EqualFold(g) {
				id.role, id.scope = r.role, r.scope
				return id, nil
			}
		}
	}
	return nil, fmt.Errorf("user %q is in %w", uid, errNoRole)
}

func (d *ldapDirectory) dial(ctx context.Context) (*ldap.Conn, error) {
	dialer := &net.Dialer{Timeout: d.timeout}
	if dl, ok := ctx.Deadline(); ok {
		dialer.Deadline = dl
	}
	conn, err := ldap.DialURL(d.cfg.URL, ldap.DialWithDialer(dialer), ldap.DialWithTLSConfig(d.tls))
	if err != nil {
		return nil, fmt.Errorf("ldap: connecting to %s: %w", d.cfg.URL, err)
	}
	conn.SetTimeout(d.timeout)
	if d.cfg.StartTLS {
		if err := conn.StartTLS(d.tls); err != nil {
			conn.Close()
			return nil, fmt.Errorf("ldap: starttls with %s: %w", d.cfg.URL, err)
		}
	}
	return conn, nil
}

func (d *ldapDirectory) serviceBind(conn *ldap.Conn) error {
	if d.cfg.BindDN == "" {
		return nil
	}
	if err := conn.Bind(d.cfg.BindDN, d.password); err != nil {
		return fmt.Errorf("ldap: the service bind as %q failed: %w; check bind_dn and bind_password", d.cfg.BindDN, err)
	}
	return nil
}

// groups are the DNs of the user's groups: its group attribute, or a
// search under group_base_dn made as the service account.
func (d *ldapDirectory) groups(conn *ldap.Conn, user *ldap.Entry, username string) ([]*ldap.DN, error) {
	var dns []string
	if d.cfg.GroupBaseDN == "" {
		dns = user.GetAttributeValues(d.cfg.GroupAttribute)
	} else {
		if err := d.serviceBind(conn); err != nil {
			return nil, err
		}
		filter := strings.NewReplacer("{dn}", ldap.EscapeFilter(user.DN), "{username}", ldap.EscapeFilter(username)).Replace(d.cfg.GroupFilter)
		res, err := conn.Search(ldap.NewSearchRequest(d.cfg.GroupBaseDN, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases,
			0, int(d.timeout/time.Second), false, filter, []string{"dn"}, nil))
		if err != nil && !ldap.IsErrorWithCode(err, ldap.LDAPResultSizeLimitExceeded) {
			return nil, fmt.Errorf("ldap: searching the user's groups: %w", err)
		}
		for _, e := range resEntries(res) {
			dns = append(dns, e.DN)
		}
	}
	var out []*ldap.DN
	for _, s := range dns {
		if dn, err := ldap.ParseDN(s); err == nil {
			out = append(out, dn)
		}
	}
	return out, nil
}

func resEntries(res *ldap.SearchResult) []*ldap.Entry {
	if res == nil {
		return nil
	}
	return res.Entries
}
