package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// TestAdminLockoutEveryRoute guesses credentials on every route of
// llm_admin that checks one, each from its own client address (the site
// trusts X-Forwarded-For from loopback): after max_failures (4) wrong
// guesses the client is blocked, and even the right token then answers
// 429 with Retry-After, on that route and on every other, so the answers
// cannot tell a right guess from a wrong one.
func TestAdminLockoutEveryRoute(t *testing.T) {
	g := sessionSite(t, filepath.Join(t.TempDir(), "storage"), "")
	bogus := "llmgw_session=" + strings.Repeat("Z", 43)
	guesses := []struct {
		name                string
		token, method, path string
		body                string
		hdr                 []string
	}{
		{name: "bearer on /llm/auth/lang", token: "wrong", method: "POST", path: "/llm/auth/lang", body: `{"lang":"de"}`},
		{name: "login token", method: "POST", path: "/llm/auth/login", body: `{"method":"token","token":"wrong"}`},
		{name: "bearer on an admin route", token: "wrong", method: "GET", path: "/llm/models"},
		{name: "cookie on an admin route", method: "GET", path: "/llm/models", hdr: []string{"Cookie", bogus}},
		{name: "cookie on /llm/auth/session", method: "GET", path: "/llm/auth/session", hdr: []string{"Cookie", bogus}},
		{name: "cookie on /llm/auth/logout", method: "POST", path: "/llm/auth/logout", hdr: []string{"Cookie", bogus}},
		{name: "cookie on /llm/auth/lang", method: "POST", path: "/llm/auth/lang", body: `{"lang":"de"}`, hdr: []string{"Cookie", bogus}},
	}
	for i, c := range guesses {
		ip := fmt.Sprintf("203.0.113.%d", i+1)
		hdr := append([]string{"X-Forwarded-For", ip}, c.hdr...)
		for n := 1; n <= 4; n++ {
			if code, _, body := siteCall(t, g, c.token, c.method, c.path, c.body, hdr...); code != 401 {
				t.Errorf("%s: wrong guess %d: got %d %s, want 401", c.name, n, code, body)
			}
		}
		right := []struct{ method, path, body string }{
			{"POST", "/llm/auth/lang", `{"lang":"de"}`}, {"GET", "/llm/models", ""}, {"GET", "/llm/auth/methods", ""},
		}
		for _, r := range right {
			code, h, body := siteCall(t, g, "ops-token", r.method, r.path, r.body, "X-Forwarded-For", ip)
			retry, _ := strconv.Atoi(h.Get("Retry-After"))
			if code != 429 || retry < 1 || !strings.Contains(body, "too many requests with a wrong token") {
				t.Errorf("%s: then the right token on %s %s: got %d (Retry-After %q) %s, want 429 with Retry-After saying why",
					c.name, r.method, r.path, code, h.Get("Retry-After"), body)
			}
		}
		code, _, body, _ := login(t, g, `{"method":"token","token":"ops-token"}`, "X-Forwarded-For", ip)
		if code != 429 {
			t.Errorf("%s: then signing in with the right token: got %d %s, want 429", c.name, code, body)
		}
	}
	// Another client is not blocked.
	if code, _, body := siteCall(t, g, "ops-token", "POST", "/llm/auth/lang", `{"lang":"de"}`, "X-Forwarded-For", "198.51.100.7"); code != 204 {
		t.Errorf("another client with the right token: got %d %s, want 204", code, body)
	}
}

