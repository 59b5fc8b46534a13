package llmadmin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/llm/apidoc"
	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// Sessions configures the sessions of people signed in through
// POST /llm/auth/login: a cookie llmgw_session (HttpOnly, Secure,
// SameSite=Strict, Path=/) names a session kept server-side in Caddy's
// storage (in a cluster, in the cluster's Redis: llm.App.SharedStorage),
// so that every llmgw sharing that storage knows it, a reload keeps it,
// and signing out ends it everywhere.
type Sessions struct {
	// TTL is how long a session lasts after sign-in, however much it is
	// used. Default: 8h.
	TTL caddy.Duration `json:"ttl,omitempty"`
	// Idle ends a session that made no request for this long.
	// Default: 1h.
	Idle caddy.Duration `json:"idle,omitempty"`
}

const (
	// SessionCookie is the name of the session cookie.
	SessionCookie = "llmgw_session"
	// CSRFHeader carries the session's csrf_token on every change made
	// with the session cookie.
	CSRFHeader = "X-CSRF-Token"

	sessionsPrefix = "llmgw/admin/sessions/" // + sha256 hex of the id: the session
	seenPrefix     = "llmgw/admin/seen/"     // + sha256 hex of the id: its last use
	langPrefix     = "llmgw/admin/lang/"     // + sha256 hex of the identity: its language
)

// session is what storage keeps of a session. It is written once, at
// sign-in; its last use is kept under another key, so that a use racing
// with a sign-out cannot bring the session back.
type session struct {
	Identity string    `json:"identity"` // token:<id>, ldap:<uid>
	Name     string    `json:"name,omitempty"`
	Role     string    `json:"role"`
	Level    string    `json:"level,omitempty"`
	Tenant   string    `json:"tenant,omitempty"`
	CSRF     string    `json:"csrf"`
	Created  time.Time `json:"created"`

	key string // storage key
}

// directory signs people in with a username and password.
type directory interface {
	authenticate(ctx context.Context, username, password string) (*identity, error)
}

var (
	// errBadCredentials is an unknown user or a wrong password: both
	// answer the same.
	errBadCredentials = errors.New("unknown user or wrong password")
	// errNoRole is a person whose groups map to no role.
	errNoRole = errors.New("no group mapped to a role")
)

// sessionBody is the answer of sign-in and GET /llm/auth/session.
type sessionBody struct {
	Identity  string `json:"identity"`
	Name      string `json:"name"`
	Role      string `json:"role"`
	Level     string `json:"level"`
	Tenant    string `json:"tenant"`
	CSRFToken string `json:"csrf_token"`
	ExpiresAt string `json:"expires_at"`
	Lang      string `json:"lang"`
}

// sessionStore keeps sessions and language choices in Caddy storage.
type sessionStore struct {
	storage certmagic.Storage
	ttl     time.Duration
	idle    time.Duration
	logger  *zap.Logger

	mu        sync.Mutex
	lastSweep time.Time
}

// touchEvery is how stale a session's last use may be in storage before
// a request writes it again.
func (s *sessionStore) touchEvery() time.Duration {
	return min(s.idle/10, time.Minute)
}

// randomToken is 256 random bits, URL-safe base64 encoded.
func randomToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

var tokenShape = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// create starts a session for an identity and returns its id, which only
// the cookie holds: storage keeps its hash.
func (s *sessionStore) create(ctx context.Context, sess *session) (string, error) {
	id, err := randomToken()
	if err != nil {
		return "", err
	}
	if sess.CSRF, err = randomToken(); err != nil {
		return "", err
	}
	sess.Created = now().UTC()
	sess.key = hashHex(id)
	b, err := json.Marshal(sess)
	if err != nil {
		return "", err
	}
	if err := s.storage.Store(ctx, sessionsPrefix+sess.key, b); err != nil {
		return "", fmt.Errorf("storing the session: %w", err)
	}
	if err := s.storage.Store(ctx, seenPrefix+sess.key, []byte(sess.Created.Format(time.RFC3339Nano))); err != nil {
		return "", fmt.Errorf("storing the session: %w", err)
	}
	s.maybeSweep()
	return id, nil
}

