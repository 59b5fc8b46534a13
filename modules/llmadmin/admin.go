// Package llmadmin serves the llm admin API on a site, behind API tokens
// with roles, so it can be used from other machines.
package llmadmin

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/llm/catalog"
)

func init() {
	caddy.RegisterModule(Handler{})
	llm.DescribeAdminOperations(authRoutes...)
}

// ActorHeader carries who makes a change to the admin routes, for the
// audit log. llm_admin sets it from the token and drops a client's own.
const ActorHeader = "X-Llmgw-Actor"

// Handler is http.handlers.llm_admin: the admin routes of every
// admin.api.llm* module (GET /llm/models, POST /llm/keys, …, the same
// paths as on Caddy's admin endpoint) served on a site, for callers that
// send "Authorization: Bearer <token>" with a token of Tokens, or the
// session cookie of a person signed in through POST /llm/auth/login. Put
// it in a route for /llm/* of a site served over TLS.
//
// Sign-in routes (no credential needed for the first two):
// GET /llm/auth/methods lists the sign-in methods; POST /llm/auth/login
// takes {"method":"token","token":"…"} and answers the identity, its
// role and a csrf_token, with the cookie llmgw_session (HttpOnly,
// Secure, SameSite=Strict); GET /llm/auth/session answers the same for
// the cookie's session; POST /llm/auth/logout ends the session (with ?everywhere=1 every
// session of the identity); POST
// /llm/auth/lang {"lang":"de"} keeps a language choice per identity.
// With the cookie, every method but GET, HEAD and OPTIONS needs the
// header X-CSRF-Token set to the session's csrf_token, else 403.
//
// Each route needs a role (see the permission table in perms.go and the
// README): a request without a credential answers 401 with
// "WWW-Authenticate: Bearer"; an identity whose role is not enough
// answers 403 naming the role needed; too many failed tokens or sign-ins
// from one client IP (or sign-ins as one username) answer 429 with
// Retry-After. Errors are JSON: {"error": "…"}. Every answer carries
// "X-Frame-Options: DENY" and "Content-Security-Policy: frame-ancestors
// 'none'". Changes are logged by the audit log with the actor
// "token:<id>" or, for a person, that person's identity.
type Handler struct {
	// Tokens are the identities that may use the admin routes.
	Tokens []Token `json:"tokens,omitempty"`
	// MaxFailures is how many requests with a wrong token one client IP
	// may send per FailureWindow before every request from it answers
	// 429. Default: 10.
	MaxFailures int `json:"max_failures,omitempty"`
	// FailureWindow is the period MaxFailures counts over. Default: 1m.
	FailureWindow caddy.Duration `json:"failure_window,omitempty"`
	// Session sets how long sign-in sessions last. Default: 8h, ended
	// after 1h without a request.
	Session *Sessions `json:"session,omitempty"`
	// LDAP lets people sign in with a username and password against a
	// directory (OpenLDAP, Active Directory), their groups mapped to
	// roles. Default: none, sign-in is by token only.
	LDAP *LDAP `json:"ldap,omitempty"`
	// OIDC lets people sign in through an OpenID Connect provider, a
	// claim such as groups mapped to roles. Default: none.
	OIDC *OIDC `json:"oidc,omitempty"`

	ids        []*identity
	limiterKey string
	unregister func()         // of the sessions usable on /v1 (playground.go)
	routes     *http.ServeMux // the admin routes, as on the admin endpoint
	app        *llm.App
	limiter    *limiter
	logger     *zap.Logger
	warned     *atomic.Bool // of a token sent without TLS, once
	sessions   *sessionStore
	ldap       directory   // nil without an ldap block
	oidc       *oidcClient // nil without an oidc block
}

// Token is one identity: an API token, kept only as its hash.
type Token struct {
	// ID names the token in the audit log ("token:<id>"). Required.
	ID string `json:"id"`
	// SHA256 is the hex SHA-256 of the token, as `llmgw hash-key` prints
	// it. Placeholders such as {env.ADMIN_TOKEN_SHA256} or
	// {file./etc/llmgw/ci.sha256} are replaced at start. Required.
	SHA256 string `json:"sha256"`
	// Role is admin, operator, viewer or tenant_admin. Required.
	Role string `json:"role"`
	// Level is org, team or project: the tenancy level a tenant_admin
	// manages. Only for tenant_admin.
	Level string `json:"level,omitempty"`
	// Tenant is the path of that level: acme, acme/research or
	// acme/research/alpha. Only for tenant_admin.
	Tenant string `json:"tenant,omitempty"`
}

