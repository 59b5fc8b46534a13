package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// adminSite runs llmgw with the llm admin routes on its site, behind
// llm_admin with four tokens: root (admin), ops (operator), watcher
// (viewer, its hash from the environment) and alpha-lead (tenant admin of
// project acme/research/alpha, which may use sim-* models).
func adminSite(t *testing.T) *gateway {
	t.Helper()
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}}
	t.Setenv("LLMGW_TEST_WATCHER_SHA256", tenancy.HashKey("watcher-token"))
	cfg := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	storage file_system %s
	llm {
		model sim-chat {
			engine sim
			option max_tokens 10
		}
		model other {
			engine sim
			min 0
		}
		org acme {
			team research {
				project alpha {
					models sim-*
					key k1 %s
				}
				project beta {
					key k2 %s
				}
			}
		}
	}
}

:%d {
	route /v1/* {
		llm_quota
		llm_router
	}
	route /llm/* {
		llm_admin {
			token root %s admin
			token ops %s operator
			token watcher {env.LLMGW_TEST_WATCHER_SHA256} viewer
			token alpha-lead %s tenant_admin project acme/research/alpha
		}
	}
}
`, g.admin, filepath.Join(g.dir, "storage"), tenancy.HashKey("secret-1"), tenancy.HashKey("secret-2"), g.http,
		tenancy.HashKey("root-token"), tenancy.HashKey("ops-token"), tenancy.HashKey("lead-token"))
	if err := os.WriteFile(filepath.Join(g.dir, "Caddyfile"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start()
	return g
}

// siteCall sends an admin request to the site with a bearer token (none
// when empty) and returns the status, headers and body.
func siteCall(t *testing.T, g *gateway, token, method, path, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, g.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(raw)
}

func keyIDs(t *testing.T, body string) []string {
	t.Helper()
	var keys []llmapi.KeyInfo
	if err := json.Unmarshal([]byte(body), &keys); err != nil {
		t.Fatalf("keys: %v: %s", err, body)
	}
	var ids []string
	for _, k := range keys {
		ids = append(ids, k.ID)
	}
	return ids
}

func TestAdminSiteRoles(t *testing.T) {
	g := adminSite(t)

	// No credential: 401 saying how to authenticate.
	code, h, body := siteCall(t, g, "", "GET", "/llm/models", "")
	if code != 401 || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") || !strings.Contains(body, `send \"Authorization: Bearer <token>\"`) {
		t.Errorf("no token: got %d %q %s, want 401 with WWW-Authenticate: Bearer", code, h.Get("WWW-Authenticate"), body)
	}
	if code, _, body = siteCall(t, g, "", "POST", "/llm/keys", `{"project":"acme/research/alpha"}`); code != 401 {
		t.Errorf("no token, POST /llm/keys: got %d %s, want 401", code, body)
	}

	// A viewer reads, and is refused a change with the role it needs.
	code, _, body = siteCall(t, g, "watcher-token", "GET", "/llm/models", "")
	if code != 200 || !strings.Contains(body, `"sim-chat"`) {
		t.Errorf("viewer GET /llm/models: got %d %s", code, body)
	}
	code, _, body = siteCall(t, g, "watcher-token", "POST", "/llm/models/other/stop", "")
	if code != 403 || !strings.Contains(body, "operator role") {
		t.Errorf("viewer stopping a model: got %d %s, want 403 naming the operator role", code, body)
	}
	code, _, body = siteCall(t, g, "watcher-token", "POST", "/llm/models/sim-chat/retry", "")
	if code != 403 || !strings.Contains(body, "operator role") {
		t.Errorf("viewer retrying a model's start: got %d %s, want 403 naming the operator role", code, body)
	}

	// An operator scales and stops models, but creates no key.
	code, _, body = siteCall(t, g, "ops-token", "POST", "/llm/models", `{"name":"rt","engine":"sim","scaling":{"min":0,"max":1}}`)
	if code != 200 && code != 201 {
		t.Fatalf("operator adding a model: got %d %s", code, body)
	}
	if code, _, body = siteCall(t, g, "ops-token", "POST", "/llm/models/rt/scale", `{"min":0,"max":2}`); code != 200 || !strings.Contains(body, `"max":2`) {
		t.Errorf("operator scaling a model: got %d %s", code, body)
	}
	if code, _, body = siteCall(t, g, "ops-token", "POST", "/llm/models/other/stop", ""); code != 200 || !strings.Contains(body, "stopped") {
		t.Errorf("operator stopping a model: got %d %s", code, body)
	}
	if code, _, body = siteCall(t, g, "ops-token", "POST", "/llm/models/other/start", ""); code != 200 {
		t.Errorf("operator starting a model: got %d %s", code, body)
	}
	if code, _, body = siteCall(t, g, "ops-token", "POST", "/llm/models/sim-chat/retry", ""); code != 409 || !strings.Contains(body, "not failing to start") {
		t.Errorf("operator retrying a model that is not failing: got %d %s, want 409", code, body)
	}
	code, _, body = siteCall(t, g, "ops-token", "POST", "/llm/keys", `{"project":"acme/research/beta"}`)
	if code != 403 || !strings.Contains(body, "admin role") {
		t.Errorf("operator creating a key: got %d %s, want 403 naming the admin role", code, body)
	}

	// An admin creates a key, which works on /v1; a client's own actor
	// header does not reach the audit log.
	code, _, body = siteCall(t, g, "root-token", "POST", "/llm/keys", `{"project":"acme/research/beta","id":"beta-ci"}`, "X-Llmgw-Actor", "forged-actor")
	var created llmapi.KeyInfo
	if code != 201 || json.Unmarshal([]byte(body), &created) != nil || created.Secret == "" {
		t.Fatalf("admin creating a key: got %d %s", code, body)
	}
	if _, e := chatErr(keyClient(g, created.Secret), "sim-chat"); e != nil {
		t.Fatalf("the key made through llm_admin does not work on /v1: %+v", e)
	}

	// A tenant admin of alpha sees only alpha's keys and models, and
	// cannot reach beta.
	code, _, body = siteCall(t, g, "lead-token", "GET", "/llm/keys", "")
	if ids := keyIDs(t, body); code != 200 || strings.Join(ids, ",") != "k1" {
		t.Errorf("tenant admin listing keys: got %d %v, want only k1", code, ids)
	}
	code, _, body = siteCall(t, g, "lead-token", "POST", "/llm/keys", `{"project":"acme/research/beta","id":"sneaky"}`)
	if code != 403 || !strings.Contains(body, "outside project acme/research/alpha") {
		t.Errorf("tenant admin creating a key in beta: got %d %s, want 403", code, body)
	}
	code, _, body = siteCall(t, g, "lead-token", "POST", "/llm/keys", `{"project":"acme/research/alpha"}`)
	var alpha2 llmapi.KeyInfo
	if code != 201 || json.Unmarshal([]byte(body), &alpha2) != nil || alpha2.Secret == "" {
		t.Errorf("tenant admin creating a key in alpha: got %d %s", code, body)
	}
	for _, req := range [][2]string{{"DELETE", "/llm/keys/k2"}, {"POST", "/llm/keys/beta-ci/rotate"}, {"GET", "/llm/keys/k2"},
		{"GET", "/llm/usage?project=acme/research/beta"}, {"GET", "/llm/usage?key=k2"}, {"GET", "/llm/usage?team=acme/research"},
		{"GET", "/llm/models/other"}, {"POST", "/llm/models/sim-chat/stop"}, {"POST", "/llm/models/sim-chat/retry"}, {"GET", "/llm/nodes"}} {
		if code, _, body = siteCall(t, g, "lead-token", req[0], req[1], ""); code != 403 {
			t.Errorf("tenant admin %s %s: got %d %s, want 403", req[0], req[1], code, body)
		}
	}
	if code, _, body = siteCall(t, g, "lead-token", "GET", "/llm/usage?project=acme/research/alpha", ""); code != 200 {
		t.Errorf("tenant admin reading its usage: got %d %s", code, body)
	}
	if code, _, body = siteCall(t, g, "lead-token", "POST", "/llm/keys/"+alpha2.ID+"/rotate", ""); code != 200 {
		t.Errorf("tenant admin rotating its key: got %d %s", code, body)
	}
	code, _, body = siteCall(t, g, "lead-token", "GET", "/llm/models", "")
	var models []llmapi.ModelStatus
	if code != 200 || json.Unmarshal([]byte(body), &models) != nil || len(models) != 1 || models[0].Name != "sim-chat" {
		t.Errorf("tenant admin listing models: got %d %s, want only sim-chat", code, body)
	}

	// Every change carries the token's identity in the audit log.
	for _, want := range [][2]string{{"key created", "token:root"}, {"key created", "token:alpha-lead"}, {"key rotated", "token:alpha-lead"}} {
		waitFor(t, 5*time.Second, fmt.Sprintf("%q by %s in the audit log", want[0], want[1]), func() bool {
			return auditLine(g.logs.String(), want[0], want[1])
		})
	}
	t.Logf("audit:\n%s", grepLines(g.logs.String(), `"actor"`))
	if strings.Contains(g.logs.String(), "forged-actor") {
		t.Error("a client-sent X-Llmgw-Actor reached the log")
	}
	if !strings.Contains(g.logs.String(), `"actor":"token:ops"`) {
		t.Error("the operator's changes are not attributed to token:ops")
	}
	if strings.Contains(g.logs.String(), "root-token") || strings.Contains(g.logs.String(), created.Secret) {
		t.Error("a token or secret is in the log")
	}
}

// auditLine reports whether some log line is the audit message msg with
// the actor.
func auditLine(logs, msg, actor string) bool {
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, `"msg":"`+msg+`"`) && strings.Contains(line, `"actor":"`+actor+`"`) {
			return true
		}
	}
	return false
}

func TestAdminSiteCtlAndRateLimit(t *testing.T) {
	g := adminSite(t)
	site := fmt.Sprintf("http://127.0.0.1:%d/llm", g.http)
	ctl := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(binary, append([]string{"ctl"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := ctl(nil, "--url", site, "--token", "watcher-token", "models")
	if err != nil || !regexpLine(out, "sim-chat", "sim") {
		t.Errorf("ctl --url --token models: %v\n%s", err, out)
	}
	if out, err = ctl(nil, "--url", site, "--token", "watcher-token", "model", "stop", "other"); err == nil || !strings.Contains(out, "operator role") {
		t.Errorf("ctl as a viewer stopping a model: %v\n%s", err, out)
	}
	env := []string{"LLMGW_ADMIN_URL=" + site, "LLMGW_ADMIN_TOKEN=ops-token"}
	if out, err = ctl(env, "model", "stop", "other"); err != nil || !strings.Contains(out, "model other: stopped") {
		t.Errorf("ctl with LLMGW_ADMIN_URL and LLMGW_ADMIN_TOKEN: %v\n%s", err, out)
	}
	if out, err = ctl(nil, "--url", site, "--token", "root-token", "keys", "create", "--project", "acme/research/alpha", "--id", "from-ctl"); err != nil || !strings.Contains(out, "secret: ") {
		t.Errorf("ctl keys create as admin: %v\n%s", err, out)
	}
	if out, err = ctl(nil, "--url", site, "models"); err == nil || !strings.Contains(out, "needs a token") {
		t.Errorf("ctl without a token: %v\n%s", err, out)
	}
	waitFor(t, 5*time.Second, "the ctl change attributed to token:ops", func() bool {
		return auditLine(g.logs.String(), "model stopped", "token:ops") || strings.Contains(g.logs.String(), `"actor":"token:ops"`)
	})

	// Wrong tokens: ten answer 401, then even a right one answers 429
	// with Retry-After, while the local admin endpoint is untouched.
	for i := range 10 {
		if code, _, body := siteCall(t, g, fmt.Sprintf("guess-%d", i), "GET", "/llm/models", ""); code != 401 || !strings.Contains(body, "not valid") {
			t.Fatalf("wrong token %d: got %d %s, want 401", i+1, code, body)
		}
	}
	code, h, body := siteCall(t, g, "root-token", "GET", "/llm/models", "")
	if code != 429 || h.Get("Retry-After") == "" || !strings.Contains(body, "try again") {
		t.Errorf("after 10 wrong tokens: got %d Retry-After %q %s, want 429", code, h.Get("Retry-After"), body)
	}
	if len(g.models()) == 0 {
		t.Error("the local admin endpoint stopped answering")
	}
}

// TestAdminSiteKeyPaging pages through GET /llm/keys: by limit and after,
// with a filter, and as a tenant admin, who sees only its keys on full
// pages whatever it asks for.
func TestAdminSiteKeyPaging(t *testing.T) {
	g := adminSite(t)
	for i := 1; i <= 5; i++ {
		for _, p := range []string{"alpha", "beta"} {
			if code, _, body := siteCall(t, g, "root-token", "POST", "/llm/keys", fmt.Sprintf(`{"project":"acme/research/%s","id":"%s-%02d"}`, p, p[:1], i)); code != 201 {
				t.Fatalf("creating a key: got %d %s", code, body)
			}
		}
	}
	type page struct {
		Keys  []struct{ ID, Project string }
		Next  string
		Total int
	}
	get := func(token, query string) page {
		t.Helper()
		code, _, body := siteCall(t, g, token, "GET", "/llm/keys?"+query, "")
		var p page
		if code != 200 || json.Unmarshal([]byte(body), &p) != nil {
			t.Fatalf("GET /llm/keys?%s: got %d %s", query, code, body)
		}
		return p
	}
	// walk follows next from the first page and returns the ids by page.
	walk := func(token, query string) (pages [][]string, total int) {
		t.Helper()
		after := ""
		for range 20 {
			p := get(token, query+"&after="+after)
			var ids []string
			for _, k := range p.Keys {
				ids = append(ids, k.ID)
			}
			pages, total = append(pages, ids), p.Total
			if p.Next == "" {
				return pages, total
			}
			after = p.Next
		}
		t.Fatalf("GET /llm/keys?%s: next never ends", query)
		return nil, 0
	}
	pages, total := walk("root-token", "limit=4")
	if got := fmt.Sprint(pages); got != "[[a-01 a-02 a-03 a-04] [a-05 b-01 b-02 b-03] [b-04 b-05 k1 k2]]" || total != 12 {
		t.Errorf("an admin's pages of 4: got %s, total %d", got, total)
	}
	if p := get("root-token", "q=B-0&limit=3"); p.Total != 5 || len(p.Keys) != 3 || p.Next != "b-03" {
		t.Errorf("filtered by id: got %+v", p)
	}
	if p := get("root-token", "q=research/alpha"); p.Total != 6 || len(p.Keys) != 6 || p.Next != "" {
		t.Errorf("filtered by project: got %+v", p)
	}
	if code, _, body := siteCall(t, g, "root-token", "GET", "/llm/keys?limit=0", ""); code != 400 || !strings.Contains(body, "from 1 to 1000") {
		t.Errorf("limit=0: got %d %s, want 400", code, body)
	}
	// Without paging parameters the answer is the whole list, as before.
	var all []struct{ ID string }
	if code, _, body := siteCall(t, g, "root-token", "GET", "/llm/keys", ""); code != 200 || json.Unmarshal([]byte(body), &all) != nil || len(all) != 12 {
		t.Errorf("GET /llm/keys without paging: got %d %s", code, body)
	}

	// The tenant admin of alpha: full pages of its keys only, also when
	// it asks under another project or filters for another's keys.
	pages, total = walk("lead-token", "limit=2")
	if got := fmt.Sprint(pages); got != "[[a-01 a-02] [a-03 a-04] [a-05 k1]]" || total != 6 {
		t.Errorf("a tenant admin's pages of 2: got %s, total %d", got, total)
	}
	pages, total = walk("lead-token", "limit=2&under=acme/research/beta")
	if got := fmt.Sprint(pages); got != "[[a-01 a-02] [a-03 a-04] [a-05 k1]]" || total != 6 {
		t.Errorf("a tenant admin asking under beta: got %s, total %d", got, total)
	}
	if p := get("lead-token", "q=b-"); len(p.Keys) != 0 || p.Total != 0 {
		t.Errorf("a tenant admin filtering for beta's keys: got %+v", p)
	}
	if p := get("lead-token", "limit=1&after=a-05"); len(p.Keys) != 1 || p.Keys[0].ID != "k1" || p.Keys[0].Project != "acme/research/alpha" || p.Next != "" {
		t.Errorf("a tenant admin's page after a-05: got %+v", p)
	}
}
