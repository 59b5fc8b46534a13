package llmadmin

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// call serves one request with llm_admin and returns the recorder.
func call(t *testing.T, h *Handler, method, target, body string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	if err := h.ServeHTTP(w, r, nil); err != nil {
		t.Fatal(err)
	}
	return w
}

// signIn signs in with a token and returns the session cookie's value and
// the answer.
func signIn(t *testing.T, h *Handler, token string, hdr ...string) (string, sessionBody) {
	t.Helper()
	w := call(t, h, "POST", "/llm/auth/login", `{"method":"token","token":"`+token+`"}`, hdr...)
	if w.Code != 200 {
		t.Fatalf("sign-in: got %d %s", w.Code, w.Body)
	}
	var b sessionBody
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		t.Fatal(err)
	}
	for _, c := range w.Result().Cookies() {
		if c.Name == SessionCookie {
			if !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
				t.Errorf("cookie %+v: want HttpOnly, Secure, SameSite=Strict, Path=/", c)
			}
			return c.Value, b
		}
	}
	t.Fatalf("sign-in set no %s cookie: %v", SessionCookie, w.Header())
	return "", b
}

func TestSessionLifecycle(t *testing.T) {
	h := testHandler(t)
	var actor string
	h.routes = http.NewServeMux()
	h.routes.HandleFunc("/llm/models", func(w http.ResponseWriter, r *http.Request) { actor = r.Header.Get(ActorHeader) })
	h.routes.HandleFunc("/llm/models/{name}/stop", func(w http.ResponseWriter, r *http.Request) { actor = r.Header.Get(ActorHeader) })

	w := call(t, h, "GET", "/llm/auth/methods", "")
	if w.Code != 200 || strings.TrimSpace(w.Body.String()) != `{"methods":["token"]}` {
		t.Errorf("methods: got %d %s", w.Code, w.Body)
	}
	if w.Header().Get("X-Frame-Options") != "DENY" || w.Header().Get("Content-Security-Policy") != "frame-ancestors 'none'" {
		t.Errorf("auth route without clickjacking headers: %v", w.Header())
	}

	// Fixation: a value the client set before sign-in is not adopted.
	planted := strings.Repeat("A", 43)
	id, b := signIn(t, h, "root-token", "Cookie", SessionCookie+"="+planted)
	if id == planted || b.Identity != "token:root" || b.Role != "admin" || b.CSRFToken == "" || b.ExpiresAt == "" {
		t.Fatalf("sign-in: cookie %q body %+v", id, b)
	}
	if w := call(t, h, "GET", "/llm/models", "", "Cookie", SessionCookie+"="+planted); w.Code != 401 {
		t.Errorf("planted cookie: got %d, want 401", w.Code)
	}
	cookie := SessionCookie + "=" + id
	if w := call(t, h, "GET", "/llm/models", "", "Cookie", cookie); w.Code != 200 || actor != "token:root" {
		t.Errorf("GET with the cookie: got %d, actor %q", w.Code, actor)
	}
	if w := call(t, h, "POST", "/llm/models/m/stop", "", "Cookie", cookie); w.Code != 403 || !strings.Contains(w.Body.String(), "CSRF") {
		t.Errorf("POST without CSRF: got %d %s", w.Code, w.Body)
	}
	if w := call(t, h, "POST", "/llm/models/m/stop", "", "Cookie", cookie, CSRFHeader, b.CSRFToken+"x"); w.Code != 403 {
		t.Errorf("POST with a wrong CSRF token: got %d %s", w.Code, w.Body)
	}
	if w := call(t, h, "POST", "/llm/models/m/stop", "", "Cookie", cookie, CSRFHeader, b.CSRFToken); w.Code != 200 {
		t.Errorf("POST with CSRF: got %d %s", w.Code, w.Body)
	}

	// The language choice outlives the session.
	if w := call(t, h, "POST", "/llm/auth/lang", `{"lang":"de"}`, "Cookie", cookie, CSRFHeader, b.CSRFToken); w.Code != 204 {
		t.Errorf("lang: got %d %s", w.Code, w.Body)
	}
	if w := call(t, h, "POST", "/llm/auth/lang", `{"lang":"<script>"}`, "Cookie", cookie, CSRFHeader, b.CSRFToken); w.Code != 400 {
		t.Errorf("lang <script>: got %d %s", w.Code, w.Body)
	}
	w = call(t, h, "GET", "/llm/auth/session", "", "Cookie", cookie)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"lang":"de"`) || !strings.Contains(w.Body.String(), b.CSRFToken) {
		t.Errorf("session: got %d %s", w.Code, w.Body)
	}

	// Sign-out needs the CSRF token, then the cookie is dead.
	if w := call(t, h, "POST", "/llm/auth/logout", "", "Cookie", cookie); w.Code != 403 {
		t.Errorf("logout without CSRF: got %d", w.Code)
	}
	if w := call(t, h, "POST", "/llm/auth/logout", "", "Cookie", cookie, CSRFHeader, b.CSRFToken); w.Code != 204 || !strings.Contains(w.Header().Get("Set-Cookie"), "Max-Age=0") {
		t.Errorf("logout: got %d %v", w.Code, w.Header())
	}
	if w := call(t, h, "GET", "/llm/models", "", "Cookie", cookie); w.Code != 401 || !strings.Contains(w.Body.String(), "sign in") {
		t.Errorf("after logout: got %d %s", w.Code, w.Body)
	}
	_, b = signIn(t, h, "root-token")
	if b.Lang != "de" {
		t.Errorf("lang after a new sign-in: got %q, want de", b.Lang)
	}

	// A viewer's session is refused a change with the role it needs.
	id, b = signIn(t, h, "watcher-token")
	w = call(t, h, "POST", "/llm/models/m/stop", "", "Cookie", SessionCookie+"="+id, CSRFHeader, b.CSRFToken)
	if w.Code != 403 || !strings.Contains(w.Body.String(), "token:watcher has the viewer role") {
		t.Errorf("viewer change: got %d %s", w.Code, w.Body)
	}
}

func TestSessionExpiry(t *testing.T) {
	defer func(f func() time.Time) { now = f }(now)
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now = func() time.Time { return clock }
	h := testHandler(t)
	h.sessions.ttl, h.sessions.idle = 3*time.Hour, time.Hour
	get := func(id string) int {
		return call(t, h, "GET", "/llm/auth/session", "", "Cookie", SessionCookie+"="+id).Code
	}

	// Idle: used every 50 minutes it lives, left 61 minutes it ends.
	id, _ := signIn(t, h, "root-token")
	for range 3 {
		clock = clock.Add(50 * time.Minute)
		if c := get(id); c != 200 {
			t.Fatalf("used within the idle time: got %d", c)
		}
	}
	// TTL: 3h after sign-in it ends, however used.
	clock = clock.Add(29 * time.Minute) // 2h59m
	if c := get(id); c != 200 {
		t.Fatalf("at 2h59m: got %d", c)
	}
	clock = clock.Add(time.Minute)
	if c := get(id); c != 401 {
		t.Errorf("at the TTL: got %d, want 401", c)
	}

	id, _ = signIn(t, h, "root-token")
	clock = clock.Add(61 * time.Minute)
	if c := get(id); c != 401 {
		t.Errorf("idle 61m: got %d, want 401", c)
	}
	if keys, _ := h.sessions.storage.List(t.Context(), "llmgw/admin/sessions", false); len(keys) != 0 {
		t.Errorf("ended sessions left in storage: %v", keys)
	}
}

func TestSignInFromAnotherSite(t *testing.T) {
	h := testHandler(t)
	// A form of another site can post JSON-looking text/plain.
	w := call(t, h, "POST", "/llm/auth/login", `{"method":"token","token":"root-token","x":"="}`,
		"Content-Type", "text/plain", "Origin", "https://evil.example")
	if w.Code != 403 || w.Header().Get("Set-Cookie") != "" {
		t.Errorf("sign-in from another origin: got %d %v, want 403 without a cookie", w.Code, w.Header())
	}
	w = call(t, h, "POST", "/llm/auth/login", `{"method":"token","token":"root-token"}`, "Sec-Fetch-Site", "cross-site")
	if w.Code != 403 || w.Header().Get("Set-Cookie") != "" {
		t.Errorf("cross-site sign-in: got %d %v, want 403 without a cookie", w.Code, w.Header())
	}
	if w := call(t, h, "POST", "/llm/auth/login", `{"method":"token","token":"root-token"}`, "Sec-Fetch-Site", "same-origin", "Origin", "http://example.com"); w.Code != 200 {
		t.Errorf("same-origin sign-in: got %d %s", w.Code, w.Body)
	}
}

func TestSignInLimit(t *testing.T) {
	h := testHandler(t) // max 3 failures a minute
	for i := range 3 {
		if w := call(t, h, "POST", "/llm/auth/login", `{"method":"token","token":"guess"}`); w.Code != 401 {
			t.Fatalf("wrong token %d: got %d %s", i+1, w.Code, w.Body)
		}
	}
	w := call(t, h, "POST", "/llm/auth/login", `{"method":"token","token":"root-token"}`)
	if w.Code != 429 || w.Header().Get("Retry-After") == "" {
		t.Errorf("after 3 failed sign-ins: got %d %v", w.Code, w.Header())
	}
}

func TestSessionCookieNotUsedWithBearer(t *testing.T) {
	h := testHandler(t)
	h.routes = http.NewServeMux()
	h.routes.HandleFunc("/llm/models/{name}/stop", func(http.ResponseWriter, *http.Request) {})
	id, _ := signIn(t, h, "root-token")
	// A bearer token needs no CSRF token; the cookie beside it is not used.
	w := call(t, h, "POST", "/llm/models/m/stop", "", "Cookie", SessionCookie+"="+id, "Authorization", "Bearer watcher-token")
	if w.Code != 403 || !strings.Contains(w.Body.String(), "token:watcher") {
		t.Errorf("bearer beside a cookie: got %d %s, want the bearer's 403", w.Code, w.Body)
	}
}

func TestSessionSweep(t *testing.T) {
	h := testHandler(t)
	live, _ := signIn(t, h, "root-token")
	_, _ = signIn(t, h, "watcher-token")
	ctx := t.Context()
	// The watcher's session is left alone past the idle time; root's is used.
	h.sessions.storage.Store(ctx, seenPrefix+hashHex(live), []byte(now().Add(90*time.Minute).UTC().Format(time.RFC3339Nano)))
	h.sessions.sweep(ctx, now().Add(2*time.Hour))
	keys, _ := h.sessions.storage.List(ctx, "llmgw/admin/sessions", false)
	if len(keys) != 1 || !strings.HasSuffix(keys[0], hashHex(live)) {
		t.Errorf("after a sweep: %v, want only the used session", keys)
	}
	if seen, _ := h.sessions.storage.List(ctx, "llmgw/admin/seen", false); len(seen) != 1 {
		t.Errorf("after a sweep, last uses: %v, want one", seen)
	}
}

func TestSessionSweepOrphans(t *testing.T) {
	h := testHandler(t)
	ctx := t.Context()
	h.sessions.storage.Store(ctx, seenPrefix+hashHex("gone"), []byte(now().Format(time.RFC3339Nano)))
	h.sessions.sweep(ctx, now())
	if seen, _ := h.sessions.storage.List(ctx, "llmgw/admin/seen", false); len(seen) != 0 {
		t.Errorf("a last use without its session outlived a sweep: %v", seen)
	}
}

// TestSessionSweepLeavesWritesInFlight: file storage writes a value to a
// temporary file beside it and renames it into place. A sweep running
// meanwhile must not take that file for a broken session or an orphaned
// last use and delete it, which made the write, and so a sign-in or the
// note of a session's use, fail.
func TestSessionSweepLeavesWritesInFlight(t *testing.T) {
	h := testHandler(t)
	ctx := t.Context()
	id, _ := signIn(t, h, "root-token")
	fs := h.sessions.storage.(*certmagic.FileStorage)
	var temps []string
	for _, prefix := range []string{sessionsPrefix, seenPrefix, oidcPrefix} {
		dir := fs.Filename(strings.TrimSuffix(prefix, "/"))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		temp := filepath.Join(dir, "."+hashHex("x")+".tmp1234")
		if err := os.WriteFile(temp, []byte(`{"crea`), 0o600); err != nil {
			t.Fatal(err)
		}
		temps = append(temps, temp)
	}
	h.sessions.sweep(ctx, now())
	for _, temp := range temps {
		if _, err := os.Stat(temp); err != nil {
			t.Errorf("a sweep deleted a write in flight: %v", err)
		}
	}
	if c := call(t, h, "GET", "/llm/auth/session", "", "Cookie", SessionCookie+"="+id).Code; c != 200 {
		t.Errorf("the session after a sweep: got %d", c)
	}
}