// identity is who makes a request: a provisioned token, or a person
// signed in.
type identity struct {
	actor string // in the audit log: token:<id>, ldap:<uid>, oidc:<sub>
	name  string // to show: the token's id, the person's name
	id    string // the token's id (tokens only)
	hash  [sha256.Size]byte
	role  role
	scope *scope // tenant admins only
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.llm_admin",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision reads the tokens and collects the admin routes.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	h.warned = new(atomic.Bool)
	if h.MaxFailures == 0 {
		h.MaxFailures = 10
	}
	if h.FailureWindow == 0 {
		h.FailureWindow = caddy.Duration(time.Minute)
	}
	key := fmt.Sprintf("%d/%s", h.MaxFailures, time.Duration(h.FailureWindow))
	l, _, err := limiters.LoadOrNew(key, func() (caddy.Destructor, error) {
		return newLimiter(h.MaxFailures, time.Duration(h.FailureWindow)), nil
	})
	if err != nil {
		return err
	}
	h.limiter, h.limiterKey = l.(*limiter), key
	if a, err := ctx.AppIfConfigured("llm"); err == nil {
		h.app, _ = a.(*llm.App)
	}
	repl := caddy.NewReplacer()
	seen, hashes := map[string]bool{}, map[[sha256.Size]byte]string{}
	for _, t := range h.Tokens {
		id, err := h.identity(t, repl)
		if err != nil {
			return err
		}
		if seen[t.ID] {
			return fmt.Errorf("llm_admin: token id %q is used twice", t.ID)
		}
		if other, dup := hashes[id.hash]; dup {
			return fmt.Errorf("llm_admin: tokens %q and %q have the same hash; give each identity its own token", other, t.ID)
		}
		seen[t.ID], hashes[id.hash] = true, t.ID
		h.ids = append(h.ids, id)
	}
	if h.LDAP != nil {
		dir, err := newLDAP(*h.LDAP, h.app, repl, h.logger.Named("ldap"))
		if err != nil {
			return fmt.Errorf("llm_admin: %w", err)
		}
		h.ldap = dir
	}
	if h.OIDC != nil {
		c, err := newOIDC(*h.OIDC, h.app, repl, h.logger.Named("oidc"))
		if err != nil {
			return fmt.Errorf("llm_admin: %w", err)
		}
		h.oidc = c
		go c.discoverLoop(ctx)
	}
	if len(h.ids) == 0 && h.ldap == nil && h.oidc == nil {
		h.logger.Warn("llm_admin has no tokens: every request answers 401; add a token line")
	}
	mux, err := collectRoutes(ctx)
	if err != nil {
		return err
	}
	h.routes = mux
	ttl, idle := 8*time.Hour, time.Hour
	if h.Session != nil {
		if h.Session.TTL > 0 {
			ttl = time.Duration(h.Session.TTL)
		}
		if h.Session.Idle > 0 {
			idle = time.Duration(h.Session.Idle)
		}
	}
	// In a cluster, sessions live in the cluster's store, so that every
	// node knows them; else in Caddy's storage.
	storage := ctx.Storage()
	if s := h.app.SharedStorage(); s != nil {
		storage = s
	}
	h.sessions = &sessionStore{storage: storage, ttl: ttl, idle: idle, logger: h.logger.Named("session")}
	if h.app != nil {
		h.unregister = h.app.RegisterSessions(fmt.Sprintf("llm_admin:%p", h), playground{h})
	}
	return nil
}

// Validate checks the limits.
func (h *Handler) Validate() error {
	if h.MaxFailures < 0 || h.FailureWindow < 0 {
		return fmt.Errorf("llm_admin: max_failures and failure_window must not be negative")
	}
	if s := h.Session; s != nil && (s.TTL < 0 || s.Idle < 0) {
		return fmt.Errorf("llm_admin: session ttl and idle must not be negative")
	}
	return nil
}

