package llamacpp

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/llmgw/llmgw/plugins/engine"
	"github.com/llmgw/llmgw/plugins/enginetest"
	"github.com/llmgw/llmgw/plugins/enginetest/tinygguf"
)

// The test binary doubles as a stand-in for llama-server (which cannot be
// installed here): run with LLMGW_STANDIN=llama-server it parses
// llama-server's flags, records them, answers /health with 503 while
// "loading", then 200, and serves /metrics and a chat completion.
func TestMain(m *testing.M) {
	if os.Getenv("LLMGW_STANDIN") == "llama-server" {
		os.Exit(standIn(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func standIn(args []string) int {
	fs := flag.NewFlagSet("llama-server", flag.ContinueOnError)
	port := fs.Int("port", 8080, "")
	host := fs.String("host", "", "")
	model := fs.String("model", "", "")
	alias := fs.String("alias", "", "")
	fs.Int("parallel", 1, "")
	fs.Int("ctx-size", 0, "")
	fs.Int("threads", 0, "")
	fs.Bool("embeddings", false, "")
	fs.Bool("metrics", false, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if f := os.Getenv("STANDIN_ARGS"); f != "" {
		_ = os.WriteFile(f, []byte(strings.Join(args, "\n")), 0o644)
	}
	if os.Getenv("STANDIN_FAIL") != "" {
		fmt.Fprintln(os.Stderr, "error: failed to load model '"+*model+"'")
		return 1
	}
	loaded := time.Now().Add(300 * time.Millisecond)
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		if time.Now().Before(loaded) {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("# HELP llamacpp:requests_processing Number of requests processing.\n# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 2\n"))
	})
	mux.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "chat.completion", "model": *alias,
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": "hello"}, "finish_reason": "stop"}}})
	})
	srv := &http.Server{Addr: fmt.Sprintf("%s:%d", *host, *port), Handler: mux}
	if err := srv.ListenAndServe(); err != nil {
		return 1
	}
	return 0
}

func standInEngine(t *testing.T) *Engine {
	t.Helper()
	t.Setenv("LLMGW_STANDIN", "llama-server")
	t.Setenv("LLMGW_ENGINE_BIN", os.Args[0])
	e := New(hclog.NewNullLogger())
	e.StartTimeout = 5 * time.Second
	t.Cleanup(e.Shutdown)
	return e
}

func tinyModel(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := tinygguf.WriteFile(path, tinygguf.Default()); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCommand(t *testing.T) {
	spec := engine.ReplicaSpec{Model: "chat", Source: "/m/chat.gguf", ContextLength: 4096, Concurrency: 4,
		Options: map[string]string{"threads": "8", "embeddings": "true", "lora": "/a/style.gguf:0.5, /a/tone.gguf", "gpu_layers": "99"},
		Args:    []string{"--no-mmap"}}
	got, err := Command(spec, 41234)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--model", "/m/chat.gguf", "--host", "127.0.0.1", "--port", "41234", "--alias", "chat",
		"--parallel", "4", "--ctx-size", "16384", "--threads", "8", "--n-gpu-layers", "99", "--embeddings", "--metrics",
		"--lora-scaled", "/a/style.gguf", "0.5", "--lora", "/a/tone.gguf", "--no-mmap"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("command:\n got %q\nwant %q", got, want)
	}
	got, _ = Command(engine.ReplicaSpec{Model: "m", Source: "/m.gguf", Cores: 6}, 1)
	if !strings.Contains(strings.Join(got, " "), "--threads 6") {
		t.Errorf("threads from the model's cores: %q", got)
	}
	for opts, msg := range map[string]string{
		"colour=red":        `engine llamacpp has no option "colour"; known options: threads, embeddings`,
		"threads=many":      `option threads: "many" is not a whole number`,
		"embeddings=yes!":   "use true or false",
		"lora=/a.gguf:loud": `scale "loud" of /a.gguf is not a number`,
	} {
		k, v, _ := strings.Cut(opts, "=")
		_, err := Command(engine.ReplicaSpec{Model: "m", Source: "/m.gguf", Options: map[string]string{k: v}}, 1)
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want %q", opts, err, msg)
		}
	}
	for _, args := range [][]string{{"--host", "0.0.0.0"}, {"--port=80"}, {"--no-mmap", "--host", "/tmp/x.sock"}} {
		_, err := Command(engine.ReplicaSpec{Model: "m", Source: "/m.gguf", Args: args}, 1)
		if err == nil || !strings.Contains(err.Error(), "engine llamacpp: args must not set --") || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("args %q: got %v, want them refused", args, err)
		}
	}
}

func TestMissingBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("LLMGW_ENGINE_BIN", "")
	_, err := New(hclog.NewNullLogger()).Info(context.Background())
	if err == nil || err.Error() != "llama-server not found on PATH; install it or set engine llamacpp { option bin /path/to/llama-server }" {
		t.Errorf("Info: %v", err)
	}
	t.Setenv("LLMGW_ENGINE_BIN", "/nonexistent/llama-server")
	_, err = New(hclog.NewNullLogger()).Info(context.Background())
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/llama-server (from the engine's bin option) is not an executable file") {
		t.Errorf("Info with a bad bin: %v", err)
	}
}

