package llmmcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// OAuth towards upstream MCP servers, as the MCP authorization
// specification (2025-06-18, 2025-11-25) has a client do it: the server
// answers 401 with a WWW-Authenticate challenge naming its Protected
// Resource Metadata (RFC 9728, else the well-known locations), which names
// the authorization server, whose metadata (RFC 8414 or OpenID Connect
// discovery) gives the endpoints. llmgw is the client: it uses the
// configured client_id/client_secret or registers itself (RFC 7591), and
// gets tokens with the authorization code grant and PKCE S256 (a person
// consents in a browser, through the URL the admin API hands out) or the
// client_credentials grant, always naming the server as the resource
// (RFC 8707). Tokens are kept per tenant, or one per server, in Caddy's
// storage, and refreshed before they expire.

// OAuthConfig makes llmgw authenticate to a url server with OAuth. Every
// field is optional: discovery fills in what is not given.
type OAuthConfig struct {
	// Grant is "authorization_code" (a person consents in a browser;
	// the default) or "client_credentials" (machine to machine, no
	// browser step).
	Grant string `json:"grant,omitempty"`
	// ClientID registered with the server's authorization server. Without
	// it llmgw registers itself there (Dynamic Client Registration).
	// Placeholders are resolved when the config loads.
	ClientID string `json:"client_id,omitempty"`
	// ClientSecret of ClientID, if it has one. Placeholders such as
	// {env.SECRET} or {file./run/secrets/x} are resolved when the config
	// loads; the value is never logged or shown.
	ClientSecret string `json:"client_secret,omitempty"`
	// Scopes to ask for. Default: those the server's challenge or
	// metadata names (and offline_access when offered, for refresh tokens).
	Scopes []string `json:"scopes,omitempty"`
	// Tokens is "per_tenant" (each key, project, team or organisation
	// authorises on its own; the default for authorization_code) or
	// "shared" (one token for every caller; the only choice for
	// client_credentials).
	Tokens string `json:"tokens,omitempty"`
	// RedirectURL is the public URL of llm_mcp's callback,
	// "<route path>/oauth/callback" on this site, as a browser reaches
	// it (set it behind a proxy). Default: the scheme, host and path of
	// the first MCP request llm_mcp served.
	RedirectURL string `json:"redirect_url,omitempty"`
}

func (o *OAuthConfig) grant() string {
	if o.Grant == "" {
		return "authorization_code"
	}
	return o.Grant
}

func (o *OAuthConfig) shared() bool {
	return o.Tokens == "shared" || o.grant() == "client_credentials"
}

func (o *OAuthConfig) validate(server string) error {
	switch {
	case o.Grant != "" && o.Grant != "authorization_code" && o.Grant != "client_credentials":
		return fmt.Errorf("mcp server %q: oauth grant %q: use authorization_code or client_credentials", server, o.Grant)
	case o.Tokens != "" && o.Tokens != "per_tenant" && o.Tokens != "shared":
		return fmt.Errorf("mcp server %q: oauth tokens %q: use per_tenant or shared", server, o.Tokens)
	case o.Grant == "client_credentials" && o.Tokens == "per_tenant":
		return fmt.Errorf("mcp server %q: the client_credentials grant gets one token for the server; drop tokens per_tenant", server)
	case o.ClientSecret != "" && o.ClientID == "":
		return fmt.Errorf("mcp server %q: oauth client_secret without client_id; give both", server)
	case o.RedirectURL != "" && !strings.HasPrefix(o.RedirectURL, "http://") && !strings.HasPrefix(o.RedirectURL, "https://"):
		return fmt.Errorf("mcp server %q: oauth redirect_url %q must be an http(s) URL", server, clip(o.RedirectURL))
	case o.RedirectURL != "" && strings.HasPrefix(o.RedirectURL, "http") && !strings.Contains(o.RedirectURL, "{"):
		if u, err := url.Parse(o.RedirectURL); err != nil || u.Hostname() == "" {
			return fmt.Errorf("mcp server %q: oauth redirect_url %q is not a URL with a host; give https://<your host><llm_mcp path>%s", server, clip(o.RedirectURL), callbackSuffix)
		}
	}
	return nil
}

// tenantRef names whose token it is: a tenancy level ("key", "project",
// "team", "org") and its id or path, or the server's one shared token.
type tenantRef struct {
	Level string `json:"level"`
	Name  string `json:"name,omitempty"`
}

var sharedRef = tenantRef{Level: "shared"}

func (r tenantRef) String() string {
	if r.Level == "shared" {
		return "shared"
	}
	return r.Level + ":" + r.Name
}

// kind is the level's name in llm.Level.Kind.
func (r tenantRef) kind() string {
	if r.Level == "org" {
		return "organisation"
	}
	return r.Level
}

