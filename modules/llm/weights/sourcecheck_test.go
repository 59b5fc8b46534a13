package weights

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// ggufBytes is a file that starts as GGUF files do.
var ggufBytes = append([]byte("GGUF\x03\x00\x00\x00"), make([]byte, 1000)...)

// weightsServer serves files by path; refuseHead answers HEAD with 405 as
// some object stores and CDNs do.
func weightsServer(t *testing.T, files map[string][]byte, refuseHead bool) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead && refuseHead {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, r.URL.Path, time.Time{}, bytes.NewReader(b))
	}))
	t.Cleanup(s.Close)
	return s
}

func TestCheckSourceURL(t *testing.T) {
	files := map[string][]byte{"/m.gguf": ggufBytes, "/m.bin": []byte("PK\x03\x04 a pickle zip, not GGUF")}
	for _, refuseHead := range []bool{false, true} {
		s := weightsServer(t, files, refuseHead)
		c := &SourceChecker{Client: s.Client(), Mirror: testMirror(t)}
		gguf := []string{catalog.FormatGGUF}
		tests := []struct {
			name, source string
			wantErr      string
			wantSize     int64
		}{
			{"answers", s.URL + "/m.gguf?token=secret", "", int64(len(ggufBytes))},
			{"404", s.URL + "/gone.gguf", "404 Not Found", 0},
			{"wrong format", s.URL + "/m.bin", "neither GGUF nor safetensors", 0},
			{"no file", s.URL + "/", "names no file", 0},
		}
		for _, tt := range tests {
			got, err := c.Check(context.Background(), &catalog.Model{Name: "m", Engine: "llamacpp", Source: tt.source}, gguf)
			if tt.wantErr != "" {
				var se *SourceError
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.As(err, &se) {
					t.Errorf("%s (HEAD refused %v): got %v, want a SourceError with %q", tt.name, refuseHead, err, tt.wantErr)
				}
				continue
			}
			if err != nil || got.Size != tt.wantSize || got.Format != catalog.FormatGGUF || got.Kind != "url" {
				t.Errorf("%s (HEAD refused %v): got %+v, %v; want size %d, gguf", tt.name, refuseHead, got, err, tt.wantSize)
			}
			if strings.Contains(got.Source, "secret") {
				t.Errorf("the check shows the URL's query: %s", got.Source)
			}
		}
	}
}

func TestCheckSourceURLUnreachable(t *testing.T) {
	s := httptest.NewServer(http.NotFoundHandler())
	u := s.URL
	s.Close()
	c := &SourceChecker{Client: http.DefaultClient, Mirror: testMirror(t)}
	_, err := c.Check(context.Background(), &catalog.Model{Name: "m", Engine: "llamacpp", Source: u + "/m.gguf"}, []string{catalog.FormatGGUF})
	if err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Errorf("got %v, want does not answer", err)
	}
}

func TestCheckSourceLocal(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "m.gguf"), filepath.Join(dir, "m.txt")
	os.WriteFile(good, ggufBytes, 0o644)
	os.WriteFile(bad, []byte("hello"), 0o644)
	c := &SourceChecker{Client: http.DefaultClient}
	gguf := []string{catalog.FormatGGUF}
	if got, err := c.Check(context.Background(), &catalog.Model{Name: "m", Engine: "llamacpp", Source: good}, gguf); err != nil || got.Size != int64(len(ggufBytes)) {
		t.Errorf("good file: got %+v, %v", got, err)
	}
	if _, err := c.Check(context.Background(), &catalog.Model{Name: "m", Engine: "llamacpp", Source: bad}, gguf); err == nil {
		t.Error("a text file for llama.cpp: want an error")
	}
	if _, err := c.Check(context.Background(), &catalog.Model{Name: "m", Engine: "llamacpp", Source: filepath.Join(dir, "none.gguf")}, gguf); err == nil {
		t.Error("a missing file: want an error")
	}
	// An engine that loads no files takes its source as it is.
	if got, err := c.Check(context.Background(), &catalog.Model{Name: "m", Engine: "sim", Source: "anything"}, []string{"sim"}); err != nil || got.Checked {
		t.Errorf("sim: got %+v, %v; want unchecked", got, err)
	}
}

