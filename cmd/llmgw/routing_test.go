package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestFallbackWhenModelFails(t *testing.T) {
	g := startGateway(t, `
		model primary {
			engine sim
			option fail_status 500
			fallback backup
		}
		model backup {
			engine sim
		}
		model lonely {
			engine sim
			option fail_status 503
		}`, "")
	g.readyReplicas("primary", 1)
	resp := chatOnce(t, g, "primary")
	if resp.SystemFingerprint != "llmgw-sim:backup" {
		t.Errorf("answer came from %q, want the fallback (llmgw-sim:backup)", resp.SystemFingerprint)
	}
	// Streams fall back too, before the first byte.
	r, body := post(t, g.base+"/v1/chat/completions", `{"model":"primary","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	if r.StatusCode != 200 || !strings.Contains(string(body), "llmgw-sim:backup") {
		t.Errorf("stream: got %d %s", r.StatusCode, body)
	}
	// With no fallback left, the upstream's error reaches the client.
	r, body = post(t, g.base+"/v1/chat/completions", `{"model":"lonely","messages":[{"role":"user","content":"x"}]}`)
	if r.StatusCode != 503 || !strings.Contains(string(body), "simulated failure") {
		t.Errorf("no fallback: got %d %s, want the replica's 503", r.StatusCode, body)
	}
}

// A model whose replica cannot start: its args pass the config check (the
// flag exists) but the replica refuses the flag's value.
func TestFallbackWhenModelCannotStart(t *testing.T) {
	g := startGateway(t, `
		model broken {
			engine sim
			args --ttft soon
			fallback backup
		}
		model backup {
			engine sim
		}`, "")
	g.readyReplicas("backup", 1)
	waitFor(t, 10*time.Second, "the broken model to report its failure", func() bool {
		return g.models()["broken"].State == "failed"
	})
	if reason := g.models()["broken"].Reason; !strings.Contains(reason, `invalid value "soon" for flag -ttft`) {
		t.Errorf("reason does not name the bad flag: %q", reason)
	}
	if resp := chatOnce(t, g, "broken"); resp.SystemFingerprint != "llmgw-sim:backup" {
		t.Errorf("answer came from %q, want the fallback", resp.SystemFingerprint)
	}
}

func TestNoCapacityIs503WithRetryAfter(t *testing.T) {
	g := startGateway(t, `
		model broken {
			engine sim
			args --ttft soon
		}`, "")
	waitFor(t, 10*time.Second, "the model to fail", func() bool { return g.models()["broken"].State == "failed" })
	r, body := post(t, g.base+"/v1/chat/completions", `{"model":"broken","messages":[{"role":"user","content":"x"}]}`)
	if r.StatusCode != 503 || r.Header.Get("Retry-After") == "" {
		t.Fatalf("got %d Retry-After=%q, want 503 with Retry-After", r.StatusCode, r.Header.Get("Retry-After"))
	}
	if !strings.Contains(string(body), `"code":"no_capacity"`) || !strings.Contains(string(body), `invalid value \"soon\" for flag -ttft`) {
		t.Errorf("body does not say why: %s", body)
	}
}

func TestFirstByteTimeoutIs504(t *testing.T) {
	// A timeout is not a reason to fall back: the client has waited long
	// enough.
	g := startGateway(t, `
		model slow {
			engine sim
			option ttft 5s
			fallback fast
		}
		model fast {
			engine sim
		}`, "first_byte_timeout 300ms")
	g.readyReplicas("slow", 1)
	r, body := post(t, g.base+"/v1/chat/completions", `{"model":"slow","messages":[{"role":"user","content":"x"}]}`)
	if r.StatusCode != 504 || !strings.Contains(string(body), `"code":"upstream_timeout"`) {
		t.Errorf("got %d %s, want 504 upstream_timeout", r.StatusCode, body)
	}
}

