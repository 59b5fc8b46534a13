package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// TestAdaptGolden adapts each testdata/adapt/*.caddyfiletest (a Caddyfile,
// a line of dashes, the JSON it must adapt to). Run with LLMGW_UPDATE_GOLDEN=1
// to rewrite the JSON halves.
func TestAdaptGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/adapt/*.caddyfiletest")
	if len(files) == 0 {
		t.Fatal("no golden files")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			in, want, ok := strings.Cut(string(raw), "\n----------\n")
			if !ok {
				t.Fatal("no line of dashes")
			}
			got := adapt(t, in+"\n")
			if os.Getenv("LLMGW_UPDATE_GOLDEN") != "" {
				_ = os.WriteFile(f, []byte(in+"\n----------\n"+got), 0o644)
				return
			}
			if got != strings.TrimRight(want, "\n")+"\n" {
				t.Errorf("adapted JSON differs\n got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func adapt(t *testing.T, caddyfile string) string {
	t.Helper()
	out, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
	if err != nil {
		t.Fatalf("adapt: %v", err)
	}
	for _, w := range warnings {
		t.Errorf("warning: %s", w.String())
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, out, "", "\t"); err != nil {
		t.Fatal(err)
	}
	return buf.String() + "\n"
}

func TestExampleAdaptsAndIsFormatted(t *testing.T) {
	raw, err := os.ReadFile("../../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	adapt(t, string(raw))
	out, err := exec.Command(binary, "fmt", "../../Caddyfile.example").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, raw) {
		t.Errorf("llmgw fmt changes Caddyfile.example:\n%s", out)
	}
}

func TestListModules(t *testing.T) {
	out, err := exec.Command(binary, "list-modules").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"llm", "admin.api.llm", "http.handlers.llm_router", "http.handlers.llm_quota", "http.handlers.llm_cache",
		"http.llm_router.policies.least_outstanding", "http.llm_router.policies.round_robin"} {
		if !strings.Contains("\n"+string(out), "\n"+id+"\n") {
			t.Errorf("list-modules does not show %s", id)
		}
	}
}

// TestJSONConfig runs llmgw from the JSON that `llmgw adapt` makes of a
// Caddyfile: the same config, the same answers.
func TestJSONConfig(t *testing.T) {
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{})}
	g.base = fmt.Sprintf("http://127.0.0.1:%d", g.http)
	g.writeConfig(`
		model m {
			engine sim
			alias m2
		}`, "")
	out, err := exec.Command(binary, "adapt", "--config", filepath.Join(g.dir, "Caddyfile")).Output()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(g.dir, "config.json")
	if err := os.WriteFile(file, out, 0o600); err != nil {
		t.Fatal(err)
	}
	g.cmd = exec.Command(binary, "run", "--config", file)
	g.cmd.Env = append(os.Environ(), "HOME="+g.dir)
	g.cmd.Stdout, g.cmd.Stderr = g.logs, g.logs
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.cmd.Wait(); close(g.exited) }()
	defer g.stop()
	g.waitReady()
	if resp := chatOnce(t, g, "m2"); resp.SystemFingerprint != "llmgw-sim:m" {
		t.Errorf("fingerprint: got %q", resp.SystemFingerprint)
	}
}