// registryServer stands in for the registry's API: one repository,
// org/tiny at revision main, with a README and, on the listing's second
// page, a GGUF file.
func registryServer(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/models/org/tiny/revision/main", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"sha":"0123456789abcdef0123"}`))
	})
	mux.HandleFunc("/api/models/org/tiny/tree/0123456789abcdef0123", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("cursor") == "" {
			w.Header().Set("Link", "<http://"+r.Host+r.URL.Path+`?recursive=true&cursor=2>; rel="next"`)
			w.Write([]byte(`[{"type":"file","path":"README.md","size":10}]`))
			return
		}
		w.Write([]byte(`[{"type":"file","path":"tiny.gguf","size":134,"lfs":{"oid":"x","size":1048576}}]`))
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func TestCheckSourceRegistry(t *testing.T) {
	s := registryServer(t)
	c := &SourceChecker{Client: s.Client(), Registry: s.URL, Mirror: testMirror(t)}
	gguf := []string{catalog.FormatGGUF}
	tests := []struct {
		name, source, wantErr string
		wantSize              int64
	}{
		{"repository", "hf://org/tiny", "", 1048576 + 10},
		{"file", "hf://org/tiny/tiny.gguf", "", 1048576},
		{"no such file", "hf://org/tiny/big.gguf", `has no file at "big.gguf"`, 0},
		{"no such repository", "hf://org/nope", "not found in the registry", 0},
		{"no such revision", "hf://org/tiny@v9", "not found in the registry", 0},
		{"not gguf", "hf://org/tiny/README.md", "neither GGUF nor safetensors", 0},
	}
	for _, tt := range tests {
		got, err := c.Check(context.Background(), &catalog.Model{Name: "m", Engine: "llamacpp", Source: tt.source}, gguf)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: got %v, want %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got.Size != tt.wantSize || got.Kind != "registry" {
			t.Errorf("%s: got %+v, %v; want size %d", tt.name, got, err, tt.wantSize)
		}
	}
	c.Registry = ""
	if _, err := c.Check(context.Background(), &catalog.Model{Name: "m", Engine: "llamacpp", Source: "hf://org/tiny"}, gguf); err == nil || !strings.Contains(err.Error(), "HF_ENDPOINT") {
		t.Errorf("no registry: got %v", err)
	}
}

// testMirror is a mirror with one directory store.
func testMirror(t *testing.T) *mirror.Mirror {
	dir := t.TempDir()
	st, err := mirror.NewDirStore("local", filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	mr, err := mirror.New(mirror.Config{Stores: []mirror.Store{st}, CacheDir: filepath.Join(dir, "cache"), Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	return mr
}

// A URL or registry source is fetched through the mirror: without one it
// would fail at the first start.
func TestCheckSourceNeedsMirror(t *testing.T) {
	s := weightsServer(t, map[string][]byte{"/m.gguf": ggufBytes}, false)
	c := &SourceChecker{Client: s.Client()}
	_, err := c.Check(context.Background(), &catalog.Model{Name: "m", Engine: "llamacpp", Source: s.URL + "/m.gguf"}, []string{catalog.FormatGGUF})
	if err == nil || !strings.Contains(err.Error(), "add a mirror block") {
		t.Errorf("got %v, want a refusal naming the mirror block", err)
	}
}

func TestCheckSourceMirror(t *testing.T) {
	dir := t.TempDir()
	mr := testMirror(t)
	src := filepath.Join(dir, "tiny.gguf")
	os.WriteFile(src, ggufBytes, 0o644)
	if _, err := mr.Add(context.Background(), mirror.AddOptions{Model: "tiny", Version: "v1", Source: src}); err != nil {
		t.Fatal(err)
	}
	c := &SourceChecker{Client: http.DefaultClient, Mirror: mr}
	tests := []struct {
		name, source, wantErr string
		formats               []string
	}{
		{"version", "mirror://tiny/v1", "", []string{catalog.FormatGGUF}},
		{"current", "mirror://tiny", "", []string{catalog.FormatGGUF}},
		{"file", "mirror://tiny/v1/tiny.gguf", "", []string{catalog.FormatGGUF}},
		{"no such version", "mirror://tiny/v2", "version tiny/v2 does not exist in the mirror (it has v1)", []string{catalog.FormatGGUF}},
		{"no such model", "mirror://other", "has no version in the mirror", []string{catalog.FormatGGUF}},
		{"no such file", "mirror://tiny/v1/x.gguf", `has no file "x.gguf"`, []string{catalog.FormatGGUF}},
		{"wrong engine", "mirror://tiny/v1", "loads safetensors weights", []string{catalog.FormatSafetensors}},
	}
	for _, tt := range tests {
		got, err := c.Check(context.Background(), &catalog.Model{Name: "m", Engine: "e", Source: tt.source}, tt.formats)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: got %v, want %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got.Size != int64(len(ggufBytes)) || got.Format != catalog.FormatGGUF {
			t.Errorf("%s: got %+v, %v", tt.name, got, err)
		}
	}
	c.Mirror = nil
	if _, err := c.Check(context.Background(), &catalog.Model{Name: "m", Engine: "e", Source: "mirror://tiny/v1"}, nil); err == nil || !strings.Contains(err.Error(), "mirror block") {
		t.Errorf("no mirror: got %v", err)
	}
}

// BenchmarkCheckSourceURL is the cost of checking a URL source on
// loopback: a HEAD and a ranged GET of 16 bytes.
func BenchmarkCheckSourceURL(b *testing.B) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "m.gguf", time.Time{}, bytes.NewReader(ggufBytes))
	}))
	defer s.Close()
	st, _ := mirror.NewDirStore("local", filepath.Join(b.TempDir(), "store"))
	mr, _ := mirror.New(mirror.Config{Stores: []mirror.Store{st}, CacheDir: filepath.Join(b.TempDir(), "cache"), Logger: zap.NewNop()})
	c := &SourceChecker{Client: s.Client(), Mirror: mr}
	m := &catalog.Model{Name: "m", Engine: "llamacpp", Source: s.URL + "/m.gguf"}
	for b.Loop() {
		if _, err := c.Check(context.Background(), m, []string{catalog.FormatGGUF}); err != nil {
			b.Fatal(err)
		}
	}
}
