package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/llmmcp"
)

// startOAuthUpstream runs mcp-serve behind its own OAuth authorization
// server (mcp-serve -oauth) on a free port.
func startOAuthUpstream(t *testing.T, name string, extra ...string) string {
	t.Helper()
	port := freePort(t)
	args := append([]string{"mcp-serve", "-listen", fmt.Sprintf("127.0.0.1:%d", port), "-name", name, "-oauth"}, extra...)
	cmd := exec.Command(mcpServeBinary(t), args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitFor(t, 10*time.Second, "mcp-serve -oauth to listen", func() bool {
		resp, err := http.Get(base + "/.well-known/oauth-authorization-server")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	return base + "/"
}

// mcpOAuthConfig: keys k1 and k2 (project alpha), llm_mcp at /mcp in
// front of "secure" (authorization code, tokens per tenant, registered by
// DCR), "team" (the same upstream, one token shared by every caller) and
// "m2m" (client_credentials with a preregistered client). The
// callback is served without a key.
func mcpOAuthConfig(g *gateway, secure, m2m, secureExtra string) string {
	return fmt.Sprintf(`{
	admin 127.0.0.1:%d
	storage file_system %s
	log {
		level DEBUG
	}
	llm {
		org acme {
			team research {
				project alpha {
					key k1 %s {
						tools secure.* m2m.* team.*
					}
					key k2 %s {
						tools secure.* m2m.* team.*
					}
				}
			}
		}
	}
}

:%d {
	log
	@keyed not path /mcp/oauth/callback
	route /mcp* {
		llm_quota @keyed
		llm_mcp {
			server secure {
				url %s
				%s
				oauth {
					scopes mcp
				}
			}
			server team {
				url %s
				oauth {
					tokens shared
				}
			}
			server m2m {
				url %s
				oauth {
					grant client_credentials
					client_id llmgw-m2m
					client_secret {env.MCP_M2M_SECRET}
				}
			}
		}
	}
}
`, g.admin, filepath.Join(g.dir, "storage"), tenancy.HashKey("secret-1"), tenancy.HashKey("secret-2"), g.http, secure, secureExtra, secure, m2m)
}

// browse plays a person's browser: it opens the authorization URL,
// submits the consent form (the authorization server's stand-in for a
// person's consent) and follows the redirects back to llmgw's callback.
func browse(t *testing.T, authURL string) (int, string) {
	t.Helper()
	resp, err := http.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="request" value="([^"]+)"`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("no consent form at the authorization URL: %d %s", resp.StatusCode, page)
	}
	form := resp.Request.URL.Scheme + "://" + resp.Request.URL.Host + "/oauth/authorize"
	resp, err = http.PostForm(form, map[string][]string{"request": {string(m[1])}, "subject": {"ada"}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestMCPOAuth(t *testing.T) {
	secure := startOAuthUpstream(t, "secure", "-token-ttl", "2s")
	m2m := startOAuthUpstream(t, "m2m", "-client-id", "llmgw-m2m", "-client-secret", "s3cret-m2m")
	t.Setenv("MCP_M2M_SECRET", "s3cret-m2m")
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{})}
	cfgPath := filepath.Join(g.dir, "Caddyfile")
	write := func(extra string) {
		if err := os.WriteFile(cfgPath, []byte(mcpOAuthConfig(g, secure, m2m, extra)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("")
	g.start()
	url := g.base + "/mcp"
	changed := make(chan struct{}, 16)
	k1, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	}).Connect(bg, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: keyHeader{"secret-1"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k1.Close()
	k2 := mcpClient(t, url, "secret-2", false, nil)
	var seenTokens []string // the upstream tokens whoami showed: never in admin output or logs
	whoami := func(c *mcp.ClientSession, tool string) string {
		t.Helper()
		out, isErr, err := callText(c, tool, map[string]any{})
		if err != nil || isErr || !strings.HasPrefix(out, "Bearer at-") {
			t.Fatalf("%s = %q, isError %v, %v; want the upstream to see an OAuth bearer token", tool, out, isErr, err)
		}
		tok := strings.TrimPrefix(out, "Bearer ")
		seenTokens = append(seenTokens, tok)
		return tok
	}
	hasSecure := func(c *mcp.ClientSession) bool { return slices.Contains(toolNames(t, c), "secure__echo") }

	t.Run("client_credentials without a browser", func(t *testing.T) {
		waitFor(t, 20*time.Second, "m2m's tools", func() bool { return slices.Contains(toolNames(t, k2), "m2m__echo") })
		whoami(k2, "m2m__whoami")
	})
	t.Run("unauthorised tenants see nothing and are told how", func(t *testing.T) {
		if hasSecure(k1) || hasSecure(k2) {
			t.Fatalf("secure's tools are listed before anyone authorised: %v", toolNames(t, k1))
		}
		out, isErr, err := callText(k1, "secure__echo", map[string]any{"text": "hi"})
		if err != nil || !isErr || !strings.Contains(out, `mcp server "secure" needs OAuth authorisation for key k1`) ||
			!strings.Contains(out, "llmgw ctl mcp authorize secure --tenant key:k1") {
			t.Errorf("k1 calling secure.echo before authorising: %q, isError %v, %v", out, isErr, err)
		}
	})
	t.Run("authorise k1 through the admin URL", func(t *testing.T) {
		if _, err := ctlRun(t, g, "mcp", "authorize", "secure"); err == nil {
			t.Error("ctl mcp authorize without --tenant worked on a per-tenant server")
		}
		out, err := ctlRun(t, g, "mcp", "authorize", "secure", "--tenant", "key:k1")
		authURL := regexp.MustCompile(`(?m)^http://\S+$`).FindString(out)
		if err != nil || authURL == "" || !strings.Contains(authURL, "code_challenge_method=S256") || !strings.Contains(authURL, "resource=") {
			t.Fatalf("ctl mcp authorize: %v\n%s", err, out)
		}
		status, page := browse(t, authURL)
		if status != http.StatusOK || !strings.Contains(page, "llmgw is authorised") || !strings.Contains(page, "key k1") {
			t.Fatalf("the callback page: %d %s", status, page)
		}
		if status, page := browse(t, authURL); status == http.StatusOK {
			t.Errorf("the same authorization URL worked twice: %s", page)
		}
		select {
		case <-changed:
		case <-time.After(15 * time.Second):
			t.Error("k1's open session got no tools/list_changed after authorising")
		}
		waitFor(t, 15*time.Second, "secure's tools for k1", func() bool { return hasSecure(k1) })
		if out, isErr, err := callText(k1, "secure__add", map[string]any{"a": 2, "b": 3}); err != nil || isErr || out != "5" {
			t.Errorf("k1 secure.add = %q, %v, %v", out, isErr, err)
		}
		whoami(k1, "secure__whoami")
		var list []llmmcp.ServerStatus
		g.adminGet("/llm/mcp/servers", &list)
		for _, st := range list {
			if st.Name == "secure" && (!st.Up || st.OAuth != "per_tenant" || !slices.Contains(st.Tools, "secure__echo") ||
				len(st.Tenants) != 1 || st.Tenants[0].Name != "k1" || !st.Tenants[0].Up) {
				t.Errorf("GET /llm/mcp/servers shows secure as %+v", st)
			}
		}
	})
	t.Run("k2 is still not authorised", func(t *testing.T) {
		if hasSecure(k2) {
			t.Errorf("k2 lists secure's tools: %v", toolNames(t, k2))
		}
		out, isErr, err := callText(k2, "secure__echo", map[string]any{"text": "hi"})
		if err != nil || !isErr || !strings.Contains(out, "needs OAuth authorisation for key k2") || !strings.Contains(out, "--tenant key:k2") {
			t.Errorf("k2 calling secure.echo: %q, isError %v, %v", out, isErr, err)
		}
	})
	t.Run("shared tokens: one authorisation for everyone", func(t *testing.T) {
		out, isErr, err := callText(k2, "team__echo", map[string]any{"text": "hi"})
		if err != nil || !isErr || !strings.Contains(out, `mcp server "team" needs OAuth authorisation`) || !strings.Contains(out, "llmgw ctl mcp authorize team'") {
			t.Errorf("k2 calling team.echo before authorising: %q, isError %v, %v", out, isErr, err)
		}
		if _, err := ctlRun(t, g, "mcp", "authorize", "team", "--tenant", "key:k2"); err == nil {
			t.Error("ctl mcp authorize --tenant worked on a shared server")
		}
		out, err = ctlRun(t, g, "mcp", "authorize", "team")
		authURL := regexp.MustCompile(`(?m)^http://\S+$`).FindString(out)
		if err != nil || authURL == "" {
			t.Fatalf("ctl mcp authorize team: %v\n%s", err, out)
		}
		if status, page := browse(t, authURL); status != http.StatusOK {
			t.Fatalf("the callback page: %d %s", status, page)
		}
		for _, c := range []*mcp.ClientSession{k1, k2} {
			waitFor(t, 15*time.Second, "team's tools", func() bool { return slices.Contains(toolNames(t, c), "team__echo") })
		}
		if a, b := whoami(k1, "team__whoami"), whoami(k2, "team__whoami"); a != b {
			t.Error("k1 and k2 reach a shared server with different tokens")
		}
	})
	t.Run("expired access tokens are refreshed", func(t *testing.T) {
		first := whoami(k1, "secure__whoami")
		end := time.Now().Add(5 * time.Second) // the tokens last 2s
		for time.Now().Before(end) {
			if out, isErr, err := callText(k1, "secure__echo", map[string]any{"text": "again"}); err != nil || isErr || out != "again" {
				t.Fatalf("a call while tokens expire: %q, %v, %v", out, isErr, err)
			}
			time.Sleep(250 * time.Millisecond)
		}
		if last := whoami(k1, "secure__whoami"); last == first {
			t.Error("the upstream still sees the first access token after 5s of 2s tokens")
		}
		var st llmmcp.AuthStatus
		g.adminGet("/llm/mcp/servers/secure/authorization", &st)
		if len(st.Tenants) != 1 || st.Tenants[0].Name != "k1" || st.Tenants[0].State != "authorized" || st.Tenants[0].Refreshes < 2 || !st.Tenants[0].HasRefreshToken {
			t.Errorf("authorization state: %+v", st)
		}
	})
	noTokens := func(t *testing.T, where, text string) {
		t.Helper()
		for _, tok := range seenTokens {
			if strings.Contains(text, tok) {
				t.Errorf("an access token is in %s", where)
			}
		}
		if regexp.MustCompile(`\b(at|rt)-[A-Z2-7]{20,}`).MatchString(text) {
			t.Errorf("a token value is in %s:\n%s", where, text)
		}
	}
	t.Run("admin output holds no token", func(t *testing.T) {
		for _, p := range []string{"/llm/mcp/servers", "/llm/mcp/servers/secure/authorization", "/llm/mcp/servers/team/authorization",
			"/llm/mcp/servers/m2m/authorization", "/metrics"} {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", g.admin, p))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			noTokens(t, p, string(raw))
			if p == "/metrics" && !strings.Contains(string(raw), `llmgw_mcp_oauth_tenants{server="secure",state="authorized"} 1`) {
				t.Errorf("/metrics does not count k1's authorisation of secure")
			}
		}
		out, err := ctlRun(t, g, "mcp", "authorization", "secure")
		if err != nil || !regexpLine(out, "key:k1", "authorized") {
			t.Errorf("ctl mcp authorization: %v\n%s", err, out)
		}
		noTokens(t, "ctl mcp authorization", out)
		noTokens(t, "llmgw's logs", g.logs.String())
		if strings.Contains(g.logs.String(), "s3cret-m2m") {
			t.Error("the client secret is in llmgw's logs")
		}
	})
	t.Run("reload keeps the tokens", func(t *testing.T) {
		write("timeout 30s") // the server's config changes: new sessions, same tokens
		out, err := exec.Command(binary, "reload", "--config", cfgPath, "--address", fmt.Sprintf("127.0.0.1:%d", g.admin)).CombinedOutput()
		if err != nil {
			t.Fatalf("reload: %v\n%s", err, out)
		}
		c := mcpClient(t, url, "secret-1", false, nil)
		waitFor(t, 15*time.Second, "secure's tools for k1 after the reload", func() bool { return hasSecure(c) })
		whoami(c, "secure__whoami")
		if hasSecure(mcpClient(t, url, "secret-2", false, nil)) {
			t.Error("after the reload k2 lists secure's tools")
		}
	})
	t.Run("restart keeps the tokens", func(t *testing.T) {
		g.stop()
		time.Sleep(2500 * time.Millisecond) // the access token expires meanwhile
		g.start()
		c := mcpClient(t, url, "secret-1", false, nil)
		waitFor(t, 15*time.Second, "secure's tools for k1 after a restart", func() bool { return hasSecure(c) })
		whoami(c, "secure__whoami")
		whoami(mcpClient(t, url, "secret-2", false, nil), "m2m__whoami")
		noTokens(t, "llmgw's logs", g.logs.String())
	})
	t.Run("deauthorize", func(t *testing.T) {
		out, err := ctlRun(t, g, "mcp", "deauthorize", "secure", "--tenant", "key:k1")
		if err != nil || !strings.Contains(out, "forgotten") {
			t.Fatalf("ctl mcp deauthorize: %v\n%s", err, out)
		}
		c := mcpClient(t, url, "secret-1", false, nil)
		waitFor(t, 10*time.Second, "secure's tools to go from k1", func() bool { return !hasSecure(c) })
		out, isErr, err := callText(c, "secure__echo", map[string]any{"text": "x"})
		if err != nil || !isErr || !strings.Contains(out, "needs OAuth authorisation for key k1") {
			t.Errorf("k1 after deauthorize: %q, %v, %v", out, isErr, err)
		}
	})
}
