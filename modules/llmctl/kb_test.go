package llmctl

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// kbServer is an admin endpoint with llm_kb's routes: one store,
// "handbook", whose uploaded files are read (completed, or failed when
// their name says bad) at the second look.
type kbServer struct {
	*httptest.Server
	mu      sync.Mutex
	got     map[string]string // file name → content uploaded
	files   []llmapi.KBFile
	looks   int
	sent    []string
	created llmapi.KBCreateStore
}

func newKBServer(t *testing.T) *kbServer {
	s := &kbServer{got: map[string]string{}}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	store := llmapi.KBStore{ID: "vs_1", Name: "handbook", Tenant: "acme/research", Shared: true, Bytes: 2048, UpdatedAt: at,
		FileCounts: llmapi.KBFileCounts{Completed: 2, Failed: 1, Total: 3}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /llm/kb/stores", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode([]llmapi.KBStore{store})
	})
	mux.HandleFunc("POST /llm/kb/stores", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&s.created)
		w.WriteHeader(201)
		_ = json.NewEncoder(w).Encode(llmapi.KBStore{ID: "vs_2", Name: s.created.Name, Tenant: s.created.Tenant, Shared: s.created.Share})
	})
	mux.HandleFunc("POST /llm/kb/stores/vs_1/files", func(w http.ResponseWriter, r *http.Request) {
		f, h, err := r.FormFile("file")
		if err != nil {
			t.Errorf("an upload without a file part: %v", err)
			return
		}
		data, _ := io.ReadAll(f)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.got[h.Filename] = string(data)
		kf := llmapi.KBFile{ID: "file-" + h.Filename, Filename: h.Filename, Bytes: int64(len(data)), Status: "in_progress"}
		s.files = append(s.files, kf)
		w.WriteHeader(201)
		_ = json.NewEncoder(w).Encode(kf)
	})
	mux.HandleFunc("GET /llm/kb/stores/vs_1", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.looks++; s.looks > 1 {
			for i := range s.files {
				s.files[i].Status = "completed"
				if strings.Contains(s.files[i].Filename, "bad") {
					s.files[i].Status, s.files[i].Error = "failed", "the PDF has no text layer; scan it with OCR first"
				}
			}
		}
		_ = json.NewEncoder(w).Encode(llmapi.KBStoreDetail{KBStore: store, Files: s.files})
	})
	mux.HandleFunc("POST /llm/kb/stores/vs_1/search", func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.sent = append(s.sent, string(raw))
		s.mu.Unlock()
		_ = json.NewEncoder(w).Encode(llmapi.KBSearchResults{Query: "reset", Passages: []llmapi.KBPassage{
			{FileID: "file-a", Filename: "guide.md", Score: 0.8123, Text: "Reset it\nunder   Settings."}}})
	})
	mux.HandleFunc("POST /llm/kb/stores/vs_1/reindex", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(llmapi.KBReindexed{ID: "vs_1", Files: 3})
	})
	mux.HandleFunc("DELETE /llm/kb/stores/vs_1", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(llmapi.KBDeleted{ID: "vs_1", Deleted: true})
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// runKB runs "llmgw ctl --admin <s> args…".
func runKB(t *testing.T, s *kbServer, args ...string) (string, error) {
	t.Helper()
	out, _, err := run(t, &admin{Server: s.Server}, args...)
	return out, err
}

// TestKBCommands: the list's table, create's body, search's passages,
// reindex and delete, a store named instead of its id.
func TestKBCommands(t *testing.T) {
	s := newKBServer(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"kb", "list"}, lines(
			"ID    NAME      TENANT         SHARED  FILES                      BYTES    UPDATED",
			"vs_1  handbook  acme/research  yes     3 (2 completed, 1 failed)  2.0 KiB  2026-12-01 10:00:00")},
		{[]string{"kb", "create", "--tenant", "acme/research", "--share", "policies"},
			"knowledge base vs_2 (policies) created for acme/research, shared with every project below it; add files with llmgw ctl kb add vs_2 PATH...\n"},
		{[]string{"kb", "search", "handbook", "how to reset", "--max", "3"}, lines("1. guide.md  (score 0.812)", "   Reset it under Settings.")},
		{[]string{"kb", "reindex", "vs_1"}, "3 files of vs_1 are being reindexed; llmgw ctl kb list shows their progress\n"},
		{[]string{"kb", "delete", "handbook"}, "knowledge base vs_1 deleted\n"},
	}
	for _, tt := range tests {
		out, err := runKB(t, s, tt.args...)
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		check(t, strings.Join(tt.args, " "), out, tt.want)
	}
	if s.created != (llmapi.KBCreateStore{Tenant: "acme/research", Share: true, Name: "policies"}) {
		t.Errorf("create sent %+v", s.created)
	}
	if want := []string{`{"query":"how to reset","max_num_results":3}`}; !slices.Equal(s.sent, want) {
		t.Errorf("search sent %q, want %q", s.sent, want)
	}
	if _, err := runKB(t, s, "kb", "search", "nope", "x"); err == nil || !strings.Contains(err.Error(), `no knowledge base has the id or name "nope"`) {
		t.Errorf("an unknown store: got %v", err)
	}
}

// TestKBAdd adds a folder: its readable files, in its subfolders too,
// are uploaded as they are on disk, the others and hidden folders left
// out; it waits for them and prints each failure's reason.
func TestKBAdd(t *testing.T) {
	s := newKBServer(t)
	dir := t.TempDir()
	for name, content := range map[string]string{"guide.md": "# Guide", "sub/notes.TXT": "notes", "sub/bad.pdf": "%PDF-1.4",
		"photo.png": "png", ".git/HEAD.md": "hidden", "sub/page.htm": "<p>hi</p>"} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := runKB(t, s, "kb", "add", "handbook", dir)
	if err == nil || err.Error() != "1 of 4 files could not be read" {
		t.Fatalf("add: got error %v, want one file failing", err)
	}
	want := map[string]string{"guide.md": "# Guide", "notes.TXT": "notes", "bad.pdf": "%PDF-1.4", "page.htm": "<p>hi</p>"}
	if len(s.got) != len(want) {
		t.Fatalf("uploaded %v, want %v", s.got, want)
	}
	for k, v := range want {
		if s.got[k] != v {
			t.Errorf("uploaded %s as %q, want %q", k, s.got[k], v)
		}
	}
	check(t, "kb add", out, lines(
		"uploaded guide.md (7 B) as file-guide.md",
		"uploaded sub/bad.pdf (8 B) as file-bad.pdf",
		"uploaded sub/notes.TXT (5 B) as file-notes.TXT",
		"uploaded sub/page.htm (9 B) as file-page.htm",
		"reading: 0/4 files done",
		"4 files added to vs_1: 3 completed, 1 failed; it holds 2.0 KiB in 3 files",
		"  failed sub/bad.pdf: the PDF has no text layer; scan it with OCR first"))
	// With -o json the store is printed, and the failure still exits 1.
	if out, err := runKB(t, newKBServer(t), "-o", "json", "kb", "add", "handbook", filepath.Join(dir, "sub", "bad.pdf")); err == nil || !strings.HasSuffix(err.Error(), "files could not be read") || !strings.Contains(out, `"id"`) {
		t.Errorf("add -o json with a failing file: got %v, printed %q", err, out)
	}
	if _, err := runKB(t, s, "kb", "add", "vs_1", filepath.Join(dir, "photo.png")); err == nil || !strings.Contains(err.Error(), "llm_kb reads .pdf .docx .html .htm .md .markdown .txt files; this is none of them") {
		t.Errorf("adding a photo: got %v", err)
	}
}