// BenchmarkServeHTTPSession is what llm_admin adds to an admin request
// made with the session cookie: the session and its last use read from
// file storage, the identity, the rule and the actor header.
func BenchmarkServeHTTPSession(b *testing.B) {
	h := testHandler(b)
	h.routes = http.NewServeMux()
	h.routes.HandleFunc("/llm/models", func(http.ResponseWriter, *http.Request) {})
	r := httptest.NewRequest("POST", "/llm/auth/login", strings.NewReader(`{"method":"token","token":"watcher-token"}`))
	w := httptest.NewRecorder()
	_ = h.ServeHTTP(w, r, nil)
	cookie := w.Header().Get("Set-Cookie")
	cookie, _, _ = strings.Cut(cookie, ";")
	r = httptest.NewRequest("GET", "/llm/models", nil)
	r.Header.Set("Cookie", cookie)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		_ = h.ServeHTTP(w, r, nil)
		if w.Code != 200 {
			b.Fatalf("got %d %s", w.Code, w.Body)
		}
	}
}

func TestLogoutEverywhere(t *testing.T) {
	h := testHandler(t)
	h.routes = http.NewServeMux()
	h.routes.HandleFunc("/llm/models", func(w http.ResponseWriter, r *http.Request) {})
	// Two browsers of root, one of watcher.
	a, ab := signIn(t, h, "root-token")
	b, _ := signIn(t, h, "root-token")
	c, _ := signIn(t, h, "watcher-token")
	// A plain sign-out ends only its own session.
	d, db := signIn(t, h, "root-token")
	if w := call(t, h, "POST", "/llm/auth/logout", "", "Cookie", SessionCookie+"="+d, CSRFHeader, db.CSRFToken); w.Code != 204 {
		t.Fatalf("logout: got %d %s", w.Code, w.Body)
	}
	if w := call(t, h, "GET", "/llm/models", "", "Cookie", SessionCookie+"="+b); w.Code != 200 {
		t.Errorf("root's other session after a plain sign-out: got %d, want 200", w.Code)
	}
	if w := call(t, h, "POST", "/llm/auth/logout?everywhere=1", "", "Cookie", SessionCookie+"="+a, CSRFHeader, ab.CSRFToken); w.Code != 204 {
		t.Fatalf("logout everywhere: got %d %s", w.Code, w.Body)
	}
	for name, id := range map[string]string{"a": a, "b": b} {
		if w := call(t, h, "GET", "/llm/models", "", "Cookie", SessionCookie+"="+id); w.Code != 401 {
			t.Errorf("root's session %s after sign-out everywhere: got %d, want 401", name, w.Code)
		}
	}
	if w := call(t, h, "GET", "/llm/models", "", "Cookie", SessionCookie+"="+c); w.Code != 200 {
		t.Errorf("watcher's session after root signed out everywhere: got %d, want 200", w.Code)
	}
}

