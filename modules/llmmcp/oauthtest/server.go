// Package oauthtest is a small OAuth 2.1 authorization server that guards
// an MCP endpoint, for tests and benchmarks of llm_mcp's OAuth client (it
// runs inside "llmgw-bench mcp-serve -oauth"). It is a real one on the wire:
// Protected Resource Metadata (RFC 9728), Authorization Server Metadata
// (RFC 8414), Dynamic Client Registration (RFC 7591), the authorization
// code grant with PKCE S256 (RFC 7636) and the resource parameter
// (RFC 8707), refresh tokens (rotated), the client_credentials grant,
// revocation (RFC 7009), and a protected endpoint that answers 401 with
// WWW-Authenticate: Bearer resource_metadata=….
//
// Its consent page is a stand-in for a person's consent in a browser: it
// shows a form with a subject field, and posting the form approves.
// Tokens and codes live in memory only.
package oauthtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Options configure a Server.
type Options struct {
	// Base is the server's own URL, without a trailing slash: issuer and
	// resource. Required.
	Base string
	// Resource is the protected MCP endpoint's URL. Default: Base + "/".
	Resource string
	// TokenTTL is the access tokens' lifetime. Default: 1h.
	TokenTTL time.Duration
	// Scopes the endpoint requires. Default: mcp.
	Scopes []string
	// ClientID and ClientSecret, when set, are a preregistered client
	// (usable with both grants).
	ClientID, ClientSecret string
}

// Server is the authorization server and the guard of one endpoint.
type Server struct {
	opts Options

	mu       sync.Mutex
	clients  map[string]*client
	requests map[string]*authRequest // consent form id → request
	codes    map[string]*authRequest
	access   map[string]*grant
	refresh  map[string]*grant
	counts   map[string]int
}

type client struct {
	id, secret string
	redirects  []string
	grants     []string
}

type authRequest struct {
	client, redirect, state, challenge, resource, scope, subject string
	expires                                                      time.Time
}

type grant struct {
	client, subject, scope, resource string
	expires                          time.Time
}

// New returns a Server.
func New(opts Options) *Server {
	if opts.Resource == "" {
		opts.Resource = opts.Base + "/"
	}
	if opts.TokenTTL == 0 {
		opts.TokenTTL = time.Hour
	}
	if len(opts.Scopes) == 0 {
		opts.Scopes = []string{"mcp"}
	}
	s := &Server{opts: opts, clients: map[string]*client{}, requests: map[string]*authRequest{}, codes: map[string]*authRequest{},
		access: map[string]*grant{}, refresh: map[string]*grant{}, counts: map[string]int{}}
	if opts.ClientID != "" {
		s.clients[opts.ClientID] = &client{id: opts.ClientID, secret: opts.ClientSecret, grants: []string{"authorization_code", "refresh_token", "client_credentials"}}
	}
	return s
}

// Count is how many times an event happened: "register", "authorize",
// "code", "refresh", "client_credentials", "revoke", "refused".
func (s *Server) Count(event string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[event]
}

func (s *Server) count(event string) { s.counts[event]++ }

// Handle adds the authorization server's routes to mux.
func (s *Server) Handle(mux *http.ServeMux) {
	prm := auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: s.opts.Resource, AuthorizationServers: []string{s.opts.Base}, ScopesSupported: s.opts.Scopes,
		BearerMethodsSupported: []string{"header"}, ResourceName: "llmgw-bench mcp-serve",
	})
	mux.Handle("/.well-known/oauth-protected-resource", prm)
	mux.Handle("/.well-known/oauth-protected-resource/", prm)
	mux.HandleFunc("/.well-known/oauth-authorization-server", s.metadata)
	mux.HandleFunc("/oauth/register", s.register)
	mux.HandleFunc("/oauth/authorize", s.authorize)
	mux.HandleFunc("/oauth/token", s.token)
	mux.HandleFunc("/oauth/revoke", s.revoke)
}

