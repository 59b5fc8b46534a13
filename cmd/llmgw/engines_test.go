package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
