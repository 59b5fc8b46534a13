package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// TestKnowledgeBaseFormats uploads the document reader's fixtures through
// the API into one store: PDFs (two columns, a table), a DOCX, HTML in
// Latin-1, text in Windows-1252 and UTF-16 complete and give passages; an encrypted PDF, a scanned PDF and a ZIP fail with a
// last_error a person can act on. Another store with a static chunking
// strategy gives smaller passages.
func TestKnowledgeBaseFormats(t *testing.T) {
	g := startGatewayBefore(t, kbModels, "\t\tllm_kb\n")
	g.waitReady()
	c := g.client()
	dir := filepath.Join("..", "..", "modules", "llmkb", "docread", "testdata")
	good := []string{"newsletter.pdf", "pricetable.pdf", "handbook.docx", "kantine-latin1.html", "expenses-1252.txt", "notes-utf16.txt"}
	bad := map[string]string{"encrypted.pdf": "encrypted", "scan.pdf": "OCR", "archive.zip": "knowledge bases read"}
	var ids []string
	names := map[string]string{}
	for _, name := range good {
		f := kbUpload(t, c, name, mustReadFile(t, filepath.Join(dir, name)))
		ids, names[f.ID] = append(ids, f.ID), name
	}
	zip := []byte("PK\x03\x04\x14\x00\x00\x00\x08\x00" + strings.Repeat("\x00", 40))
	for name := range bad {
		data := zip
		if name != "archive.zip" {
			data = mustReadFile(t, filepath.Join(dir, name))
		}
		f := kbUpload(t, c, name, data)
		ids, names[f.ID] = append(ids, f.ID), name
	}
	vs, err := c.VectorStores.New(bg, openai.VectorStoreNewParams{FileIDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	kbWaitStore(t, c, vs.ID)
	page, err := c.VectorStores.Files.List(bg, vs.ID, openai.VectorStoreFileListParams{Limit: openai.Int(100)})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range page.Data {
		name := names[f.ID]
		want, shouldFail := bad[name]
		switch {
		case shouldFail && (f.Status != openai.VectorStoreFileStatusFailed || !strings.Contains(f.LastError.Message, want)):
			t.Errorf("%s: %s %+v, want failed with %q", name, f.Status, f.LastError, want)
		case !shouldFail && f.Status != openai.VectorStoreFileStatusCompleted:
			t.Errorf("%s: %s %+v, want completed", name, f.Status, f.LastError)
		case !shouldFail:
			kbCheckNoDuplicates(t, c, vs.ID, f.ID)
		}
	}
	auto := kbPassageSize(t, c, vs.ID, ids[0])
	static, err := c.VectorStores.New(bg, openai.VectorStoreNewParams{FileIDs: ids[:1], ChunkingStrategy: openai.FileChunkingStrategyParamUnion{
		OfStatic: &openai.StaticFileChunkingStrategyObjectParam{Static: openai.StaticFileChunkingStrategyParam{MaxChunkSizeTokens: 100, ChunkOverlapTokens: 20}}}})
	if err != nil {
		t.Fatal(err)
	}
	kbWaitStore(t, c, static.ID)
	if small := kbPassageSize(t, c, static.ID, ids[0]); small >= auto || small > 900 {
		t.Errorf("static chunks of 100 tokens average %d bytes, auto ones %d", small, auto)
	}
	if _, err := c.VectorStores.New(bg, openai.VectorStoreNewParams{ChunkingStrategy: openai.FileChunkingStrategyParamUnion{
		OfStatic: &openai.StaticFileChunkingStrategyObjectParam{Static: openai.StaticFileChunkingStrategyParam{MaxChunkSizeTokens: 100, ChunkOverlapTokens: 80}}}}); apiStatus(err) != 400 {
		t.Errorf("an overlap above half the chunk: want 400, got %v", err)
	}
}

// kbPassageSize is the average passage length of a file in a store.
func kbPassageSize(t *testing.T, c openai.Client, store, file string) int {
	t.Helper()
	content, err := c.VectorStores.Files.Content(bg, store, file)
	if err != nil || len(content.Data) == 0 {
		t.Fatalf("no passages of %s in %s: %v", file, store, err)
	}
	n := 0
	for _, p := range content.Data {
		n += len(p.Text)
	}
	return n / len(content.Data)
}

func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKnowledgeBaseBadInput sends what clients get wrong: each answer is
// a 4xx in OpenAI's error shape that says what was wrong.
func TestKnowledgeBaseBadInput(t *testing.T) {
	g := startGatewayBefore(t, kbModels, "\t\tllm_kb {\n\t\t\tmax_file_size 4KiB\n\t\t}\n")
	g.waitReady()
	c := g.client()
	vs, err := c.VectorStores.New(bg, openai.VectorStoreNewParams{Name: openai.String("x")})
	if err != nil {
		t.Fatal(err)
	}
	s := "/v1/vector_stores/" + vs.ID
	for _, tc := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"POST", s + "/search", `{"query":"x","max_num_results":0}`, 400, "max_num_results 0: give 1 to 50"},
		{"POST", s + "/search", `{"query":""}`, 400, "query is required"},
		{"POST", s + "/search", `{"query":"x","filters":{"type":"eqq","key":"a","value":1}}`, 400, "eqq"},
		{"POST", s + "/search", `{"query":"x","ranking_options":{"score_threshold":2}}`, 400, "score_threshold"},
		{"POST", s + "/search", `{"query":`, 400, "not what this endpoint takes"},
		{"POST", s + "/files", `{}`, 400, "file_id is required"},
		{"POST", s + "/files", `{"file_id":"file-nope"}`, 404, `no file found with id "file-nope"`},
		{"POST", s + "/files", `{"file_id":"file-x","attributes":{"a":{"b":1}}}`, 400, "strings, numbers or booleans"},
		{"POST", s + "/file_batches", `{}`, 400, "file_ids or as files"},
		{"POST", "/v1/vector_stores", `{"expires_after":{"anchor":"created_at","days":3}}`, 400, "last_active_at"},
		{"POST", "/v1/vector_stores", `{"share":"everyone"}`, 400, "share \"everyone\""},
		{"GET", "/v1/vector_stores/vs_nope", ``, 404, `no vector store found with id "vs_nope"`},
		{"GET", "/v1/vector_stores?limit=500", ``, 400, "1 to 100"},
		{"PUT", s, `{}`, 405, "use GET or POST or DELETE"},
		{"GET", "/v1/files/file-x/nonsense", ``, 404, "no endpoint"},
		{"POST", "/v1/files", `{"purpose":"assistants"}`, 400, "multipart/form-data"},
	} {
		req, _ := http.NewRequest(tc.method, g.base+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var shape struct {
			Error struct{ Message, Type string }
		}
		if resp.StatusCode != tc.status || json.Unmarshal(b, &shape) != nil || !strings.Contains(shape.Error.Message, tc.want) || shape.Error.Type == "" {
			t.Errorf("%s %s %s: %d %s, want %d with %q", tc.method, tc.path, tc.body, resp.StatusCode, b, tc.status, tc.want)
		}
	}
	big := bytes.Repeat([]byte("All work and no play makes Jack a dull boy.\n"), 500)
	_, err = c.Files.New(bg, openai.FileNewParams{File: openai.File(bytes.NewReader(big), "big.txt", "text/plain"), Purpose: openai.FilePurposeAssistants})
	if e := (*openai.Error)(nil); !errors.As(err, &e) || e.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(e.Message, "limit of 4.0 KiB (llm_kb max_file_size)") {
		t.Errorf("a file over max_file_size: want 413 naming max_file_size, got %v", err)
	}
	// A multipart upload without a purpose, and one with a purpose not kept.
	for _, tc := range []struct{ purpose, want string }{{"", "no purpose"}, {"fine-tune", "is not kept by this gateway"}} {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		fw, _ := mw.CreateFormFile("file", "a.txt")
		_, _ = fw.Write([]byte("hello"))
		if tc.purpose != "" {
			_ = mw.WriteField("purpose", tc.purpose)
		}
		mw.Close()
		req, _ := http.NewRequest("POST", g.base+"/v1/files", &body)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), tc.want) {
			t.Errorf("upload with purpose %q: %d %s", tc.purpose, resp.StatusCode, b)
		}
	}
}
