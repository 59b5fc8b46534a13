package setup

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// shippedAnswers are the answers the units in deploy/systemd are
// written from: the defaults, as root, on a machine without GPU groups.
func shippedAnswers(cluster bool) *setupAnswers {
	a := defaultAnswers()
	a.Units, a.Node = "/etc/systemd/system", "gpu-1"
	if cluster {
		a.Redis, a.Advertise = "redis://10.0.0.5:6379/0", "10.0.0.11:7443"
	}
	return &a
}

// TestShippedUnitsAreSetups keeps deploy/systemd what setup writes with
// its defaults (LLMGW_UPDATE_UNITS=1 rewrites them).
func TestShippedUnitsAreSetups(t *testing.T) {
	for _, cluster := range []bool{false, true} {
		a := shippedAnswers(cluster)
		got, err := renderUnit(a, nil)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("..", "..", "..", "deploy", "systemd", a.unitName(false))
		if os.Getenv("LLMGW_UPDATE_UNITS") == "1" {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v; LLMGW_UPDATE_UNITS=1 go test -run TestShippedUnitsAreSetups ./modules/llmctl writes it", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what setup writes with its defaults; LLMGW_UPDATE_UNITS=1 go test -run TestShippedUnitsAreSetups ./modules/llmctl rewrites it", path)
		}
	}
}

// TestUnitsVerify runs systemd-analyze verify on the shipped units and
// on units setup writes (with GPU groups, a mirror directory, a cluster
// node), their binary path pointed at a file that exists.
func TestUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("systemd-analyze is not on PATH; install systemd")
		}
		t.Skip("systemd-analyze is not on PATH")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "llmgw")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	units := map[string][]byte{}
	for _, name := range []string{"llmgw.service", "llmgw-node@.service"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		units["shipped-"+name] = bytes.ReplaceAll(b, []byte("/usr/local/bin/llmgw"), []byte(bin))
	}
	for _, cluster := range []bool{false, true} {
		a := shippedAnswers(cluster)
		a.Binary, a.Data, a.MirrorDir = bin, "/srv/llmgw", "/srv/weights"
		b, err := renderUnit(a, []string{"render", "video"})
		if err != nil {
			t.Fatal(err)
		}
		units["written-"+a.unitName(false)] = b
	}
	for name, b := range units {
		t.Run(name, func(t *testing.T) {
			unitDir := t.TempDir()
			file := strings.TrimPrefix(strings.TrimPrefix(name, "shipped-"), "written-")
			path := filepath.Join(unitDir, file)
			if strings.Contains(file, "@") {
				path = filepath.Join(unitDir, strings.Replace(file, "@", "@gpu-1", 1))
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(analyze, "verify", path).CombinedOutput()
			if err != nil || len(bytes.TrimSpace(out)) > 0 {
				t.Errorf("systemd-analyze verify %s: %v\n%s", file, err, out)
			}
		})
	}
}
