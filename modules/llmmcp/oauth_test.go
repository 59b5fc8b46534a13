package llmmcp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/certmagic"

	"github.com/llmgw/llmgw/modules/llmmcp/oauthtest"
)

// oauthFixture is an OAuth-protected endpoint and its authorization
// server, and llm_mcp's storage in a temporary directory.
type oauthFixture struct {
	as       *oauthtest.Server
	srv      *httptest.Server
	cfg      *ServerConfig
	redirect string
}

func newOAuthFixture(t *testing.T, name string, opts oauthtest.Options, oc OAuthConfig) *oauthFixture {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	opts.Base = srv.URL
	as := oauthtest.New(opts)
	as.Handle(mux)
	mux.Handle("/", as.Protect(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })))
	rtMu.Lock()
	old := rtStorage
	rtStorage = &certmagic.FileStorage{Path: t.TempDir()}
	rtMu.Unlock()
	realNow := now
	t.Cleanup(func() {
		rtMu.Lock()
		rtStorage = old
		rtMu.Unlock()
		now = realNow
		oauthMu.Lock()
		delete(oauthClients, name)
		oauthMu.Unlock()
	})
	c := &ServerConfig{Name: name, URL: srv.URL + "/", OAuth: &oc}
	return &oauthFixture{as: as, srv: srv, cfg: c, redirect: "https://gw.example/mcp/oauth/callback"}
}

// consent plays the browser: it opens the authorization URL, submits the
// consent form, and returns where the server sends it back.
func consent(t *testing.T, authURL string) url.Values {
	t.Helper()
	resp, err := http.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`name="request" value="([^"]+)"`).FindStringSubmatch(string(b))
	if m == nil {
		t.Fatalf("no consent form at %s: %d %s", authURL, resp.StatusCode, b)
	}
	u, _ := url.Parse(authURL)
	u.RawQuery = ""
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp2, err := noFollow.PostForm(u.String(), url.Values{"request": {m[1]}, "subject": {"ada"}})
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	loc, err := url.Parse(resp2.Header.Get("Location"))
	if err != nil || resp2.StatusCode != http.StatusFound {
		t.Fatalf("consent answered %d, Location %q", resp2.StatusCode, resp2.Header.Get("Location"))
	}
	return loc.Query()
}

func TestOAuthState(t *testing.T) {
	f := newOAuthFixture(t, "st", oauthtest.Options{}, OAuthConfig{})
	oc := oauthFor(f.cfg)
	ref := tenantRef{Level: "key", Name: "k1"}
	authURL, _, err := oc.begin(context.Background(), ref, f.redirect)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(authURL)
	q := u.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("resource") != f.cfg.URL ||
		q.Get("redirect_uri") != f.redirect || len(q.Get("state")) < 20 || !strings.Contains(q.Get("scope"), "mcp") {
		t.Fatalf("authorization URL %s lacks S256 PKCE, resource, redirect, state or scope", authURL)
	}
	if f.as.Count("register") != 1 {
		t.Errorf("llmgw registered %d times, want once (DCR)", f.as.Count("register"))
	}
	p, err := takePending(q.Get("state"))
	if err != nil || p.oc != oc || p.ref != ref {
		t.Fatalf("the state is not bound to the server and tenant: %+v %v", p, err)
	}
	if _, err := takePending(q.Get("state")); err == nil || !strings.Contains(err.Error(), "already used") {
		t.Errorf("a state was accepted twice: %v", err)
	}
	if _, err := takePending("forged"); err == nil {
		t.Error("an unknown state was accepted")
	}
	authURL, _, _ = oc.begin(context.Background(), ref, f.redirect)
	u, _ = url.Parse(authURL)
	now = func() time.Time { return time.Now().Add(pendingTTL + time.Minute) }
	if _, err := takePending(u.Query().Get("state")); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("an expired state was accepted: %v", err)
	}
	// a second authorisation reuses the registration
	if _, _, err := oc.begin(context.Background(), tenantRef{Level: "team", Name: "acme/research"}, f.redirect); err != nil || f.as.Count("register") != 1 {
		t.Errorf("a second authorisation registered again (%d) or failed: %v", f.as.Count("register"), err)
	}
}

