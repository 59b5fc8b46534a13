package sim

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func call(t *testing.T, s *Server, path, body string) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s: body %q is not JSON: %v", path, rec.Body.String(), err)
	}
	return rec.Code, out
}

func content(out map[string]any, i int) string {
	c := out["choices"].([]any)[i].(map[string]any)
	if m, ok := c["message"].(map[string]any); ok {
		s, _ := m["content"].(string)
		return s
	}
	return c["text"].(string)
}

func TestAnswers(t *testing.T) {
	s := NewServer(ServerConfig{Model: "m"})
	t.Run("deterministic for the same prompt and seed", func(t *testing.T) {
		body := `{"model":"m","seed":7,"messages":[{"role":"user","content":"hello"}]}`
		_, a := call(t, s, "/v1/chat/completions", body)
		_, b := call(t, s, "/v1/chat/completions", body)
		if content(a, 0) != content(b, 0) || len(strings.Fields(content(a, 0))) != 16 {
			t.Errorf("got %q and %q", content(a, 0), content(b, 0))
		}
	})
	t.Run("n choices", func(t *testing.T) {
		_, out := call(t, s, "/v1/chat/completions", `{"model":"m","n":3,"max_tokens":2,"messages":[{"role":"user","content":"x"}]}`)
		if got := len(out["choices"].([]any)); got != 3 {
			t.Errorf("got %d choices, want 3", got)
		}
		if u := out["usage"].(map[string]any); u["completion_tokens"].(float64) != 6 {
			t.Errorf("usage: got %v, want 6 completion tokens", u)
		}
	})
	t.Run("stop sequence", func(t *testing.T) {
		_, whole := call(t, s, "/v1/completions", `{"model":"m","prompt":"p","max_tokens":8}`)
		words := strings.Fields(content(whole, 0))
		_, out := call(t, s, "/v1/completions", `{"model":"m","prompt":"p","max_tokens":8,"stop":" `+words[3]+`"}`)
		c := out["choices"].([]any)[0].(map[string]any)
		if got := content(out, 0); got != strings.Join(words[:3], " ") || c["finish_reason"] != "stop" {
			t.Errorf("got %q (%v), want %q", got, c["finish_reason"], strings.Join(words[:3], " "))
		}
	})
	t.Run("json response format", func(t *testing.T) {
		_, out := call(t, s, "/v1/chat/completions", `{"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"x"}]}`)
		var v map[string]string
		if err := json.Unmarshal([]byte(content(out, 0)), &v); err != nil || v["answer"] == "" {
			t.Errorf("content %q is not a JSON object: %v", content(out, 0), err)
		}
	})
	t.Run("fail status", func(t *testing.T) {
		code, out := call(t, NewServer(ServerConfig{FailStatus: 429}), "/v1/chat/completions", `{"model":"m","messages":[{}]}`)
		if code != 429 || out["error"] == nil {
			t.Errorf("got %d %v", code, out)
		}
	})
	t.Run("bad JSON", func(t *testing.T) {
		if code, _ := call(t, s, "/v1/chat/completions", `{`); code != 400 {
			t.Errorf("got %d, want 400", code)
		}
	})
}

func TestEmbeddings(t *testing.T) {
	s := NewServer(ServerConfig{EmbeddingDims: 8})
	_, out := call(t, s, "/v1/embeddings", `{"model":"e","input":"the cat sat"}`)
	vec := out["data"].([]any)[0].(map[string]any)["embedding"].([]any)
	if len(vec) != 8 {
		t.Fatalf("got %d dims, want 8", len(vec))
	}
	_, out = call(t, s, "/v1/embeddings", `{"model":"e","input":"the cat sat","encoding_format":"base64"}`)
	raw, err := base64.StdEncoding.DecodeString(out["data"].([]any)[0].(map[string]any)["embedding"].(string))
	if err != nil || len(raw) != 32 {
		t.Fatalf("base64 embedding: %d bytes, %v", len(raw), err)
	}
	for i := range 8 {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); got != float32(vec[i].(float64)) {
			t.Errorf("dim %d: base64 %v, float %v", i, got, vec[i])
		}
	}
	near := cosine(Embed("what is the capital of France", 64), Embed("what's the capital of France?", 64))
	far := cosine(Embed("what is the capital of France", 64), Embed("bake a chocolate cake", 64))
	if near <= far {
		t.Errorf("similar texts are not closer: %.2f <= %.2f", near, far)
	}
}

func cosine(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i] * b[i])
	}
	return s
}

// A replica given weights reports their sum: a file's sha256, a
// directory's over its files, another for other contents.
func TestWeightsReported(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "w.bin")
	os.WriteFile(file, []byte("weights v1"), 0o644)
	sum := sha256.Sum256([]byte("weights v1"))
	head := func(path string) string {
		rec := httptest.NewRecorder()
		NewServer(ServerConfig{Weights: path}).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`)))
		return rec.Header().Get("X-Sim-Weights")
	}
	if got, want := head(file), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("file: got %q, want %q", got, want)
	}
	d1 := head(dir)
	os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644)
	if d2 := head(dir); d1 == "" || d1 == d2 || len(d2) != 64 {
		t.Errorf("directory: got %q then %q; want two different sums", d1, d2)
	}
	if got := head(""); got != "" {
		t.Errorf("no weights: got %q, want no header", got)
	}
	if got := head(filepath.Join(dir, "gone")); got != "unreadable" {
		t.Errorf("a missing path: got %q", got)
	}
}

// TestEmbeddingDelay sets embedding_delay as the engine passes it (a
// replica flag): each embeddings call takes at least that long, and one
// its client gives up ends then, not after the delay.
func TestEmbeddingDelay(t *testing.T) {
	cfg, _, err := parseFlags([]string{"--embedding-delay=300ms"})
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(cfg)
	start := time.Now()
	if code, out := call(t, s, "/v1/embeddings", `{"model":"e","input":["a","b"]}`); code != 200 || len(out["data"].([]any)) != 2 {
		t.Fatalf("got %d %v", code, out)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("an embeddings call took %v, want at least the delay of 300ms", took)
	}
	if _, out := call(t, s, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`); out["choices"] == nil {
		t.Errorf("chat with an embedding delay: %v", out)
	}
	slow := NewServer(ServerConfig{EmbeddingDelay: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/embeddings", strings.NewReader(`{"model":"e","input":"a"}`))
		slow.ServeHTTP(httptest.NewRecorder(), req)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("an embeddings call given up by its client still waits out the delay")
	}
}