func (r tenantRef) validate() error {
	switch r.Level {
	case "key", "project", "team", "org":
		if r.Name == "" {
			return fmt.Errorf("tenant %s needs its id or path, such as key k1 or team acme/research", r.Level)
		}
		return checkTenantName(r.Level, r.Name)
	case "shared":
		return nil
	}
	return fmt.Errorf("tenant level %q: use key, project, team or org", clip(r.Level))
}

// tokenRecord is one tenant's tokens as kept in storage.
type tokenRecord struct {
	Tenant       tenantRef `json:"tenant"`
	AccessToken  string    `json:"access_token,omitempty"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	TokenType    string    `json:"token_type,omitempty"`
	Scope        string    `json:"scope,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	Issued       time.Time `json:"issued,omitzero"`
	Authorized   time.Time `json:"authorized,omitzero"`
	Refreshed    time.Time `json:"refreshed,omitzero"`
	Refreshes    int       `json:"refreshes,omitempty"`
	// NeedsAuth is set when the tokens can no longer be used: a refresh
	// was refused, or the server refused the token.
	NeedsAuth bool   `json:"needs_authorization,omitempty"`
	LastError string `json:"last_error,omitempty"`
	// Client is the registered client the tokens were issued to, when
	// llmgw registered itself: a later registration (a new redirect URL)
	// must not strand them.
	Client *clientRecord `json:"client,omitempty"`
}

// clientRecord is what discovery and registration found for a server,
// kept so a restart can refresh tokens without starting over.
type clientRecord struct {
	Resource      string   `json:"resource"`
	Issuer        string   `json:"issuer"`
	AuthURL       string   `json:"authorization_endpoint"`
	TokenURL      string   `json:"token_endpoint"`
	RevokeURL     string   `json:"revocation_endpoint,omitempty"`
	IssParam      bool     `json:"iss_parameter,omitempty"`
	Scopes        []string `json:"scopes,omitempty"`
	ClientID      string   `json:"client_id"`
	ClientSecret  string   `json:"client_secret,omitempty"`
	AuthMethod    string   `json:"token_endpoint_auth_method,omitempty"`
	RedirectURL   string   `json:"redirect_url,omitempty"`
	Registered    bool     `json:"registered,omitempty"` // by DCR
	ConfiguredFor string   `json:"configured_for,omitempty"`
}

// oauthClient is llmgw as the OAuth client of one upstream server. One
// lives per server name for the process, so tokens and pending
// authorisations outlive reloads.
type oauthClient struct {
	server string
	hc     *http.Client // oauthHTTP, or for a server added at run time its egress policy's

	mu      sync.Mutex
	url     string
	cfg     OAuthConfig
	client  *clientRecord
	entries map[tenantRef]*tokenEntry
	listed  bool // entries holds every stored token
}

var (
	oauthMu      sync.Mutex
	oauthClients = map[string]*oauthClient{}
	// oauthHTTP makes discovery, registration and token requests.
	oauthHTTP = &http.Client{Transport: upstreamTransport, Timeout: 30 * time.Second}
)

// oauthFor returns the server's OAuth client, updated to its config.
func oauthFor(c *ServerConfig) *oauthClient {
	oauthMu.Lock()
	oc := oauthClients[c.Name]
	if oc == nil {
		oc = &oauthClient{server: c.Name, entries: map[tenantRef]*tokenEntry{}}
		oauthClients[c.Name] = oc
	}
	oauthMu.Unlock()
	hc := oauthHTTP
	if c.egress != nil {
		hc = c.egress.Client(30 * time.Second)
	}
	oc.mu.Lock()
	oc.hc = hc
	if oc.url != c.URL || !slices.Equal(oc.cfg.Scopes, c.OAuth.Scopes) || oc.cfg.ClientID != c.OAuth.ClientID ||
		oc.cfg.ClientSecret != c.OAuth.ClientSecret || oc.cfg.Grant != c.OAuth.Grant {
		oc.client = nil // discover again
	}
	oc.url, oc.cfg = c.URL, *c.OAuth
	oc.mu.Unlock()
	return oc
}

func lookupOAuth(server string) *oauthClient {
	oauthMu.Lock()
	defer oauthMu.Unlock()
	return oauthClients[server]
}

// http is the client of the server's discovery, registration and token
// requests.
func (oc *oauthClient) http() *http.Client {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if oc.hc == nil {
		return oauthHTTP
	}
	return oc.hc
}

func (oc *oauthClient) config() (string, OAuthConfig) {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	return oc.url, oc.cfg
}

// storage paths
func (oc *oauthClient) prefix() string { return "llm_mcp/oauth/" + url.PathEscape(oc.server) }
func (oc *oauthClient) clientKey() string {
	return oc.prefix() + "/client.json"
}
func (oc *oauthClient) tokenKey(r tenantRef) string {
	if r.Level == "shared" {
		return oc.prefix() + "/tokens/shared.json"
	}
	return oc.prefix() + "/tokens/" + r.Level + "-" + url.PathEscape(r.Name) + ".json"
}

