package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// validate runs llmgw validate on a Caddyfile and returns its output.
func validate(t *testing.T, caddyfile string, env ...string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "validate", "--config", path)
	cmd.Env = append(os.Environ(), append([]string{"XDG_DATA_HOME=" + dir, "XDG_CONFIG_HOME=" + dir}, env...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// An engine whose server binary is missing is refused when the config is
// loaded, with what to do, not at the first request.
func TestMissingEngineBinaryRefusedAtProvision(t *testing.T) {
	const cfg = `{
	admin off
	llm {
		%s
		model tiny {
			engine llamacpp
			source /models/tiny.gguf
		}
	}
}
:0 {
	llm_router
}
`
	out, err := validate(t, strings.Replace(cfg, "%s", "", 1), "PATH="+t.TempDir())
	if err == nil || !strings.Contains(out, "llama-server not found on PATH; install it or set engine llamacpp { option bin /path/to/llama-server }") {
		t.Errorf("no llama-server: %v\n%s", err, lastLines(out, 3))
	}
	engineBlock := "engine llamacpp {\n\t\t\toption bin /opt/none/llama-server\n\t\t}"
	out, err = validate(t, strings.Replace(cfg, "%s", engineBlock, 1))
	if err == nil || !strings.Contains(out, "/opt/none/llama-server (from the engine's bin option) is not an executable file") {
		t.Errorf("a bin that is not there: %v\n%s", err, lastLines(out, 3))
	}
}

// A model whose weights its engine cannot load is refused when the config
// is loaded, with the reason.
func TestWeightsTheEngineCannotLoadAreRefused(t *testing.T) {
	gguf := tinyModel(t)
	st := t.TempDir()
	_ = os.WriteFile(filepath.Join(st, "config.json"), []byte("{}"), 0o644)
	_ = os.WriteFile(filepath.Join(st, "model.safetensors"), []byte("{}"), 0o644)
	cfg := func(engine, source string) string {
		return `{
	admin off
	llm {
		engine ` + engine + ` {
			option bin /bin/true
		}
		model m {
			engine ` + engine + `
			source ` + source + `
		}
	}
}
:0 {
	llm_router
}
`
	}
	out, err := validate(t, cfg("vllm", gguf))
	if err == nil || !strings.Contains(out, `model \"m\": engine vllm cannot load gguf weights (`+gguf+`); it loads safetensors`) {
		t.Errorf("GGUF for vllm: %v\n%s", err, lastLines(out, 2))
	}
	out, err = validate(t, cfg("llamacpp", st))
	if err == nil || !strings.Contains(out, `engine llamacpp cannot load safetensors weights`) {
		t.Errorf("safetensors for llamacpp: %v\n%s", err, lastLines(out, 2))
	}
	if out, err := validate(t, cfg("llamacpp", gguf)); err != nil {
		t.Errorf("GGUF for llamacpp: %v\n%s", err, lastLines(out, 2))
	}
}

// A model's options and args are checked against what its engine declares
// when the config is loaded: a misspelled option is refused with the known
// ones, and args that would move a replica off loopback are refused.
// Names follow one rule.
func TestEngineSettingsCheckedAtLoad(t *testing.T) {
	cfg := func(name, body string) string {
		return "{\n\tadmin off\n\tllm {\n\t\tmodel " + name + " {\n\t\t\tengine sim\n\t\t\t" + body + "\n\t\t}\n\t}\n}\n:0 {\n\tllm_router\n}\n"
	}
	for _, tc := range []struct{ name, model, body, want string }{
		{"misspelled option", "chat", "option tokens_per_secnd 20", `model \"chat\": engine sim has no option \"tokens_per_secnd\"; known options: ttft, tokens_per_second, max_tokens, embedding_dims, embedding_delay, fail_status, echo`},
		{"option type", "chat", "option ttft soon", `model \"chat\": engine sim option ttft: \"soon\" is not a duration`},
		{"listen in args", "chat", "args --listen 0.0.0.0:9", `model \"chat\": engine sim: args must not set --listen (\"--listen\"): engine servers listen only on loopback, on a port llmgw chooses`},
		{"listen in a profile's args", "chat", "profile cpu {\n\t\t\t\targs --listen 0.0.0.0:9\n\t\t\t}", `args must not set --listen (\"--listen\"): engine servers listen only on loopback, on a port llmgw chooses; remove it from args (profile cpu)`},
		{"unknown flag", "chat", "args --flash-attn", `engine sim has no flag --flash-attn; its flags are --ttft`},
		{"name", "../../x", "", `model name \"../../x\" has a \"..\" part`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := validate(t, cfg(tc.model, tc.body))
			if err == nil || !strings.Contains(out, tc.want) {
				t.Errorf("validate: %v\n%s\nwant %s", err, lastLines(out, 3), tc.want)
			}
		})
	}
	if out, err := validate(t, cfg("Qwen/Qwen2.5-7B", "option tokens_per_second 20\n\t\t\targs --ttft 1ms")); err != nil {
		t.Errorf("a valid model: %v\n%s", err, lastLines(out, 3))
	}
}

// The admin API applies the same checks: 400 with the rule, nothing added,
// nothing listening off loopback, and no log line carries a huge name.
func TestAdminRefusesUnsafeModels(t *testing.T) {
	g := startGateway(t, `
		model base {
			engine sim
		}`, "")
	long := strings.Repeat("n", 200<<10)
	for _, bad := range []struct{ body, want string }{
		{`{"name":"x","engine":"sim","args":["--listen","0.0.0.0:9"]}`, `model \"x\": engine sim: args must not set --listen`},
		{`{"name":"x","engine":"sim","args":["--listen=0.0.0.0:9"]}`, `engine servers listen only on loopback`},
		{`{"name":"x","engine":"sim","options":{"tokens_per_secnd":"20"}}`, `engine sim has no option \"tokens_per_secnd\"; known options: ttft, tokens_per_second`},
		{`{"name":"x","engine":"sim","args":["--flash-attn"]}`, `no flag --flash-attn`},
		// A profile's args and options follow the same rules as the model's.
		{`{"name":"x","engine":"sim","profiles":[{"name":"cpu","args":["--listen","0.0.0.0:9"]}]}`, `args must not set --listen`},
		{`{"name":"x","engine":"sim","profiles":[{"name":"gpu","resources":{"gpus":1}},{"name":"cpu","args":["--listen=0.0.0.0:9"]}]}`, `engine servers listen only on loopback`},
		{`{"name":"x","engine":"sim","profiles":[{"name":"cpu","options":{"tokens_per_secnd":"20"}}]}`, `has no option \"tokens_per_secnd\"`},
		{`{"name":"x","engine":"sim","profiles":[{"name":"cpu","engine":"../../bin/sh"}]}`, `an engine type is up to 64 lowercase letters`},
		{`{"name":"../../x","engine":"sim"}`, `has a \"..\" part; a name is 1 to 128 characters`},
		{`{"name":"x","aliases":["a b"],"engine":"sim"}`, `alias \"a b\" has ' '`},
		{`{"name":"` + long + `","engine":"sim"}`, `is 204800 bytes long`},
	} {
		code, body := adminDo(t, g, "POST", "/llm/models", bad.body)
		if code != 400 || !strings.Contains(string(body), bad.want) || len(body) > 1000 {
			t.Errorf("adding %.80s: %d %.300s, want 400 mentioning %s", bad.body, code, body, bad.want)
		}
	}
	if ms := g.models(); len(ms) != 1 {
		t.Errorf("models after refusals: %v", ms)
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.2:9", 200*time.Millisecond); err == nil {
		c.Close()
		t.Error("a replica listens on 0.0.0.0:9 (reached at 127.0.0.2:9)")
	}
	if strings.Contains(g.logs.String(), strings.Repeat("n", 300)) {
		t.Error("the log carries the long name")
	}

	// Runtime models an older llmgw stored with bad names are skipped at
	// start, with a bounded warning; the others still serve.
	g.stop()
	stored := `[{"name":"` + long + `","engine":"sim"},{"name":"../../x","engine":"sim"},{"name":"kept","engine":"sim"}]`
	_ = os.MkdirAll(filepath.Join(g.dir, "storage", "llmgw"), 0o700)
	if err := os.WriteFile(filepath.Join(g.dir, "storage", "llmgw", "models.json"), []byte(stored), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start()
	g.readyReplicas("kept", 1)
	if ms := g.models(); len(ms) != 2 {
		t.Errorf("models after a start with bad stored names: %d, want base and kept", len(ms))
	}
	if n := strings.Count(g.logs.String(), "ignoring a runtime model from storage"); n != 2 {
		t.Errorf("%d warnings about stored models, want 2", n)
	}
	if strings.Contains(g.logs.String(), strings.Repeat("n", 300)) {
		t.Error("the log carries the long stored name")
	}
}

// A replica that cannot start says why in the engine server's own words:
// the last lines of its stderr are in the model's reason and in the 503.
func TestEngineStderrInStartError(t *testing.T) {
	gguf := tinyModel(t)
	bin := filepath.Join(t.TempDir(), "llama-server")
	script := "#!/bin/sh\necho 'loading model' >&2\necho 'error: unsupported tensor type q9_k in blk.0.attn_q.weight' >&2\nexit 1\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, `
		engine llamacpp {
			option bin `+bin+`
		}
		model broken {
			engine llamacpp
			source `+gguf+`
		}`, "")
	const want = "unsupported tensor type q9_k in blk.0.attn_q.weight"
	waitFor(t, 20*time.Second, "the failed start's reason", func() bool {
		return strings.Contains(g.models()["broken"].Reason, want)
	})
	r, body := post(t, g.base+"/v1/chat/completions", `{"model":"broken","messages":[{"role":"user","content":"x"}]}`)
	if r.StatusCode != 503 || !strings.Contains(string(body), want) {
		t.Errorf("a request to the model: %d %s, want 503 quoting the engine server", r.StatusCode, body)
	}
}
