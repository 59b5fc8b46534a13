package main

import (
	"crypto/sha256"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionIsLlmgws: llmgw version (and --version) names llmgw's version
// and commit with the Caddy and Go inside; a release build's stamp shows.
// Caddy's add-package and remove-package, which would replace llmgw
// with a plain Caddy, refuse, leave the binary as it was, and are
// not in the help.
func TestVersionIsLlmgws(t *testing.T) {
	out, err := exec.Command(binary, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "llmgw ") || !strings.Contains(string(out), "caddy v2.") || !strings.Contains(string(out), "go1.") {
		t.Errorf("llmgw version: %v\n%s", err, out)
	}
	if flag, _ := exec.Command(binary, "--version").CombinedOutput(); string(flag) != string(out) {
		t.Errorf("llmgw --version says %q, llmgw version %q", flag, out)
	}
	raw, err := exec.Command(binary, "version", "--json").Output()
	var b struct{ Version, Caddy, Go string }
	if err != nil || json.Unmarshal(raw, &b) != nil || b.Version == "" || !strings.HasPrefix(b.Caddy, "v2.") {
		t.Errorf("llmgw version --json: %v %s", err, raw)
	}

	before := fileSum(t, binary)
	for _, args := range [][]string{{"add-package", "github.com/caddy-dns/cloudflare"}, {"remove-package", "github.com/llmgw/llmgw"}} {
		out, err := exec.Command(binary, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "would replace this llmgw") || !strings.Contains(string(out), "xcaddy build --with github.com/llmgw/llmgw") {
			t.Errorf("llmgw %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if fileSum(t, binary) != before {
		t.Error("the binary changed")
	}
	help, _ := exec.Command(binary, "help").CombinedOutput()
	for _, name := range []string{"add-package", "remove-package"} {
		if strings.Contains(string(help), "  "+name+" ") {
			t.Errorf("the help lists %s:\n%s", name, help)
		}
	}

	// A subcommand a group lacks is an error, as an unknown command is.
	for _, args := range [][]string{{"nosuch"}, {"ctl", "nosuch"}, {"ctl", "model", "nosuch"}, {"mirror", "nosuch"}} {
		out, err := exec.Command(binary, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), `unknown command "nosuch"`) {
			t.Errorf("llmgw %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	// A release build: the version and commit it was stamped with.
	dir := t.TempDir()
	bin := filepath.Join(dir, "llmgw")
	build := exec.Command("go", "build", "-o", bin, "-ldflags",
		"-X github.com/llmgw/llmgw/modules/internal/buildinfo.version=v9.8.7 -X github.com/llmgw/llmgw/modules/internal/buildinfo.commit=0123456789abcdef0123", ".")
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building a stamped llmgw: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "llmgw v9.8.7 (commit 0123456789ab, caddy v2.") {
		t.Errorf("a stamped build's version: %v\n%s", err, out)
	}
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}