// stubDirectory refuses every sign-in, counting the calls.
type stubDirectory struct{ calls int }

func (d *stubDirectory) authenticate(context.Context, string, string) (*identity, error) {
	d.calls++
	return nil, errBadCredentials
}

// TestSignInUsernameBounded: a username of 64 KiB, or with control
// characters, is refused before the directory is asked and before the
// failure limiter keeps it.
func TestSignInUsernameBounded(t *testing.T) {
	h := testHandler(t)
	dir := &stubDirectory{}
	h.ldap = dir
	for _, name := range []string{strings.Repeat("u", 60<<10), "al\x00ice", "al\x1bice", ""} {
		body, _ := json.Marshal(loginRequest{Method: "ldap", Username: name, Password: "pw"})
		w := call(t, h, "POST", "/llm/auth/login", string(body))
		if w.Code != 400 || !strings.Contains(w.Body.String(), "a username is 1 to 256 bytes of UTF-8 without control characters") || w.Body.Len() > 500 {
			t.Errorf("username %s: got %d %.300s, want 400 stating the rule", catalog.Bounded(name), w.Code, w.Body)
		}
	}
	if dir.calls != 0 || len(h.limiter.clients) != 0 {
		t.Errorf("the directory was asked %d times and the limiter keeps %d clients, want none", dir.calls, len(h.limiter.clients))
	}
	if w := call(t, h, "POST", "/llm/auth/login", `{"method":"ldap","username":"alice","password":"wrong"}`); w.Code != 401 || dir.calls != 1 {
		t.Errorf("a plain username: got %d (directory asked %d times), want 401 from the directory", w.Code, dir.calls)
	}
}

