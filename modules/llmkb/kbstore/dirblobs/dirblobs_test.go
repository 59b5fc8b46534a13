package dirblobs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore/storetest"
)

func TestConformance(t *testing.T) {
	storetest.RunBlobs(t, func(t *testing.T) kbstore.Blobs {
		b, err := Open(filepath.Join(t.TempDir(), "llm", "kb", "files"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

// TestPathsRefused tries ids that would reach outside the directory:
// each is refused with a message naming the rule, and nothing outside
// is written, read or deleted.
func TestPathsRefused(t *testing.T) {
	root := t.TempDir()
	secret := filepath.Join(root, "secret")
	if err := os.WriteFile(secret, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := Open(filepath.Join(root, "files"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"../secret", "..", ".", "", "a/b", `..\secret`, "/etc/passwd", "file-1/../../secret", "file-..", ".tmp-x", "file\x00"} {
		t.Run(id, func(t *testing.T) {
			for what, err := range map[string]error{
				"PutBlob":    b.PutBlob(t.Context(), id, []byte("overwritten")),
				"DeleteBlob": b.DeleteBlob(t.Context(), id),
			} {
				if err == nil || !strings.Contains(err.Error(), "without path separators") {
					t.Errorf("%s(%q) = %v, want an error saying what an id may be", what, id, err)
				}
			}
			if data, err := b.GetBlob(t.Context(), id); err == nil || !strings.Contains(err.Error(), "invalid file id") {
				t.Errorf("GetBlob(%q) = %q, %v; want refused", id, data, err)
			}
		})
	}
	if data, _ := os.ReadFile(secret); string(data) != "keep" {
		t.Fatalf("the file outside the directory holds %q, want it untouched", data)
	}
}

// TestNoTempFilesLeft leaves only the blobs in the directory.
func TestNoTempFilesLeft(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"file-1", "file-2", "file-1"} {
		if err := b.PutBlob(t.Context(), id, []byte(id)); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "file-1 file-2" {
		t.Fatalf("directory holds %q, want [file-1 file-2]", names)
	}
}
