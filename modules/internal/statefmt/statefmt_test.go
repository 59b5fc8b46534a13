package statefmt

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckDir(t *testing.T) {
	dir := t.TempDir()
	if err := CheckDir(dir, "v0.16.0"); err != nil {
		t.Fatalf("fresh directory: %v", err)
	}
	path := filepath.Join(dir, "llmgw", FileName)
	var m Marker
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &m); err != nil || m.Layout != Layout || m.Version != "v0.16.0" {
		t.Fatalf("marker %s: %v", b, err)
	}
	// An older release of the same layout (a rollback) starts and marks it.
	if err := CheckDir(dir, "v0.15.0"); err != nil {
		t.Fatalf("same layout, older release: %v", err)
	}
	newer, _ := json.Marshal(Marker{Layout: Layout + 1, Version: "v9.0.0"})
	_ = os.WriteFile(path, newer, 0o600)
	err := CheckDir(dir, "v0.16.0")
	if err == nil || !strings.Contains(err.Error(), "written by llmgw v9.0.0") || !strings.Contains(err.Error(), "run v9.0.0 or a later release") {
		t.Fatalf("newer layout: %v", err)
	}
	if b2, _ := os.ReadFile(path); string(b2) != string(newer) {
		t.Fatalf("a refused start changed the marker: %s", b2)
	}
	_ = os.WriteFile(path, []byte("{"), 0o600)
	if err := CheckDir(dir, "v0.16.0"); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Fatalf("broken marker: %v", err)
	}
}
