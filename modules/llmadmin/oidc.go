package llmadmin

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/coreos/go-oidc/v3/oidc"
	"go.uber.org/zap"
	"golang.org/x/oauth2"

	"github.com/llmgw/llmgw/modules/llm"
)

// OIDC signs people in through an OpenID Connect provider (Keycloak,
// Entra ID, Okta, Google, Ory Hydra, …) with the authorization code flow
// and PKCE: GET /llm/auth/oidc/start?return=/console/ sends the browser
// to the provider, which sends it back to GET /llm/auth/oidc/callback;
// llm_admin checks the ID token (signature, issuer, audience, expiry,
// nonce), maps the values of RoleClaim to a role with Roles and starts a
// session as POST /llm/auth/login does, then sends the browser to the
// return path. A person whose claim maps to no role is refused (403).
// The session's identity, and so the audit log's actor, is
// "oidc:<sub>": the provider's stable subject, not a name that can be
// changed or given to someone else.
type OIDC struct {
	// Issuer is the provider's issuer URL, as its discovery document
	// (<issuer>/.well-known/openid-configuration) names it. Required.
	Issuer string `json:"issuer"`
	// ClientID is llmgw's client at the provider. Required.
	ClientID string `json:"client_id"`
	// ClientSecret is the client's secret; use a placeholder such as
	// {env.OIDC_CLIENT_SECRET}, replaced at start. Default: none, a
	// public client (PKCE only).
	ClientSecret string `json:"client_secret,omitempty"`
	// Scopes asked for. Default: openid profile email.
	Scopes []string `json:"scopes,omitempty"`
	// RedirectURL is the callback registered at the provider.
	// Default: <scheme>://<host of the request>/llm/auth/oidc/callback.
	RedirectURL string `json:"redirect_url,omitempty"`
	// Name is shown on the sign-in button. Default: "OpenID Connect".
	Name string `json:"name,omitempty"`
	// RoleClaim is the claim mapped to roles: a string or an array of
	// strings, read from the ID token, else from the userinfo endpoint.
	// Default: groups.
	RoleClaim string `json:"role_claim,omitempty"`
	// CAFile is a PEM file of the CA certificates that sign the
	// provider's certificate. Default: the system's roots.
	CAFile string `json:"ca_file,omitempty"`
	// Roles map claim values to roles. A person with several gets the
	// highest: admin, then operator, then tenant_admin (the first that
	// matches, in this order), then viewer.
	Roles []OIDCRole `json:"roles,omitempty"`
}

// OIDCRole maps one value of the role claim to a role.
type OIDCRole struct {
	// Role is admin, operator, viewer or tenant_admin. Required.
	Role string `json:"role"`
	// Value is the claim's value, compared exactly. Required.
	Value string `json:"value"`
	// Level and Tenant name what a tenant_admin manages: org, team or
	// project and its path. Only for tenant_admin.
	Level  string `json:"level,omitempty"`
	Tenant string `json:"tenant,omitempty"`
}

const (
	// oidcCookie binds a sign-in in progress to the browser that started
	// it: it holds the state, whose hash names the flow in storage.
	oidcCookie = "llmgw_oidc"
	oidcPrefix = "llmgw/admin/oidc/" // + sha256 hex of the state: the flow
	// oidcFlowTTL is how long a sign-in may take at the provider.
	oidcFlowTTL = 10 * time.Minute
	// oidcCallbackPath is where the provider sends the browser back.
	oidcCallbackPath = "/llm/auth/oidc/callback"
)

// oidcFlow is a sign-in in progress, kept in storage until its callback.
type oidcFlow struct {
	Nonce    string    `json:"nonce"`
	Verifier string    `json:"verifier"` // PKCE
	Return   string    `json:"return"`
	Redirect string    `json:"redirect"`
	Created  time.Time `json:"created"`
}

type oidcRole struct {
	value string
	role  role
	scope *scope
}

// oidcClient is a provisioned oidc block.
type oidcClient struct {
	cfg    OIDC
	secret string
	client *http.Client
	roles  []oidcRole // in order of precedence
	logger *zap.Logger

	mu       sync.Mutex
	provider *oidc.Provider
}

