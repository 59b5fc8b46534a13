package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// adminPut sends a PUT with body to an admin route.
func (g *gateway) adminPut(path, body string) (int, string) {
	g.t.Helper()
	req, _ := http.NewRequest("PUT", fmt.Sprintf("http://127.0.0.1:%d%s", g.admin, path), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestKeyLimitsChanged: a runtime key's limits are replaced through the
// admin API and ctl, take effect at the next request, and go away again.
func TestKeyLimitsChanged(t *testing.T) {
	g := startQuotaGateway(t, quotaModels+tenancyBlock("", "", "", ""), "")
	code, body := g.adminPost("/llm/keys", `{"project":"acme/research/alpha","id":"runner"}`)
	var k llmapi.KeyInfo
	if code != 201 || json.Unmarshal(body, &k) != nil || k.Secret == "" {
		t.Fatalf("create: %d %s", code, body)
	}
	c := keyClient(g, k.Secret)

	if code, out := g.adminPut("/llm/keys/runner/limits", `{"requests_per_minute":2}`); code != 200 || !strings.Contains(out, `"requests_per_minute":2`) {
		t.Fatalf("PUT limits: %d %s", code, out)
	}
	for i := range 2 {
		if _, e := chatErr(c, "sim-chat"); e != nil {
			t.Fatalf("request %d under the new limit: %v", i+1, e)
		}
	}
	_, e := chatErr(c, "sim-chat")
	if e == nil || e.StatusCode != 429 || !strings.Contains(e.Message, "limit of 2 requests per minute") {
		t.Fatalf("third request a minute with requests_per_minute 2: got %+v (%q), want 429", e, e.Message)
	}
	// Lifted through ctl: the next request passes.
	out, err := exec.Command(binary, "ctl", "--admin", fmt.Sprintf("127.0.0.1:%d", g.admin), "keys", "limits", "runner", "--clear").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "none of its own") {
		t.Fatalf("ctl keys limits --clear: %v %s", err, out)
	}
	if _, e := chatErr(c, "sim-chat"); e != nil {
		t.Fatalf("after the limits were removed: %v", e)
	}
	// Models: narrowed at runtime.
	out, err = exec.Command(binary, "ctl", "--admin", fmt.Sprintf("127.0.0.1:%d", g.admin), "keys", "limits", "runner", "--models", "other").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"models":["other"]`) {
		t.Fatalf("ctl keys limits --models: %v %s", err, out)
	}
	if _, e := chatErr(c, "sim-chat"); e == nil || e.StatusCode != 403 {
		t.Fatalf("a model outside the key's new list: got %+v, want 403", e)
	}
	// The key shows its own limits.
	var got llmapi.KeyInfo
	g.adminGet("/llm/keys/runner", &got)
	if got.Limits == nil || len(got.Limits.Models) != 1 {
		t.Errorf("GET /llm/keys/runner: %+v", got)
	}

	for _, tc := range []struct {
		path, body string
		code       int
		says       string
	}{
		{"/llm/keys/runner/limits", `{"requests_per_minute":-1}`, 400, "negative"},
		{"/llm/keys/runner/limits", `{"requests_per_minit":5}`, 400, "requests_per_minit"},
		{"/llm/keys/runner/limits", `{"budget_period":"week"}`, 400, "day or month"},
		{"/llm/keys/k1/limits", `{}`, 409, "config file"},
		{"/llm/keys/nobody/limits", `{}`, 404, "nobody"},
	} {
		if code, out := g.adminPut(tc.path, tc.body); code != tc.code || !strings.Contains(out, tc.says) {
			t.Errorf("PUT %s %s: got %d %s, want %d saying %q", tc.path, tc.body, code, out, tc.code, tc.says)
		}
	}
}
