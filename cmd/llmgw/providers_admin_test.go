package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// TestProvidersLiveState runs the real binary with a model served by two
// stand-in providers (httptest servers standing in for paid outside
// providers; none is called), the first answering 429 with Retry-After:
// 30. After one request, GET /llm/providers/models/{name} on an
// llm_admin site shows the first resting for about 30s because of the
// 429 and the second ready with its time to first byte; llmgw ctl
// providers shows the same; an unknown model is a 404 saying where the
// list is; a tenant admin is refused; no provider key is in an answer or
// the logs.
func TestProvidersLiveState(t *testing.T) {
	first, second := newStandinProvider(t, "first"), newStandinProvider(t, "second")
	first.limited.Store(30)
	outside := func(name string, p *standinProvider) string {
		return "\t\t\tprovider " + name + " {\n\t\t\t\tengine openai\n\t\t\t\toption base_url " + p.url() +
			"\n\t\t\t\toption probe_interval 1s\n\t\t\t\tmodel " + name + "-model\n\t\t\t\tkey sk-standin-" + name + "-4242\n\t\t\t}\n"
	}
	llmBlock := "\t\tmodel ext {\n\t\t\tpolicy first\n" + outside("first", first) + outside("second", second) + "\t\t}\n" +
		"\t\tmodel plain {\n\t\t\tengine sim\n\t\t\tmin 0\n\t\t}\n" +
		"\t\torg acme {\n\t\t\tteam research {\n\t\t\t\tproject alpha {\n\t\t\t\t\tkey k1 " + tenancy.HashKey("secret-1") + "\n\t\t\t\t}\n\t\t\t}\n\t\t}"
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{}),
		routes: fmt.Sprintf("\troute /llm/* {\n\t\tllm_admin {\n\t\t\ttoken watcher %s viewer\n\t\t\ttoken alpha-lead %s tenant_admin project acme/research/alpha\n\t\t}\n\t}",
			tenancy.HashKey("watcher-token"), tenancy.HashKey("lead-token"))}
	g.writeConfig(llmBlock, "")
	g.start()
	g.readyReplicas("ext", 1) // the first provider: ext takes its engine
	g.readyReplicas("ext/second", 1)

	asked := time.Now()
	if code, prov := askProvider(t, g, "ext"); code != 200 || prov != "second; reason=failover" {
		t.Fatalf("got %d %q, want 200 from second; reason=failover after first's 429", code, prov)
	}
	var answers strings.Builder // every answer, for keys
	code, _, body := siteCall(t, g, "watcher-token", "GET", "/llm/providers/models/ext", "")
	answers.WriteString(body)
	var m llmapi.ProvidersModel
	if code != 200 || json.Unmarshal([]byte(body), &m) != nil || len(m.Providers) != 2 {
		t.Fatalf("GET /llm/providers/models/ext as a viewer: got %d %s", code, body)
	}
	checkAgainstSchema(t, g, "/llm/providers/models/{name}", body)
	p1, p2 := m.Providers[0], m.Providers[1]
	if until := p1.RestingUntil.Sub(asked); p1.Name != "first" || p1.State != "resting" || p1.RestReason != "429" || until < 29*time.Second || until > 32*time.Second {
		t.Errorf("first: got %+v, want resting for a 429 until about 30s after the request", p1)
	}
	if p2.Name != "second" || p2.State != "ready" || p2.TTFTMS == nil || *p2.TTFTMS <= 0 || p2.LastSampled.IsZero() || !p2.RestingUntil.IsZero() {
		t.Errorf("second: got %+v, want ready with a time to first byte", p2)
	}
	if m.Policy != "first" || p1.Model != "ext" || p1.SelfHosted {
		t.Errorf("got policy %q and first %+v, want policy first, first served by ext, outside", m.Policy, p1)
	}
	var list []llmapi.ProvidersModel
	if code, _, body := siteCall(t, g, "watcher-token", "GET", "/llm/providers/models", ""); code != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list) != 1 || list[0].Name != "ext" {
		t.Errorf("GET /llm/providers/models: got %d %s, want ext alone", code, body)
	} else {
		checkAgainstSchema(t, g, "/llm/providers/models", body)
	}

	// Refusals: unknown, not a model with providers, a tenant admin, no
	// token.
	for _, c := range []struct {
		token, path string
		status      int
		why         string
	}{
		{"watcher-token", "/llm/providers/models/nope", 404, `no model "nope" here; GET /llm/providers/models lists`},
		{"watcher-token", "/llm/providers/models/plain", 404, `model "plain" has no providers`},
		{"lead-token", "/llm/providers/models", 403, ""},
		{"lead-token", "/llm/providers/models/ext", 403, ""},
		{"", "/llm/providers/models/ext", 401, ""},
	} {
		code, _, body := siteCall(t, g, c.token, "GET", c.path, "")
		answers.WriteString(body)
		var e struct{ Error string }
		if code != c.status || json.Unmarshal([]byte(body), &e) != nil || e.Error == "" || !strings.Contains(e.Error, c.why) {
			t.Errorf("GET %s with %q: got %d %s, want %d with an error saying %q", c.path, c.token, code, body, c.status, c.why)
		}
	}

	ctl := func(args ...string) (string, error) {
		cmd := exec.Command(binary, append([]string{"ctl", "--url", g.base}, args...)...)
		cmd.Env = append(os.Environ(), "LLMGW_ADMIN_TOKEN=watcher-token", "LLMGW_ADMIN_URL=", "LLMGW_ADMIN=")
		out, err := cmd.CombinedOutput()
		answers.Write(out)
		return string(out), err
	}
	out, err := ctl("providers")
	lines := strings.Split(out, "\n")
	if err != nil || len(lines) < 3 || !strings.HasPrefix(lines[0], "MODEL  PROVIDER  STATE    TTFT") ||
		!strings.Contains(lines[1], "ext    first     resting") || !strings.Contains(lines[1], ", 429)") ||
		!strings.Contains(lines[2], "ext    second    ready    ") || strings.Contains(lines[2], "ready    -") {
		t.Errorf("llmgw ctl providers: %v\n%s", err, out)
	}
	out, err = ctl("providers", "ext", "-o", "json")
	if err != nil || json.Unmarshal([]byte(out), &m) != nil || m.Providers[0].State != "resting" || m.Providers[1].TTFTMS == nil {
		t.Errorf("llmgw ctl providers ext -o json: %v\n%s", err, out)
	}
	if out, err = ctl("providers", "nope"); err == nil || !strings.Contains(out, `no model "nope" here`) {
		t.Errorf("llmgw ctl providers nope: got %v\n%s, want a failure naming the model", err, out)
	}
	for _, secret := range []string{"sk-standin-first-4242", "sk-standin-second-4242"} {
		if strings.Contains(answers.String(), secret) || strings.Contains(g.logs.String(), secret) {
			t.Errorf("the key %s is in an answer or the logs", secret)
		}
	}
}