// Protect guards h: a request without a valid access token for the
// resource gets 401 and the challenge that points to the metadata.
func (s *Server) Protect(h http.Handler) http.Handler {
	return auth.RequireBearerToken(s.verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: s.opts.Base + "/.well-known/oauth-protected-resource", Scopes: s.opts.Scopes,
	})(h)
}

func (s *Server) verify(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.access[tok]
	if g == nil || time.Now().After(g.expires) || g.resource != s.opts.Resource {
		s.count("refused")
		return nil, fmt.Errorf("%w: unknown, expired or for another resource", auth.ErrInvalidToken)
	}
	return &auth.TokenInfo{Scopes: strings.Fields(g.scope), Expiration: g.expires, UserID: g.subject}, nil
}

func (s *Server) metadata(w http.ResponseWriter, _ *http.Request) {
	b := s.opts.Base
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer": b, "authorization_endpoint": b + "/oauth/authorize", "token_endpoint": b + "/oauth/token",
		"registration_endpoint": b + "/oauth/register", "revocation_endpoint": b + "/oauth/revoke",
		"scopes_supported":                      append(slices.Clone(s.opts.Scopes), "offline_access"),
		"response_types_supported":              []string{"code"},
		"grant_types_supported":                 []string{"authorization_code", "refresh_token", "client_credentials"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post", "none"},
		"code_challenge_methods_supported":      []string{"S256"},
	})
}

func random() string { return rand.Text() }

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	var m oauthex.ClientRegistrationMetadata
	if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&m) != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_client_metadata"})
		return
	}
	grants := m.GrantTypes
	if len(grants) == 0 {
		grants = []string{"authorization_code"}
	}
	if slices.Contains(grants, "authorization_code") && len(m.RedirectURIs) == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_redirect_uri", "error_description": "redirect_uris required"})
		return
	}
	c := &client{id: "client-" + random(), redirects: m.RedirectURIs, grants: grants}
	if m.TokenEndpointAuthMethod != "none" {
		c.secret = "secret-" + random()
	}
	s.mu.Lock()
	s.clients[c.id] = c
	s.count("register")
	s.mu.Unlock()
	resp := map[string]any{"client_id": c.id, "redirect_uris": c.redirects, "grant_types": grants,
		"token_endpoint_auth_method": m.TokenEndpointAuthMethod, "client_id_issued_at": time.Now().Unix()}
	if c.secret != "" {
		resp["client_secret"], resp["client_secret_expires_at"] = c.secret, 0
	}
	writeJSON(w, http.StatusCreated, resp)
}

// authorize shows the consent form (GET) and approves it (POST), sending
// the browser back to the client with a code.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		_ = r.ParseForm()
		s.mu.Lock()
		req := s.requests[r.PostForm.Get("request")]
		delete(s.requests, r.PostForm.Get("request"))
		s.mu.Unlock()
		if req == nil || time.Now().After(req.expires) {
			http.Error(w, "unknown or expired consent request", http.StatusBadRequest)
			return
		}
		req.subject = strings.TrimSpace(r.PostForm.Get("subject"))
		if req.subject == "" {
			req.subject = "someone"
		}
		code := random()
		s.mu.Lock()
		s.codes[code] = req
		s.count("authorize")
		s.mu.Unlock()
		http.Redirect(w, r, req.redirect+"?"+url.Values{"code": {code}, "state": {req.state}}.Encode(), http.StatusFound)
		return
	}
	q := r.URL.Query()
	s.mu.Lock()
	c := s.clients[q.Get("client_id")]
	s.mu.Unlock()
	switch {
	case c == nil:
		http.Error(w, "unknown client_id", http.StatusBadRequest)
		return
	case !slices.Contains(c.redirects, q.Get("redirect_uri")) && !(c.id == s.opts.ClientID && q.Get("redirect_uri") != ""):
		http.Error(w, "redirect_uri not registered for this client", http.StatusBadRequest)
		return
	}
	fail := func(code, desc string) {
		http.Redirect(w, r, q.Get("redirect_uri")+"?"+url.Values{"error": {code}, "error_description": {desc}, "state": {q.Get("state")}}.Encode(), http.StatusFound)
	}
	switch {
	case q.Get("response_type") != "code":
		fail("unsupported_response_type", "only code")
		return
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		fail("invalid_request", "PKCE S256 is required")
		return
	case q.Get("resource") != s.opts.Resource:
		fail("invalid_target", "resource must be "+s.opts.Resource)
		return
	}
	id := random()
	s.mu.Lock()
	s.requests[id] = &authRequest{client: c.id, redirect: q.Get("redirect_uri"), state: q.Get("state"), challenge: q.Get("code_challenge"),
		resource: q.Get("resource"), scope: q.Get("scope"), expires: time.Now().Add(5 * time.Minute)}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, `<!doctype html><title>Consent (stand-in)</title><h1>Let %s use %s?</h1><p>Scopes: %s</p>
<form method="post" action="/oauth/authorize"><input type="hidden" name="request" value="%s">
<label>Who are you <input name="subject"></label><button type="submit">Allow</button></form>
`, html.EscapeString(c.id), html.EscapeString(s.opts.Resource), html.EscapeString(q.Get("scope")), id)
}

