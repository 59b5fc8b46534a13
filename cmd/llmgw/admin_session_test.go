package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// sessionSite runs llmgw with llm_admin on its site, with two tokens (ops,
// operator; watcher, viewer), the given storage directory and extra lines
// in the llm_admin block (a session block, an ldap block, …).
func sessionSite(t *testing.T, storage, adminExtra string) *gateway {
	t.Helper()
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}}
	g.writeSessionConfig(storage, adminExtra)
	g.start()
	return g
}

func (g *gateway) writeSessionConfig(storage, adminExtra string) {
	g.t.Helper()
	cfg := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	storage file_system %s
	servers {
		trusted_proxies static 127.0.0.1/32
	}
	llm {
		model sim-chat {
			engine sim
			min 0
		}
		org acme {
			team research {
				project alpha {
					key k1 %s
				}
			}
		}
	}
}

:%d {
	route /v1/* {
		llm_router
	}
	route /llm/* {
		llm_admin {
			token ops %s operator
			token watcher %s viewer
			max_failures 4
%s
		}
	}
}
`, g.admin, storage, tenancy.HashKey("secret-1"), g.http, tenancy.HashKey("ops-token"), tenancy.HashKey("watcher-token"), adminExtra)
	if err := os.WriteFile(filepath.Join(g.dir, "Caddyfile"), []byte(cfg), 0o600); err != nil {
		g.t.Fatal(err)
	}
}

// reloadSession applies a new llm_admin block through `llmgw reload`.
func (g *gateway) reloadSession(storage, adminExtra string) {
	g.t.Helper()
	g.writeSessionConfig(storage, adminExtra)
	out, err := exec.Command(binary, "reload", "--config", filepath.Join(g.dir, "Caddyfile"),
		"--address", fmt.Sprintf("127.0.0.1:%d", g.admin)).CombinedOutput()
	if err != nil {
		g.t.Fatalf("reload: %v\n%s", err, out)
	}
}

// signedIn is the answer of a sign-in.
type signedIn struct {
	Identity  string `json:"identity"`
	Name      string `json:"name"`
	Role      string `json:"role"`
	CSRFToken string `json:"csrf_token"`
	ExpiresAt string `json:"expires_at"`
	Lang      string `json:"lang"`

	cookie string // llmgw_session=<value>
	raw    string // the Set-Cookie header
}

// login posts a sign-in body and returns the status, the answer and the
// error body.
func login(t *testing.T, g *gateway, body string, hdr ...string) (int, signedIn, string, http.Header) {
	t.Helper()
	code, h, raw := siteCall(t, g, "", "POST", "/llm/auth/login", body, hdr...)
	var s signedIn
	if code == 200 {
		if err := json.Unmarshal([]byte(raw), &s); err != nil {
			t.Fatalf("sign-in answer: %v: %s", err, raw)
		}
		for _, c := range h.Values("Set-Cookie") {
			if strings.HasPrefix(c, "llmgw_session=") {
				s.raw = c
				s.cookie, _, _ = strings.Cut(c, ";")
			}
		}
		if s.cookie == "" {
			t.Fatalf("sign-in set no llmgw_session cookie: %v", h)
		}
	}
	return code, s, raw, h
}

func TestAdminSessionSignIn(t *testing.T) {
	storage := filepath.Join(t.TempDir(), "storage")
	g := sessionSite(t, storage, "")

	code, h, body := siteCall(t, g, "", "GET", "/llm/auth/methods", "")
	if code != 200 || strings.TrimSpace(body) != `{"methods":["token"]}` {
		t.Errorf("methods: got %d %s", code, body)
	}
	if h.Get("X-Frame-Options") != "DENY" || h.Get("Content-Security-Policy") != "frame-ancestors 'none'" {
		t.Errorf("/llm/auth/methods without clickjacking headers: %v", h)
	}

	// Fixation: a cookie value set by the client before sign-in is not
	// adopted; the sign-in issues its own.
	planted := "llmgw_session=" + strings.Repeat("Q", 43)
	code, s, body, _ := login(t, g, `{"method":"token","token":"ops-token"}`, "Cookie", planted)
	if code != 200 || s.Identity != "token:ops" || s.Role != "operator" || s.CSRFToken == "" || s.cookie == planted {
		t.Fatalf("token sign-in: got %d %+v %s", code, s, body)
	}
	for _, flag := range []string{"Path=/", "HttpOnly", "Secure", "SameSite=Strict"} {
		if !strings.Contains(s.raw, flag) {
			t.Errorf("Set-Cookie %q lacks %s", s.raw, flag)
		}
	}
	if code, _, body = siteCall(t, g, "", "GET", "/llm/models", "", "Cookie", planted); code != 401 {
		t.Errorf("the planted cookie: got %d %s, want 401", code, body)
	}

	// A sign-in a page of another site makes the browser send is refused.
	if code, _, body, h := login(t, g, `{"method":"token","token":"ops-token"}`, "Origin", "https://evil.example", "Content-Type", "text/plain"); code != 403 || h.Get("Set-Cookie") != "" {
		t.Errorf("sign-in from another origin: got %d %s, want 403 without a cookie", code, body)
	}

	// The cookie reads; a change needs the CSRF header.
	if code, _, body = siteCall(t, g, "", "GET", "/llm/models", "", "Cookie", s.cookie); code != 200 || !strings.Contains(body, "sim-chat") {
		t.Errorf("GET with the cookie: got %d %s", code, body)
	}
	code, _, body = siteCall(t, g, "", "POST", "/llm/models/sim-chat/stop", "", "Cookie", s.cookie)
	if code != 403 || !strings.Contains(body, "CSRF") {
		t.Errorf("POST without X-CSRF-Token: got %d %s, want 403", code, body)
	}
	code, _, body = siteCall(t, g, "", "POST", "/llm/models/sim-chat/stop", "", "Cookie", s.cookie, "X-CSRF-Token", s.CSRFToken)
	if code != 200 || !strings.Contains(body, "stopped") {
		t.Errorf("POST with X-CSRF-Token: got %d %s", code, body)
	}
	waitFor(t, 5*time.Second, "the change attributed to token:ops", func() bool {
		return strings.Contains(g.logs.String(), `"actor":"token:ops"`)
	})
	// Bearer tokens work as before, beside sessions.
	if code, _, body = siteCall(t, g, "ops-token", "POST", "/llm/models/sim-chat/start", ""); code != 200 {
		t.Errorf("bearer change: got %d %s", code, body)
	}

	// A second llmgw sharing the storage knows the session; signing out
	// there ends it here too.
	g2 := sessionSite(t, storage, "")
	if code, _, body = siteCall(t, g2, "", "GET", "/llm/auth/session", "", "Cookie", s.cookie); code != 200 || !strings.Contains(body, s.CSRFToken) {
		t.Errorf("the session on a second llmgw: got %d %s", code, body)
	}
	if code, _, body = siteCall(t, g2, "", "POST", "/llm/auth/lang", `{"lang":"de"}`, "Cookie", s.cookie, "X-CSRF-Token", s.CSRFToken); code != 204 {
		t.Errorf("lang: got %d %s", code, body)
	}
	if code, h, body = siteCall(t, g2, "", "POST", "/llm/auth/logout", "", "Cookie", s.cookie, "X-CSRF-Token", s.CSRFToken); code != 204 || !strings.Contains(h.Get("Set-Cookie"), "Max-Age=0") {
		t.Errorf("logout: got %d %v %s", code, h, body)
	}
	if code, _, body = siteCall(t, g, "", "GET", "/llm/models", "", "Cookie", s.cookie); code != 401 {
		t.Errorf("the old cookie after sign-out on the other llmgw: got %d %s, want 401", code, body)
	}

	// A session survives a reload; the language choice outlives sign-out.
	_, s, _, _ = login(t, g, `{"method":"token","token":"watcher-token"}`)
	_, s2, _, _ := login(t, g, `{"method":"token","token":"ops-token"}`)
	if s2.Lang != "de" {
		t.Errorf("lang after signing in again: got %q, want de", s2.Lang)
	}
	g.reloadSession(storage, "\t\t\tsession {\n\t\t\t\tttl 2h\n\t\t\t}")
	if code, _, body = siteCall(t, g, "", "GET", "/llm/auth/session", "", "Cookie", s2.cookie); code != 200 || !strings.Contains(body, `"identity":"token:ops"`) {
		t.Errorf("the session after a reload: got %d %s", code, body)
	}
	// The viewer's session is refused a change with the role it needs.
	code, _, body = siteCall(t, g, "", "POST", "/llm/models/sim-chat/stop", "", "Cookie", s.cookie, "X-CSRF-Token", s.CSRFToken)
	if code != 403 || !strings.Contains(body, "operator role") {
		t.Errorf("viewer session stopping a model: got %d %s", code, body)
	}

	// Expiry: with ttl 4s a new session ends by itself, however used.
	g.reloadSession(storage, "\t\t\tsession {\n\t\t\t\tttl 4s\n\t\t\t}")
	_, s, _, _ = login(t, g, `{"method":"token","token":"ops-token"}`)
	start := time.Now()
	waitFor(t, 30*time.Second, "the session to expire", func() bool {
		code, _, _ := siteCall(t, g, "", "GET", "/llm/models", "", "Cookie", s.cookie)
		if code == 200 && time.Since(start) > 10*time.Second {
			t.Fatalf("the session lives %s with ttl 4s", time.Since(start))
		}
		return code == 401
	})
	t.Logf("a session with ttl 4s ended after %s of polling", time.Since(start).Round(100*time.Millisecond))

	// Idle: with idle 2s a session left alone ends.
	g.reloadSession(storage, "\t\t\tsession {\n\t\t\t\tidle 2s\n\t\t\t}")
	_, s, _, _ = login(t, g, `{"method":"token","token":"ops-token"}`)
	signedAt := time.Now()
	if code, _, _ = siteCall(t, g, "", "GET", "/llm/auth/session", "", "Cookie", s.cookie); code != 200 && time.Since(signedAt) < time.Second {
		t.Fatalf("a new session with idle 2s: got %d", code)
	}
	time.Sleep(3 * time.Second) // left alone past its idle time
	if code, _, body = siteCall(t, g, "", "GET", "/llm/auth/session", "", "Cookie", s.cookie); code != 401 {
		t.Errorf("a session idle for 3s with idle 2s: got %d %s, want 401", code, body)
	}

	// Failed sign-ins: four answer 401, then even a right one answers 429.
	// From another client: the dead session cookies above counted too.
	for i := range 4 {
		if code, _, body, _ := login(t, g, fmt.Sprintf(`{"method":"token","token":"guess-%d"}`, i), "X-Forwarded-For", "192.0.2.9"); code != 401 {
			t.Fatalf("failed sign-in %d: got %d %s", i+1, code, body)
		}
	}
	code, _, body, h = login(t, g, `{"method":"token","token":"ops-token"}`, "X-Forwarded-For", "192.0.2.9")
	if code != 429 || h.Get("Retry-After") == "" {
		t.Errorf("sign-in after 4 failures: got %d Retry-After %q %s, want 429", code, h.Get("Retry-After"), body)
	}
	if strings.Contains(g.logs.String(), "ops-token") || strings.Contains(g.logs.String(), s.CSRFToken) {
		t.Error("a token or CSRF token is in the log")
	}
}
