package llmadmin

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/google/go-cmp/cmp"
)

func TestOIDCCaddyfile(t *testing.T) {
	d := caddyfile.NewTestDispenser(`llm_admin {
		oidc {
			issuer https://login.example.com/realms/staff
			client_id llmgw
			client_secret {env.OIDC_CLIENT_SECRET}
			scopes openid profile email groups
			name "Example SSO"
			role_claim roles
			role admin llm-admins
			role viewer llm-viewers
			tenant_admin org acme acme-admins
		}
	}`)
	var h Handler
	if err := h.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	want := &OIDC{Issuer: "https://login.example.com/realms/staff", ClientID: "llmgw", ClientSecret: "{env.OIDC_CLIENT_SECRET}",
		Scopes: []string{"openid", "profile", "email", "groups"}, Name: "Example SSO", RoleClaim: "roles",
		Roles: []OIDCRole{{Role: "admin", Value: "llm-admins"}, {Role: "viewer", Value: "llm-viewers"},
			{Role: "tenant_admin", Level: "org", Tenant: "acme", Value: "acme-admins"}}}
	if diff := cmp.Diff(want, h.OIDC); diff != "" {
		t.Errorf("oidc (-want +got):\n%s", diff)
	}
	for _, tc := range []struct{ name, in, want string }{
		{"no issuer", "llm_admin {\n oidc {\n client_id x\n }\n}", "issuer and client_id are required"},
		{"unknown", "llm_admin {\n oidc {\n issuer https://x\n client_id x\n bogus 1\n }\n}", "unknown subdirective"},
		{"tenant role", "llm_admin {\n oidc {\n issuer https://x\n client_id x\n role tenant_admin g\n }\n}", "a tenant_admin line"},
		{"short tenant", "llm_admin {\n oidc {\n issuer https://x\n client_id x\n tenant_admin org g\n }\n}", "tenant_admin needs"},
		{"twice", "llm_admin {\n oidc {\n issuer https://x\n issuer https://y\n }\n}", "given twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Handler
			err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestSafeReturn(t *testing.T) {
	for in, want := range map[string]string{
		"": "/", "/console/": "/console/", "/console/models?x=1#k": "/console/models?x=1#k",
		"https://evil.example/": "/", "//evil.example/": "/", `/\evil.example`: "/", "javascript:alert(1)": "/",
		"console": "/", "/a\r\nSet-Cookie: x=1": "/", "///evil.example": "/",
	} {
		if got, _ := safeReturn(in); got != want {
			t.Errorf("safeReturn(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestClaimValues(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want []string
	}{
		{"admins", []string{"admins"}}, {[]any{"a", 3.0, "b"}, []string{"a", "b"}}, {nil, nil}, {"", nil}, {map[string]any{}, nil},
	} {
		if diff := cmp.Diff(tc.want, claimValues(tc.in)); diff != "" {
			t.Errorf("claimValues(%v) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestSweepOIDCFlows(t *testing.T) {
	h := testHandler(t)
	ctx := context.Background()
	st := h.sessions.storage
	t0 := now()
	for name, age := range map[string]time.Duration{"old": 11 * time.Minute, "new": time.Minute} {
		b, _ := json.Marshal(oidcFlow{Nonce: "n", Created: t0.Add(-age)})
		if err := st.Store(ctx, oidcPrefix+hashHex(name), b); err != nil {
			t.Fatal(err)
		}
	}
	h.sessions.sweep(ctx, t0)
	old, young := st.Exists(ctx, oidcPrefix+hashHex("old")), st.Exists(ctx, oidcPrefix+hashHex("new"))
	if old || !young {
		t.Errorf("after a sweep: old flow kept %v, new flow kept %v; want only the new one", old, young)
	}
}