func (h *Handler) identity(t Token, repl *caddy.Replacer) (*identity, error) {
	if err := catalog.CheckID("token id", t.ID); err != nil {
		return nil, fmt.Errorf("llm_admin: %w", err)
	}
	sum, err := hex.DecodeString(strings.TrimSpace(repl.ReplaceAll(t.SHA256, "")))
	if err != nil || len(sum) != sha256.Size {
		return nil, fmt.Errorf("llm_admin: token %q: sha256 must be 64 hex digits; make a token and its hash with `llmgw hash-key --new`", t.ID)
	}
	id := &identity{id: t.ID, actor: "token:" + t.ID, name: t.ID}
	copy(id.hash[:], sum)
	if id.role, err = parseRole(t.Role); err != nil {
		return nil, fmt.Errorf("llm_admin: token %q: %w", t.ID, err)
	}
	if id.role != roleTenant {
		if t.Level != "" || t.Tenant != "" {
			return nil, fmt.Errorf("llm_admin: token %q: only a tenant_admin names a level and tenant", t.ID)
		}
		return id, nil
	}
	if id.scope, err = newScope(t.Level, t.Tenant, h.app); err != nil {
		return nil, fmt.Errorf("llm_admin: token %q: %w", t.ID, err)
	}
	return id, nil
}

// limiters keep the counts of wrong tokens across reloads: one per
// max_failures and failure_window, shared by every llm_admin with them.
var limiters = caddy.NewUsagePool()

// Cleanup releases the limiter.
func (h *Handler) Cleanup() error {
	if h.unregister != nil {
		h.unregister()
	}
	if h.limiterKey != "" {
		_, _ = limiters.Delete(h.limiterKey)
	}
	return nil
}

// collectRoutes puts the routes of every admin.api.llm* module on one
// mux, with the patterns they have on the admin endpoint: a module that
// adds a route adds it here too.
func collectRoutes(ctx caddy.Context) (mux *http.ServeMux, err error) {
	mux = http.NewServeMux()
	mux.Handle(metricsPattern, metricsHandler(ctx))
	defer func() {
		if p := recover(); p != nil { // a pattern registered twice
			err = fmt.Errorf("llm_admin: collecting the admin routes: %v", p)
		}
	}()
	for _, m := range adminModules() {
		router := m.New().(caddy.AdminRouter)
		if p, ok := router.(caddy.Provisioner); ok {
			if err := p.Provision(ctx); err != nil {
				return nil, fmt.Errorf("llm_admin: provisioning %s: %w", m.ID, err)
			}
		}
		for _, rt := range router.Routes() {
			h := rt.Handler
			mux.Handle(rt.Pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if err := h.ServeHTTP(w, r); err != nil {
					writeAPIError(w, err)
				}
			}))
		}
	}
	return mux, nil
}

