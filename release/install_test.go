package release

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestSumOf(t *testing.T) {
	sums := []byte("AA11  llmgw_v1_linux_amd64.tar.gz\nbb22 *llmgw_v1_darwin_arm64.tar.gz\n")
	if s, ok := sumOf(sums, "llmgw_v1_linux_amd64.tar.gz"); !ok || s != "aa11" {
		t.Errorf("got %q %v, want aa11", s, ok)
	}
	if s, ok := sumOf(sums, "llmgw_v1_darwin_arm64.tar.gz"); !ok || s != "bb22" {
		t.Errorf("binary mode line: got %q %v, want bb22", s, ok)
	}
	if _, ok := sumOf(sums, "llmgw_v1_linux"); ok {
		t.Error("a name's prefix matched")
	}
}

// TestReplaceAndRollback: the new binary takes the path with the old
// one's mode, the old is kept as .previous, --rollback swaps them, and no
// temporary file is left beside them.
func TestReplaceAndRollback(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "llmgw")
	os.WriteFile(bin, []byte("old"), 0o750)
	if err := Rollback(bin); err == nil || !strings.Contains(err.Error(), "no "+bin+".previous") {
		t.Errorf("rollback with nothing to go back to: %v", err)
	}
	if err := Replace(bin, []byte("new")); err != nil {
		t.Fatal(err)
	}
	check := func(what, cur, prev string) {
		t.Helper()
		c, _ := os.ReadFile(bin)
		p, _ := os.ReadFile(bin + ".previous")
		if string(c) != cur || string(p) != prev {
			t.Errorf("%s: binary %q, previous %q, want %q and %q", what, c, p, cur, prev)
		}
		if fi, _ := os.Stat(bin); fi.Mode().Perm() != 0o750 {
			t.Errorf("%s: mode %o, want the old one's 750", what, fi.Mode().Perm())
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 2 {
			t.Errorf("%s: %d files beside the binary, want it and .previous", what, len(entries))
		}
	}
	check("upgrade", "new", "old")
	if err := Rollback(bin); err != nil {
		t.Fatal(err)
	}
	check("rollback", "old", "new")
}

func TestWriteErrSaysSudo(t *testing.T) {
	err := writeErr("/usr/local/bin/llmgw", &fs.PathError{Op: "open", Path: "/usr/local/bin/.llmgw", Err: fs.ErrPermission})
	if !strings.Contains(err.Error(), "run with sudo") {
		t.Errorf("got %v, want it to say run with sudo", err)
	}
}

func TestPlatformOf(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(exe)
	if got := PlatformOf(b); got != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("this test binary: got %s, want %s/%s", got, runtime.GOOS, runtime.GOARCH)
	}
	if got := PlatformOf([]byte("#!/bin/sh\n")); !strings.Contains(got, "unknown platform") {
		t.Errorf("a script: got %s", got)
	}
}