func simStats(t *testing.T, replicaURL string) map[string]int64 {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(replicaURL, "/v1") + "/sim/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s map[string]int64
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStreamFlushesAndDisconnectCancelsUpstream(t *testing.T) {
	g := startGateway(t, `
		model m {
			engine sim
			option tokens_per_second 2
		}`, "")
	rep := g.readyReplicas("m", 1)[0]
	req, _ := http.NewRequest("POST", g.base+"/v1/chat/completions", strings.NewReader(
		`{"model":"m","stream":true,"max_tokens":1000,"messages":[{"role":"user","content":"x"}]}`))
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// The role event and the first token arrive as they are made, one
	// small event at a time: only a flush per event gets them here before
	// the timeout, long before the 1000-token answer ends.
	br := bufio.NewReader(resp.Body)
	for i := 0; i < 4; i++ {
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	if got := simStats(t, rep.URL)["inflight"]; got != 1 {
		t.Fatalf("replica has %d requests in flight, want 1", got)
	}
	resp.Body.Close()
	waitFor(t, 5*time.Second, "the replica to see the cancellation", func() bool {
		s := simStats(t, rep.URL)
		return s["canceled"] == 1 && s["inflight"] == 0
	})
}

func TestOutsideProviderEngine(t *testing.T) {
	// A fake provider: the real one is a paid service that cannot run here.
	var got atomic.Value
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got.Store(r.Method + " " + r.URL.Path + " " + r.Header.Get("Authorization") + " " + string(body))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"x","object":"chat.completion","created":1,"model":"provider-model","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	}))
	defer provider.Close()
	t.Setenv("LLMGW_TEST_PROVIDER_KEY", "sk-test-123")
	g := startGateway(t, fmt.Sprintf(`
		model house-name {
			engine openai
			option base_url %s/v1
			option api_key {env.LLMGW_TEST_PROVIDER_KEY}
			option model provider-model
		}`, provider.URL), "")
	resp := chatOnce(t, g, "house-name")
	if resp.Choices[0].Message.Content != "hello" {
		t.Errorf("answer: got %q", resp.Choices[0].Message.Content)
	}
	seen, _ := got.Load().(string)
	for _, want := range []string{"POST /v1/chat/completions ", "Bearer sk-test-123", `"model":"provider-model"`} {
		if !strings.Contains(seen, want) {
			t.Errorf("provider saw %q, want it to contain %q", seen, want)
		}
	}
	if strings.Contains(seen, "unused") {
		t.Errorf("the client's own key was forwarded to the provider: %q", seen)
	}
}

func buildThirdParty(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "llmgw-engine-thirdparty")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/thirdparty").CombinedOutput()
	if err != nil {
		t.Fatalf("building the plugin: %v\n%s", err, out)
	}
	return dir
}

func TestThirdPartyPlugin(t *testing.T) {
	dir := buildThirdParty(t)
	bin := filepath.Join(dir, "llmgw-engine-thirdparty")
	out, err := exec.Command(bin, "describe").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"thirdparty","version":"9.9.9","protocol":1,`; !strings.HasPrefix(string(out), want) {
		t.Errorf("describe: got %s, want it to start with %s", out, want)
	}
	f, _ := os.ReadFile(bin)
	sum := sha256.Sum256(f)
	g := startGateway(t, fmt.Sprintf(`
		plugin_dir %s
		engine thirdparty {
			sha256 %s
		}
		model tp {
			engine thirdparty
		}`, dir, hex.EncodeToString(sum[:])), "")
	if resp := chatOnce(t, g, "tp"); resp.SystemFingerprint != "llmgw-sim:tp" {
		t.Errorf("fingerprint: got %q", resp.SystemFingerprint)
	}
}

func TestThirdPartyPluginChecksumMismatch(t *testing.T) {
	dir := buildThirdParty(t)
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}}
	g.writeConfig(fmt.Sprintf(`
		plugin_dir %s
		engine thirdparty {
			sha256 %s
		}
		model tp {
			engine thirdparty
		}`, dir, strings.Repeat("ab", 32)), "")
	out, err := exec.Command(binary, "run", "--config", filepath.Join(g.dir, "Caddyfile")).CombinedOutput()
	if err == nil {
		t.Fatal("llmgw ran a plugin whose checksum does not match")
	}
	if !strings.Contains(string(out), "checksum") {
		t.Errorf("the error does not mention the checksum:\n%s", out)
	}
}