// adminModules are the admin.api modules of the llm family: Caddy's own
// (config, load, pki, …) stay on its local admin endpoint.
func adminModules() []caddy.ModuleInfo {
	var out []caddy.ModuleInfo
	for _, m := range caddy.GetModules("admin.api") {
		if strings.HasPrefix(string(m.ID), "admin.api.llm") {
			if _, ok := m.New().(caddy.AdminRouter); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

// ServeHTTP authenticates, authorises and serves one admin request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "frame-ancestors 'none'")
	if p := r.URL.Path; r.URL.RawPath != "" || (path.Clean(p) != p && path.Clean(p)+"/" != p) {
		return writeErr(w, http.StatusBadRequest, "the path %q must be plain: no encoded slashes, no . or .. segments", r.URL.EscapedPath())
	}
	if strings.ContainsFunc(r.URL.Path, unicode.IsControl) {
		return writeErr(w, http.StatusBadRequest, "the path %s has a control character; no id or name has one (an id is %s)", catalog.Bounded(r.URL.Path), catalog.IDRule)
	}
	ip := clientIP(r)
	if h.refuseBlocked(w, ip) {
		return nil
	}
	if strings.HasPrefix(r.URL.Path, "/llm/auth/") {
		return h.serveAuth(w, r, ip)
	}
	var sess *session
	id, status, msg := h.authenticate(r)
	if id == nil && r.Header.Get("Authorization") == "" {
		var err error
		if id, sess, err = h.fromSession(r); err != nil {
			return writeErr(w, http.StatusInternalServerError, "%v", err)
		}
		if id == nil && sessionCookie(r) != "" {
			clearSessionCookie(w)
			msg = errNoSession
		}
	}
	if sess != nil && !safeMethod(r.Method) && !csrfOK(r, sess) {
		return writeErr(w, http.StatusForbidden, "%s", errCSRF)
	}
	if id == nil {
		if msg == errBadToken || msg == errNoSession {
			h.failed(ip, "")
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="llmgw admin"`)
		return writeErr(w, status, "%s", msg)
	}
	if h.refuseBlocked(w, ip) { // other guesses, in flight with this one, reached the limit
		return nil
	}
	if r.TLS == nil && !net.ParseIP(ip).IsLoopback() {
		if h.warned.CompareAndSwap(false, true) {
			h.logger.Warn("admin request over plain HTTP from another machine; serve llm_admin's site over TLS",
				zap.String("remote_ip", ip))
		}
	}
	rl := ruleFor(r)
	if err := h.authorize(id, rl, r); err != nil {
		return writeAPIError(w, err)
	}
	r.Header.Del(ActorHeader)
	r.Header.Set(ActorHeader, id.actor)
	r = r.WithContext(llm.WithCaller(r.Context(), llm.Caller{Actor: id.actor, Role: id.role.String()}))
	if _, pattern := h.routes.Handler(r); pattern == "" {
		return writeErr(w, http.StatusNotFound, "no admin route %s %s; GET /llm/openapi.json lists them", r.Method, r.URL.Path)
	}
	if id.role == roleTenant && rl.tenant.filters() {
		return h.serveFiltered(w, r, id.scope, rl.tenant)
	}
	h.routes.ServeHTTP(w, r)
	return nil
}

const (
	errNoToken  = "this admin API needs a token or a session: send \"Authorization: Bearer <token>\" with a token configured in llm_admin (make one with `llmgw hash-key --new`), or sign in with POST /llm/auth/login"
	errBadToken = "the token is not valid: send \"Authorization: Bearer <token>\" with a token configured in llm_admin"
)

// authenticate finds the identity of the request's bearer token,
// comparing its hash with every token's in constant time.
func (h *Handler) authenticate(r *http.Request) (*identity, int, string) {
	auth := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(auth, " ")
	if auth == "" || !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, http.StatusUnauthorized, errNoToken
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return nil, http.StatusUnauthorized, errNoToken
	}
	if found := h.tokenIdentity(token); found != nil {
		return found, 0, ""
	}
	return nil, http.StatusUnauthorized, errBadToken
}

// refuseBlocked answers 429 with Retry-After when the client has sent
// too many wrong credentials, and reports whether it did. It is asked
// before a credential is checked and again after a right one, so that
// a right guess among many sent at once answers as a wrong one does.
func (h *Handler) refuseBlocked(w http.ResponseWriter, ip string) bool {
	wait := h.limiter.blocked(ip)
	if wait <= 0 {
		return false
	}
	_ = tooMany(w, wait, "too many requests with a wrong token, session or sign-in from %s; try again in %s", ip, wait.Round(time.Second))
	return true
}

// tokenIdentity finds the identity of a token, comparing its hash with
// every token's in constant time.
func (h *Handler) tokenIdentity(token string) *identity {
	if token == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(token))
	var found *identity
	for _, id := range h.ids {
		if subtle.ConstantTimeCompare(sum[:], id.hash[:]) == 1 {
			found = id
		}
	}
	return found
}

// clientIP is the client's address, as Caddy determined it (trusting
// trusted_proxies' headers when so configured).
func clientIP(r *http.Request) string {
	if ip, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok && ip != "" {
		return ip
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// writeErr answers with a JSON error in the admin API's shape.
func writeErr(w http.ResponseWriter, status int, format string, args ...any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(map[string]string{"error": fmt.Sprintf(format, args...)})
}

// writeAPIError answers with an admin route's error, as Caddy's admin
// endpoint does.
func writeAPIError(w http.ResponseWriter, err error) error {
	apiErr, ok := err.(caddy.APIError)
	if !ok {
		apiErr = caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err}
	}
	if apiErr.HTTPStatus == 0 {
		apiErr.HTTPStatus = http.StatusInternalServerError
	}
	if apiErr.Message == "" && apiErr.Err != nil {
		apiErr.Message = apiErr.Err.Error()
	}
	return writeErr(w, apiErr.HTTPStatus, "%s", apiErr.Message)
}

// recorder keeps an admin route's answer so that it can be filtered.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: http.Header{}, status: http.StatusOK} }

func (rec *recorder) Header() http.Header         { return rec.header }
func (rec *recorder) Write(p []byte) (int, error) { return rec.body.Write(p) }
func (rec *recorder) WriteHeader(status int)      { rec.status = status }

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