// newOIDC checks the block and prepares what sign-ins need.
func newOIDC(cfg OIDC, app *llm.App, repl *caddy.Replacer, logger *zap.Logger) (*oidcClient, error) {
	u, err := url.Parse(cfg.Issuer)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("oidc issuer %q: use the provider's issuer URL, such as https://login.example.com/realms/staff", cfg.Issuer)
	}
	if cfg.ClientID == "" {
		return nil, fmt.Errorf("oidc: client_id is required: llmgw's client at the provider")
	}
	c := &oidcClient{cfg: cfg, secret: repl.ReplaceAll(cfg.ClientSecret, ""), logger: logger}
	if cfg.ClientSecret != "" && c.secret == "" {
		return nil, fmt.Errorf("oidc: client_secret %q is empty once replaced; set the variable it names", cfg.ClientSecret)
	}
	if len(c.cfg.Scopes) == 0 {
		c.cfg.Scopes = []string{oidc.ScopeOpenID, "profile", "email"}
	} else if !slices.Contains(c.cfg.Scopes, oidc.ScopeOpenID) {
		c.cfg.Scopes = append([]string{oidc.ScopeOpenID}, c.cfg.Scopes...)
	}
	if c.cfg.RedirectURL != "" {
		r, err := url.Parse(c.cfg.RedirectURL)
		if err != nil || r.Host == "" || (r.Scheme != "https" && r.Scheme != "http") {
			return nil, fmt.Errorf("oidc: redirect_url %q must be an absolute URL, such as https://llm.example.com%s", c.cfg.RedirectURL, oidcCallbackPath)
		}
	}
	if c.cfg.Name == "" {
		c.cfg.Name = "OpenID Connect"
	}
	if c.cfg.RoleClaim == "" {
		c.cfg.RoleClaim = "groups"
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("oidc: reading ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("oidc: ca_file %s holds no PEM certificate", cfg.CAFile)
		}
		tlsCfg.RootCAs = pool
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	c.client = &http.Client{Transport: tr, Timeout: 15 * time.Second}
	if len(cfg.Roles) == 0 {
		return nil, fmt.Errorf("oidc: map at least one value of the %s claim to a role, such as: role admin llm-admins", c.cfg.RoleClaim)
	}
	for _, rank := range []role{roleAdmin, roleOperator, roleTenant, roleViewer} {
		for _, r := range cfg.Roles {
			rl, err := parseRole(r.Role)
			if err != nil {
				return nil, fmt.Errorf("oidc: %w", err)
			}
			if rl != rank {
				continue
			}
			if r.Value == "" {
				return nil, fmt.Errorf("oidc: role %s needs the claim value it maps", r.Role)
			}
			or := oidcRole{value: r.Value, role: rl}
			if rl == roleTenant {
				if or.scope, err = newScope(r.Level, r.Tenant, app); err != nil {
					return nil, fmt.Errorf("oidc: value %s: %w", r.Value, err)
				}
			} else if r.Level != "" || r.Tenant != "" {
				return nil, fmt.Errorf("oidc: value %s: only a tenant_admin names a level and tenant", r.Value)
			}
			c.roles = append(c.roles, or)
		}
	}
	return c, nil
}

// discoverLoop reads the provider's discovery document until it has it,
// so that a provider not up yet delays sign-ins, not llmgw's start.
func (c *oidcClient) discoverLoop(ctx context.Context) {
	wait := time.Second
	for {
		if _, err := c.discover(ctx); err == nil {
			return
		} else {
			c.logger.Warn("oidc discovery failed; retrying", zap.String("issuer", c.cfg.Issuer), zap.Duration("in", wait), zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, time.Minute)
	}
}

// discover returns the provider, reading its discovery document if it
// has not been read yet.
func (c *oidcClient) discover(ctx context.Context) (*oidc.Provider, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.provider != nil {
		return c.provider, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, c.client), c.cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("reading the discovery document of %s: %w", c.cfg.Issuer, err)
	}
	c.provider = p
	return p, nil
}

func (c *oidcClient) oauth2(p *oidc.Provider, redirect string) *oauth2.Config {
	return &oauth2.Config{ClientID: c.cfg.ClientID, ClientSecret: c.secret, Endpoint: p.Endpoint(),
		RedirectURL: redirect, Scopes: c.cfg.Scopes}
}

// redirectURL is the callback URL for a request: the configured one, or
// the request's own site.
func (c *oidcClient) redirectURL(r *http.Request) string {
	if c.cfg.RedirectURL != "" {
		return c.cfg.RedirectURL
	}
	scheme := "https"
	if r.TLS == nil {
		scheme = "http"
	}
	return scheme + "://" + r.Host + oidcCallbackPath
}

// safeReturn is the path to send the browser to after sign-in: a path
// of this site, never another site's URL.
func safeReturn(s string) (string, bool) {
	if s == "" {
		return "/", true
	}
	if !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") || strings.ContainsAny(s, "\\\x00\r\n\t") || len(s) > 2048 {
		return "/", false
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/", false
	}
	return s, true
}