// get returns the live session the id names, or nil: for an id the
// server did not issue, one signed out, and one past its TTL or idle
// time. A use is noted at most every touchEvery.
func (s *sessionStore) get(ctx context.Context, id string) (*session, error) {
	if !tokenShape.MatchString(id) {
		return nil, nil
	}
	key := hashHex(id)
	b, err := s.storage.Load(ctx, sessionsPrefix+key)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the session: %w", err)
	}
	var sess session
	if err := json.Unmarshal(b, &sess); err != nil {
		s.logger.Error("unreadable session in storage; ending it", zap.String("key", sessionsPrefix+key), zap.Error(err))
		s.delete(ctx, key)
		return nil, nil
	}
	sess.key = key
	t := now()
	seen := s.lastUse(ctx, &sess)
	if !s.live(&sess, seen, t) {
		s.delete(ctx, key)
		return nil, nil
	}
	if t.Sub(seen) >= s.touchEvery() {
		if err := s.storage.Store(ctx, seenPrefix+key, []byte(t.UTC().Format(time.RFC3339Nano))); err != nil {
			s.logger.Error("noting a session's use", zap.Error(err))
		}
	}
	return &sess, nil
}

// lastUse is when a session was last used, as far as storage knows.
func (s *sessionStore) lastUse(ctx context.Context, sess *session) time.Time {
	seen := sess.Created
	if b, err := s.storage.Load(ctx, seenPrefix+sess.key); err == nil {
		if st, err := time.Parse(time.RFC3339Nano, string(b)); err == nil && st.After(seen) {
			seen = st
		}
	}
	return seen
}

// live reports whether a session last used at seen is still live at t.
func (s *sessionStore) live(sess *session, seen, t time.Time) bool {
	return t.Before(sess.Created.Add(s.ttl)) && t.Before(seen.Add(s.idle))
}

// delete ends a session everywhere: every llmgw reads storage.
func (s *sessionStore) delete(ctx context.Context, key string) {
	for _, k := range []string{sessionsPrefix + key, seenPrefix + key} {
		if err := s.storage.Delete(ctx, k); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.logger.Error("deleting a session", zap.String("key", k), zap.Error(err))
		}
	}
}

// deleteIdentity ends every session of one identity, in every browser
// and on every llmgw sharing the storage, and returns how many it ended.
func (s *sessionStore) deleteIdentity(ctx context.Context, identity string) int {
	keys, err := s.list(ctx, sessionsPrefix)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.logger.Error("listing sessions", zap.Error(err))
	}
	n := 0
	for _, k := range keys {
		b, err := s.storage.Load(ctx, k)
		if err != nil {
			continue
		}
		var sess session
		if json.Unmarshal(b, &sess) == nil && sess.Identity == identity {
			s.delete(ctx, k[strings.LastIndexByte(k, '/')+1:])
			n++
		}
	}
	return n
}

// expires is when a session ends at the latest.
func (s *sessionStore) expires(sess *session) time.Time { return sess.Created.Add(s.ttl) }

// sweepEvery is how often a sign-in also removes sessions that ended
// without a sign-out.
const sweepEvery = 10 * time.Minute