func TestOAuthTokensStoredAndRefreshed(t *testing.T) {
	f := newOAuthFixture(t, "tk", oauthtest.Options{TokenTTL: time.Minute}, OAuthConfig{})
	oc := oauthFor(f.cfg)
	ref := tenantRef{Level: "key", Name: "k1"}
	ctx := context.Background()
	if _, err := oc.entry(ref).token(ctx); !errors.As(err, new(*needsAuthError)) || !strings.Contains(err.Error(), "llmgw ctl mcp authorize tk --tenant key:k1") {
		t.Fatalf("before authorising: %v, want an error saying how to authorise", err)
	}
	authURL, _, err := oc.begin(ctx, ref, f.redirect)
	if err != nil {
		t.Fatal(err)
	}
	back := consent(t, authURL)
	p, err := takePending(back.Get("state"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := p.complete(ctx, back.Get("code"), back.Get("iss"))
	if err != nil {
		t.Fatal(err)
	}
	tok1, err := e.token(ctx)
	if err != nil || !strings.HasPrefix(tok1, "at-") {
		t.Fatalf("token after authorising: %q %v", tok1, err)
	}
	get := func(e *tokenEntry) int {
		hc := &http.Client{Transport: bearerTransport{e: e, base: http.DefaultTransport}}
		resp, err := hc.Get(f.cfg.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := get(e); s != http.StatusOK {
		t.Fatalf("the protected endpoint answered %d to the token", s)
	}

	// storage: a fresh client (a restart) finds the tokens
	oauthMu.Lock()
	delete(oauthClients, "tk")
	oauthMu.Unlock()
	oc2 := oauthFor(f.cfg)
	if ts := oc2.tenants(); len(ts) != 1 || ts[0].ref != ref {
		t.Fatalf("after a restart the stored tenants are %v", ts)
	}
	e2 := oc2.entry(ref)
	if tok, err := e2.token(ctx); err != nil || tok != tok1 {
		t.Fatalf("after a restart the token is %q (%v), want the stored one", tok, err)
	}

	// refresh: near its expiry the token is refreshed, and stored
	now = func() time.Time { return time.Now().Add(59 * time.Second) }
	tok2, err := e2.token(ctx)
	if err != nil || tok2 == tok1 || f.as.Count("refresh") != 1 {
		t.Fatalf("near expiry: token %q (%v), refreshes %d; want a new token from one refresh", tok2, err, f.as.Count("refresh"))
	}
	now = time.Now
	if rec := e2.record(); rec.Refreshes != 1 || rec.AccessToken != tok2 {
		t.Errorf("record after refresh: %+v", rec)
	}
	// the server refusing a token (here: it forgot it) makes the transport
	// refresh once and retry
	f.as.RevokeAll()
	if s := get(e2); s != http.StatusUnauthorized {
		t.Errorf("with every token revoked the endpoint answered %d", s)
	}
	// the refresh was refused: the tenant needs authorising again, and
	// says so, in storage too
	rec := e2.record()
	if !rec.NeedsAuth || !strings.Contains(rec.LastError, "invalid_grant") || e2.usable() {
		t.Fatalf("after a refused refresh the record is %+v", rec)
	}
	if _, err := e2.token(ctx); err == nil || !strings.Contains(err.Error(), "needs OAuth authorisation for key k1") {
		t.Errorf("after a refused refresh: %v", err)
	}
	var stored tokenRecord
	if err := loadJSON(oc2.tokenKey(ref), &stored); err != nil || !stored.NeedsAuth {
		t.Errorf("the stored record does not say authorisation is needed: %+v %v", stored, err)
	}
	if err := e2.forget(ctx); err != nil || e2.record() != nil || len(oc2.tenants()) != 0 {
		t.Errorf("forget: %v", err)
	}
}

func TestOAuthClientCredentials(t *testing.T) {
	f := newOAuthFixture(t, "cc", oauthtest.Options{ClientID: "llmgw", ClientSecret: "s3cret"},
		OAuthConfig{Grant: "client_credentials", ClientID: "llmgw", ClientSecret: "s3cret"})
	oc := oauthFor(f.cfg)
	e := oc.entry(sharedRef)
	if !e.usable() {
		t.Fatal("a client_credentials server is not usable before its first token")
	}
	tok, err := e.token(context.Background())
	if err != nil || f.as.Count("client_credentials") != 1 || f.as.Count("register") != 0 {
		t.Fatalf("client_credentials token %q, %v (grants %d, registrations %d)", tok, err, f.as.Count("client_credentials"), f.as.Count("register"))
	}
	f.cfg.OAuth.ClientSecret = "wrong"
	oc = oauthFor(f.cfg)
	now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if _, err := oc.entry(sharedRef).token(context.Background()); err == nil || !strings.Contains(err.Error(), "client_secret") {
		t.Errorf("with a wrong secret: %v, want an error pointing at the client_secret", err)
	}
}

func TestOAuthCaddyfile(t *testing.T) {
	h := new(Handler)
	err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`llm_mcp {
		server gh {
			url https://mcp.example/
			oauth {
				client_id llmgw
				client_secret {env.GH_SECRET}
				scopes repo read:org
				tokens shared
				redirect_url https://gw.example/mcp/oauth/callback
			}
		}
		server plain {
			url https://other.example/
			oauth
		}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	o := h.Servers[0].OAuth
	if o == nil || o.ClientID != "llmgw" || o.ClientSecret != "{env.GH_SECRET}" || !slices.Equal(o.Scopes, []string{"repo", "read:org"}) ||
		o.Tokens != "shared" || o.RedirectURL != "https://gw.example/mcp/oauth/callback" || o.grant() != "authorization_code" {
		t.Errorf("parsed %+v", o)
	}
	if o := h.Servers[1].OAuth; o == nil || o.shared() || o.grant() != "authorization_code" {
		t.Errorf("a bare oauth: %+v", o)
	}
	for _, in := range []string{
		"llm_mcp {\n server a {\n url http://x\n oauth {\n grant password\n }\n }\n}",
		"llm_mcp {\n server a {\n url http://x\n oauth {\n scope x\n }\n }\n}",
		"llm_mcp {\n server a {\n url http://x\n oauth {\n tokens a\n tokens b\n }\n }\n}",
	} {
		if err := new(Handler).UnmarshalCaddyfile(caddyfile.NewTestDispenser(in)); err == nil {
			t.Errorf("%q parsed", in)
		}
	}
}

func TestOAuthConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		s    ServerConfig
		want string
	}{
		{ServerConfig{Name: "a", Command: "/bin/x", OAuth: &OAuthConfig{}}, "url servers only"},
		{ServerConfig{Name: "a", URL: "http://x", OAuth: &OAuthConfig{Grant: "password"}}, `grant "password"`},
		{ServerConfig{Name: "a", URL: "http://x", OAuth: &OAuthConfig{Grant: "client_credentials", Tokens: "per_tenant"}}, "drop tokens per_tenant"},
		{ServerConfig{Name: "a", URL: "http://x", OAuth: &OAuthConfig{ClientSecret: "s"}}, "without client_id"},
		{ServerConfig{Name: "a", URL: "http://x", OAuth: &OAuthConfig{}, Tenants: []*TenantCredential{{Level: "key", Name: "k"}}}, "do not mix"},
	} {
		if err := tc.s.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.s.OAuth, err, tc.want)
		}
	}
}

// A new redirect URL means a new registration; tokens issued to the old
// client still refresh.
func TestOAuthReregistrationKeepsTokens(t *testing.T) {
	f := newOAuthFixture(t, "rr", oauthtest.Options{TokenTTL: time.Minute}, OAuthConfig{})
	oc := oauthFor(f.cfg)
	ctx := context.Background()
	ref := tenantRef{Level: "key", Name: "k1"}
	authURL, _, err := oc.begin(ctx, ref, f.redirect)
	if err != nil {
		t.Fatal(err)
	}
	back := consent(t, authURL)
	p, err := takePending(back.Get("state"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := p.complete(ctx, back.Get("code"), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := oc.begin(ctx, tenantRef{Level: "key", Name: "k2"}, "https://elsewhere.example/mcp/oauth/callback"); err != nil || f.as.Count("register") != 2 {
		t.Fatalf("a new redirect URL: %v, registrations %d, want 2", err, f.as.Count("register"))
	}
	now = func() time.Time { return time.Now().Add(time.Hour) }
	if _, err := e.token(ctx); err != nil || f.as.Count("refresh") != 1 {
		t.Errorf("refreshing k1's token after a re-registration: %v (refreshes %d)", err, f.as.Count("refresh"))
	}
}
