package llmctl

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// runMirror runs "llmgw mirror --config <config> args…" in-process;
// without a config, it runs "llmgw mirror args…".
func runMirror(t *testing.T, config string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	mc := &mirrorCmd{out: &out, errOut: &errOut}
	root := &cobra.Command{Use: "mirror", SilenceUsage: true, SilenceErrors: true}
	mc.register(root)
	if config != "" {
		args = append([]string{"--config", config}, args...)
	}
	root.SetArgs(args)
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	err = root.Execute()
	return out.String(), errOut.String(), err
}

// TestMirrorCommands adds a file to a directory store named by a JSON
// config's apps.llm.mirror (nothing else of the llm app is read), and
// lists, shows, verifies and removes it.
func TestMirrorCommands(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	config := filepath.Join(dir, "config.json")
	store := filepath.Join(dir, "store")
	if err := os.WriteFile(config, []byte(`{"apps": {"llm": {"mirror": {"stores": [{"name": "disk", "type": "dir", "path": "`+store+`"}],
		"cache": "`+filepath.Join(dir, "cache")+`"}, "models": [{"name": "whatever", "future_field": true}]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	weightsFile := filepath.Join(dir, "tiny.gguf")
	data := append([]byte("GGUF"), bytes.Repeat([]byte{1}, 1020)...)
	if err := os.WriteFile(weightsFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)

	out, _, err := runMirror(t, config, "add", "tiny", weightsFile, "--version", "v1")
	if err != nil {
		t.Fatal(err)
	}
	check(t, "mirror add", out, "added tiny/v1 (gguf, 1 files, 1.0 KiB) to disk\n")
	out, _, err = runMirror(t, config, "show", "tiny", "v1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "tiny/v1  format gguf  added ") || !strings.Contains(out, "tiny.gguf  1.0 KiB  "+hex.EncodeToString(sum[:])+"\n") {
		t.Errorf("mirror show:\n%s", out)
	}
	out, _, err = runMirror(t, config, "verify", "tiny", "v1")
	if err != nil {
		t.Fatal(err)
	}
	check(t, "mirror verify", out, lines(
		"STORE  FILE       STATUS  DETAIL",
		"disk   tiny.gguf  ok      "))
	out, _, err = runMirror(t, config, "remove", "tiny", "v1")
	if err != nil {
		t.Fatal(err)
	}
	check(t, "mirror remove", out, "removed tiny/v1 from disk\n")
	out, _, err = runMirror(t, config, "list")
	if err != nil {
		t.Fatal(err)
	}
	check(t, "mirror list", out, "MODEL  VERSION  FORMAT  FILES  SIZE  STORES  ADDED  SOURCE\n")
}

func TestMirrorConfigErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"apps": {"llm": {"mirror": {"stores": "disk"}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, tt := range []struct {
		name, config string
		args         []string
		want         string
	}{
		{"no config", "", nil, "no config: give --config with the llmgw config whose mirror block names the stores"},
		{"missing file", filepath.Join(dir, "none.json"), nil, "reading the config: open " + filepath.Join(dir, "none.json") + ": no such file or directory"},
		{"bad mirror", bad, nil, "reading " + bad + ": json: cannot unmarshal string into Go struct field MirrorConfig.apps.llm.mirror.stores of type []*weights.StoreConfig"},
		{"unknown adapter", bad, []string{"--adapter", "toml"}, `unknown config adapter "toml"`},
	} {
		_, _, err := runMirror(t, tt.config, append(tt.args, "list")...)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: got %v, want %q", tt.name, err, tt.want)
		}
	}
}
