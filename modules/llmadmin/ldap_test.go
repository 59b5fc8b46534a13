package llmadmin

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
)

func TestCaddyfileLDAP(t *testing.T) {
	d := caddyfile.NewTestDispenser(`llm_admin {
		ldap {
			url ldap://dc1.example.com
			starttls
			ca_file /etc/llmgw/ca.pem
			bind_dn cn=llmgw,ou=services,dc=example,dc=com
			bind_password {env.LDAP_BIND_PASSWORD}
			base_dn ou=people,dc=example,dc=com
			user_filter (sAMAccountName={username})
			group_attribute memberOf
			timeout 5s
			role admin cn=llm-admins,ou=groups,dc=example,dc=com
			role viewer cn=llm-viewers,ou=groups,dc=example,dc=com
			tenant_admin org acme cn=acme-admins,ou=groups,dc=example,dc=com
		}
	}`)
	var h Handler
	if err := h.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	want := &LDAP{URL: "ldap://dc1.example.com", StartTLS: true, CAFile: "/etc/llmgw/ca.pem",
		BindDN: "cn=llmgw,ou=services,dc=example,dc=com", BindPassword: "{env.LDAP_BIND_PASSWORD}",
		BaseDN: "ou=people,dc=example,dc=com", UserFilter: "(sAMAccountName={username})", GroupAttribute: "memberOf",
		Timeout: caddy.Duration(5e9),
		Roles: []LDAPRole{{Role: "admin", Group: "cn=llm-admins,ou=groups,dc=example,dc=com"},
			{Role: "viewer", Group: "cn=llm-viewers,ou=groups,dc=example,dc=com"},
			{Role: "tenant_admin", Level: "org", Tenant: "acme", Group: "cn=acme-admins,ou=groups,dc=example,dc=com"}}}
	if diff := cmp.Diff(want, h.LDAP); diff != "" {
		t.Errorf("ldap (-want +got):\n%s", diff)
	}
}

func TestCaddyfileLDAPErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"no url", "ldap {\n base_dn dc=x\n }", "url and base_dn are required"},
		{"unknown", "ldap {\n url ldap://x\n base_dn dc=x\n filter (x)\n }", `unknown subdirective "filter"`},
		{"twice", "ldap {\n url ldap://x\n url ldap://y\n }", "given twice"},
		{"role args", "ldap {\n role admin\n }", "role needs"},
		{"tenant role", "ldap {\n role tenant_admin cn=x\n }", "tenant_admin line"},
		{"tenant args", "ldap {\n tenant_admin org cn=x\n }", "tenant_admin needs"},
		{"tenant level", "ldap {\n tenant_admin galaxy far cn=x\n }", `level "galaxy"`},
		{"starttls arg", "ldap {\n starttls yes\n }", "wrong argument count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Handler
			err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_admin {\n " + tc.in + "\n}"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestNewLDAP(t *testing.T) {
	ok := LDAP{URL: "ldaps://dc1.example.com", BaseDN: "dc=example,dc=com",
		Roles: []LDAPRole{{Role: "viewer", Group: "cn=v,dc=example,dc=com"}, {Role: "admin", Group: "cn=a,dc=example,dc=com"}}}
	d, err := newLDAP(ok, nil, caddy.NewReplacer(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if d.userAttr != "uid" || len(d.roles) != 2 || d.roles[0].role != roleAdmin {
		t.Errorf("got user attribute %q, roles %+v: want uid, admin first", d.userAttr, d.roles)
	}
	// An empty password is refused before any connection: it would be an
	// unauthenticated bind, which succeeds.
	if _, err := d.authenticate(context.Background(), "alice", ""); !errors.Is(err, errBadCredentials) {
		t.Errorf("empty password: got %v, want errBadCredentials", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*LDAP)
		want string
	}{
		{"scheme", func(l *LDAP) { l.URL = "https://dc1" }, "use ldaps://"},
		{"starttls on ldaps", func(l *LDAP) { l.StartTLS = true }, "already uses TLS"},
		{"no base", func(l *LDAP) { l.BaseDN = "" }, "base_dn is required"},
		{"filter", func(l *LDAP) { l.UserFilter = "(uid=alice)" }, "must contain {username}"},
		{"bad filter", func(l *LDAP) { l.UserFilter = "(uid={username}" }, "user_filter"},
		{"no password", func(l *LDAP) { l.BindDN = "cn=svc"; l.BindPassword = "{env.LLMADMIN_TEST_UNSET}" }, "no bind_password"},
		{"no roles", func(l *LDAP) { l.Roles = nil }, "at least one group"},
		{"bad group", func(l *LDAP) { l.Roles = []LDAPRole{{Role: "admin", Group: "llm-admins"}} }, "is not a DN"},
		{"tenant without app", func(l *LDAP) {
			l.Roles = []LDAPRole{{Role: "tenant_admin", Level: "org", Tenant: "acme", Group: "cn=a,dc=x"}}
		}, "declares no tenancy"},
		{"ca file", func(l *LDAP) { l.CAFile = "/nonexistent/ca.pem" }, "ca_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := ok
			l.Roles = append([]LDAPRole(nil), ok.Roles...)
			tc.edit(&l)
			_, err := newLDAP(l, nil, caddy.NewReplacer(), zap.NewNop())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}
