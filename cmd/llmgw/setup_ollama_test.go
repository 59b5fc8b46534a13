package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startOllama runs "ollama serve" on a free port with its own models
// directory, and makes the tiny test model there as "tiny".
func startOllama(t *testing.T) string {
	t.Helper()
	bin := ollamaBin(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	env := append(os.Environ(), "OLLAMA_HOST="+addr, "OLLAMA_MODELS="+t.TempDir(), "HOME="+t.TempDir())
	serve := exec.Command(bin, "serve")
	serve.Env = env
	logs := &syncBuffer{}
	serve.Stdout, serve.Stderr = logs, logs
	// Its runners are its children: stop them with it, and do not wait
	// for the output they hold open.
	serve.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	serve.WaitDelay = 5 * time.Second
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-serve.Process.Pid, syscall.SIGKILL); _ = serve.Wait() })
	waitFor(t, 60*time.Second, "ollama serve", func() bool {
		resp, err := http.Get("http://" + addr + "/api/tags")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
	modelfile := filepath.Join(t.TempDir(), "Modelfile")
	if err := os.WriteFile(modelfile, []byte("FROM "+tinyModel(t)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	create := exec.Command(bin, "create", "tiny", "-f", modelfile)
	create.Env = env
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("ollama create: %v\n%s\n%s", err, out, logs.String())
	}
	return "http://" + addr
}

// TestSetupOllama finds a running Ollama server's models, serves them
// through the gateway setup wrote, and answers a chat completion with
// the printed key.
func TestSetupOllama(t *testing.T) {
	ollama := startOllama(t)
	s := newSetupDirs(t)
	args := append(s.flags("--yes", "--models", "ollama", "--console=false", "--listen", fmt.Sprintf("127.0.0.1:%d", s.http)), "--ollama-url", ollama)
	out, err := runSetup(t, args...)
	if err != nil {
		t.Fatalf("llmgw setup: %v\n%s", err, out)
	}
	if !strings.Contains(out, "Ollama      answers at "+ollama+" with 1 models: tiny:latest") {
		t.Errorf("setup did not report the Ollama server's model:\n%s", out)
	}
	key := keyLine.FindStringSubmatch(out)
	b, _ := os.ReadFile(filepath.Join(s.dir, "Caddyfile"))
	if key == nil || !strings.Contains(string(b), "model tiny:latest {") || strings.Contains(string(b), "sim-chat") || strings.Contains(string(b), "llm_console") {
		t.Fatalf("the Caddyfile does not serve Ollama's model alone, or no key was printed:\n%s\n%s", b, out)
	}
	g := &gateway{t: t, dir: s.dir, http: s.http, admin: s.admin, logs: &syncBuffer{}}
	g.start()
	waitFor(t, 60*time.Second, "a chat completion through Ollama", func() bool {
		code, body := postWithKey(t, g.base+"/v1/chat/completions", key[1], `{"model":"tiny:latest","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`)
		if code != 200 {
			t.Logf("%d %.300s", code, body)
		}
		return code == 200 && strings.Contains(body, `"content"`)
	})
}

func postWithKey(t *testing.T, url, key, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b)
}