func store() certmagic.Storage {
	rtMu.Lock()
	defer rtMu.Unlock()
	return rtStorage
}

func storeJSON(key string, v any) error {
	st := store()
	if st == nil {
		return nil
	}
	raw, _ := json.Marshal(v)
	return st.Store(context.Background(), key, raw)
}

func loadJSON(key string, v any) error {
	st := store()
	if st == nil {
		return fs.ErrNotExist
	}
	raw, err := st.Load(context.Background(), key)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}

// entry returns a tenant's token entry, loaded from storage on first use.
func (oc *oauthClient) entry(r tenantRef) *tokenEntry {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	return oc.entryLocked(r)
}

func (oc *oauthClient) entryLocked(r tenantRef) *tokenEntry {
	if e := oc.entries[r]; e != nil {
		return e
	}
	e := &tokenEntry{oc: oc, ref: r, changed: make(chan struct{})}
	var rec tokenRecord
	if loadJSON(oc.tokenKey(r), &rec) == nil && rec.Tenant == r {
		e.rec = &rec
	}
	oc.entries[r] = e
	return e
}

// tenants are the tenants with stored tokens (usable or not), sorted.
// Lock order: an entry's mu may take oc.mu, never the other way round.
func (oc *oauthClient) tenants() []*tokenEntry {
	oc.mu.Lock()
	if !oc.listed {
		oc.listed = true
		if st := store(); st != nil {
			keys, _ := st.List(context.Background(), oc.prefix()+"/tokens", true)
			for _, k := range keys {
				var rec tokenRecord
				if loadJSON(k, &rec) == nil && rec.Tenant.validate() == nil {
					oc.entryLocked(rec.Tenant)
				}
			}
		}
	}
	all := make([]*tokenEntry, 0, len(oc.entries))
	for _, e := range oc.entries {
		all = append(all, e)
	}
	oc.mu.Unlock()
	var out []*tokenEntry
	for _, e := range all {
		if e.record() != nil {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ref.String() < out[j].ref.String() })
	return out
}

// discover finds the endpoints and the client to use, registering one
// when none is configured; the result is kept in memory and storage.
// redirect is the callback URL (authorization_code only).
func (oc *oauthClient) discover(ctx context.Context, redirect string) (*clientRecord, error) {
	serverURL, cfg := oc.config()
	oc.mu.Lock()
	cr := oc.client
	oc.mu.Unlock()
	wantFor := cfg.grant() + " " + cfg.ClientID + " " + strings.Join(cfg.Scopes, " ")
	if cr == nil {
		var stored clientRecord
		if loadJSON(oc.clientKey(), &stored) == nil && stored.Resource != "" && stored.ConfiguredFor == wantFor && stored.TokenURL != "" {
			cr = &stored
			if !cr.Registered {
				cr.ClientSecret = cfg.ClientSecret
			}
		}
	}
	if cr != nil && (redirect == "" || cr.RedirectURL == redirect || !cr.Registered) {
		if !cr.Registered {
			c := *cr
			c.RedirectURL = redirect
			cr = &c
		}
		oc.mu.Lock()
		oc.client = cr
		oc.mu.Unlock()
		return cr, nil
	}
	cr, err := discoverClient(ctx, oc.http(), oc.server, serverURL, cfg, redirect)
	if err != nil {
		return nil, err
	}
	cr.ConfiguredFor = wantFor
	oc.mu.Lock()
	oc.client = cr
	oc.mu.Unlock()
	persist := *cr
	if !persist.Registered {
		persist.ClientSecret = "" // the config holds it
	}
	if err := storeJSON(oc.clientKey(), &persist); err != nil {
		return nil, fmt.Errorf("storing the oauth client of mcp server %q: %w", oc.server, err)
	}
	return cr, nil
}

// discoverClient runs discovery and, without a configured client, DCR.
func discoverClient(ctx context.Context, hc *http.Client, server, serverURL string, cfg OAuthConfig, redirect string) (*clientRecord, error) {
	cr, err := runDiscovery(ctx, hc, serverURL, cfg, redirect)
	if err != nil {
		return nil, fmt.Errorf("oauth discovery for mcp server %q: %w", server, err)
	}
	return cr, nil
}

