package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/engines/standin"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// The key the stand-in provider takes; no answer of the gateway may show it.
const standinKey = "sk-standin-live-0123"

// startListingProvider runs a stand-in for a paid OpenAI-compatible
// provider (no paid provider is called): it lists its models at
// /v1/models for standinKey only, as providers do, and answers the rest
// as engines/standin does.
func startListingProvider(t *testing.T) string {
	t.Helper()
	s := standin.New(standin.Options{Delay: time.Millisecond})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			s.ServeHTTP(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+standinKey {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"standin-model","object":"model"}]}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// deadURL is a base URL nothing listens on.
func deadURL(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	return srv.URL + "/v1"
}

// waitModelState waits until the model's state is want and returns its
// status.
func waitModelState(t *testing.T, g *gateway, name, want string, timeout time.Duration) llmapi.ModelStatus {
	t.Helper()
	var m llmapi.ModelStatus
	waitFor(t, timeout, "model "+name+" "+want, func() bool {
		m = g.models()[name]
		return m.State == want
	})
	return m
}

// testModel answers POST /llm/models/<name>/test.
func testModel(t *testing.T, g *gateway, name string) llmapi.ModelTest {
	t.Helper()
	code, raw := adminDo(t, g, "POST", "/llm/models/"+name+"/test", "")
	if code != http.StatusOK {
		t.Fatalf("POST /llm/models/%s/test: %d %s", name, code, raw)
	}
	if strings.Contains(string(raw), standinKey) {
		t.Errorf("the test's answer shows the key: %s", raw)
	}
	var res llmapi.ModelTest
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestProviderHealth: an outside provider is probed; one that does not
// answer or refuses its key is shown failing with the reason within the
// probe interval, gets no request (503 with the reason, at once), and
// the test route and ctl model test say why; a live one is ready.
func TestProviderHealth(t *testing.T) {
	provider := startListingProvider(t)
	dead := deadURL(t)
	g := startGateway(t, fmt.Sprintf(`
		runtime_hosts 127.0.0.1
		model live {
			engine openai
			option base_url %s/v1
			option api_key %s
			option probe_interval 300ms
		}`, provider, standinKey), "")
	for _, m := range []struct{ name, base, key string }{{"dead", dead, standinKey}, {"wrongkey", provider + "/v1", "sk-wrong"}} {
		body := fmt.Sprintf(`{"name":%q,"engine":"openai","options":{"base_url":%q,"api_key":%q,"probe_interval":"300ms"}}`, m.name, m.base, m.key)
		if code, raw := adminDo(t, g, "POST", "/llm/models", body); code != http.StatusCreated {
			t.Fatalf("adding %s: %d %s", m.name, code, raw)
		}
	}

	deadM := waitModelState(t, g, "dead", "failing", 20*time.Second)
	wantWhy := "unreachable: GET " + dead + "/models: "
	if !strings.Contains(deadM.Reason, wantWhy) || !strings.Contains(deadM.Reason, "check base_url") ||
		len(deadM.Replicas) != 1 || deadM.Replicas[0].State != "failing" || deadM.Replicas[0].Reason != deadM.Reason {
		t.Errorf("dead provider: got %+v, want failing with %q", deadM, wantWhy)
	}
	wrong := waitModelState(t, g, "wrongkey", "failing", 20*time.Second)
	if !strings.Contains(wrong.Reason, "the provider refused the key: GET "+provider+"/v1/models answered 401; check api_key") {
		t.Errorf("wrong key: got %q", wrong.Reason)
	}
	live := waitModelState(t, g, "live", "ready", 20*time.Second)
	if live.Replicas[0].State != "ready" || live.Reason != "" {
		t.Errorf("live provider: got %+v", live)
	}

	res := testModel(t, g, "dead")
	if res.OK || len(res.Replicas) != 1 || res.Replicas[0].URL != dead+"/models" || res.Replicas[0].Status != 0 ||
		!strings.Contains(res.Reason, wantWhy) {
		t.Errorf("test of the dead provider: got %+v", res)
	}
	res = testModel(t, g, "live")
	if !res.OK || res.Replicas[0].Status != 200 || res.Replicas[0].State != "ready" || res.Replicas[0].LatencyMS <= 0 {
		t.Errorf("test of the live provider: got %+v", res)
	}

	// The router sends nothing to a provider known dead: 503 with why.
	resp, body := post(t, g.base+"/v1/chat/completions", `{"model":"dead","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "its provider is failing: "+wantWhy) {
		t.Errorf("a request for the dead provider: %d %s", resp.StatusCode, body)
	}
	resp, body = post(t, g.base+"/v1/chat/completions", `{"model":"live","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a request for the live provider: %d %s", resp.StatusCode, body)
	}

	out, err := ctlRun(t, g, "model", "test", "dead")
	if err == nil || !strings.Contains(out, "model dead does not serve: "+wantWhy) {
		t.Errorf("ctl model test dead: %v\n%s", err, out)
	}
	out, err = ctlRun(t, g, "models")
	if err != nil || !regexpLine(out, "dead", "openai", "failing", "unreachable") {
		t.Errorf("ctl models: %v\n%s", err, out)
	}
	for _, path := range []string{"/llm/models", "/llm/models/live", "/llm/models/dead"} {
		if _, raw := adminDo(t, g, "GET", path, ""); strings.Contains(string(raw), standinKey) {
			t.Errorf("GET %s shows the key: %s", path, raw)
		}
	}
}

// TestAddModelChecks: a model without an option its engine requires is
// refused at once, naming the option; numbers where strings go (a YAML
// file's 50) are taken, through the API and through ctl model add.
func TestAddModelChecks(t *testing.T) {
	provider := startListingProvider(t)
	g := startGateway(t, `
		runtime_hosts 127.0.0.1
		model chat {
			engine sim
		}`, "")
	checkEngineList(t, g)
	code, raw := adminDo(t, g, "POST", "/llm/models", `{"name":"nobase","engine":"openai","options":{"api_key":"sk-x"}}`)
	if code != http.StatusBadRequest || !strings.Contains(string(raw), "engine openai needs option base_url, such as https://api.openai.com/v1") {
		t.Errorf("an openai model without base_url: %d %s, want 400 naming base_url", code, raw)
	}
	if _, ok := g.models()["nobase"]; ok {
		t.Error("the refused model is in the catalog")
	}

	body := fmt.Sprintf(`{"name":"numbers","engine":"openai","options":{"base_url":"%s/v1","api_key":%q,"model":50,"probe_interval":"1s"},"scaling":{"min":1,"max":2}}`, provider, standinKey)
	if code, raw := adminDo(t, g, "POST", "/llm/models", body); code != http.StatusCreated {
		t.Errorf("a model with a number for an option: %d %s", code, raw)
	}
	code, raw = adminDo(t, g, "POST", "/llm/models", `{"name":"simnum","engine":"sim","options":{"max_tokens":50,"tokens_per_second":200.5,"reasoning":false},"scaling":{"min":0,"max":50}}`)
	if code != http.StatusCreated {
		t.Errorf("a sim model with numbers and a boolean for options: %d %s", code, raw)
	}
	if code, raw := adminDo(t, g, "POST", "/llm/models/simnum/settings", `{"options":{"max_tokens":20}}`); code != http.StatusOK {
		t.Errorf("changing an option to a number: %d %s", code, raw)
	}

	file := filepath.Join(t.TempDir(), "model.yaml")
	yaml := fmt.Sprintf("name: fromyaml\nengine: openai\noptions:\n  base_url: %s/v1\n  api_key: %s\n  model: 50\nscaling:\n  min: 1\n  max: 50\n", provider, standinKey)
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := ctlRun(t, g, "model", "add", "-f", file); err != nil {
		t.Errorf("ctl model add of a YAML file with numbers: %v\n%s", err, out)
	}
	waitModelState(t, g, "fromyaml", "ready", 20*time.Second)
}

// checkEngineList: GET /llm/engines lists every built-in engine, running
// or not, with its options (required, secret) and an example model.
func checkEngineList(t *testing.T, g *gateway) {
	t.Helper()
	var list []llmapi.EngineStatus
	g.adminGet("/llm/engines", &list)
	byType := map[string]llmapi.EngineStatus{}
	for _, e := range list {
		byType[e.Type] = e
	}
	for _, typ := range []string{"sim", "simimage", "openai", "anthropic", "llamacpp", "vllm", "ollama"} {
		e, ok := byType[typ]
		// An engine whose server is not installed here says so, and
		// still lists its options.
		notHere := strings.Contains(e.Error, "not found on PATH; install it")
		if !ok || !notHere && e.Error != "" || len(e.Options) == 0 || e.Version == "" || e.Example == "" {
			t.Errorf("engine %s: got %+v, want it listed with its options and an example", typ, e)
		}
		if e.Running != (typ == "sim") {
			t.Errorf("engine %s: running %v", typ, e.Running)
		}
	}
	opts := map[string]bool{}
	for _, o := range byType["openai"].Options {
		opts[fmt.Sprintf("%s %t %t", o.Name, o.Required, o.Secret)] = true
	}
	if !opts["base_url true false"] || !opts["api_key false true"] || !strings.Contains(byType["openai"].Example, "engine: openai") {
		t.Errorf("openai's options and example: %+v", byType["openai"])
	}
}