func TestCheckWeights(t *testing.T) {
	if err := CheckWeights(tinyModel(t)); err != nil {
		t.Errorf("a GGUF file: %v", err)
	}
	st := filepath.Join(t.TempDir(), "model.safetensors")
	_ = os.WriteFile(st, []byte("{\"__metadata__\":{}}"), 0o644)
	if err := CheckWeights(st); err == nil || !strings.Contains(err.Error(), "is not one (no GGUF header)") {
		t.Errorf("a safetensors file: %v", err)
	}
	if err := CheckWeights(""); err == nil || !strings.Contains(err.Error(), "set source to a .gguf file") {
		t.Errorf("no source: %v", err)
	}
}

func TestStartWaitsForHealthAndReportsLoad(t *testing.T) {
	e := standInEngine(t)
	argsFile := filepath.Join(t.TempDir(), "args")
	t.Setenv("STANDIN_ARGS", argsFile)
	model := tinyModel(t)
	start := time.Now()
	rep, err := e.Start(context.Background(), engine.ReplicaSpec{Model: "tiny", ReplicaID: "tiny-1", Source: model, Concurrency: 2, ContextLength: 512})
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 300*time.Millisecond {
		t.Error("Start returned before /health said the model was loaded")
	}
	args, _ := os.ReadFile(argsFile)
	if !strings.Contains(string(args), "--model\n"+model+"\n--host\n127.0.0.1\n--port\n") || !strings.Contains(string(args), "--parallel\n2\n--ctx-size\n1024") {
		t.Errorf("llama-server got:\n%s", args)
	}
	if !strings.HasPrefix(rep.BaseURL, "http://127.0.0.1:") || !strings.HasSuffix(rep.BaseURL, "/v1") || rep.PID == 0 {
		t.Errorf("replica %+v", rep)
	}
	st, err := e.Status(context.Background(), "tiny-1")
	if err != nil || st.State != engine.StateReady || st.Inflight != 2 {
		t.Errorf("status %+v %v", st, err)
	}
	resp, err := http.Post(rep.BaseURL+"/chat/completions", "application/json", strings.NewReader(`{"model":"tiny","messages":[]}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("chat: %v", err)
	}
	resp.Body.Close()
	if err := e.Stop(context.Background(), "tiny-1", time.Second); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.Status(context.Background(), "tiny-1"); st.State == engine.StateReady {
		t.Errorf("after Stop: %+v", st)
	}
}

func TestStartFailures(t *testing.T) {
	e := standInEngine(t)
	t.Setenv("STANDIN_FAIL", "1")
	_, err := e.Start(context.Background(), engine.ReplicaSpec{Model: "tiny", ReplicaID: "tiny-2", Source: tinyModel(t)})
	if err == nil || !strings.Contains(err.Error(), `starting llama-server for "tiny"`) || !strings.Contains(err.Error(), "exited") {
		t.Errorf("a server that exits: %v", err)
	}
	t.Setenv("STANDIN_FAIL", "")
	notGGUF := filepath.Join(t.TempDir(), "x.bin")
	_ = os.WriteFile(notGGUF, []byte("PK\x03\x04"), 0o644)
	_, err = e.Start(context.Background(), engine.ReplicaSpec{Model: "tiny", ReplicaID: "tiny-3", Source: notGGUF})
	if err == nil || !strings.Contains(err.Error(), `model "tiny": llamacpp loads GGUF files`) {
		t.Errorf("weights it cannot load: %v", err)
	}
}

// The conformance suite, against the stand-in llama-server.
func TestConformanceStandIn(t *testing.T) {
	model := tinyModel(t)
	opts := enginetest.Options{Spec: engine.ReplicaSpec{Model: "tiny", Source: model}, ProbePath: "/chat/completions", StartTimeout: 10 * time.Second}
	t.Run("direct", func(t *testing.T) { enginetest.Run(t, standInEngine(t), opts) })
	t.Run("grpc", func(t *testing.T) { enginetest.Run(t, enginetest.OverGRPC(t, standInEngine(t)), opts) })
}

func TestCommandAdapters(t *testing.T) {
	spec := engine.ReplicaSpec{Model: "chat", Source: "/m/chat.gguf",
		Adapters: []engine.Adapter{{Name: "chat-sql", Path: "/c/sql.gguf", Scale: 0.5}, {Name: "chat-pirate", Path: "/c/pirate.gguf"}}}
	got, err := Command(spec, 41234)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--model", "/m/chat.gguf", "--host", "127.0.0.1", "--port", "41234", "--alias", "chat",
		"--parallel", "1", "--metrics", "--lora-init-without-apply",
		"--lora-scaled", "/c/sql.gguf", "0.5", "--lora-scaled", "/c/pirate.gguf", "1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("command:\n got %q\nwant %q", got, want)
	}
	fields := Adapters(spec)
	wantFields := map[string]string{
		"chat-sql":    `{"lora":[{"id":0,"scale":0.5}]}`,
		"chat-pirate": `{"lora":[{"id":1,"scale":1}]}`,
	}
	if !reflect.DeepEqual(fields, wantFields) {
		t.Errorf("request members:\n got %q\nwant %q", fields, wantFields)
	}
	spec.Options = map[string]string{"lora": "/a/style.gguf"}
	if _, err := Command(spec, 1); err == nil || !strings.Contains(err.Error(), "option lora and adapters cannot be used together") {
		t.Errorf("option lora with adapters: got %v, want it refused", err)
	}
}