// slowDirectory signs alice in once released, as a directory that takes
// its time.
type slowDirectory struct{ entered, release chan struct{} }

func (d *slowDirectory) authenticate(context.Context, string, string) (*identity, error) {
	close(d.entered)
	<-d.release
	return &identity{actor: "ldap:alice", name: "alice", role: roleViewer}, nil
}

// TestRightSignInWhileBlocked: guesses sent at once with a right one.
// The right one passed the first check, then the others blocked the
// client while its credential was checked: it answers 429 as they do,
// not with a session.
func TestRightSignInWhileBlocked(t *testing.T) {
	h := testHandler(t) // max 3 failures a minute
	dir := &slowDirectory{entered: make(chan struct{}), release: make(chan struct{})}
	h.ldap = dir
	done := make(chan *httptest.ResponseRecorder)
	go func() {
		r := httptest.NewRequest("POST", "/llm/auth/login", strings.NewReader(`{"method":"ldap","username":"alice","password":"right"}`))
		w := httptest.NewRecorder()
		_ = h.ServeHTTP(w, r, nil)
		done <- w
	}()
	<-dir.entered
	for range 3 {
		call(t, h, "GET", "/llm/models", "", "Authorization", "Bearer guess")
	}
	close(dir.release)
	w := <-done
	if w.Code != 429 || w.Header().Get("Retry-After") == "" || strings.Contains(w.Header().Get("Set-Cookie"), SessionCookie+"=") {
		t.Errorf("the right sign-in among guesses: got %d %v %s, want 429 with Retry-After and no session", w.Code, w.Header(), w.Body)
	}
}
