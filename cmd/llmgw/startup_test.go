package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
