package enginelist

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/llmgw/llmgw/plugins/engine"
)

// Every engine is listed once: built in, configured, and the executable
// plugin files of the plugin directory.
func TestInstalled(t *testing.T) {
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{"llmgw-engine-comfy": 0o755, "llmgw-engine-notes": 0o644, "other": 0o755} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	got := Installed([]string{"sim", "openai"}, []string{"openai", "custom"}, dir)
	if want := []string{"comfy", "custom", "openai", "sim"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// A running engine is described by its plugin, another by running its
// plugin file with describe; one that cannot be asked says why.
func TestList(t *testing.T) {
	dir := t.TempDir()
	plugin := filepath.Join(dir, "llmgw-engine-comfy")
	script := "#!/bin/sh\n[ \"$1\" = describe ] || exit 3\necho '{\"type\":\"comfy\",\"version\":\"2.0\",\"protocol\":1,\"options\":[{\"name\":\"token\",\"secret\":true,\"required\":true}],\"example\":\"name: c\"}'\n"
	if err := os.WriteFile(plugin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	src := Source{
		Running: func(typ string) (engine.Info, int, bool) {
			return engine.Info{Type: "sim", Version: "1"}, 42, typ == "sim"
		},
		Command: func(typ string) ([]string, string, error) {
			if typ == "comfy" {
				return []string{plugin}, "", nil
			}
			return nil, "", errors.New("no plugin at /x/llmgw-engine-" + typ)
		},
	}
	got := List(context.Background(), []string{"comfy", "gone", "sim"}, src)
	if got[0].Type != "comfy" || got[0].Version != "2.0" || got[0].Running || got[0].Example != "name: c" ||
		len(got[0].Options) != 1 || !got[0].Options[0].Secret || !got[0].Options[0].Required {
		t.Errorf("a plugin file: got %+v", got[0])
	}
	if got[1].Type != "gone" || got[1].Error != "no plugin at /x/llmgw-engine-gone" {
		t.Errorf("a missing plugin: got %+v", got[1])
	}
	if got[2].Type != "sim" || !got[2].Running || got[2].PID != 42 {
		t.Errorf("a running engine: got %+v", got[2])
	}
	// A plugin file whose sha256 is not the configured one is not run.
	src.Command = func(string) ([]string, string, error) {
		return []string{plugin}, "0000000000000000000000000000000000000000000000000000000000000000", nil
	}
	if got := List(context.Background(), []string{"comfy"}, src); got[0].Error == "" || got[0].Version != "" {
		t.Errorf("a plugin with another sha256: got %+v", got[0])
	}
}

// With a cache, a plugin file is run once for lists within DescribeTTL.
func TestListCache(t *testing.T) {
	dir := t.TempDir()
	plugin, runs := filepath.Join(dir, "llmgw-engine-x"), filepath.Join(dir, "runs")
	script := "#!/bin/sh\necho run >> " + runs + "\necho '{\"type\":\"x\",\"version\":\"1\"}'\n"
	if err := os.WriteFile(plugin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	src := Source{Cache: &Cache{},
		Running: func(string) (engine.Info, int, bool) { return engine.Info{}, 0, false },
		Command: func(string) ([]string, string, error) { return []string{plugin}, "", nil }}
	for range 3 {
		if got := List(context.Background(), []string{"x"}, src); got[0].Version != "1" {
			t.Fatalf("got %+v", got[0])
		}
	}
	if b, _ := os.ReadFile(runs); string(b) != "run\n" {
		t.Errorf("the plugin ran %q, want once", b)
	}
}
