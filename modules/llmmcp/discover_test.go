package llmmcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDiscoverWithoutMetadata: a server that publishes neither protected
// resource metadata nor authorization server metadata is, without a
// challenge, likely not OAuth-protected, and the error says so; with a
// challenge, its origin's default endpoints (2025-03-26) are used.
func TestDiscoverWithoutMetadata(t *testing.T) {
	for _, tc := range []struct {
		name       string
		challenge  bool
		cfg        OAuthConfig
		wantErr    string // part of the error, or "" for none
		wantRecord func(base string) clientRecord
	}{{
		name:    "no challenge, no metadata: not OAuth-protected",
		wantErr: "found no protected resource metadata (tried /.well-known/oauth-protected-resource/mcp, /.well-known/oauth-protected-resource) and no authorization server metadata at",
	}, {
		name: "a challenge and a configured client: the origin's default endpoints", challenge: true,
		cfg: OAuthConfig{ClientID: "c1", Grant: "client_credentials"},
		wantRecord: func(base string) clientRecord {
			return clientRecord{Resource: base + "/mcp", Issuer: base, AuthURL: base + "/authorize", TokenURL: base + "/token",
				ClientID: "c1", AuthMethod: "none"}
		},
	}, {
		name: "a challenge and no client: registration at the default endpoint", challenge: true,
		cfg:     OAuthConfig{Grant: "client_credentials"},
		wantErr: "registering llmgw as a client at /register",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/mcp" && tc.challenge {
					w.Header().Set("WWW-Authenticate", `Bearer realm="mcp"`)
					w.WriteHeader(http.StatusUnauthorized)
					return
				}
				if r.URL.Path == "/mcp" {
					_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":0,"result":{}}`))
					return
				}
				http.NotFound(w, r)
			}))
			defer srv.Close()
			cr, err := discoverClient(context.Background(), srv.Client(), "s", srv.URL+"/mcp", tc.cfg, "")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(strings.ReplaceAll(err.Error(), srv.URL, ""), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				if !strings.HasPrefix(err.Error(), `oauth discovery for mcp server "s": `) {
					t.Errorf("error %q does not start with the server's name", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.wantRecord(srv.URL); cr.Resource != want.Resource || cr.Issuer != want.Issuer || cr.AuthURL != want.AuthURL ||
				cr.TokenURL != want.TokenURL || cr.ClientID != want.ClientID || cr.AuthMethod != want.AuthMethod {
				t.Errorf("got %+v, want %+v", *cr, want)
			}
		})
	}
}
