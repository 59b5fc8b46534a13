package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// recordingProvider is an OpenAI-compatible stand-in on 127.0.0.5 (a
// loopback address the test's config allows) that keeps the
// Authorization headers it received.
func recordingProvider(t *testing.T) (url string, auths func() []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	ln, err := net.Listen("tcp", "127.0.0.5:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.5: %v", err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// What an admin API caller gives at run time is taken as it is: the
// placeholders that would read llmgw's environment or files are refused,
// a secret is named (secret:NAME) or given as a value and never shown
// back, and URLs may not reach loopback, link-local or this machine's
// addresses unless the config file allows them. Each attack is the
// request outside testing sent.
func TestRuntimeValuesCannotReadTheHost(t *testing.T) {
	const secret = "sk-host-secret-8f2c"
	t.Setenv("LLMGW_TEST_HOST_SECRET", secret)
	provider, auths := recordingProvider(t)
	g := startGateway(t, `
		secret provider_key {env.LLMGW_TEST_HOST_SECRET}
		runtime_hosts 127.0.0.5
		model base {
			engine sim
			min 0
		}`, "")
	admin := fmt.Sprintf("127.0.0.1:%d", g.admin)

	refused := []struct{ name, body, want string }{
		{"env placeholder in an option",
			`{"name":"x1","engine":"openai","options":{"base_url":"` + provider + `/v1","api_key":"{env.LLMGW_TEST_HOST_SECRET}"}}`,
			"resolved only in the config file"},
		{"file placeholder in an option",
			`{"name":"x2","engine":"openai","options":{"base_url":"` + provider + `/v1","api_key":"{file./etc/hostname}"}}`,
			"resolved only in the config file"},
		{"placeholder in the source",
			`{"name":"x3","engine":"sim","source":"{env.HOME}/w.gguf"}`,
			"resolved only in the config file"},
		{"an undeclared secret",
			`{"name":"x4","engine":"openai","options":{"base_url":"` + provider + `/v1","api_key":"secret:nope"}}`,
			"names no secret the config file declares"},
		{"the admin endpoint",
			`{"name":"x5","engine":"openai","options":{"base_url":"http://` + admin + `/","api_key":"secret:provider_key"}}`,
			"loopback"},
		{"the admin endpoint by name",
			fmt.Sprintf(`{"name":"x6","engine":"openai","options":{"base_url":"http://localhost:%d/"}}`, g.admin),
			"loopback"},
		{"IPv4-mapped loopback",
			fmt.Sprintf(`{"name":"x7","engine":"openai","options":{"base_url":"http://[::ffff:127.0.0.1]:%d/"}}`, g.admin),
			"loopback"},
		{"cloud metadata",
			`{"name":"x8","engine":"openai","options":{"base_url":"http://169.254.169.254/latest/meta-data/"}}`,
			"link-local"},
		{"env placeholder in a profile's option",
			`{"name":"x10","engine":"sim","profiles":[{"name":"cpu","options":{"tokens_per_second":"{env.LLMGW_TEST_HOST_SECRET}"}}]}`,
			"resolved only in the config file"},
		{"placeholder in a profile's source",
			`{"name":"x11","engine":"sim","profiles":[{"name":"cpu","source":"{file./etc/hostname}"}]}`,
			"resolved only in the config file"},
		{"a profile's weights URL on loopback",
			`{"name":"x12","engine":"sim","profiles":[{"name":"cpu","engine":"ollama","source":"http://127.0.0.1:1/w.gguf"}]}`,
			"loopback"},
		{"a weights URL on loopback",
			`{"name":"x9","engine":"ollama","source":"http://127.0.0.1:1/w.gguf"}`,
			"loopback"},
	}
	for _, tc := range refused {
		code, body := adminDo(t, g, "POST", "/llm/models", tc.body)
		if code != http.StatusBadRequest || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s: got %d %s, want 400 saying %q", tc.name, code, body, tc.want)
		}
		if strings.Contains(string(body), secret) {
			t.Errorf("%s: the answer shows the secret: %s", tc.name, body)
		}
	}
	// Settings on a config model follow the same rules.
	if code, body := adminDo(t, g, "POST", "/llm/models/base/settings", `{"options":{"api_key":"{env.LLMGW_TEST_HOST_SECRET}"}}`); code != http.StatusBadRequest || !strings.Contains(string(body), "resolved only in the config file") {
		t.Errorf("settings with a placeholder: got %d %s, want 400", code, body)
	}

	// A declared secret, named: the provider gets it; nobody sees it.
	code, body := adminDo(t, g, "POST", "/llm/models", `{"name":"remote","engine":"openai","options":{"base_url":"`+provider+`/v1","api_key":"secret:provider_key","model":"m"}}`)
	if code != http.StatusCreated {
		t.Fatalf("adding a model that names a declared secret: got %d %s", code, body)
	}
	resp, raw := post(t, g.base+"/v1/chat/completions", `{"model":"remote","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("chat through the runtime model: %d %s", resp.StatusCode, raw)
	}
	if a := auths(); len(a) == 0 || a[len(a)-1] != "Bearer "+secret {
		t.Errorf("the provider got %q, want the declared secret", a)
	}
	stored, err := os.ReadFile(filepath.Join(g.dir, "storage", "llmgw", "models.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(stored), secret) || !strings.Contains(string(stored), "secret:provider_key") {
		t.Errorf("models.json holds %s; want the secret's name, not its value", stored)
	}
	// A literal credential given in settings: stored, used, never shown.
	if code, body := adminDo(t, g, "POST", "/llm/models/remote/settings", `{"options":{"api_key":"sk-literal-77aa"}}`); code != 200 {
		t.Fatalf("settings with a literal key: %d %s", code, body)
	}
	for _, path := range []string{"/llm/models", "/llm/models/remote", "/llm/audit"} {
		code, body := adminDo(t, g, "GET", path, "")
		if code != 200 || strings.Contains(string(body), secret) || strings.Contains(string(body), "sk-literal-77aa") {
			t.Errorf("GET %s: %d shows a secret: %s", path, code, body)
		}
	}
}

// Adding the first model of a new engine type starts its plugin while
// requests ask which APIs engines speak and the admin API lists engines:
// under the race detector (the e2e binary is built with it under -race)
// a data race in llmgw fails the test.
func TestNewEngineTypeUnderTraffic(t *testing.T) {
	provider, _ := recordingProvider(t)
	g := startGateway(t, `
		runtime_hosts 127.0.0.5
		model base {
			engine sim
		}`, "")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for n := 0; n < 400; n++ {
				select {
				case <-stop:
					return
				default:
				}
				path, body := "/v1/responses", `{"model":"base","input":"hi"}`
				if i%2 == 0 {
					path, body = "/v1/messages", `{"model":"base","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
				}
				req, _ := http.NewRequest("POST", g.base+path, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
				if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/llm/engines", g.admin)); err == nil {
					resp.Body.Close()
				}
			}
		}(i)
	}
	for i, engine := range []string{"openai", "anthropic"} {
		body := fmt.Sprintf(`{"name":"new-%d","engine":%q,"options":{"base_url":"%s/v1","api_key":"k"}}`, i, engine, provider)
		if code, raw := adminDo(t, g, "POST", "/llm/models", body); code != http.StatusCreated {
			t.Errorf("adding a %s model: %d %s", engine, code, raw)
		}
	}
	close(stop)
	wg.Wait()
	var engines []struct {
		Type    string
		Running bool
	}
	g.adminGet("/llm/engines", &engines)
	var running []string
	for _, e := range engines {
		if e.Running {
			running = append(running, e.Type)
		}
	}
	if strings.Join(running, ",") != "anthropic,openai,sim" {
		t.Errorf("engines running after the adds: %v, want sim, openai and anthropic", running)
	}
}

