package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// jsClients is where .ci/install put the JavaScript client libraries
// of cmd/llmgw/testdata/jsclients/package.json.
func jsClients(t *testing.T) string {
	dir := os.Getenv("LLMGW_JSCLIENTS")
	if dir == "" {
		cache, _ := os.UserCacheDir()
		dir = filepath.Join(cache, "llmgw", "jsclients")
	}
	_, err := os.Stat(filepath.Join(dir, "node_modules", "ai", "package.json"))
	_, nodeErr := exec.LookPath("node")
	if err != nil || nodeErr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the JavaScript clients are not installed in %s (node: %v); .ci/install installs them", dir, nodeErr)
		}
		t.Skipf("the JavaScript clients are not installed in %s; run .ci/install", dir)
	}
	return dir
}

// TestJSClients runs the Vercel AI SDK, through its OpenAI (chat and
// Responses) and Anthropic (Messages, the SDK's choice for claude-*
// names) providers, against llmgw serving the sim engine: structured
// output (generateObject, streamObject) and text, whole and streamed.
func TestJSClients(t *testing.T) {
	lib := jsClients(t)
	work := t.TempDir()
	script, err := os.ReadFile(filepath.Join("testdata", "jsclients", "checks.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "checks.mjs"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(lib, "node_modules"), filepath.Join(work, "node_modules")); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, `
		model gpt-4o-mini {
			engine sim
		}
		model claude-sonnet-4-5 {
			engine sim
		}`, "")
	cmd := exec.Command("node", "checks.mjs")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "LLMGW_BASE="+g.base+"/v1", "LLMGW_KEY=none")
	done := make(chan struct{})
	var out []byte
	go func() { out, err = cmd.Output(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the checks did not finish in 3 minutes: %s", out)
	}
	if err != nil {
		t.Fatalf("node checks.mjs: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var results []struct {
		Name  string `json:"name"`
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &results); err != nil || len(results) == 0 {
		t.Fatalf("the checks' results: %v\n%s", err, out)
	}
	for _, r := range results {
		if !r.OK {
			t.Errorf("%s: %s", r.Name, r.Error)
		}
	}
	t.Logf("%d checks", len(results))
}
