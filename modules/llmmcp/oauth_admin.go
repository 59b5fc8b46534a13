package llmmcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// callbackSuffix is where, under its route's path, llm_mcp takes the
// browser back from an authorization server.
const callbackSuffix = "/oauth/callback"

// learned is the callback URL of the first MCP request llm_mcp served, the
// redirect URL of servers that set none.
var learned atomic.Pointer[string]

func learnRedirect(r *http.Request, ssePath string) {
	if learned.Load() != nil {
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	p := strings.TrimSuffix(r.URL.Path, ssePath)
	p = strings.TrimSuffix(p, "/")
	u := scheme + "://" + r.Host + p + callbackSuffix
	learned.CompareAndSwap(nil, &u)
}

func redirectFor(cfg OAuthConfig) string {
	if cfg.RedirectURL != "" {
		return cfg.RedirectURL
	}
	if p := learned.Load(); p != nil {
		return *p
	}
	return ""
}

// serveCallback finishes an authorisation: the browser comes back with
// the code and the state it was sent off with.
func serveCallback(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		callbackPage(w, http.StatusMethodNotAllowed, "Not an authorisation", "This address takes the browser back from an authorization server.")
		return
	}
	q := r.URL.Query()
	p, err := takePending(q.Get("state"))
	if err != nil {
		callbackPage(w, http.StatusBadRequest, "Authorisation failed", err.Error()+"; start again with 'llmgw ctl mcp authorize <server>' and open the new URL.")
		return
	}
	who := "server " + p.oc.server
	if p.ref.Level != "shared" {
		who += " for " + p.ref.Level + " " + p.ref.Name
	}
	if e := q.Get("error"); e != "" {
		msg := fmt.Sprintf("The authorization server refused: %s", e)
		if d := q.Get("error_description"); d != "" {
			msg += " (" + d + ")"
		}
		caddyLog().Warn("mcp oauth authorisation refused", zap.String("server", p.oc.server), zap.String("tenant", p.ref.String()), zap.String("error", e))
		callbackPage(w, http.StatusBadRequest, "Authorisation of MCP "+who+" refused", msg+".")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	e, err := p.complete(ctx, q.Get("code"), q.Get("iss"))
	if err != nil {
		caddyLog().Error("mcp oauth authorisation failed", zap.String("server", p.oc.server), zap.String("tenant", p.ref.String()), zap.Error(err))
		callbackPage(w, http.StatusBadGateway, "Authorisation of MCP "+who+" failed", err.Error()+".")
		return
	}
	caddyLog().Info("mcp oauth authorised", zap.String("server", p.oc.server), zap.String("tenant", p.ref.String()))
	notifyOAuth(p.oc.server, e)
	callbackPage(w, http.StatusOK, "llmgw is authorised", fmt.Sprintf("llmgw may now use MCP %s. You can close this page.", who))
}

// notifyOAuth tells every running gateway that a tenant's tokens came or went.
func notifyOAuth(server string, e *tokenEntry) {
	for _, g := range gatewaysNow() {
		g.oauthChanged(server, e)
	}
}

// TenantAuth is one tenant's OAuth state for a server, as the admin API
// shows it: never a token's value.
type TenantAuth struct {
	Level           string    `json:"level"`
	Name            string    `json:"name,omitempty"`
	State           string    `json:"state"` // authorized, needs_authorization
	Scope           string    `json:"scope,omitempty"`
	ExpiresAt       time.Time `json:"expires_at,omitzero"`
	HasRefreshToken bool      `json:"has_refresh_token"`
	AuthorizedAt    time.Time `json:"authorized_at,omitzero"`
	RefreshedAt     time.Time `json:"refreshed_at,omitzero"`
	Refreshes       int       `json:"refreshes"`
	LastError       string    `json:"last_error,omitempty"`
}

// AuthStatus is a server's OAuth state.
type AuthStatus struct {
	Server      string       `json:"server"`
	Grant       string       `json:"grant"`
	Tokens      string       `json:"tokens"`
	RedirectURL string       `json:"redirect_url,omitempty"`
	Issuer      string       `json:"issuer,omitempty"`
	ClientID    string       `json:"client_id,omitempty"`
	Registered  bool         `json:"dynamically_registered,omitempty"`
	Tenants     []TenantAuth `json:"tenants"`
}

// AuthorizeRequest is the body of POST /llm/mcp/servers/<name>/authorize.
type AuthorizeRequest struct {
	// Level is key, project, team or org; empty for a shared server.
	Level string `json:"level,omitempty"`
	// Name is the key's id or the level's path.
	Name string `json:"name,omitempty"`
}

// AuthorizeResponse says where to consent (authorization_code) or that a
// token was got (client_credentials).
type AuthorizeResponse struct {
	Server           string    `json:"server"`
	Tenant           string    `json:"tenant"`
	AuthorizationURL string    `json:"authorization_url,omitempty"`
	ExpiresAt        time.Time `json:"expires_at,omitzero"`
	RedirectURL      string    `json:"redirect_url,omitempty"`
	Authorized       bool      `json:"authorized,omitempty"`
}

func authStatus(oc *oauthClient) AuthStatus {
	_, cfg := oc.config()
	st := AuthStatus{Server: oc.server, Grant: cfg.grant(), Tokens: "per_tenant", RedirectURL: redirectFor(cfg), Tenants: []TenantAuth{}}
	if cfg.shared() {
		st.Tokens = "shared"
	}
	if cfg.grant() == "client_credentials" {
		st.RedirectURL = ""
	}
	oc.mu.Lock()
	if cr := oc.client; cr != nil {
		st.Issuer, st.ClientID, st.Registered = cr.Issuer, cr.ClientID, cr.Registered
	}
	oc.mu.Unlock()
	for _, e := range oc.tenants() {
		rec := e.record()
		if rec == nil {
			continue
		}
		ta := TenantAuth{Level: rec.Tenant.Level, Name: rec.Tenant.Name, State: "authorized", Scope: rec.Scope, ExpiresAt: rec.Expiry,
			HasRefreshToken: rec.RefreshToken != "", AuthorizedAt: rec.Authorized, RefreshedAt: rec.Refreshed, Refreshes: rec.Refreshes, LastError: rec.LastError}
		if rec.NeedsAuth {
			ta.State = "needs_authorization"
		}
		st.Tenants = append(st.Tenants, ta)
	}
	return st
}

// oauthRoute serves the authorisation actions of one server.
func oauthRoute(w http.ResponseWriter, r *http.Request, name, action string) error {
	oc := lookupOAuth(name)
	if oc == nil || !oauthConfigured(name) {
		return apiErr(http.StatusConflict, "mcp server %q does not use oauth; add an oauth block to it in the config", name)
	}
	_, cfg := oc.config()
	switch {
	case action == "authorization" && r.Method == http.MethodGet:
		return writeJSON(w, authStatus(oc))
	case action == "authorization" && r.Method == http.MethodDelete:
		ref, err := refFrom(cfg, r.URL.Query().Get("level"), r.URL.Query().Get("name"))
		if err != nil {
			return apiErr(http.StatusBadRequest, "%v", err)
		}
		e := oc.entry(ref)
		if e.record() == nil {
			return apiErr(http.StatusNotFound, "mcp server %q holds no tokens for %s", name, ref)
		}
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		if err := e.forget(ctx); err != nil {
			return apiErr(http.StatusInternalServerError, "forgetting the tokens: %v", err)
		}
		notifyOAuth(name, e)
		audit(r, "mcp oauth tokens forgotten", zap.String("server", name), zap.String("tenant", ref.String()))
		return writeJSON(w, map[string]string{"forgotten": ref.String(), "server": name})
	case action == "authorize" && r.Method == http.MethodPost:
		var body AuthorizeRequest
		if r.ContentLength != 0 {
			dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&body); err != nil {
				return apiErr(http.StatusBadRequest, "decoding the request: %v; send {\"level\":\"key\",\"name\":\"<key id>\"}", err)
			}
		}
		ref, err := refFrom(cfg, body.Level, body.Name)
		if err != nil {
			return apiErr(http.StatusBadRequest, "%v", err)
		}
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		resp := AuthorizeResponse{Server: name, Tenant: ref.String()}
		if cfg.grant() == "client_credentials" {
			e := oc.entry(ref)
			e.mu.Lock()
			_, err := e.renewLocked(ctx, true)
			e.mu.Unlock()
			if err != nil {
				return apiErr(http.StatusBadGateway, "%v", err)
			}
			notifyOAuth(name, e)
			resp.Authorized = true
			audit(r, "mcp oauth client credentials fetched", zap.String("server", name))
			return writeJSON(w, resp)
		}
		redirect := redirectFor(cfg)
		if redirect == "" {
			return apiErr(http.StatusConflict, "mcp server %q: llm_mcp does not know its public callback URL yet; set redirect_url in the server's oauth block (https://<your host><llm_mcp path>%s), or make one MCP request first", name, callbackSuffix)
		}
		u, exp, err := oc.begin(ctx, ref, redirect)
		if err != nil {
			return apiErr(http.StatusBadGateway, "%v", err)
		}
		resp.AuthorizationURL, resp.ExpiresAt, resp.RedirectURL = u, exp, redirect
		audit(r, "mcp oauth authorisation started", zap.String("server", name), zap.String("tenant", ref.String()))
		return writeJSON(w, resp)
	}
	return apiErr(http.StatusMethodNotAllowed, "%s %s is not a route; use POST .../authorize, GET or DELETE .../authorization", r.Method, r.URL.Path)
}

// refFrom checks a tenant against the server's token mode.
func refFrom(cfg OAuthConfig, level, name string) (tenantRef, error) {
	if cfg.shared() {
		if level != "" && level != "shared" {
			return tenantRef{}, errors.New("this server's tokens are shared: authorise it without a tenant")
		}
		return sharedRef, nil
	}
	if level == "" {
		return tenantRef{}, errors.New("this server's tokens are per tenant: say whose, such as {\"level\":\"key\",\"name\":\"k1\"} (ctl: --tenant key:k1)")
	}
	ref := tenantRef{Level: level, Name: name}
	if level == "shared" {
		return tenantRef{}, errors.New("this server's tokens are per tenant; set tokens shared in its oauth block for one token")
	}
	return ref, ref.validate()
}

// oauthConfigured reports whether a running gateway has the server with
// an oauth block.
func oauthConfigured(name string) bool {
	for _, g := range gatewaysNow() {
		g.mu.Lock()
		u := g.upstreams[name]
		g.mu.Unlock()
		if u != nil && u.cfg.OAuth != nil {
			return true
		}
	}
	return false
}