// A mirror version's source given through the admin API: an operator may
// not have llmgw read this machine's files into the mirror, nor fetch
// from internal addresses (the check is made again at every redirect).
func TestMirrorSourcesFromTheAdminAPI(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(secretFile, []byte("PRIVATE KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A public-looking server that redirects to the metadata address.
	redirect := httptest.NewServer(http.RedirectHandler("http://169.254.169.254/latest/meta-data/", http.StatusFound))
	defer redirect.Close()
	g := consoleSite(t, fmt.Sprintf("\t\truntime_hosts 127.0.0.1\n\t\tmirror {\n\t\t\tstore a dir %s\n\t\t}\n", t.TempDir()),
		"\t\t\ttoken ops "+tenancy.HashKey("ops-token")+" operator\n")
	cases := []struct{ name, token, body, want string }{
		{"an operator reads a host file", "ops-token", fmt.Sprintf(`{"model":"stolen","version":"v1","source":%q}`, secretFile), "needs the admin role"},
		{"metadata", "ops-token", `{"model":"meta","version":"v1","source":"http://169.254.169.254/latest/meta-data/x.gguf"}`, "link-local"},
		{"a redirect to metadata", "root-token", fmt.Sprintf(`{"model":"meta2","version":"v1","source":"%s/w.gguf"}`, redirect.URL), "link-local"},
	}
	for _, tc := range cases {
		code, _, body := siteCall(t, g, tc.token, "POST", "/llm/mirror/versions", tc.body)
		if code < 400 || !strings.Contains(body, tc.want) {
			t.Errorf("%s: got %d %s, want a refusal saying %q", tc.name, code, body, tc.want)
		}
	}
	_, _, list := siteCall(t, g, "root-token", "GET", "/llm/mirror/versions", "")
	for _, m := range []string{"stolen", "meta"} {
		if strings.Contains(list, `"`+m+`"`) {
			t.Errorf("the mirror holds %s after a refusal: %s", m, list)
		}
	}
}