// clientOf authenticates the client of a token or revocation request.
func (s *Server) clientOf(r *http.Request) *client {
	id, secret, basic := r.BasicAuth()
	if basic {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.clients[id]
	if c == nil || c.secret != secret {
		return nil
	}
	return c
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	c := s.clientOf(r)
	if c == nil {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	f := r.PostForm
	if f.Get("resource") != s.opts.Resource {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_target", "error_description": "resource must be " + s.opts.Resource})
		return
	}
	bad := func(desc string) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant", "error_description": desc})
	}
	var g grant
	refresh := true
	s.mu.Lock()
	defer s.mu.Unlock()
	switch f.Get("grant_type") {
	case "authorization_code":
		req := s.codes[f.Get("code")]
		delete(s.codes, f.Get("code"))
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		switch {
		case req == nil || req.client != c.id:
			bad("unknown or used code")
			return
		case base64.RawURLEncoding.EncodeToString(sum[:]) != req.challenge:
			bad("code_verifier does not match the code_challenge")
			return
		case f.Get("redirect_uri") != req.redirect:
			bad("redirect_uri differs from the authorization request's")
			return
		}
		g = grant{client: c.id, subject: req.subject, scope: req.scope, resource: req.resource}
		s.count("code")
	case "refresh_token":
		old := s.refresh[f.Get("refresh_token")]
		delete(s.refresh, f.Get("refresh_token")) // rotated: single use
		if old == nil || old.client != c.id {
			bad("unknown, used or revoked refresh token")
			return
		}
		g = *old
		s.count("refresh")
	case "client_credentials":
		if !slices.Contains(c.grants, "client_credentials") {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unauthorized_client"})
			return
		}
		g = grant{client: c.id, subject: c.id, scope: f.Get("scope"), resource: f.Get("resource")}
		if g.scope == "" {
			g.scope = strings.Join(s.opts.Scopes, " ")
		}
		refresh = false
		s.count("client_credentials")
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	g.expires = time.Now().Add(s.opts.TokenTTL)
	at := "at-" + random()
	s.access[at] = &g
	resp := map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": int(s.opts.TokenTTL.Seconds()), "scope": g.scope}
	if refresh {
		rt := "rt-" + random()
		rg := g
		s.refresh[rt] = &rg
		resp["refresh_token"] = rt
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	if s.clientOf(r) == nil {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	s.mu.Lock()
	delete(s.access, r.PostForm.Get("token"))
	delete(s.refresh, r.PostForm.Get("token"))
	s.count("revoke")
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// RevokeAll forgets every token, as when a person withdraws consent: the
// next refresh is refused.
func (s *Server) RevokeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.access, s.refresh = map[string]*grant{}, map[string]*grant{}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
