package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/llmmcp"
)

// mcpAttackSite runs llmgw with llm_mcp at /mcp (no llm_quota: anonymous
// clients) and the admin routes on the site behind llm_admin, with the
// tokens root (admin) and ops (operator). allow_commands lists
// mcp-serve's binary; servers added at run time may reach localhost by
// name (runtime_hosts localhost), not 127.0.0.1 or any other loopback,
// link-local or own address; the secret upstream_token is declared.
func mcpAttackSite(t *testing.T) *gateway {
	t.Helper()
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}}
	t.Setenv("MCP_ATTACK_SECRET", "env-secret-value")
	cfg := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	storage file_system %s
	llm {
		runtime_hosts localhost
		secret upstream_token declared-secret-value
	}
}

:%d {
	route /v1/* {
		respond 200
	}
	route /mcp* {
		llm_mcp {
			allow_commands %s /usr/local/bin/mcp-*
		}
	}
	route /llm/* {
		llm_admin {
			token root %s admin
			token ops %s operator
		}
	}
}
`, g.admin, filepath.Join(g.dir, "storage"), g.http, mcpServeBinary(t), tenancy.HashKey("root-token"), tenancy.HashKey("ops-token"))
	if err := os.WriteFile(filepath.Join(g.dir, "Caddyfile"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start()
	return g
}

// addMCP posts a server to the site's admin API with a token, or to
// Caddy's own admin endpoint when token is empty.
func addMCP(t *testing.T, g *gateway, token, body string) (int, string) {
	t.Helper()
	if token == "" {
		resp, raw := post(t, fmt.Sprintf("http://127.0.0.1:%d/llm/mcp/servers", g.admin), body)
		return resp.StatusCode, string(raw)
	}
	code, _, raw := siteCall(t, g, token, "POST", "/llm/mcp/servers", body, "Content-Type", "application/json")
	return code, raw
}

func wantRefused(t *testing.T, what string, code int, body string, status int, says ...string) {
	t.Helper()
	if code != status {
		t.Errorf("%s: got %d %s, want %d", what, code, body, status)
		return
	}
	for _, s := range says {
		if !strings.Contains(body, s) {
			t.Errorf("%s: the answer %s does not say %q", what, body, s)
		}
	}
}

func TestMCPRuntimeCommands(t *testing.T) {
	g := mcpAttackSite(t)
	marker := filepath.Join(t.TempDir(), "owned")
	attack := fmt.Sprintf(`{"name":"x","command":"/bin/sh","args":["-c","id > %s"]}`, marker)

	code, body := addMCP(t, g, "ops-token", attack)
	wantRefused(t, "an operator adding /bin/sh", code, body, http.StatusForbidden, "adding a command server needs the admin role")
	code, body = addMCP(t, g, "root-token", attack)
	wantRefused(t, "an admin adding /bin/sh", code, body, http.StatusForbidden, `command \"/bin/sh\" is not in allow_commands`, "llm_mcp { allow_commands")
	code, body = addMCP(t, g, "", attack)
	wantRefused(t, "Caddy's admin endpoint adding /bin/sh", code, body, http.StatusForbidden, "not in allow_commands")
	// out of the allowed glob with ..
	code, body = addMCP(t, g, "root-token", fmt.Sprintf(`{"name":"x","command":"/usr/local/bin/mcp-x/../../../../bin/sh","args":["-c","id > %s"]}`, marker))
	wantRefused(t, "an admin adding /bin/sh through ..", code, body, http.StatusForbidden, "not in allow_commands")
	time.Sleep(time.Second)
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("%s exists: an attack ran a command", marker)
	}

	bin := mcpServeBinary(t)
	allowed := func(name, extra string) string {
		return fmt.Sprintf(`{"name":%q,"command":%q,"args":["mcp-serve","-stdio","-name",%q]%s}`, name, bin, name, extra)
	}
	code, body = addMCP(t, g, "ops-token", allowed("tools1", ""))
	wantRefused(t, "an operator adding an allowed command", code, body, http.StatusForbidden, "needs the admin role")
	for _, env := range []string{"LD_PRELOAD", "LD_LIBRARY_PATH", "PATH", "NODE_OPTIONS"} {
		code, body = addMCP(t, g, "root-token", allowed("tools1", fmt.Sprintf(`,"env":{%q:"/tmp/evil.so"}`, env)))
		wantRefused(t, "an admin setting "+env, code, body, http.StatusBadRequest, "env "+env+" changes what the command runs", "config file")
	}
	code, body = addMCP(t, g, "root-token", allowed("tools1", `,"dir":"tmp/../.."`))
	wantRefused(t, "an admin giving a relative dir", code, body, http.StatusBadRequest, "give an absolute, clean path")
	code, body = addMCP(t, g, "root-token", allowed("tools1", `,"env":{"MCP_LEVEL":"{env.MCP_ATTACK_SECRET}"}`))
	wantRefused(t, "an admin giving a placeholder in env", code, body, http.StatusBadRequest, "placeholders such as {env.NAME}")

	code, body = addMCP(t, g, "root-token", allowed("tools1", `,"env":{"MCP_LEVEL":"debug"}`))
	if code != http.StatusCreated {
		t.Fatalf("an admin adding an allowed command: %d %s", code, body)
	}
	waitFor(t, 20*time.Second, "the added command server's tools", func() bool {
		var list []llmmcp.ServerStatus
		g.adminGet("/llm/mcp/servers", &list)
		return len(list) == 1 && list[0].Up && slices.Contains(list[0].Tools, "tools1__echo")
	})
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("%s exists: an attack ran a command", marker)
	}
}

func TestMCPRuntimeValues(t *testing.T) {
	g := mcpAttackSite(t)
	port := strings.TrimPrefix(startMCPUpstream(t, "up"), "http://127.0.0.1:")
	up := "http://localhost:" + port // runtime_hosts allows localhost by name

	for _, tc := range []struct{ name, body string }{
		{"env placeholder in a header", `{"name":"h","url":%q,"headers":{"Authorization":"Bearer {env.MCP_ATTACK_SECRET}"}}`},
		{"file placeholder in a header", `{"name":"h","url":%q,"headers":{"X-Leak":"{file./etc/passwd}"}}`},
		{"placeholder in a tenant credential", `{"name":"h","url":%q,"tenants":[{"level":"key","name":"k1","headers":{"Authorization":"{env.MCP_ATTACK_SECRET}"}}]}`},
		{"placeholder in an oauth client secret", `{"name":"h","url":%q,"oauth":{"client_id":"c","client_secret":"{env.MCP_ATTACK_SECRET}"}}`},
	} {
		code, body := addMCP(t, g, "ops-token", fmt.Sprintf(tc.body, up))
		wantRefused(t, tc.name, code, body, http.StatusBadRequest, "placeholders such as {env.NAME} and {file.path} are resolved only in the config file", "secret:NAME")
	}
	code, body := addMCP(t, g, "ops-token", fmt.Sprintf(`{"name":"h","url":%q,"headers":{"Authorization":"secret:nope"}}`, up))
	wantRefused(t, "an undeclared secret", code, body, http.StatusBadRequest, "secret:nope names no secret the config file declares")

	code, body = addMCP(t, g, "ops-token", fmt.Sprintf(`{"name":"declared","url":%q,"headers":{"Authorization":"secret:upstream_token"}}`, up))
	if code != http.StatusCreated {
		t.Fatalf("adding a server with a declared secret: %d %s", code, body)
	}
	code, body = addMCP(t, g, "ops-token", fmt.Sprintf(`{"name":"literal","url":%q,"headers":{"Authorization":"literal-credential"}}`, up))
	if code != http.StatusCreated {
		t.Fatalf("adding a server with a literal credential: %d %s", code, body)
	}
	c := mcpClient(t, g.base+"/mcp", "", false, nil)
	waitFor(t, 20*time.Second, "the added servers' tools", func() bool {
		n := toolNames(t, c)
		return slices.Contains(n, "declared__whoami") && slices.Contains(n, "literal__whoami")
	})
	if out, _, err := callText(c, "declared__whoami", map[string]any{}); err != nil || out != "declared-secret-value" {
		t.Errorf("the upstream saw Authorization %q (%v); want the declared secret's value", out, err)
	}
	_, _, list := siteCall(t, g, "ops-token", "GET", "/llm/mcp/servers", "")
	var servers []llmmcp.ServerStatus
	if err := json.Unmarshal([]byte(list), &servers); err != nil || len(servers) != 2 {
		t.Fatalf("GET /llm/mcp/servers: %v %s", err, list)
	}
	if got := servers[0].Headers["Authorization"]; got != "secret:upstream_token" {
		t.Errorf("server declared lists Authorization %q, want the reference secret:upstream_token", got)
	}
	if got := servers[1].Headers["Authorization"]; got != llm.Masked("literal-credential") || !strings.HasPrefix(got, "*** sha256:") {
		t.Errorf("server literal lists Authorization %q, want it masked", got)
	}
	for _, secret := range []string{"declared-secret-value", "literal-credential", "env-secret-value"} {
		if strings.Contains(list, secret) || strings.Contains(g.logs.String(), secret) {
			t.Errorf("%q is shown by GET /llm/mcp/servers or in the logs: %s", secret, list)
		}
	}
	stored, err := os.ReadFile(filepath.Join(g.dir, "storage", "llm_mcp", "runtime.json"))
	if err != nil || !strings.Contains(string(stored), `"secret:upstream_token"`) || strings.Contains(string(stored), "declared-secret-value") {
		t.Errorf("runtime.json = %s (%v); want the secret:NAME reference as given, not its value", stored, err)
	}
}

// hits counts the requests a server gets: none may reach it.
func hits(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestMCPRuntimeURLs(t *testing.T) {
	g := mcpAttackSite(t)
	for _, tc := range []struct{ name, url, says string }{
		{"the admin endpoint", fmt.Sprintf("http://127.0.0.1:%d/load", g.admin), "is a loopback address"},
		{"the admin endpoint's keys", fmt.Sprintf("http://127.0.0.1:%d/llm/keys", g.admin), "is a loopback address"},
		{"cloud metadata", "http://169.254.169.254/latest/meta-data/", "link-local"},
		{"ipv6 loopback", fmt.Sprintf("http://[::1]:%d/", g.admin), "is a loopback address"},
		{"unspecified", fmt.Sprintf("http://0.0.0.0:%d/", g.admin), "unspecified"},
	} {
		code, body := addMCP(t, g, "ops-token", fmt.Sprintf(`{"name":"s","url":%q}`, tc.url))
		wantRefused(t, tc.name, code, body, http.StatusBadRequest, tc.says, "runtime_hosts")
	}
	code, body := addMCP(t, g, "ops-token", `{"name":"b","url":"http://a b/mcp"}`)
	wantRefused(t, "a url with a space", code, body, http.StatusBadRequest, "is not a URL")
	code, body = addMCP(t, g, "ops-token", `{"name":"b","url":"http:///mcp"}`)
	wantRefused(t, "a url without a host", code, body, http.StatusBadRequest, "names no host")

	// An allowed host that redirects to a refused address, and an OAuth
	// server whose metadata is at a refused address: every connection is
	// checked, so the target never sees a request.
	target, n := hits(t)
	refused := target.URL // 127.0.0.1, refused
	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/oauth") {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer resource_metadata=%q`, refused+"/.well-known/oauth-protected-resource"))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		http.Redirect(w, r, refused+"/mcp", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redir.Close)
	byName := strings.Replace(redir.URL, "127.0.0.1", "localhost", 1)
	if code, body := addMCP(t, g, "ops-token", fmt.Sprintf(`{"name":"redir","url":%q}`, byName+"/mcp")); code != http.StatusCreated {
		t.Fatalf("adding a server on an allowed host: %d %s", code, body)
	}
	oauth := fmt.Sprintf(`{"name":"meta","url":%q,"oauth":{"tokens":"shared","client_id":"c","redirect_url":"%s/mcp/oauth/callback"}}`, byName+"/oauth", g.base)
	if code, body := addMCP(t, g, "ops-token", oauth); code != http.StatusCreated {
		t.Fatalf("adding an oauth server on an allowed host: %d %s", code, body)
	}
	code, _, body = siteCall(t, g, "ops-token", "POST", "/llm/mcp/servers/meta/authorize", "")
	if code == http.StatusOK && strings.Contains(body, refused) {
		t.Errorf("authorizing: %d %s; the authorization URL leads to the refused address", code, body)
	}
	waitFor(t, 10*time.Second, "the redirected server to fail", func() bool {
		var st llmmcp.ServerStatus
		g.adminGet("/llm/mcp/servers/redir", &st)
		return st.Restarts > 0 || st.LastError != ""
	})
	if got := n.Load(); got != 0 {
		t.Errorf("the refused address got %d requests through a redirect or OAuth discovery", got)
	}
	var st llmmcp.ServerStatus
	g.adminGet("/llm/mcp/servers/redir", &st)
	if !strings.Contains(st.LastError, "127.0.0.1 is a loopback address") {
		t.Errorf("the redirected server's last error is %q; want it to say the redirect's address was refused", st.LastError)
	}
}

// A local server that never handshakes and ignores its stdin closing and
// SIGTERM is gone within seconds of llmgw, whether llmgw stops or is
// killed.
func TestMCPCommandServersDieWithLlmgw(t *testing.T) {
	for _, sig := range []os.Signal{os.Interrupt, os.Kill} {
		t.Run(sig.String(), func(t *testing.T) {
			g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}}
			pidFile := filepath.Join(g.dir, "pid")
			script := filepath.Join(g.dir, "stubborn.sh")
			src := fmt.Sprintf("#!/bin/sh\ntrap '' TERM INT HUP\necho $$ > %s\nwhile :; do sleep 1; done\n", pidFile)
			if err := os.WriteFile(script, []byte(src), 0o755); err != nil {
				t.Fatal(err)
			}
			cfg := fmt.Sprintf("{\n\tadmin 127.0.0.1:%d\n\tstorage file_system %s\n}\n\n:%d {\n\troute /mcp* {\n\t\tllm_mcp {\n\t\t\tserver stubborn {\n\t\t\t\tcommand %s\n\t\t\t\ttimeout 60s\n\t\t\t}\n\t\t}\n\t}\n\troute /v1/* {\n\t\trespond 200\n\t}\n}\n",
				g.admin, filepath.Join(g.dir, "storage"), g.http, script)
			if err := os.WriteFile(filepath.Join(g.dir, "Caddyfile"), []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			g.cmd = exec.Command(binary, "run", "--config", filepath.Join(g.dir, "Caddyfile"))
			g.cmd.Stdout, g.cmd.Stderr = g.logs, g.logs
			if err := g.cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { _ = g.cmd.Wait(); close(done) }()
			t.Cleanup(func() { _ = g.cmd.Process.Kill(); <-done })
			var pid int
			waitFor(t, 30*time.Second, "the stubborn server to start", func() bool {
				b, err := os.ReadFile(pidFile)
				if err == nil {
					_, err = fmt.Sscan(string(b), &pid)
				}
				return err == nil && processAlive(pid)
			})
			time.Sleep(300 * time.Millisecond) // llmgw is waiting for its handshake
			if err := g.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("llmgw did not exit on %v", sig)
			}
			deadline := time.Now().Add(2 * time.Second)
			for processAlive(pid) && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if processAlive(pid) {
				_ = exec.Command("kill", "-9", fmt.Sprint(pid)).Run()
				t.Fatalf("the local server (pid %d) still runs 2s after llmgw exited on %v", pid, sig)
			}
		})
	}
}

// Names with control characters, or too long, are refused wherever a
// request gives one: a server's name (in the body and in the path) and a
// tenant's.
func TestMCPRuntimeNames(t *testing.T) {
	g := mcpAttackSite(t)
	up := "http://localhost:" + strings.TrimPrefix(startMCPUpstream(t, "up"), "http://127.0.0.1:")
	for _, name := range []string{"a\\u0000b", "a\\u001b[31mb", "a\\rb", "a.b", strings.Repeat("n", 65)} {
		code, body := addMCP(t, g, "ops-token", fmt.Sprintf(`{"name":"%s","url":%q}`, name, up))
		wantRefused(t, "adding a server named "+name, code, body, http.StatusBadRequest, "use 1 to 64 letters, digits")
	}
	code, body := addMCP(t, g, "ops-token", fmt.Sprintf(`{"name":"t","url":%q,"tenants":[{"level":"key","name":"k\r\n1","headers":{"A":"b"}}]}`, up))
	wantRefused(t, "a tenant credential named with CR LF", code, body, http.StatusBadRequest, "control character")
	for _, path := range []string{"/llm/mcp/servers/a%00b", "/llm/mcp/servers/a%1bb/disable", "/llm/mcp/servers/a%0db/authorization"} {
		req, _ := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d%s", g.admin, path), nil)
		if strings.HasSuffix(path, "disable") {
			req.Method = "POST"
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Error string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		wantRefused(t, req.Method+" "+path, resp.StatusCode, e.Error, http.StatusBadRequest, "use 1 to 64 letters, digits")
	}
	oauth := fmt.Sprintf(`{"name":"o","url":%q,"oauth":{"client_id":"c","redirect_url":"%s/mcp/oauth/callback"}}`, up, g.base)
	if code, body := addMCP(t, g, "ops-token", oauth); code != http.StatusCreated {
		t.Fatalf("adding an oauth server: %d %s", code, body)
	}
	code, _, body = siteCall(t, g, "ops-token", "POST", "/llm/mcp/servers/o/authorize", `{"level":"key","name":"k\u001b1"}`)
	wantRefused(t, "authorizing a tenant named with ESC", code, body, http.StatusBadRequest, "control character")
}
