package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
)

// manualSections cuts the project's manual (README.md and docs/*.md)
// into its sections: real Markdown documents of every length, with code
// blocks and tables.
func manualSections(t *testing.T, n int) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	sort.Strings(files)
	out := map[string][]byte{}
	heading := regexp.MustCompile(`(?m)^#{1,3} `)
	for _, f := range append([]string{"../../README.md"}, files...) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		idx := heading.FindAllIndex(raw, -1)
		for i := 0; i < len(idx) && len(out) < n; i++ {
			end := len(raw)
			if i+1 < len(idx) {
				end = idx[i+1][0]
			}
			sec := raw[idx[i][0]:end]
			if len(bytes.TrimSpace(sec)) < 200 {
				continue
			}
			out[fmt.Sprintf("section-%02d.md", len(out))] = sec
		}
	}
	return out
}

// TestKnowledgeBaseImportSurvivesKill kills llmgw (SIGKILL) in the
// middle of an import whose embedder is slow, and starts it again on the
// same data directory: every file ends completed, none twice (each file's
// passages are as many as its chunks), and a file that was in progress
// when it died is found.
func TestKnowledgeBaseImportSurvivesKill(t *testing.T) {
	models := `
		model sim-embed {
			engine sim
			option embedding_delay 150ms
			min 1
		}`
	g := startGatewayBefore(t, models, "\t\tllm_kb {\n\t\t\tembedder sim-embed\n\t\t}\n")
	g.waitReady()
	c := g.client()
	docs := manualSections(t, 24)
	var ids []string
	for name, data := range docs {
		ids = append(ids, kbUpload(t, c, name, data).ID)
	}
	vs, err := c.VectorStores.New(bg, openai.VectorStoreNewParams{Name: openai.String("manual")})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.VectorStores.FileBatches.New(bg, vs.ID, openai.VectorStoreFileBatchNewParams{FileIDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	var inProgress []string
	waitFor(t, 60*time.Second, "some files done and some in progress", func() bool {
		b, err := c.VectorStores.FileBatches.Get(bg, vs.ID, batch.ID)
		return err == nil && b.FileCounts.Completed >= 2 && b.FileCounts.InProgress >= 4
	})
	page, err := c.VectorStores.Files.List(bg, vs.ID, openai.VectorStoreFileListParams{Filter: openai.VectorStoreFileListParamsFilterInProgress, Limit: openai.Int(100)})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range page.Data {
		inProgress = append(inProgress, f.ID)
	}
	_ = g.cmd.Process.Kill()
	<-g.exited
	g.start()
	g.waitReady()
	waitFor(t, 90*time.Second, "the import to end after the restart", func() bool {
		b, err := c.VectorStores.FileBatches.Get(bg, vs.ID, batch.ID)
		return err == nil && b.Status != openai.VectorStoreFileBatchStatusInProgress
	})
	b, _ := c.VectorStores.FileBatches.Get(bg, vs.ID, batch.ID)
	if b.FileCounts.Completed != int64(len(ids)) {
		t.Fatalf("after the restart: %+v, want all %d completed", b.FileCounts, len(ids))
	}
	for _, id := range ids {
		kbCheckNoDuplicates(t, c, vs.ID, id)
	}
	f, err := c.Files.Get(bg, inProgress[0])
	if err != nil {
		t.Fatal(err)
	}
	text := string(docs[f.Filename])
	first := strings.TrimSpace(strings.SplitN(text, "\n", 2)[0])
	if names, _ := kbSearch(t, c, vs.ID, strings.TrimLeft(first, "# "), nil); len(names) == 0 || !contains(names[:min(3, len(names))], f.Filename) {
		t.Errorf("a file in progress at the kill (%s, %q) is not found: %v", f.Filename, first, names)
	}
}

// kbCheckNoDuplicates checks that a file's passages in a store are its
// chunks once: no two alike.
func kbCheckNoDuplicates(t *testing.T, c openai.Client, store, file string) {
	t.Helper()
	page, err := c.VectorStores.Files.Content(bg, store, file)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range page.Data {
		if seen[p.Text] {
			t.Errorf("file %s has a passage twice: %.60q", file, p.Text)
		}
		seen[p.Text] = true
	}
	if len(page.Data) == 0 {
		t.Errorf("file %s has no passages", file)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
