package main

import (
	"cmp"
	"context"
	"encoding/json"
	"image/color"
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

// jsWork is a folder holding the check scripts (files of
// testdata/jsclients) and the installed client libraries, to run node in.
func jsWork(t *testing.T, files ...string) string {
	t.Helper()
	lib := jsClients(t)
	work := t.TempDir()
	for _, f := range files {
		script, err := os.ReadFile(filepath.Join("testdata", "jsclients", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, f), script, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(lib, "node_modules"), filepath.Join(work, "node_modules")); err != nil {
		t.Fatal(err)
	}
	return work
}

// TestJSClients runs JavaScript client libraries against llmgw serving
// the sim engine: the Vercel AI SDK through its OpenAI (chat and
// Responses) and Anthropic (Messages, the SDK's choice for claude-*
// names) providers (structured output and text, whole and streamed;
// checks.mjs), and LangChain's ChatOpenAI and the OpenAI Agents SDK over
// chat completions and Responses (text, structured output, tool calls,
// an agent loop; agents.mjs).
func TestJSClients(t *testing.T) {
	work := jsWork(t, "lib.mjs", "checks.mjs", "agents.mjs")
	g := startGateway(t, `
		model gpt-4o-mini {
			engine sim
		}
		model claude-sonnet-4-5 {
			engine sim
		}`, "")
	for _, script := range []string{"checks.mjs", "agents.mjs"} {
		t.Run(script, func(t *testing.T) { runJSChecks(t, g, work, script) })
	}
}

// TestJSImages runs the official openai client's images.generate and
// images.edit, whole and streamed (images.mjs), against the demo
// config, Caddyfile.example, whose image model runs the simimage
// simulator through llm_jobs.
func TestJSImages(t *testing.T) {
	work := jsWork(t, "lib.mjs", "images.mjs")
	for name, c := range map[string]color.NRGBA{"red.png": {230, 20, 20, 255}, "blue.png": {20, 20, 230, 255}} {
		if err := os.WriteFile(filepath.Join(work, name), solidPNG(c, 64, 48), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	g := startExample(t) // the demo config: its image model starts on the first job
	t.Setenv("LLMGW_JS_KEY", "sk-llmgw-example-key-change-me")
	runJSChecks(t, g, work, "images.mjs")
}

// runJSChecks runs one script of checks and fails each check that failed.
func runJSChecks(t *testing.T, g *gateway, work, script string) {
	ctx, cancel := context.WithTimeout(bg, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "LLMGW_BASE="+g.base+"/v1", "LLMGW_KEY="+cmp.Or(os.Getenv("LLMGW_JS_KEY"), "none"))
	out, err := cmd.Output()
	if ctx.Err() != nil {
		t.Fatalf("the checks did not finish in 3 minutes: %s", out)
	}
	if err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, out)
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
