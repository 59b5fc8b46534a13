package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// hydraVersion is the Ory Hydra release .ci/install builds.
const hydraVersion = "v2.3.0"

// hydraBin finds Hydra: $LLMGW_HYDRA, the cache .ci/install fills, PATH.
func hydraBin() string {
	if p := os.Getenv("LLMGW_HYDRA"); p != "" {
		return p
	}
	if cache, err := os.UserCacheDir(); err == nil {
		p := filepath.Join(cache, "llmgw", "hydra-"+hydraVersion, "hydra")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	if p, err := exec.LookPath("hydra"); err == nil {
		return p
	}
	return ""
}

// hydraServer is an Ory Hydra started by a test (in memory, on loopback
// ports), with the login and consent app Hydra asks its deployer to
// write: it signs in whoever the test names with as, in the groups the
// test gives that person.
type hydraServer struct {
	t             *testing.T
	public, admin string // base URLs
	issuer        string

	mu     sync.Mutex
	user   string              // who signs in next; "" refuses (access_denied)
	groups map[string][]string // or a string, as groups claim
	tenant map[string]string   // a single string groups claim
}

func (h *hydraServer) signInAs(user string) {
	h.mu.Lock()
	h.user = user
	h.mu.Unlock()
}

// startHydra starts `hydra serve all --dev` on two free ports. Without
// Hydra it skips, except in CI (CI=true), where .ci/install builds it.
func startHydra(t *testing.T, publicPort int) *hydraServer {
	t.Helper()
	return startHydraAt(t, "127.0.0.1", publicPort)
}

// startHydraAt is startHydra with the host name of its public URLs (its
// issuer): "localhost" makes it another site than llmgw's 127.0.0.1 for
// a browser, as a provider is in production. It listens on 127.0.0.1.
func startHydraAt(t *testing.T, host string, publicPort int) *hydraServer {
	t.Helper()
	bin := hydraBin()
	if bin == "" {
		msg := "Ory Hydra is not installed; .ci/install builds it (from .ci/tools/hydra into ~/.cache/llmgw/hydra-" + hydraVersion + ")"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	h := &hydraServer{t: t, groups: map[string][]string{}, tenant: map[string]string{}}
	app := httptest.NewServer(http.HandlerFunc(h.serveApp))
	t.Cleanup(app.Close)
	adminPort := freePort(t)
	h.public = fmt.Sprintf("http://%s:%d", host, publicPort)
	h.admin = fmt.Sprintf("http://127.0.0.1:%d", adminPort)
	h.issuer = h.public + "/"
	logs := &syncBuffer{}
	cmd := exec.Command(bin, "serve", "all", "--dev", "--sqa-opt-out")
	cmd.Env = append(os.Environ(), "DSN=memory", "URLS_SELF_ISSUER="+h.issuer,
		"URLS_LOGIN="+app.URL+"/login", "URLS_CONSENT="+app.URL+"/consent",
		"SERVE_PUBLIC_HOST=127.0.0.1", fmt.Sprintf("SERVE_PUBLIC_PORT=%d", publicPort),
		"SERVE_ADMIN_HOST=127.0.0.1", fmt.Sprintf("SERVE_ADMIN_PORT=%d", adminPort),
		"SECRETS_SYSTEM=llmgw-test-system-secret-0123456789", "LOG_LEVEL=warn", "HOME="+t.TempDir())
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("hydra logs:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(h.admin + "/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("hydra not ready after 60s: %v\n%s", err, logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	return h
}

// adminCall calls Hydra's admin API and decodes its JSON answer into out.
func (h *hydraServer) adminCall(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, h.admin+path, body)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("hydra %s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// createClient registers llmgw's client, confidential, with its
// callback.
func (h *hydraServer) createClient(id, secret, redirect string) {
	h.t.Helper()
	err := h.adminCall("POST", "/admin/clients", map[string]any{
		"client_id": id, "client_secret": secret, "grant_types": []string{"authorization_code"},
		"response_types": []string{"code"}, "scope": "openid profile email groups",
		"redirect_uris": []string{redirect}, "token_endpoint_auth_method": "client_secret_basic",
	}, nil)
	if err != nil {
		h.t.Fatal(err)
	}
}

// serveApp is the login and consent app.
func (h *hydraServer) serveApp(w http.ResponseWriter, r *http.Request) {
	var redirect struct {
		To string `json:"redirect_to"`
	}
	var err error
	h.mu.Lock()
	user, groups, tenant := h.user, h.groups[h.user], h.tenant[h.user]
	h.mu.Unlock()
	switch r.URL.Path {
	case "/login":
		ch := url.QueryEscape(r.URL.Query().Get("login_challenge"))
		if user == "" {
			err = h.adminCall("PUT", "/admin/oauth2/auth/requests/login/reject?login_challenge="+ch,
				map[string]string{"error": "access_denied", "error_description": "The resource owner denied the request"}, &redirect)
		} else {
			err = h.adminCall("PUT", "/admin/oauth2/auth/requests/login/accept?login_challenge="+ch,
				map[string]any{"subject": user, "remember": false}, &redirect)
		}
	case "/consent":
		ch := url.QueryEscape(r.URL.Query().Get("consent_challenge"))
		var req struct {
			Scope    []string `json:"requested_scope"`
			Audience []string `json:"requested_access_token_audience"`
		}
		if err = h.adminCall("GET", "/admin/oauth2/auth/requests/consent?consent_challenge="+ch, nil, &req); err != nil {
			break
		}
		claims := map[string]any{"preferred_username": user, "name": strings.ToUpper(user[:1]) + user[1:] + " Example"}
		if tenant != "" {
			claims["groups"] = tenant
		} else if groups != nil {
			claims["groups"] = groups
		}
		err = h.adminCall("PUT", "/admin/oauth2/auth/requests/consent/accept?consent_challenge="+ch, map[string]any{
			"grant_scope": req.Scope, "grant_access_token_audience": req.Audience, "remember": false,
			"session": map[string]any{"id_token": claims},
		}, &redirect)
	default:
		http.NotFound(w, r)
		return
	}
	if err != nil {
		h.t.Errorf("login and consent app: %v", err)
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	http.Redirect(w, r, redirect.To, http.StatusFound)
}

// secureLoopbackJar is a cookie jar that, as browsers do for
// http://127.0.0.1, treats loopback as a secure context: it keeps and
// sends Secure cookies over plain HTTP.
type secureLoopbackJar struct{ jar *cookiejar.Jar }

func asHTTPS(u *url.URL) *url.URL {
	c := *u
	c.Scheme = "https"
	return &c
}

func (j secureLoopbackJar) SetCookies(u *url.URL, cookies []*http.Cookie) {
	j.jar.SetCookies(asHTTPS(u), cookies)
}
func (j secureLoopbackJar) Cookies(u *url.URL) []*http.Cookie { return j.jar.Cookies(asHTTPS(u)) }

// jarBrowser is an http.Client playing a browser: a cookie jar, following
// redirects through the provider and its login app, stopping at the
// first answer of llmgw's site that is not a sign-in route.
type jarBrowser struct {
	c        *http.Client
	jar      secureLoopbackJar
	site     *url.URL
	callback string // the last callback URL the provider sent the browser to
	stopAtCB bool   // stop before following the provider's redirect to the callback
}

func newJarBrowser(t *testing.T, site string) *jarBrowser {
	t.Helper()
	j, _ := cookiejar.New(nil)
	b := &jarBrowser{jar: secureLoopbackJar{j}}
	b.site, _ = url.Parse(site)
	b.c = &http.Client{Jar: b.jar, Timeout: 30 * time.Second, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Host != b.site.Host {
			return nil
		}
		if req.URL.Path == "/llm/auth/oidc/callback" {
			b.callback = req.URL.String()
			if b.stopAtCB {
				return http.ErrUseLastResponse
			}
			return nil
		}
		return http.ErrUseLastResponse
	}}
	return b
}

// get sends a GET to the site and returns the status, the Location and
// the body of the answer it stops at.
func (b *jarBrowser) get(t *testing.T, path string, hdr ...string) (int, string, string) {
	t.Helper()
	u := path
	if strings.HasPrefix(path, "/") {
		u = b.site.String() + path
	}
	req, _ := http.NewRequest("GET", u, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(raw)
}

// session is the browser's llmgw_session cookie, as a Cookie header.
func (b *jarBrowser) session() string {
	for _, c := range b.jar.Cookies(b.site) {
		if c.Name == "llmgw_session" {
			return c.Name + "=" + c.Value
		}
	}
	return ""
}

func TestAdminSessionOIDC(t *testing.T) {
	t.Setenv("LLMGW_TEST_OIDC_SECRET", "llmgw-client-secret")
	storage := filepath.Join(t.TempDir(), "storage")
	hydraPort := freePort(t)
	issuer := fmt.Sprintf("http://127.0.0.1:%d/", hydraPort)
	// llmgw starts before the provider is up: discovery is retried, the
	// start does not fail.
	g := sessionSite(t, storage, fmt.Sprintf(`			oidc {
				issuer %s
				client_id llmgw
				client_secret {env.LLMGW_TEST_OIDC_SECRET}
				scopes openid profile email groups
				name "Example SSO"
				role_claim groups
				role admin llm-admins
				role operator llm-operators
				role viewer llm-viewers
				tenant_admin org acme acme-admins
			}`, issuer))
	code, _, body := siteCall(t, g, "", "GET", "/llm/auth/methods", "")
	if code != 200 || strings.TrimSpace(body) != `{"methods":["token","oidc"],"oidc":{"name":"Example SSO","start":"/llm/auth/oidc/start"}}` {
		t.Errorf("methods: got %d %s", code, body)
	}
	code, _, body = siteCall(t, g, "", "GET", "/llm/auth/oidc/start", "")
	if code != 502 || !strings.Contains(body, "the OpenID provider is not reachable") {
		t.Errorf("start before the provider is up: got %d %s, want 502", code, body)
	}

	h := startHydra(t, hydraPort)
	h.createClient("llmgw", "llmgw-client-secret", g.base+"/llm/auth/oidc/callback")
	h.groups["alice"] = []string{"staff", "llm-viewers", "llm-admins"}
	h.groups["victor"] = []string{"llm-viewers"}
	h.groups["nora"] = []string{"staff"}
	h.tenant["tara"] = "acme-admins"

	// alice, an admin by group (and a viewer: the highest role wins),
	// starts in one browser; the provider's redirect back is replayed in
	// another browser first, which is refused (the state is bound to the
	// browser that started), then followed in hers.
	h.signInAs("alice")
	alice := newJarBrowser(t, g.base)
	alice.stopAtCB = true
	code, loc, body := alice.get(t, "/llm/auth/oidc/start?return=/console/models?x=1")
	if (code != 302 && code != 303) || alice.callback == "" || !strings.Contains(loc, "code=") {
		t.Fatalf("alice at the provider: got %d %s %s (callback %q)", code, loc, body, alice.callback)
	}
	other := newJarBrowser(t, g.base)
	code, _, body = other.get(t, alice.callback)
	if code != 400 || !strings.Contains(body, "not started by this browser") {
		t.Errorf("callback in another browser: got %d %s, want 400", code, body)
	}
	code, loc, body = alice.get(t, alice.callback)
	if code != 302 || loc != "/console/models?x=1" || alice.session() == "" {
		t.Fatalf("alice's callback: got %d %q %s, cookie %q", code, loc, body, alice.session())
	}
	// The same callback again, even with the state's cookie: used once.
	st, _ := url.Parse(alice.callback)
	code, _, body = other.get(t, alice.callback, "Cookie", "llmgw_oidc="+st.Query().Get("state"))
	if code != 400 || !strings.Contains(body, "already used") {
		t.Errorf("replayed callback: got %d %s, want 400", code, body)
	}
	// A forged state.
	code, _, body = alice.get(t, "/llm/auth/oidc/callback?code=abc&state=forged", "Accept", "text/html")
	if code != 400 || !strings.Contains(body, "<h1>Sign-in failed</h1>") {
		t.Errorf("forged state: got %d %s, want 400 with a page", code, body)
	}

	code, _, body = siteCall(t, g, "", "GET", "/llm/auth/session", "", "Cookie", alice.session())
	var s signedIn
	_ = json.Unmarshal([]byte(body), &s)
	if code != 200 || s.Identity != "oidc:alice" || s.Role != "admin" || s.Name != "Alice Example" || s.CSRFToken == "" {
		t.Fatalf("alice's session: got %d %s", code, body)
	}
	if code, _, body = siteCall(t, g, "", "GET", "/llm/models", "", "Cookie", alice.session()); code != 200 || !strings.Contains(body, "sim-chat") {
		t.Errorf("alice reading models: got %d %s", code, body)
	}
	if code, _, body = siteCall(t, g, "", "POST", "/llm/models/sim-chat/stop", "", "Cookie", alice.session()); code != 403 || !strings.Contains(body, "CSRF") {
		t.Errorf("alice's change without CSRF: got %d %s, want 403", code, body)
	}
	code, _, body = siteCall(t, g, "", "POST", "/llm/models/sim-chat/stop", "", "Cookie", alice.session(), "X-CSRF-Token", s.CSRFToken)
	if code != 200 {
		t.Errorf("alice stopping a model: got %d %s", code, body)
	}
	waitFor(t, 5*time.Second, "the change attributed to oidc:alice in the audit log", func() bool {
		return strings.Contains(g.logs.String(), `"actor":"oidc:alice"`)
	})

	// victor, a viewer by group: reads, refused a change. His return
	// is another site's URL: ignored, he lands on /.
	h.signInAs("victor")
	victor := newJarBrowser(t, g.base)
	code, loc, body = victor.get(t, "/llm/auth/oidc/start?return=https://evil.example/")
	if code != 302 || loc != "/" || victor.session() == "" {
		t.Fatalf("victor: got %d %q %s", code, loc, body)
	}
	for _, ret := range []string{"//evil.example/x", `/\evil.example`, "javascript:alert(1)"} {
		b := newJarBrowser(t, g.base)
		if code, loc, body = b.get(t, "/llm/auth/oidc/start?return="+url.QueryEscape(ret)); code != 302 || loc != "/" {
			t.Errorf("return %q: got %d %q %s, want 302 to /", ret, code, loc, body)
		}
	}
	code, _, body = siteCall(t, g, "", "GET", "/llm/auth/session", "", "Cookie", victor.session())
	_ = json.Unmarshal([]byte(body), &s)
	if code != 200 || s.Identity != "oidc:victor" || s.Role != "viewer" {
		t.Fatalf("victor's session: got %d %s", code, body)
	}
	code, _, body = siteCall(t, g, "", "POST", "/llm/models/sim-chat/start", "", "Cookie", victor.session(), "X-CSRF-Token", s.CSRFToken)
	if code != 403 || !strings.Contains(body, "oidc:victor has the viewer role") {
		t.Errorf("victor starting a model: got %d %s, want 403", code, body)
	}

	// tara: groups is one string, a tenant admin of org acme.
	h.signInAs("tara")
	tara := newJarBrowser(t, g.base)
	if code, _, body = tara.get(t, "/llm/auth/oidc/start"); code != 302 || tara.session() == "" {
		t.Fatalf("tara: got %d %s", code, body)
	}
	code, _, body = siteCall(t, g, "", "GET", "/llm/auth/session", "", "Cookie", tara.session())
	if code != 200 || !strings.Contains(body, `"role":"tenant_admin","level":"org","tenant":"acme"`) {
		t.Errorf("tara's session: got %d %s", code, body)
	}

	// nora is in no mapped group: 403 saying so, no session.
	h.signInAs("nora")
	nora := newJarBrowser(t, g.base)
	code, _, body = nora.get(t, "/llm/auth/oidc/start")
	if code != 403 || !strings.Contains(body, `oidc:nora (Nora Example) has no groups value mapped to a role`) || nora.session() != "" {
		t.Errorf("nora: got %d %s, cookie %q", code, body, nora.session())
	}

	// The person refuses at the provider: access_denied, said plainly.
	h.signInAs("")
	denied := newJarBrowser(t, g.base)
	code, _, body = denied.get(t, "/llm/auth/oidc/start")
	if code != 403 || !strings.Contains(body, "sign-in refused by the OpenID provider (access_denied") || denied.session() != "" {
		t.Errorf("access_denied: got %d %s", code, body)
	}

	// alice signs in from a second browser, then signs out everywhere
	// from the first: both her sessions end, victor's does not.
	h.signInAs("alice")
	alice2 := newJarBrowser(t, g.base)
	if code, _, body = alice2.get(t, "/llm/auth/oidc/start"); code != 302 || alice2.session() == "" {
		t.Fatalf("alice's second browser: got %d %s", code, body)
	}
	code, _, body = siteCall(t, g, "", "GET", "/llm/auth/session", "", "Cookie", alice.session())
	_ = json.Unmarshal([]byte(body), &s)
	if code, _, body = siteCall(t, g, "", "POST", "/llm/auth/logout?everywhere=1", "", "Cookie", alice.session(), "X-CSRF-Token", s.CSRFToken); code != 204 {
		t.Fatalf("alice signing out everywhere: got %d %s", code, body)
	}
	for name, c := range map[string]string{"first": alice.session(), "second": alice2.session()} {
		if code, _, body = siteCall(t, g, "", "GET", "/llm/models", "", "Cookie", c); code != 401 {
			t.Errorf("alice's %s browser after signing out everywhere: got %d %s, want 401", name, code, body)
		}
	}
	if code, _, body = siteCall(t, g, "", "GET", "/llm/models", "", "Cookie", victor.session()); code != 200 {
		t.Errorf("victor after alice signed out everywhere: got %d %s, want 200", code, body)
	}
}