// TestAdminIdentifierRule sends the identifiers an attacker would: ids
// of hundreds of kilobytes and megabytes, and ids with NUL, ESC and CR,
// as key ids, in key paths and as tenancy names. Each is refused with a
// 400 that states the rule, and nothing is created.
func TestAdminIdentifierRule(t *testing.T) {
	g := adminSite(t)
	const rule = "an id is 1 to 128 bytes of printable UTF-8"
	cases := []struct {
		name, token, method, path, body, want string
	}{
		{"8 MiB key id", "root-token", "POST", "/llm/keys", `{"project":"acme/research/beta","id":"` + strings.Repeat("k", 8<<20) + `"}`, "at most 65536 bytes"},
		{"900 KB key id from a tenant admin", "lead-token", "POST", "/llm/keys", `{"project":"acme/research/alpha","id":"` + strings.Repeat("k", 900<<10) + `"}`, "does not choose a key's id"},
		{"200-byte key id", "root-token", "POST", "/llm/keys", `{"project":"acme/research/beta","id":"` + strings.Repeat("k", 200) + `"}`, "is 200 bytes long; " + rule},
		{"NUL in a key id", "root-token", "POST", "/llm/keys", `{"project":"acme/research/beta","id":"a\u0000b"}`, "character U+0000; " + rule},
		{"ESC in a key id", "root-token", "POST", "/llm/keys", `{"project":"acme/research/beta","id":"a\u001b[2Jb"}`, "U+001B; " + rule},
		{"CR in a key id", "root-token", "POST", "/llm/keys", `{"project":"acme/research/beta","id":"a\rb"}`, "U+000D; " + rule},
		{"ESC in a key path", "root-token", "DELETE", "/llm/keys/a%1Bb", "", "has a control character; no id or name has one (" + rule},
		{"ESC in an MCP server name", "root-token", "DELETE", "/llm/mcp/servers/a%1Bb", "", "has a control character; no id or name has one (" + rule},
		{"long key path", "root-token", "POST", "/llm/keys/" + strings.Repeat("k", 300) + "/rotate", "", "is 300 bytes long; " + rule},
		{"long key path from a tenant admin", "lead-token", "GET", "/llm/keys/" + strings.Repeat("k", 300), "", "is 300 bytes long; " + rule},
		{"8 MiB cache purge", "root-token", "POST", "/llm/cache/purge", `{"model":"` + strings.Repeat("m", 8<<20) + `"}`, "at most 65536 bytes"},
		{"ESC in an org name", "root-token", "POST", "/llm/tenants/orgs", `{"name":"ev\u001bil"}`, "U+001B; " + rule},
		{"long project name", "root-token", "POST", "/llm/tenants/orgs/acme/teams/research/projects", `{"name":"` + strings.Repeat("p", 129) + `"}`, "is 129 bytes long; " + rule},
	}
	for _, c := range cases {
		code, _, body := siteCall(t, g, c.token, c.method, c.path, c.body)
		if code != 400 || !strings.Contains(body, c.want) || len(body) > 1000 {
			t.Errorf("%s: got %d %.300s, want 400 with %q", c.name, code, body, c.want)
		}
	}
	// On the admin endpoint too, the key routes check the rule themselves.
	for _, p := range []string{"/llm/keys/a%1Bb", "/llm/keys/" + strings.Repeat("k", 300) + "/rotate"} {
		code, body := adminDo(t, g, "POST", p, "")
		if code != 400 || !strings.Contains(string(body), rule) {
			t.Errorf("admin endpoint, POST %.60s: got %d %.300s, want 400 stating the rule", p, code, body)
		}
	}
	_, _, body := siteCall(t, g, "root-token", "GET", "/llm/keys", "")
	if ids := keyIDs(t, body); strings.Join(ids, ",") != "k1,k2" {
		t.Errorf("keys after the refused ids: %q, want only k1 and k2", ids)
	}
	// The rule allows ordinary ids.
	if code, _, body := siteCall(t, g, "root-token", "POST", "/llm/keys", `{"project":"acme/research/beta","id":"ci.bot_2-équipe"}`); code != 201 {
		t.Errorf("a valid id: got %d %s, want 201", code, body)
	}
}

// TestAdminTenantKeyIDsHidden: a tenant admin cannot tell whether
// another tenant holds a key id. Choosing an id answers the same
// whether it is free or held elsewhere, and naming a key of another
// tenant answers as naming one that does not exist.
func TestAdminTenantKeyIDsHidden(t *testing.T) {
	g := adminSite(t)
	taken, _, takenBody := siteCall(t, g, "lead-token", "POST", "/llm/keys", `{"project":"acme/research/alpha","id":"k2"}`)
	free, _, freeBody := siteCall(t, g, "lead-token", "POST", "/llm/keys", `{"project":"acme/research/alpha","id":"k-free"}`)
	if taken != 400 || taken != free || takenBody != freeBody || !strings.Contains(takenBody, `leave \"id\" out`) {
		t.Errorf("a tenant admin choosing k2 (held by beta): %d %s; choosing a free id: %d %s; want the same 400", taken, takenBody, free, freeBody)
	}
	code, _, body := siteCall(t, g, "lead-token", "POST", "/llm/keys", `{"project":"acme/research/alpha"}`)
	if code != 201 || !strings.Contains(body, `"id":"key-`) {
		t.Errorf("a tenant admin creating a key without an id: got %d %s, want 201 with an id llmgw chose", code, body)
	}
	for _, p := range []string{"/llm/keys/k2", "/llm/usage?key=k2"} {
		held, _, heldBody := siteCall(t, g, "lead-token", "GET", p, "")
		none, _, noneBody := siteCall(t, g, "lead-token", "GET", strings.Replace(p, "k2", "k9", 1), "")
		if held != 403 || none != 403 || strings.Replace(heldBody, "k2", "k9", 1) != noneBody {
			t.Errorf("GET %s (beta's key): %d %s; the same for an unknown key: %d %s; want the same 403", p, held, heldBody, none, noneBody)
		}
	}
	// An admin still names its keys.
	if code, _, body := siteCall(t, g, "root-token", "POST", "/llm/keys", `{"project":"acme/research/beta","id":"k2"}`); code != 409 {
		t.Errorf("an admin choosing a held id: got %d %s, want 409", code, body)
	}
}

// TestDuplicateKeyHashRefused: two configured keys with the same hash
// would make one secret both keys, billed to whichever came last; the
// config is refused, naming both.
func TestDuplicateKeyHashRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "Caddyfile")
	conf := fmt.Sprintf(`{
	admin off
	storage file_system %s
	llm {
		model sim-chat {
			engine sim
		}
		org acme {
			team research {
				project alpha {
					key k1 %s
				}
				project beta {
					key k2 %s
				}
			}
		}
	}
}
:0 {
	route /v1/* {
		llm_quota
		llm_router
	}
}
`, filepath.Join(dir, "storage"), tenancy.HashKey("same-secret"), strings.ToUpper(tenancy.HashKey("same-secret")))
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"validate", "run"} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary, verb, "--config", path)
		cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("llmgw %s accepted two keys with one hash:\n%s", verb, out)
		}
		want := `keys \"k1\" (project acme/research/alpha) and \"k2\" (project acme/research/beta) have the same sha256`
		if msg := errorLine(string(out)); !strings.Contains(msg, want) {
			t.Errorf("llmgw %s: got %q, want %q", verb, msg, want)
		}
	}
}
