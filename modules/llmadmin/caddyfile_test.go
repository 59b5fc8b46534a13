package llmadmin

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/google/go-cmp/cmp"
)

const hash = "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"

func TestCaddyfile(t *testing.T) {
	d := caddyfile.NewTestDispenser(`llm_admin {
		token ci ` + hash + ` admin
		token lead {env.LEAD_SHA256} tenant_admin project acme/research/alpha
		max_failures 5
		failure_window 30s
		session {
			ttl 4h
			idle 20m
		}
	}`)
	var h Handler
	if err := h.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	want := []Token{{ID: "ci", SHA256: hash, Role: "admin"},
		{ID: "lead", SHA256: "{env.LEAD_SHA256}", Role: "tenant_admin", Level: "project", Tenant: "acme/research/alpha"}}
	if diff := cmp.Diff(want, h.Tokens); diff != "" {
		t.Errorf("tokens (-want +got):\n%s", diff)
	}
	if h.MaxFailures != 5 || time.Duration(h.FailureWindow) != 30*time.Second {
		t.Errorf("got max_failures %d, failure_window %v", h.MaxFailures, h.FailureWindow)
	}
	if h.Session == nil || time.Duration(h.Session.TTL) != 4*time.Hour || time.Duration(h.Session.Idle) != 20*time.Minute {
		t.Errorf("got session %+v, want ttl 4h idle 20m", h.Session)
	}
}

func TestCaddyfileErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"argument", "llm_admin x", "wrong argument count"},
		{"unknown", "llm_admin {\n bogus\n}", "unknown subdirective"},
		{"short token", "llm_admin {\n token ci " + hash + "\n}", "needs <id> <sha256> <role>"},
		{"bad role", "llm_admin {\n token ci " + hash + " root\n}", `role "root"`},
		{"tenant without scope", "llm_admin {\n token ci " + hash + " tenant_admin\n}", "tenant_admin needs"},
		{"bad level", "llm_admin {\n token ci " + hash + " tenant_admin galaxy far\n}", `level "galaxy"`},
		{"extra", "llm_admin {\n token ci " + hash + " viewer more\n}", "wrong argument count"},
		{"twice", "llm_admin {\n max_failures 3\n max_failures 4\n}", "given twice"},
		{"zero", "llm_admin {\n max_failures 0\n}", "positive"},
		{"window", "llm_admin {\n failure_window soon\n}", "duration"},
		{"session ttl", "llm_admin {\n session {\n ttl forever\n }\n}", `session ttl "forever"`},
		{"session unknown", "llm_admin {\n session {\n max 3\n }\n}", "use ttl or idle"},
		{"session twice", "llm_admin {\n session {\n idle 1m\n idle 2m\n }\n}", "given twice"},
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

func TestTokenValidation(t *testing.T) {
	t.Setenv("LLMADMIN_TEST_SHA", hash)
	h := &Handler{}
	for _, tc := range []struct {
		name string
		tok  Token
		want string
	}{
		{"placeholder", Token{ID: "ci", SHA256: "{env.LLMADMIN_TEST_SHA}", Role: "viewer"}, ""},
		{"short hash", Token{ID: "ci", SHA256: "abc", Role: "viewer"}, "64 hex digits"},
		{"unset placeholder", Token{ID: "ci", SHA256: "{env.LLMADMIN_TEST_UNSET}", Role: "viewer"}, "64 hex digits"},
		{"scope on viewer", Token{ID: "ci", SHA256: hash, Role: "viewer", Level: "org", Tenant: "acme"}, "only a tenant_admin"},
		{"tenant without app", Token{ID: "ci", SHA256: hash, Role: "tenant_admin", Level: "org", Tenant: "acme"}, "declares no tenancy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.identity(tc.tok, caddy.NewReplacer())
			if (tc.want == "" && err != nil) || (tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want))) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}
