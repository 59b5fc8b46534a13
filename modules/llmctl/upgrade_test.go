package llmctl

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestLocate(t *testing.T) {
	plat := runtime.GOOS + "_" + runtime.GOARCH
	for _, tc := range []struct {
		name, arg, from string
		want            location
		wantErr         string
	}{
		{"version under an https base", "v1.2.3", "https://example.com/rel/v1.2.3/", location{base: "https://example.com/rel/v1.2.3", name: "llmgw_v1.2.3_" + plat + ".tar.gz", remote: true}, ""},
		{"version under a directory", "v1.2.3", "/srv/rel", location{base: "/srv/rel", name: "llmgw_v1.2.3_" + plat + ".tar.gz"}, ""},
		{"an https URL", "https://example.com/a/llmgw_v1_linux_amd64.tar.gz", "", location{base: "https://example.com/a", name: "llmgw_v1_linux_amd64.tar.gz", remote: true}, ""},
		{"plain http on loopback", "http://127.0.0.1:8000/x.tar.gz", "", location{base: "http://127.0.0.1:8000", name: "x.tar.gz", remote: true}, ""},
		{"plain http elsewhere", "http://example.com/x.tar.gz", "", location{}, "use https://"},
		{"version without --from", "v1.2.3", "", location{}, "--from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := locate(tc.arg, tc.from)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("got %v, want an error saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %+v, %v, want %+v", got, err, tc.want)
			}
		})
	}
}

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
	if err := rollbackBinary(bin); err == nil || !strings.Contains(err.Error(), "no "+bin+".previous") {
		t.Errorf("rollback with nothing to go back to: %v", err)
	}
	if err := replaceBinary(bin, []byte("new")); err != nil {
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
	if err := rollbackBinary(bin); err != nil {
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
	if got := platformOf(b); got != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("this test binary: got %s, want %s/%s", got, runtime.GOOS, runtime.GOARCH)
	}
	if got := platformOf([]byte("#!/bin/sh\n")); !strings.Contains(got, "unknown platform") {
		t.Errorf("a script: got %s", got)
	}
}

// TestRestartService: --service runs systemctl restart <unit> (here a
// systemctl of the test's on PATH that records its arguments), and says
// what failed when it fails.
func TestRestartService(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "args")
	script := "#!/bin/sh\necho \"$@\" >" + record + "\n[ \"$2\" = broken ] && { echo 'Unit broken.service not found.' >&2; exit 5; }\nexit 0\n"
	if err := os.WriteFile(filepath.Join(dir, "systemctl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out strings.Builder
	u := &upgrader{ctl: ctl{out: &out}, service: "llmgw"}
	if err := u.restart(BuildInfo{Version: "v1.0.0"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(record); string(b) != "restart llmgw\n" {
		t.Errorf("systemctl ran with %q, want restart llmgw", b)
	}
	u.service = "broken"
	if err := u.restart(BuildInfo{}); err == nil || !strings.Contains(err.Error(), "Unit broken.service not found") || !strings.Contains(err.Error(), "restart the service yourself") {
		t.Errorf("a failing systemctl: got %v", err)
	}
}