// runDiscovery finds the server's protected resource metadata and its
// authorization server, and makes the client record: the configured
// client, or one registered there.
func runDiscovery(ctx context.Context, hc *http.Client, serverURL string, cfg OAuthConfig, redirect string) (*clientRecord, error) {
	metaURL, scope, challenged, err := challenge(ctx, hc, serverURL)
	if err != nil {
		return nil, err
	}
	prm, tried, err := resourceMetadata(ctx, hc, serverURL, metaURL)
	if err != nil {
		return nil, err
	}
	asm, err := authServerMetadata(ctx, hc, prm.AuthorizationServers[0], tried, challenged)
	if err != nil {
		return nil, err
	}
	cr := newClientRecord(prm, asm, serverURL, redirect, cfg, scope)
	method := tokenAuthMethod(asm)
	if cfg.ClientID != "" {
		cr.ClientID, cr.ClientSecret, cr.AuthMethod = cfg.ClientID, cfg.ClientSecret, method
		if cfg.ClientSecret == "" {
			cr.AuthMethod = "none"
		}
		return cr, nil
	}
	if err := registerClient(ctx, hc, cr, asm, cfg, method); err != nil {
		return nil, err
	}
	return cr, nil
}

// challenge asks the server for a ping without a token: its 401's bearer
// challenge names its resource metadata and scopes. challenged says it
// sent a challenge at all.
func challenge(ctx context.Context, hc *http.Client, serverURL string) (metaURL, scope string, challenged bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, serverURL,
		strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"ping"}`))
	if err != nil {
		return "", "", false, fmt.Errorf("url %q: %v; fix the server's url", clip(serverURL), unwrapURLErr(err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		return "", "", false, fmt.Errorf("the server did not answer: %v", scrub(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	var challenges []oauthex.Challenge
	if resp.StatusCode == http.StatusUnauthorized {
		challenges, _ = oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	}
	for _, c := range challenges {
		if c.Scheme != "bearer" {
			continue
		}
		metaURL = cmp(metaURL, c.Params["resource_metadata"])
		scope = cmp(scope, c.Params["scope"])
	}
	return metaURL, scope, len(challenges) > 0, nil
}

// resourceMetadata is the server's Protected Resource Metadata: at the
// challenge's metaURL, then at the well-known locations (at the
// endpoint's path, then at the root). When none has it, it is the
// 2025-03-26 default, the server's origin as its authorization server,
// and tried lists the places looked at.
func resourceMetadata(ctx context.Context, hc *http.Client, serverURL, metaURL string) (*oauthex.ProtectedResourceMetadata, []string, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, nil, fmt.Errorf("url: %v", err)
	}
	cands := [][2]string{}
	if metaURL != "" {
		cands = append(cands, [2]string{metaURL, serverURL})
	}
	atPath, atRoot := *u, *u
	atPath.Path, atPath.RawQuery = "/.well-known/oauth-protected-resource/"+strings.TrimLeft(u.Path, "/"), ""
	atRoot.Path, atRoot.RawQuery = "/.well-known/oauth-protected-resource", ""
	root := *u
	root.Path, root.RawQuery = "", ""
	cands = append(cands, [2]string{atPath.String(), serverURL}, [2]string{atRoot.String(), root.String()})
	var tried []string
	for _, c := range cands {
		p, err := oauthex.GetProtectedResourceMetadata(ctx, c[0], c[1], hc)
		if err == nil && p != nil {
			if len(p.AuthorizationServers) == 0 {
				return nil, nil, fmt.Errorf("its protected resource metadata at %s names no authorization server", c[0])
			}
			return p, nil, nil
		}
		tried = append(tried, c[0])
		if metaURL != "" && c[0] == metaURL {
			tried[len(tried)-1] += fmt.Sprintf(" (%v)", err)
		}
	}
	// 2025-03-26: the server's origin is its authorization server
	return &oauthex.ProtectedResourceMetadata{Resource: serverURL, AuthorizationServers: []string{root.String()}}, tried, nil
}

// authServerMetadata is issuer's Authorization Server Metadata, or the
// 2025-03-26 default endpoints under it when it has none; with neither
// resource metadata (tried is where it was looked for) nor a challenge,
// the server is likely not OAuth-protected at all, and that is the error.
func authServerMetadata(ctx context.Context, hc *http.Client, issuer string, tried []string, challenged bool) (*oauthex.AuthServerMeta, error) {
	asm, err := auth.GetAuthServerMetadata(ctx, issuer, hc)
	if err != nil {
		return nil, fmt.Errorf("authorization server metadata of %s: %v", issuer, err)
	}
	if asm != nil {
		return asm, nil
	}
	if tried != nil && !challenged {
		return nil, fmt.Errorf("found no protected resource metadata (tried %s) and no authorization server metadata at %s; is the server OAuth-protected? if it takes a static token, use header Authorization instead of oauth",
			strings.Join(tried, ", "), issuer)
	}
	return &oauthex.AuthServerMeta{Issuer: issuer, AuthorizationEndpoint: strings.TrimSuffix(issuer, "/") + "/authorize",
		TokenEndpoint: strings.TrimSuffix(issuer, "/") + "/token", RegistrationEndpoint: strings.TrimSuffix(issuer, "/") + "/register"}, nil
}

// newClientRecord is the client record of a discovery, without its
// client: the endpoints, and the scopes to ask for (the configured ones,
// the challenge's, or the resource's), with offline_access for a refresh
// token when the authorization server offers it.
func newClientRecord(prm *oauthex.ProtectedResourceMetadata, asm *oauthex.AuthServerMeta, serverURL, redirect string, cfg OAuthConfig, scope string) *clientRecord {
	cr := &clientRecord{Resource: prm.Resource, Issuer: asm.Issuer, AuthURL: asm.AuthorizationEndpoint, TokenURL: asm.TokenEndpoint,
		RevokeURL: asm.RevocationEndpoint, IssParam: asm.AuthorizationResponseIssParameterSupported, RedirectURL: redirect}
	if cr.Resource == "" {
		cr.Resource = serverURL
	}
	switch {
	case len(cfg.Scopes) > 0:
		cr.Scopes = cfg.Scopes
	case scope != "":
		cr.Scopes = strings.Fields(scope)
	default:
		cr.Scopes = prm.ScopesSupported
	}
	if cfg.grant() == "authorization_code" && slices.Contains(asm.ScopesSupported, "offline_access") && !slices.Contains(cr.Scopes, "offline_access") {
		cr.Scopes = append(slices.Clip(cr.Scopes), "offline_access")
	}
	return cr
}

// tokenAuthMethod is how the client authenticates at the token endpoint:
// client_secret_post or client_secret_basic, as the server offers them.
func tokenAuthMethod(asm *oauthex.AuthServerMeta) string {
	for _, m := range []string{"client_secret_post", "client_secret_basic"} {
		if slices.Contains(asm.TokenEndpointAuthMethodsSupported, m) {
			return m
		}
	}
	return "client_secret_basic"
}

// registerClient registers llmgw at the authorization server (Dynamic
// Client Registration) for the configured grant and sets cr's client.
func registerClient(ctx context.Context, hc *http.Client, cr *clientRecord, asm *oauthex.AuthServerMeta, cfg OAuthConfig, method string) error {
	if asm.RegistrationEndpoint == "" {
		return fmt.Errorf("its authorization server %s offers no dynamic client registration: register llmgw there and set client_id (and client_secret) in the server's oauth block", asm.Issuer)
	}
	meta := &oauthex.ClientRegistrationMetadata{ClientName: "llmgw", TokenEndpointAuthMethod: method, Scope: strings.Join(cr.Scopes, " ")}
	if cfg.grant() == "client_credentials" {
		meta.GrantTypes = []string{"client_credentials"}
		meta.ResponseTypes = []string{}
		meta.RedirectURIs = []string{}
	} else {
		if cr.RedirectURL == "" {
			return fmt.Errorf("no redirect URL to register; set redirect_url in the server's oauth block, or make one MCP request to llm_mcp first so it learns its address")
		}
		meta.RedirectURIs = []string{cr.RedirectURL}
		meta.GrantTypes = []string{"authorization_code", "refresh_token"}
		meta.ResponseTypes = []string{"code"}
	}
	reg, err := oauthex.RegisterClient(ctx, asm.RegistrationEndpoint, meta, hc)
	if err != nil {
		return fmt.Errorf("registering llmgw as a client at %s: %v; or register it yourself and set client_id in the server's oauth block", asm.RegistrationEndpoint, scrub(err))
	}
	cr.ClientID, cr.ClientSecret, cr.Registered = reg.ClientID, reg.ClientSecret, true
	cr.AuthMethod = cmp(reg.TokenEndpointAuthMethod, method)
	if reg.ClientSecret == "" {
		cr.AuthMethod = "none"
	}
	return nil
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// tokenResponse is a token endpoint's answer (RFC 6749 5.1, 5.2).
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
	Error        string `json:"error"`
	ErrorDesc    string `json:"error_description"`
}

// oauthError is the authorization server refusing a grant: the tokens
// it concerns cannot be used again.
type oauthError struct {
	status      int
	code, desc  string
	endpointURL string
}

func (e *oauthError) Error() string {
	s := fmt.Sprintf("the authorization server's token endpoint %s refused (%d %s)", e.endpointURL, e.status, cmp(e.code, "no error code"))
	if e.desc != "" {
		s += ": " + e.desc
	}
	return s
}

// tokenRequest posts a grant to the token endpoint, with the client's
// authentication and the resource (RFC 8707).
func tokenRequest(ctx context.Context, hc *http.Client, cr *clientRecord, form url.Values) (*tokenResponse, error) {
	form.Set("resource", cr.Resource)
	if cr.AuthMethod != "client_secret_basic" {
		form.Set("client_id", cr.ClientID)
		if cr.AuthMethod == "client_secret_post" && cr.ClientSecret != "" {
			form.Set("client_secret", cr.ClientSecret)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cr.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if cr.AuthMethod == "client_secret_basic" {
		req.SetBasicAuth(url.QueryEscape(cr.ClientID), url.QueryEscape(cr.ClientSecret))
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reaching the token endpoint %s: %w", cr.TokenURL, scrub(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the token endpoint's answer: %w", err)
	}
	var tr tokenResponse
	jerr := json.Unmarshal(raw, &tr)
	if resp.StatusCode >= 400 || tr.Error != "" {
		if resp.StatusCode >= 500 {
			return nil, fmt.Errorf("the token endpoint %s failed: %s", cr.TokenURL, resp.Status)
		}
		return nil, &oauthError{status: resp.StatusCode, code: tr.Error, desc: tr.ErrorDesc, endpointURL: cr.TokenURL}
	}
	if jerr != nil || tr.AccessToken == "" {
		return nil, fmt.Errorf("the token endpoint %s answered without an access_token", cr.TokenURL)
	}
	return &tr, nil
}

func (tr *tokenResponse) apply(rec *tokenRecord) {
	t := now()
	rec.AccessToken, rec.TokenType, rec.Issued = tr.AccessToken, tr.TokenType, t
	if tr.RefreshToken != "" {
		rec.RefreshToken = tr.RefreshToken
	}
	if tr.Scope != "" {
		rec.Scope = tr.Scope
	}
	rec.Expiry = time.Time{}
	if tr.ExpiresIn > 0 {
		rec.Expiry = t.Add(time.Duration(tr.ExpiresIn) * time.Second)
	}
	rec.NeedsAuth, rec.LastError = false, ""
}

// tokenEntry is one tenant's tokens for a server: the token source of its
// upstream session.
type tokenEntry struct {
	oc  *oauthClient
	ref tenantRef

	mu      sync.Mutex
	rec     *tokenRecord  // nil: never authorised (or forgotten)
	changed chan struct{} // closed, and replaced, on every change of state
}

func (e *tokenEntry) record() *tokenRecord {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rec == nil {
		return nil
	}
	r := *e.rec
	return &r
}

// usable reports whether calls can go out with this tenant's tokens.
func (e *tokenEntry) usable() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.oc.isClientCredentials() {
		return true // fetched, and fetched again, without anyone's consent
	}
	return e.rec != nil && !e.rec.NeedsAuth
}

func (oc *oauthClient) isClientCredentials() bool {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	return oc.cfg.grant() == "client_credentials"
}

// wait returns a channel closed at the entry's next change of state.
func (e *tokenEntry) wait() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.changed
}

// set replaces the record, stores it and wakes the waiters; e.mu held.
func (e *tokenEntry) setLocked(rec *tokenRecord) error {
	e.rec = rec
	close(e.changed)
	e.changed = make(chan struct{})
	go countTokens(e.oc)
	if rec == nil {
		if st := store(); st != nil {
			if err := st.Delete(context.Background(), e.oc.tokenKey(e.ref)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		return nil
	}
	return storeJSON(e.oc.tokenKey(e.ref), rec)
}

// needsAuthError is a call that cannot go out until someone authorises.
type needsAuthError struct {
	server string
	ref    tenantRef
	reason string
}

func (e *needsAuthError) Error() string {
	how := fmt.Sprintf("llmgw ctl mcp authorize %s --tenant %s", e.server, e.ref)
	if e.ref.Level == "shared" {
		how = "llmgw ctl mcp authorize " + e.server
	}
	s := fmt.Sprintf("mcp server %q needs OAuth authorisation", e.server)
	if e.ref.Level != "shared" {
		s += " for " + e.ref.Level + " " + e.ref.Name
	}
	if e.reason != "" {
		s += " (" + e.reason + ")"
	}
	return s + fmt.Sprintf("; an admin runs '%s' (or POST /llm/mcp/servers/%s/authorize) and opens the URL it prints", how, e.server)
}

// refreshSkew is how long before its expiry a token is refreshed: a
// quarter of its life, at most 30s.
func refreshSkew(rec *tokenRecord) time.Duration {
	if rec.Issued.IsZero() || rec.Expiry.IsZero() {
		return 0
	}
	return max(0, min(rec.Expiry.Sub(rec.Issued)/4, 30*time.Second))
}

// token returns an access token to send, refreshing (or, for
// client_credentials, fetching) one when the current one is about to
// expire. A refused refresh marks the tenant as needing authorisation.
func (e *tokenEntry) token(ctx context.Context) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	rec := e.rec
	if rec != nil && !rec.NeedsAuth && rec.AccessToken != "" && (rec.Expiry.IsZero() || now().Add(refreshSkew(rec)).Before(rec.Expiry)) {
		return rec.AccessToken, nil
	}
	cc := e.oc.isClientCredentials()
	if !cc && (rec == nil || rec.NeedsAuth) {
		reason := ""
		if rec != nil {
			reason = rec.LastError
		}
		return "", &needsAuthError{server: e.oc.server, ref: e.ref, reason: reason}
	}
	return e.renewLocked(ctx, cc)
}

// renewLocked refreshes the tokens (client_credentials: asks for new
// ones); e.mu held.
func (e *tokenEntry) renewLocked(ctx context.Context, cc bool) (string, error) {
	cr, err := e.oc.discover(ctx, "")
	if err != nil {
		return "", err
	}
	if e.rec != nil && e.rec.Client != nil && e.rec.Client.ClientID != cr.ClientID {
		cr = e.rec.Client
	}
	next := tokenRecord{Tenant: e.ref}
	if e.rec != nil {
		next = *e.rec
	}
	form := url.Values{}
	switch {
	case cc:
		form.Set("grant_type", "client_credentials")
		if len(cr.Scopes) > 0 {
			form.Set("scope", strings.Join(cr.Scopes, " "))
		}
	case next.RefreshToken == "":
		next.NeedsAuth, next.LastError = true, "the access token expired and the authorization server gave no refresh token"
		_ = e.setLocked(&next)
		return "", &needsAuthError{server: e.oc.server, ref: e.ref, reason: next.LastError}
	default:
		form.Set("grant_type", "refresh_token")
		form.Set("refresh_token", next.RefreshToken)
	}
	tr, err := tokenRequest(ctx, e.oc.http(), cr, form)
	var oe *oauthError
	switch {
	case errors.As(err, &oe):
		next.NeedsAuth, next.LastError = true, "refreshing the token: "+oe.Error()
		if cc {
			next.LastError = "getting a token: " + oe.Error() + "; check the oauth client_id and client_secret"
		}
		_ = e.setLocked(&next)
		if cc {
			return "", fmt.Errorf("mcp server %q: %s", e.oc.server, next.LastError)
		}
		return "", &needsAuthError{server: e.oc.server, ref: e.ref, reason: next.LastError}
	case err != nil:
		// the authorization server is unreachable: the tokens may still be
		// good, try again on the next call
		return "", fmt.Errorf("mcp server %q: %s: %w", e.oc.server, "renewing its oauth token", err)
	}
	tr.apply(&next)
	if cc {
		if next.Authorized.IsZero() {
			next.Authorized = now()
		}
	} else {
		next.Refreshed = now()
		next.Refreshes++
	}
	if err := e.setLocked(&next); err != nil {
		return "", fmt.Errorf("storing the refreshed token of mcp server %q: %w", e.oc.server, err)
	}
	return next.AccessToken, nil
}

// expire makes the next token() renew, after the server refused tok.
func (e *tokenEntry) expire(tok string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rec != nil && e.rec.AccessToken == tok {
		r := *e.rec
		r.Expiry = now().Add(-time.Second)
		e.rec = &r
	}
}

// refused marks the tokens unusable after the server refused a fresh one.
func (e *tokenEntry) refused(reason string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rec == nil || e.rec.NeedsAuth {
		return
	}
	r := *e.rec
	r.NeedsAuth, r.LastError = true, reason
	_ = e.setLocked(&r)
}

// forget drops the tokens, revoking them first where the authorization
// server offers revocation (RFC 7009), best effort.
func (e *tokenEntry) forget(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rec != nil && (e.rec.RefreshToken != "" || e.rec.AccessToken != "") {
		e.oc.mu.Lock()
		cr := e.oc.client
		e.oc.mu.Unlock()
		if cr != nil && cr.RevokeURL != "" {
			tok, hint := e.rec.RefreshToken, "refresh_token"
			if tok == "" {
				tok, hint = e.rec.AccessToken, "access_token"
			}
			revoke(ctx, e.oc.http(), cr, tok, hint)
		}
	}
	return e.setLocked(nil)
}

func revoke(ctx context.Context, hc *http.Client, cr *clientRecord, tok, hint string) {
	form := url.Values{"token": {tok}, "token_type_hint": {hint}}
	if cr.AuthMethod != "client_secret_basic" {
		form.Set("client_id", cr.ClientID)
		if cr.AuthMethod == "client_secret_post" {
			form.Set("client_secret", cr.ClientSecret)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cr.RevokeURL, strings.NewReader(form.Encode()))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if cr.AuthMethod == "client_secret_basic" {
		req.SetBasicAuth(url.QueryEscape(cr.ClientID), url.QueryEscape(cr.ClientSecret))
	}
	if resp, err := hc.Do(req); err == nil {
		resp.Body.Close()
	}
}

// Pending authorisations: the state parameter of each authorization URL
// handed out, bound to the server and tenant, used once, expiring.
type pendingAuth struct {
	oc       *oauthClient
	ref      tenantRef
	verifier string
	client   *clientRecord
	expires  time.Time
}

// pendingTTL is how long an authorization URL stays good.
var pendingTTL = 10 * time.Minute

var (
	pendingMu sync.Mutex
	pending   = map[string]*pendingAuth{}
)

func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// s256 is the PKCE S256 challenge of a verifier (RFC 7636 4.2).
func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// begin starts an authorization code flow for a tenant: it returns the
// URL a person opens to consent.
func (oc *oauthClient) begin(ctx context.Context, ref tenantRef, redirect string) (string, time.Time, error) {
	cr, err := oc.discover(ctx, redirect)
	if err != nil {
		return "", time.Time{}, err
	}
	p := &pendingAuth{oc: oc, ref: ref, verifier: randomString(32), client: cr, expires: now().Add(pendingTTL)}
	state := randomString(24)
	pendingMu.Lock()
	for k, o := range pending { // drop the expired ones
		if now().After(o.expires) {
			delete(pending, k)
		}
	}
	pending[state] = p
	pendingMu.Unlock()
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {cr.ClientID},
		"redirect_uri":          {redirect},
		"state":                 {state},
		"code_challenge":        {s256(p.verifier)},
		"code_challenge_method": {"S256"},
		"resource":              {cr.Resource},
	}
	if len(cr.Scopes) > 0 {
		q.Set("scope", strings.Join(cr.Scopes, " "))
	}
	sep := "?"
	if strings.Contains(cr.AuthURL, "?") {
		sep = "&"
	}
	return cr.AuthURL + sep + q.Encode(), p.expires, nil
}

// takePending returns and forgets the authorisation a state belongs to.
func takePending(state string) (*pendingAuth, error) {
	pendingMu.Lock()
	p := pending[state]
	delete(pending, state)
	pendingMu.Unlock()
	switch {
	case state == "" || p == nil:
		return nil, errors.New("this authorisation link is unknown or was already used")
	case now().After(p.expires):
		return nil, fmt.Errorf("this authorisation link expired (they last %s)", pendingTTL)
	}
	return p, nil
}

// complete exchanges the code the browser brought back for tokens and
// stores them.
func (p *pendingAuth) complete(ctx context.Context, code, iss string) (*tokenEntry, error) {
	cr := p.client
	if iss != "" && strings.TrimSuffix(iss, "/") != strings.TrimSuffix(cr.Issuer, "/") {
		return nil, fmt.Errorf("the authorization response came from issuer %q, not %q (RFC 9207): refused", iss, cr.Issuer)
	}
	if iss == "" && cr.IssParam {
		return nil, fmt.Errorf("the authorization server %s promises an iss parameter but sent none: refused", cr.Issuer)
	}
	if code == "" {
		return nil, errors.New("the authorization server sent no code")
	}
	tr, err := tokenRequest(ctx, p.oc.http(), cr, url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {cr.RedirectURL}, "code_verifier": {p.verifier}})
	if err != nil {
		return nil, fmt.Errorf("exchanging the code for a token: %w", err)
	}
	rec := &tokenRecord{Tenant: p.ref, Authorized: now()}
	if cr.Registered {
		rec.Client = cr
	}
	tr.apply(rec)
	e := p.oc.entry(p.ref)
	e.mu.Lock()
	err = e.setLocked(rec)
	e.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("storing the token: %w", err)
	}
	return e, nil
}

// bearerTransport sends a tenant's access token (and the server's own
// headers) upstream. When the server refuses a token it renews it once
// and retries; if it refuses the new one too, the tenant needs
// authorising again.
type bearerTransport struct {
	e       *tokenEntry
	headers map[string]string
	base    http.RoundTripper
}

func (t bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	tok, err := t.e.token(r.Context())
	if err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	resp, err := t.base.RoundTrip(t.with(r, tok))
	if err != nil || resp.StatusCode != http.StatusUnauthorized || (r.Body != nil && r.GetBody == nil) {
		return resp, err
	}
	t.e.expire(tok)
	tok2, err := t.e.token(r.Context())
	if err != nil || tok2 == tok {
		return resp, nil
	}
	r2 := t.with(r, tok2)
	if r.GetBody != nil {
		if r2.Body, err = r.GetBody(); err != nil {
			return resp, nil
		}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	resp, err = t.base.RoundTrip(r2)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		t.e.refused("the server refused a freshly issued token (401)")
	}
	return resp, err
}

func (t bearerTransport) with(r *http.Request, tok string) *http.Request {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	r.Header.Set("Authorization", "Bearer "+tok)
	return r
}

// callbackPage is what the browser shows after the redirect back.
func callbackPage(w http.ResponseWriter, status int, title, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	var b bytes.Buffer
	b.WriteString("<!doctype html><html><head><meta charset=\"utf-8\"><title>llmgw: ")
	b.WriteString(htmlEscape(title))
	b.WriteString("</title></head><body><h1>")
	b.WriteString(htmlEscape(title))
	b.WriteString("</h1><p>")
	b.WriteString(htmlEscape(msg))
	b.WriteString("</p></body></html>\n")
	_, _ = w.Write(b.Bytes())
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(s)
}
