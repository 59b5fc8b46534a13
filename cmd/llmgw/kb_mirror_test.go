package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/llmgw/llmgw/mirror/s3test"
)

// TestKnowledgeBaseFilesInMirror configures the weights mirror with two
// S3 stores (versitygw): an uploaded file's bytes go to both, under
// kb/files/, are read back (also with one store down) and ingested, and
// deleting the file deletes them from both.
func TestKnowledgeBaseFilesInMirror(t *testing.T) {
	a, b := s3test.Start(t), s3test.Start(t)
	g := startGatewayBefore(t, kbModels+mirrorBlock(t, a, b, filepath.Join(t.TempDir(), "cache")), "\t\tllm_kb\n")
	g.waitReady()
	c := g.client()
	data, err := os.ReadFile(filepath.Join("testdata", "kb", "security.html"))
	if err != nil {
		t.Fatal(err)
	}
	f := kbUpload(t, c, "security.html", data)
	for name, s := range map[string]*s3test.Server{"a": a, "b": b} {
		got, err := os.ReadFile(s.ObjectPath("weights", "llmgw/kb/files/"+f.ID))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("store %s does not hold the file's bytes: %v", name, err)
		}
	}
	vs, err := c.VectorStores.New(bg, openai.VectorStoreNewParams{FileIDs: []string{f.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if got := kbWaitStore(t, c, vs.ID); got.FileCounts.Completed != 1 {
		t.Fatalf("the file read from the mirror was not ingested: %+v", got.FileCounts)
	}
	a.Kill()
	resp, err := c.Files.Content(bg, f.ID)
	if err != nil {
		t.Fatalf("the content with one store down: %v", err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(got, data) {
		t.Fatalf("the content with one store down differs")
	}
	a.Restart()
	if _, err := c.Files.Delete(bg, f.ID); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*s3test.Server{"a": a, "b": b} {
		if _, err := os.Stat(s.ObjectPath("weights", "llmgw/kb/files/"+f.ID)); !os.IsNotExist(err) {
			t.Errorf("store %s still holds a deleted file's bytes: %v", name, err)
		}
	}
}