// serveOIDC serves GET /llm/auth/oidc/start and /llm/auth/oidc/callback.
func (h *Handler) serveOIDC(w http.ResponseWriter, r *http.Request, route, ip string) error {
	if h.oidc == nil {
		return writeErr(w, http.StatusNotFound, "sign-in with OpenID Connect is not offered: llm_admin has no oidc block; methods: %s", strings.Join(h.methods(), ", "))
	}
	if route == "oidc/start" {
		return h.oidcStart(w, r)
	}
	return h.oidcCallback(w, r, ip)
}

func (h *Handler) oidcStart(w http.ResponseWriter, r *http.Request) error {
	c := h.oidc
	ret, ok := safeReturn(r.URL.Query().Get("return"))
	if !ok {
		h.logger.Info("oidc sign-in: return is not a path of this site; using /", zap.String("return", r.URL.Query().Get("return")))
	}
	p, err := c.discover(r.Context())
	if err != nil {
		return oidcError(w, r, http.StatusBadGateway, "the OpenID provider is not reachable (%v); try again in a moment", err)
	}
	state, err := randomToken()
	if err != nil {
		return oidcError(w, r, http.StatusInternalServerError, "%v", err)
	}
	nonce, err := randomToken()
	if err != nil {
		return oidcError(w, r, http.StatusInternalServerError, "%v", err)
	}
	flow := oidcFlow{Nonce: nonce, Verifier: oauth2.GenerateVerifier(), Return: ret, Redirect: c.redirectURL(r), Created: now().UTC()}
	b, _ := json.Marshal(flow)
	if err := h.sessions.storage.Store(r.Context(), oidcPrefix+hashHex(state), b); err != nil {
		return oidcError(w, r, http.StatusInternalServerError, "keeping the sign-in: %v", err)
	}
	// SameSite=Lax: the provider's redirect back is a navigation from
	// another site, which a Strict cookie would not be sent with.
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: state, Path: "/llm/auth/oidc/", MaxAge: int(oidcFlowTTL / time.Second),
		HttpOnly: true, Secure: true, SameSite: http.SameSiteLaxMode})
	target := c.oauth2(p, flow.Redirect).AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(flow.Verifier))
	http.Redirect(w, r, target, http.StatusFound)
	return nil
}

// takeFlow returns the sign-in the callback's state names and ends it,
// so that a state is used once: nil when the browser did not start it,
// it was used or it is too old.
func (h *Handler) takeFlow(ctx context.Context, r *http.Request) (*oidcFlow, error) {
	state := r.URL.Query().Get("state")
	c, err := r.Cookie(oidcCookie)
	if state == "" || err != nil || !tokenShape.MatchString(state) || subtle.ConstantTimeCompare([]byte(state), []byte(c.Value)) != 1 {
		return nil, nil
	}
	key := oidcPrefix + hashHex(state)
	b, err := h.sessions.storage.Load(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the sign-in: %w", err)
	}
	if err := h.sessions.storage.Delete(ctx, key); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("ending the sign-in: %w", err)
	}
	var f oidcFlow
	if json.Unmarshal(b, &f) != nil || now().Sub(f.Created) > oidcFlowTTL {
		return nil, nil
	}
	return &f, nil
}

const errOIDCState = "sign-in refused: this sign-in was not started by this browser, was already used or is older than 10 minutes; start again from the sign-in page"