func (s *sessionStore) maybeSweep() {
	s.mu.Lock()
	t := now()
	due := t.Sub(s.lastSweep) >= sweepEvery
	if due {
		s.lastSweep = t
	}
	s.mu.Unlock()
	if !due {
		return
	}
	go func() {
		defer func() {
			if p := recover(); p != nil {
				s.logger.Error("sweeping sessions panicked", zap.Any("panic", p), zap.Stack("stack"))
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s.sweep(ctx, t)
	}()
}

// list returns the keys under prefix that this store wrote: named by a
// SHA-256 in hex. Others are left alone: a file storage writes a value to
// a temporary file beside it and renames it, and a sweep that took such
// a file for an unreadable session would delete it from under the write.
func (s *sessionStore) list(ctx context.Context, prefix string) ([]string, error) {
	keys, err := s.storage.List(ctx, strings.TrimSuffix(prefix, "/"), false)
	return slices.DeleteFunc(keys, func(k string) bool { return !isHashName(k[strings.LastIndexByte(k, '/')+1:]) }), err
}

// isHashName reports whether name is a SHA-256 in lower-case hex.
func isHashName(name string) bool {
	if len(name) != 2*sha256.Size {
		return false
	}
	for i := range len(name) {
		if c := name[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// sweep removes the sessions whose time is over at t.
func (s *sessionStore) sweep(ctx context.Context, t time.Time) {
	keys, _ := s.list(ctx, sessionsPrefix)
	for _, k := range keys {
		key := k[strings.LastIndexByte(k, '/')+1:]
		b, err := s.storage.Load(ctx, k)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		sess := session{key: key}
		if err == nil && json.Unmarshal(b, &sess) == nil && s.live(&sess, s.lastUse(ctx, &sess), t) {
			continue
		}
		s.delete(ctx, key)
	}
	// OpenID Connect sign-ins started and never finished.
	flows, _ := s.list(ctx, oidcPrefix)
	for _, k := range flows {
		var f oidcFlow
		if b, err := s.storage.Load(ctx, k); err == nil && json.Unmarshal(b, &f) == nil && t.Sub(f.Created) <= oidcFlowTTL {
			continue
		}
		_ = s.storage.Delete(ctx, k)
	}
	// A use noted while a sign-out deleted the session leaves its note.
	seen, _ := s.list(ctx, seenPrefix)
	for _, k := range seen {
		key := k[strings.LastIndexByte(k, '/')+1:]
		if !s.storage.Exists(ctx, sessionsPrefix+key) {
			_ = s.storage.Delete(ctx, k)
		}
	}
}

type langChoice struct {
	Identity string `json:"identity"`
	Lang     string `json:"lang"`
}

// lang is the language an identity chose, or "".
func (s *sessionStore) lang(ctx context.Context, identity string) string {
	b, err := s.storage.Load(ctx, langPrefix+hashHex(identity))
	if err != nil {
		return ""
	}
	var c langChoice
	if json.Unmarshal(b, &c) != nil || c.Identity != identity {
		return ""
	}
	return c.Lang
}

func (s *sessionStore) setLang(ctx context.Context, identity, lang string) error {
	if lang == "" {
		err := s.storage.Delete(ctx, langPrefix+hashHex(identity))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	b, _ := json.Marshal(langChoice{Identity: identity, Lang: lang})
	return s.storage.Store(ctx, langPrefix+hashHex(identity), b)
}

// langTag is a BCP 47 language tag such as de, en-GB or zh-Hant-TW.
var langTag = regexp.MustCompile(`^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,3}$`)

// sessionCookie reads the session id from the request's cookie, "" when
// there is none.
func sessionCookie(r *http.Request) string {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return ""
	}
	return c.Value
}

func (h *Handler) setSessionCookie(w http.ResponseWriter, id string) {
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: id, Path: "/", MaxAge: int(h.sessions.ttl / time.Second),
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
}

func clearSessionCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
}

// crossOrigin reports whether a browser says the request comes from a
// page of another origin: by Sec-Fetch-Site, or an Origin whose host is
// not the request's.
func crossOrigin(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return true
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return false // not a browser, or a same-origin GET
	}
	u, err := url.Parse(o)
	return err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host)
}

// safeMethod reports whether a method changes nothing, so needs no CSRF
// token.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// csrfOK compares the request's CSRF header with the session's in
// constant time.
func csrfOK(r *http.Request, sess *session) bool {
	got := r.Header.Get(CSRFHeader)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(sess.CSRF)) == 1
}

const errCSRF = "missing or wrong CSRF token; a change made with the session cookie needs the header X-CSRF-Token set to the csrf_token of POST /llm/auth/login or GET /llm/auth/session"

// sessionIdentity returns the identity of a live session, as the
// current config sees it: a token's session follows the token's role and
// ends when the token is removed; a directory user's session keeps the
// role it signed in with and ends when its sign-in method is removed.
func (h *Handler) sessionIdentity(sess *session) *identity {
	kind, name, _ := strings.Cut(sess.Identity, ":")
	switch kind {
	case "token":
		for _, id := range h.ids {
			if id.id == name {
				return id
			}
		}
		return nil
	case "ldap":
		if h.ldap == nil {
			return nil
		}
	case "oidc":
		if h.oidc == nil {
			return nil
		}
	default:
		return nil
	}
	id := &identity{actor: sess.Identity, name: sess.Name}
	var err error
	if id.role, err = parseRole(sess.Role); err != nil {
		return nil
	}
	if id.role == roleTenant {
		if id.scope, err = newScope(sess.Level, sess.Tenant, h.app); err != nil {
			return nil
		}
	}
	return id
}

// fromSession authenticates a request by its session cookie.
func (h *Handler) fromSession(r *http.Request) (*identity, *session, error) {
	c := sessionCookie(r)
	if c == "" {
		return nil, nil, nil
	}
	sess, err := h.sessions.get(r.Context(), c)
	if err != nil || sess == nil {
		return nil, nil, err
	}
	id := h.sessionIdentity(sess)
	if id == nil {
		h.sessions.delete(r.Context(), sess.key)
		return nil, nil, nil
	}
	return id, sess, nil
}

// authRoutes are llm_admin's own routes, served before the permission
// table: they need no role. GET /llm/openapi.json lists them.
var authRoutes = []llm.AdminOperation{
	{Method: "GET", Path: "/llm/auth/methods", Response: methodsBody{}, Summary: "llm_admin only, no credential needed: the sign-in methods on offer ({\"methods\":[\"token\",\"ldap\",\"oidc\"],\"oidc\":{\"name\":…,\"start\":…}})"},
	{Method: "POST", Path: "/llm/auth/login", Request: loginRequest{}, Response: sessionBody{}, Summary: "llm_admin only, no credential needed: sign in with a token or an LDAP username and password; answers the identity, role, csrf_token and expires_at, with the cookie llmgw_session (HttpOnly, Secure, SameSite=Strict). 401 on a wrong credential; 429 with Retry-After once a client or username has had max_failures of them in failure_window", Body: `{"method":"token","token":"…"}`},
	{Method: "GET", Path: "/llm/auth/session", Response: sessionBody{}, Summary: "llm_admin only: the session of the cookie llmgw_session, as sign-in answers it; 401 when it has ended"},
	{Method: "POST", Path: "/llm/auth/logout", Response: apidoc.NoContent, Summary: "llm_admin only: end the cookie's session (?everywhere=1: every session of the identity); needs X-CSRF-Token; 204"},
	{Method: "POST", Path: "/llm/auth/lang", Request: map[string]any{"type": "object", "required": []string{"lang"}, "properties": map[string]any{"lang": map[string]any{"type": "string", "description": "a language tag such as de; \"\" follows the browser"}}}, Response: apidoc.NoContent, Summary: "llm_admin only: keep a language choice for the identity (a session cookie with X-CSRF-Token, or a bearer token); \"\" follows the browser; 204", Body: `{"lang":"de"}`},
	{Method: "GET", Path: "/llm/auth/oidc/start", Response: apidoc.Redirect, Summary: "llm_admin only, no credential needed: start an OpenID Connect sign-in (?return=<path of this site>); a redirect to the provider"},
	{Method: "GET", Path: "/llm/auth/oidc/callback", Response: apidoc.Redirect, Summary: "llm_admin only: where the OpenID provider sends the browser back (?code=&state=); starts a session and redirects to the return path"},
}

// authMethod is the method of one of authRoutes, "" for another path.
func authMethod(path string) string {
	for _, op := range authRoutes {
		if op.Path == path {
			return op.Method
		}
	}
	return ""
}

// serveAuth serves /llm/auth/*: the sign-in methods, sign-in, the
// session, sign-out and the language choice.
func (h *Handler) serveAuth(w http.ResponseWriter, r *http.Request, ip string) error {
	w.Header().Set("Cache-Control", "no-store")
	route := strings.TrimPrefix(r.URL.Path, "/llm/auth/")
	method := authMethod(r.URL.Path)
	if method == "" {
		var all []string
		for _, op := range authRoutes {
			all = append(all, op.Method+" "+op.Path)
		}
		return writeErr(w, http.StatusNotFound, "no route %s; the sign-in routes are %s", catalog.Bounded(r.URL.Path), strings.Join(all, ", "))
	}
	if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
		w.Header().Set("Allow", method)
		return writeErr(w, http.StatusMethodNotAllowed, "%s takes %s, not %s", r.URL.Path, method, r.Method)
	}
	if route == "methods" {
		m := methodsBody{Methods: h.methods()}
		if h.oidc != nil {
			m.OIDC = &oidcMethod{Name: h.oidc.cfg.Name, Start: "/llm/auth/oidc/start"}
		}
		return writeJSON(w, http.StatusOK, m)
	}
	// The provider sends the browser back from its own site: the state
	// bound to this browser guards the callback, not the origin.
	if strings.HasPrefix(route, "oidc/") {
		return h.serveOIDC(w, r, route, ip)
	}
	// A page of another site may post a form here (text/plain can carry
	// JSON) and sign the browser in as someone else: a browser's request
	// from another origin is refused.
	if crossOrigin(r) {
		return writeErr(w, http.StatusForbidden, "%s refuses requests a browser sends from another site (Origin %q)", r.URL.Path, r.Header.Get("Origin"))
	}
	if route == "login" {
		return h.login(w, r, ip)
	}
	id, sess, err := h.fromSession(r)
	if err != nil {
		return writeErr(w, http.StatusInternalServerError, "%v", err)
	}
	if route == "lang" && sess == nil && r.Header.Get("Authorization") != "" {
		tid, status, msg := h.authenticate(r)
		if tid == nil {
			if msg == errBadToken {
				h.failed(ip, "")
			}
			return writeErr(w, status, "%s", msg)
		}
		if h.refuseBlocked(w, ip) {
			return nil
		}
		return h.serveLang(w, r, tid)
	}
	if sess == nil {
		if sessionCookie(r) != "" {
			h.failed(ip, "")
			clearSessionCookie(w)
		}
		return writeErr(w, http.StatusUnauthorized, "%s", errNoSession)
	}
	if h.refuseBlocked(w, ip) {
		return nil
	}
	if route == "session" {
		return writeJSON(w, http.StatusOK, h.body(r.Context(), id, sess))
	}
	if !csrfOK(r, sess) {
		return writeErr(w, http.StatusForbidden, "%s", errCSRF)
	}
	if route == "lang" {
		return h.serveLang(w, r, id)
	}
	h.sessions.delete(r.Context(), sess.key)
	clearSessionCookie(w)
	if ev := r.URL.Query().Get("everywhere"); ev == "1" || ev == "true" {
		n := h.sessions.deleteIdentity(r.Context(), sess.Identity)
		h.logger.Info("signed out everywhere", zap.String("actor", id.actor), zap.Int("other_sessions", n))
	} else {
		h.logger.Info("signed out", zap.String("actor", id.actor))
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

const errNoSession = "no session, or it has ended; sign in with POST /llm/auth/login"

func (h *Handler) serveLang(w http.ResponseWriter, r *http.Request, id *identity) error {
	var req struct {
		Lang *string `json:"lang"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&req); err != nil || req.Lang == nil {
		return writeErr(w, http.StatusBadRequest, "the body must be JSON like {\"lang\":\"de\"}")
	}
	if *req.Lang != "" && !langTag.MatchString(*req.Lang) {
		return writeErr(w, http.StatusBadRequest, "lang %q is not a language tag; use one such as en, de or pt-BR, or \"\" to follow the browser", *req.Lang)
	}
	if err := h.sessions.setLang(r.Context(), id.actor, *req.Lang); err != nil {
		return writeErr(w, http.StatusInternalServerError, "keeping the language choice: %v", err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// methodsBody is the answer of GET /llm/auth/methods.
type methodsBody struct {
	Methods []string    `json:"methods"`
	OIDC    *oidcMethod `json:"oidc,omitempty"`
}

// oidcMethod is how a sign-in page offers OpenID Connect: a button
// named Name that navigates to Start?return=<path>.
type oidcMethod struct {
	Name  string `json:"name"`
	Start string `json:"start"`
}

// methods are the sign-in methods on offer.
func (h *Handler) methods() []string {
	m := []string{}
	if len(h.ids) > 0 {
		m = append(m, "token")
	}
	if h.ldap != nil {
		m = append(m, "ldap")
	}
	if h.oidc != nil {
		m = append(m, "oidc")
	}
	return m
}

func (h *Handler) body(ctx context.Context, id *identity, sess *session) sessionBody {
	b := sessionBody{Identity: id.actor, Name: id.name, Role: id.role.String(), CSRFToken: sess.CSRF,
		ExpiresAt: h.sessions.expires(sess).UTC().Format(time.RFC3339), Lang: h.sessions.lang(ctx, id.actor)}
	if id.scope != nil {
		b.Level, b.Tenant = id.scope.level, id.scope.path
	}
	return b
}

// loginRequest is the body of POST /llm/auth/login.
type loginRequest struct {
	Method   string `json:"method"`
	Token    string `json:"token"`
	Username string `json:"username"`
	Password string `json:"password"`
}

const errBadLogin = "sign-in failed: unknown user or wrong password"

// login checks a credential and starts a session with a new id.
func (h *Handler) login(w http.ResponseWriter, r *http.Request, ip string) error {
	var req loginRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil {
		return writeErr(w, http.StatusBadRequest, `the body must be JSON like {"method":"token","token":"…"} or {"method":"ldap","username":"…","password":"…"}: %v`, err)
	}
	var id *identity
	switch req.Method {
	case "token":
		if len(h.ids) == 0 {
			return writeErr(w, http.StatusBadRequest, "sign-in with a token is not offered: llm_admin has no tokens; methods: %s", strings.Join(h.methods(), ", "))
		}
		if id = h.tokenIdentity(strings.TrimSpace(req.Token)); id == nil {
			h.failed(ip, "")
			return writeErr(w, http.StatusUnauthorized, "sign-in failed: the token is not valid; use a token configured in llm_admin")
		}
	case "ldap":
		if h.ldap == nil {
			return writeErr(w, http.StatusBadRequest, "sign-in with ldap is not offered: llm_admin has no ldap block; methods: %s", strings.Join(h.methods(), ", "))
		}
		if err := checkUsername(req.Username); err != nil {
			return writeErr(w, http.StatusBadRequest, "%v", err)
		}
		user := userKey(req.Username)
		if wait := h.limiter.blocked(user); wait > 0 {
			return tooMany(w, wait, "too many failed sign-ins as %q; try again in %s", req.Username, wait.Round(time.Second))
		}
		var err error
		id, err = h.ldap.authenticate(r.Context(), req.Username, req.Password)
		switch {
		case errors.Is(err, errBadCredentials):
			h.failed(ip, user)
			return writeErr(w, http.StatusUnauthorized, "%s", errBadLogin)
		case errors.Is(err, errNoRole):
			h.logger.Info("sign-in refused: no group mapped to a role", zap.String("actor", "ldap:"+req.Username))
			return writeErr(w, http.StatusForbidden, "%v", err)
		case err != nil:
			h.logger.Error("ldap sign-in", zap.Error(err))
			return writeErr(w, http.StatusBadGateway, "%v", err)
		}
	default:
		return writeErr(w, http.StatusBadRequest, "method %q: use one of %s", req.Method, strings.Join(h.methods(), ", "))
	}
	if h.refuseBlocked(w, ip) {
		return nil
	}
	sess, err := h.startSession(w, r, id, ip)
	if err != nil {
		return writeErr(w, http.StatusInternalServerError, "starting a session: %v", err)
	}
	return writeJSON(w, http.StatusOK, h.body(r.Context(), id, sess))
}

// startSession starts a session for a person signed in, with a new id
// in the cookie.
func (h *Handler) startSession(w http.ResponseWriter, r *http.Request, id *identity, ip string) (*session, error) {
	// A session the client already had ends: a sign-in always gets a new
	// id, and a value the server did not issue is never adopted.
	if old := sessionCookie(r); old != "" && tokenShape.MatchString(old) {
		h.sessions.delete(r.Context(), hashHex(old))
	}
	sess := &session{Identity: id.actor, Name: id.name, Role: id.role.String()}
	if id.scope != nil {
		sess.Level, sess.Tenant = id.scope.level, id.scope.path
	}
	sid, err := h.sessions.create(r.Context(), sess)
	if err != nil {
		return nil, err
	}
	h.setSessionCookie(w, sid)
	h.logger.Info("signed in", zap.String("actor", id.actor), zap.String("role", id.role.String()), zap.String("remote_ip", ip))
	return sess, nil
}

// checkUsername refuses a username no directory holds: empty, too long
// or with control characters. It is checked before the failure limiter
// keeps the name.
func checkUsername(name string) error {
	if name == "" || len(name) > maxUsername || strings.ContainsFunc(name, unicode.IsControl) || !utf8.ValidString(name) {
		return fmt.Errorf("username %s: a username is 1 to %d bytes of UTF-8 without control characters", catalog.Bounded(name), maxUsername)
	}
	return nil
}

// userKey is a username's entry in the failure limiter; no IP address
// has this shape.
func userKey(name string) string { return "user:" + strings.ToLower(name) }

// failed counts a wrong credential (token, session, sign-in) against
// the client IP, and a failed sign-in against the username too.
func (h *Handler) failed(ip, user string) {
	for _, k := range []string{ip, user} {
		if k != "" && h.limiter.fail(k) {
			h.logger.Info("client blocked after wrong credentials", zap.String("client", k), zap.Int("failures", h.MaxFailures))
		}
	}
}

func tooMany(w http.ResponseWriter, wait time.Duration, format string, args ...any) error {
	w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
	return writeErr(w, http.StatusTooManyRequests, format, args...)
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
