package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A config whose llm app fails (an engine's sha256 does not match) fails
// validate and run with that cause, not with a claim that the llm app is
// missing.
func TestLoadErrorNamesTheCause(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "Caddyfile")
	conf := `{
	admin off
	storage file_system ` + filepath.Join(dir, "data") + `
	llm {
		engine sim {
			sha256 ` + strings.Repeat("0", 64) + `
		}
		model m {
			engine sim
		}
	}
}
:0 {
	route /v1/* {
		llm_quota
		llm_cache
		llm_router
	}
}
`
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"validate", "run"} {
		out, err := exec.Command(binary, verb, "--config", path).CombinedOutput()
		if err == nil {
			t.Fatalf("llmgw %s accepted a bad engine sha256:\n%s", verb, out)
		}
		msg := errorLine(string(out))
		if strings.Contains(msg, "needs the llm app") || !strings.Contains(msg, "checksums did not match") {
			t.Errorf("llmgw %s: got %q, want the checksum mismatch as the cause", verb, msg)
		}
	}
}

// errorLine returns the message of the last error-level log line.
func errorLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], `"level":"error"`) {
			return lines[i]
		}
	}
	return out
}

// A second llmgw with the same config and data directory refuses to
// start, naming the first one's pid; a reload of the first keeps its
// lock, and once it stops the config starts again.
func TestSecondInstanceRefused(t *testing.T) {
	g := startGateway(t, `
		model m {
			engine sim
		}`, "")
	second := func() {
		t.Helper()
		out := runRefused(t, g)
		want := fmt.Sprintf("another llmgw (pid %d) is running with the data directory", g.cmd.Process.Pid)
		if !strings.Contains(out, want) {
			t.Fatalf("the second llmgw's error does not say %q:\n%s", want, out)
		}
	}
	second()
	g.reload(`
		model m {
			engine sim
		}
		model n {
			engine sim
			min 0
		}`, "")
	chatOnce(t, g, "m")
	second()
	chatOnce(t, g, "m")
	g.stop()
	g.start()
	chatOnce(t, g, "n")
}

// runRefused runs g's config in a second llmgw process, which must exit
// with an error; it returns what that process printed.
func runRefused(t *testing.T, g *gateway) string {
	t.Helper()
	cmd := exec.Command(binary, "run", "--config", filepath.Join(g.dir, "Caddyfile"))
	cmd.Env = g.cmd.Env
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("llmgw exited without an error:\n%s", out.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("llmgw started where it should have refused:\n%s", out.String())
	}
	return out.String()
}

// An llmgw refuses a data directory whose state a newer llmgw wrote in a
// layout it does not know, naming that version; the marker it refused is
// left as it was, and the same data directory starts again once the
// marker is of a layout it knows (as after upgrading to that version).
func TestNewerStateRefused(t *testing.T) {
	g := startGateway(t, `
		model m {
			engine sim
		}`, "")
	marker := filepath.Join(g.dir, "data", "caddy", "llmgw", "state-format.json")
	b, err := os.ReadFile(marker)
	if err != nil || !strings.Contains(string(b), `"layout":1`) {
		t.Fatalf("the data directory has no state marker (%v): %s", err, b)
	}
	g.stop()
	newer := `{"layout":99,"version":"v9.9.9","at":"2030-01-01T00:00:00Z"}`
	if err := os.WriteFile(marker, []byte(newer), 0o600); err != nil {
		t.Fatal(err)
	}
	out := runRefused(t, g)
	if want := "was written by llmgw v9.9.9 (state layout 99)"; !strings.Contains(out, want) || !strings.Contains(out, "run v9.9.9 or a later release") {
		t.Fatalf("the refusal does not say %q and what to do:\n%s", want, out)
	}
	if b, _ := os.ReadFile(marker); string(b) != newer {
		t.Fatalf("the refused start changed the marker: %s", b)
	}
	_ = os.WriteFile(marker, b, 0o600)
	g.start()
	chatOnce(t, g, "m")
}

// Help texts name the command llmgw, also those that come from Caddy.
func TestHelpSaysLLMGW(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"run", "--help"}, {"help", "start"}, {"start", "--help"},
		{"reload", "--help"}, {"storage", "--help"}, {"environ", "--help"}, {"ctl", "--help"}, {"mirror", "fetch", "--help"}} {
		out, err := exec.Command(binary, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("llmgw %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if m := caddyWord.FindString(string(out)); m != "" {
			t.Errorf("llmgw %s says %q:\n%s", strings.Join(args, " "), m, out)
		}
		if !strings.Contains(string(out), "llmgw") {
			t.Errorf("llmgw %s never says llmgw:\n%s", strings.Join(args, " "), out)
		}
	}
}