func (h *Handler) oidcCallback(w http.ResponseWriter, r *http.Request, ip string) error {
	c := h.oidc
	q := r.URL.Query()
	flow, err := h.takeFlow(r.Context(), r)
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: "", Path: "/llm/auth/oidc/", MaxAge: -1,
		HttpOnly: true, Secure: true, SameSite: http.SameSiteLaxMode})
	if err != nil {
		return oidcError(w, r, http.StatusInternalServerError, "%v", err)
	}
	if e := q.Get("error"); e != "" {
		msg := e
		if d := q.Get("error_description"); d != "" {
			msg += ": " + d
		}
		h.logger.Info("oidc sign-in refused by the provider", zap.String("error", e), zap.String("remote_ip", ip))
		if e == "access_denied" {
			return oidcError(w, r, http.StatusForbidden, "sign-in refused by the OpenID provider (%s); you did not allow llmgw access, or the provider does not let you use it", msg)
		}
		return oidcError(w, r, http.StatusBadGateway, "sign-in failed at the OpenID provider (%s); try again, or ask whoever runs the provider", msg)
	}
	if flow == nil {
		h.logger.Info("oidc sign-in refused: unknown or used state", zap.String("remote_ip", ip))
		return oidcError(w, r, http.StatusBadRequest, "%s", errOIDCState)
	}
	code := q.Get("code")
	if code == "" {
		return oidcError(w, r, http.StatusBadRequest, "sign-in failed: the provider sent no code; start again from the sign-in page")
	}
	p, err := c.discover(r.Context())
	if err != nil {
		return oidcError(w, r, http.StatusBadGateway, "the OpenID provider is not reachable (%v); try again in a moment", err)
	}
	ctx := oidc.ClientContext(r.Context(), c.client)
	conf := c.oauth2(p, flow.Redirect)
	tok, err := conf.Exchange(ctx, code, oauth2.VerifierOption(flow.Verifier))
	if err != nil {
		h.logger.Warn("oidc code exchange failed", zap.Error(err))
		return oidcError(w, r, http.StatusBadGateway, "sign-in failed: the OpenID provider refused the code (%v); start again from the sign-in page", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return oidcError(w, r, http.StatusBadGateway, "sign-in failed: the OpenID provider sent no ID token; make sure the scope openid is allowed for client %s", c.cfg.ClientID)
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: c.cfg.ClientID}).Verify(ctx, raw)
	if err != nil {
		h.logger.Warn("oidc ID token refused", zap.Error(err))
		return oidcError(w, r, http.StatusBadGateway, "sign-in failed: the ID token is not valid: %v", err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(flow.Nonce)) != 1 {
		return oidcError(w, r, http.StatusBadRequest, "sign-in failed: the ID token's nonce is not this sign-in's; start again from the sign-in page")
	}
	claims := map[string]any{}
	if err := idt.Claims(&claims); err != nil {
		return oidcError(w, r, http.StatusBadGateway, "sign-in failed: reading the ID token's claims: %v", err)
	}
	if _, ok := claims[c.cfg.RoleClaim]; !ok && p.UserInfoEndpoint() != "" {
		ui, err := p.UserInfo(ctx, oauth2.StaticTokenSource(tok))
		if err != nil {
			h.logger.Warn("oidc userinfo failed", zap.Error(err))
		} else if ui.Subject == idt.Subject {
			more := map[string]any{}
			if ui.Claims(&more) == nil {
				for k, v := range more {
					if _, ok := claims[k]; !ok {
						claims[k] = v
					}
				}
			}
		}
	}
	id := &identity{actor: "oidc:" + idt.Subject, name: idt.Subject}
	for _, k := range []string{"preferred_username", "email", "name"} {
		if s, ok := claims[k].(string); ok && s != "" {
			id.name = s
		}
	}
	values := claimValues(claims[c.cfg.RoleClaim])
	found := false
	for _, rl := range c.roles {
		if slices.Contains(values, rl.value) {
			id.role, id.scope, found = rl.role, rl.scope, true
			break
		}
	}
	if !found {
		h.logger.Info("sign-in refused: no claim value mapped to a role", zap.String("actor", id.actor), zap.Strings(c.cfg.RoleClaim, values))
		return oidcError(w, r, http.StatusForbidden, "sign-in refused: %s (%s) has no %s value mapped to a role in llm_admin; ask an administrator to map one of %q",
			id.actor, id.name, c.cfg.RoleClaim, values)
	}
	if _, err := h.startSession(w, r, id, ip); err != nil {
		return oidcError(w, r, http.StatusInternalServerError, "starting a session: %v", err)
	}
	http.Redirect(w, r, flow.Return, http.StatusFound)
	return nil
}

// claimValues reads a claim that is a string or an array of strings.
func claimValues(v any) []string {
	switch v := v.(type) {
	case string:
		if v == "" {
			return nil
		}
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// oidcError answers a sign-in that failed: a short page for a browser,
// the admin API's JSON error for other clients.
func oidcError(w http.ResponseWriter, r *http.Request, status int, format string, args ...any) error {
	if !strings.Contains(r.Header.Get("Accept"), "text/html") {
		return writeErr(w, status, format, args...)
	}
	msg := fmt.Sprintf(format, args...)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	w.WriteHeader(status)
	_, err := fmt.Fprintf(w, "<!doctype html>\n<meta charset=utf-8><title>Sign-in failed</title>\n<h1>Sign-in failed</h1>\n<p>%s</p>\n<p><a href=\"/\">Back</a></p>\n", html.EscapeString(msg))
	return err
}
