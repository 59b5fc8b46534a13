package llmctl

import (
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
