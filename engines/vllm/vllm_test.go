package vllm

import (
	"context"
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
)

// The test binary doubles as a stand-in for `vllm serve` (vLLM cannot be
// installed here): run with LLMGW_STANDIN=vllm it records its arguments
// and environment, answers /health with 503 while "loading", then 200.
func TestMain(m *testing.M) {
	if os.Getenv("LLMGW_STANDIN") == "vllm" {
		os.Exit(standIn(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func standIn(args []string) int {
	if f := os.Getenv("STANDIN_ARGS"); f != "" {
		_ = os.WriteFile(f, []byte(strings.Join(args, "\n")+"\nCUDA_VISIBLE_DEVICES="+os.Getenv("CUDA_VISIBLE_DEVICES")), 0o644)
	}
	port := ""
	for i, a := range args {
		if a == "--port" && i+1 < len(args) {
			port = args[i+1]
		}
	}
	if os.Getenv("STANDIN_FAIL") != "" || len(args) == 0 || args[0] != "serve" {
		fmt.Fprintln(os.Stderr, "torch.OutOfMemoryError: CUDA out of memory")
		return 1
	}
	loaded := time.Now().Add(300 * time.Millisecond)
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		if time.Now().Before(loaded) {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	if err := http.ListenAndServe("127.0.0.1:"+port, mux); err != nil {
		return 1
	}
	return 0
}

func modelDir(t *testing.T, files ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCommand(t *testing.T) {
	spec := engine.ReplicaSpec{Model: "llama", Source: "/models/llama", ContextLength: 8192, Concurrency: 32,
		Options: map[string]string{"gpus": "0, 1", "lora": "sql=/a/sql,chat=/a/chat", "max_lora_rank": "64", "gpu_memory_utilization": "0.85"}}
	args, env, err := Command(spec, 40001)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"serve", "/models/llama", "--host", "127.0.0.1", "--port", "40001", "--served-model-name", "llama",
		"--tensor-parallel-size", "2", "--max-model-len", "8192", "--max-num-seqs", "32", "--gpu-memory-utilization", "0.85",
		"--enable-lora", "--max-lora-rank", "64", "--lora-modules", "sql=/a/sql", "chat=/a/chat"}
	if !reflect.DeepEqual(args, want) {
		t.Errorf("args:\n got %q\nwant %q", args, want)
	}
	if !reflect.DeepEqual(env, []string{"CUDA_VISIBLE_DEVICES=0,1"}) {
		t.Errorf("env %q", env)
	}
	args, env, _ = Command(engine.ReplicaSpec{Model: "m", Source: "/m", GPUs: 4}, 1)
	if !strings.Contains(strings.Join(args, " "), "--tensor-parallel-size 4") || len(env) != 0 {
		t.Errorf("tensor parallel size from the model's gpus: %q %q", args, env)
	}
	// The devices the gateway gave the replica: tensor parallel across
	// them; option gpus may name the same ones, not others.
	args, _, _ = Command(engine.ReplicaSpec{Model: "m", Source: "/m", GPUs: 2, GPUDevices: []int{2, 3}}, 1)
	if !strings.Contains(strings.Join(args, " "), "--tensor-parallel-size 2") {
		t.Errorf("tensor parallel size from the gateway's devices: %q", args)
	}
	if _, _, err := Command(engine.ReplicaSpec{Model: "m", Source: "/m", GPUs: 2, GPUDevices: []int{3, 2}, Options: map[string]string{"gpus": "2,3"}}, 1); err != nil {
		t.Errorf("option gpus naming the gateway's devices: %v", err)
	}
	if _, _, err := Command(engine.ReplicaSpec{Model: "m", Source: "/m", GPUs: 2, GPUDevices: []int{2, 3}, Options: map[string]string{"gpus": "0,1"}}, 1); err == nil ||
		!strings.Contains(err.Error(), "vllm option gpus 0,1 names other devices than the gateway gave this replica (2,3)") {
		t.Errorf("option gpus naming other devices: got %v", err)
	}
	for opts, msg := range map[string]string{
		"colour=red":                 `vllm has no option "colour"`,
		"gpus=first":                 "give GPU indexes",
		"gpu_memory_utilization=1.5": "must be a fraction",
		"lora=/just/a/path":          "give name=path adapters",
	} {
		k, v, _ := strings.Cut(opts, "=")
		if _, _, err := Command(engine.ReplicaSpec{Model: "m", Source: "/m", Options: map[string]string{k: v}}, 1); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want %q", opts, err, msg)
		}
	}
	for _, args := range [][]string{{"--host", "0.0.0.0"}, {"--port=80"}, {"--uds", "/tmp/v.sock"}, {"--ho", "0.0.0.0"}} {
		_, _, err := Command(engine.ReplicaSpec{Model: "m", Source: "/m", Args: args}, 1)
		if err == nil || !strings.Contains(err.Error(), "engine vllm: args must not set --") || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("args %q: got %v, want them refused", args, err)
		}
	}
}

func TestCheckWeights(t *testing.T) {
	if err := CheckWeights(modelDir(t, "config.json", "model-00001-of-00002.safetensors"), false); err != nil {
		t.Errorf("a safetensors directory: %v", err)
	}
	pick := modelDir(t, "config.json", "pytorch_model.bin")
	if err := CheckWeights(pick, false); err == nil || !strings.Contains(err.Error(), "only pickle weights (pytorch_model.bin)") {
		t.Errorf("pickle weights: %v", err)
	}
	if err := CheckWeights(pick, true); err != nil {
		t.Errorf("pickle weights allowed: %v", err)
	}
	gguf := filepath.Join(t.TempDir(), "m.gguf")
	_ = os.WriteFile(gguf, []byte("GGUF"), 0o644)
	if err := CheckWeights(gguf, false); err == nil || !strings.Contains(err.Error(), "is a file; point source at the directory") {
		t.Errorf("a GGUF file: %v", err)
	}
	if err := CheckWeights(modelDir(t, "model.safetensors"), false); err == nil || !strings.Contains(err.Error(), "no config.json") {
		t.Errorf("no config.json: %v", err)
	}
}

func TestMissingBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("LLMGW_ENGINE_BIN", "")
	if _, err := New(hclog.NewNullLogger()).Info(context.Background()); err == nil || err.Error() != "vllm not found on PATH; install it or set engine vllm { option bin /path/to/vllm }" {
		t.Errorf("Info: %v", err)
	}
}

func TestStartWaitsForHealth(t *testing.T) {
	t.Setenv("LLMGW_STANDIN", "vllm")
	t.Setenv("LLMGW_ENGINE_BIN", os.Args[0])
	argsFile := filepath.Join(t.TempDir(), "args")
	t.Setenv("STANDIN_ARGS", argsFile)
	e := New(hclog.NewNullLogger())
	e.StartTimeout = 5 * time.Second
	defer e.Shutdown()
	dir := modelDir(t, "config.json", "model.safetensors")
	start := time.Now()
	rep, err := e.Start(context.Background(), engine.ReplicaSpec{Model: "m", ReplicaID: "m-1", Source: dir, Options: map[string]string{"gpus": "3"}})
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 300*time.Millisecond {
		t.Error("Start returned before /health answered 200")
	}
	got, _ := os.ReadFile(argsFile)
	if !strings.HasPrefix(string(got), "serve\n"+dir+"\n--host\n127.0.0.1\n--port\n") || !strings.HasSuffix(string(got), "--tensor-parallel-size\n1\nCUDA_VISIBLE_DEVICES=3") {
		t.Errorf("vllm got:\n%s", got)
	}
	if st, _ := e.Status(context.Background(), rep.ID); st.State != engine.StateReady {
		t.Errorf("status %+v", st)
	}
	t.Setenv("STANDIN_FAIL", "1")
	if _, err := e.Start(context.Background(), engine.ReplicaSpec{Model: "m", ReplicaID: "m-2", Source: dir}); err == nil || !strings.Contains(err.Error(), "exited") {
		t.Errorf("a server that exits: %v", err)
	}
}

func TestCommandAdapters(t *testing.T) {
	spec := engine.ReplicaSpec{Model: "llama", Source: "/models/llama",
		Options:  map[string]string{"lora": "old=/a/old", "max_lora_rank": "16"},
		Adapters: []engine.Adapter{{Name: "llama-sql", Path: "/c/sql"}, {Name: "llama-chat", Path: "/c/chat", Scale: 1}}}
	args, _, err := Command(spec, 40001)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"serve", "/models/llama", "--host", "127.0.0.1", "--port", "40001", "--served-model-name", "llama",
		"--enable-lora", "--max-lora-rank", "16", "--lora-modules", "old=/a/old", "llama-sql=/c/sql", "llama-chat=/c/chat"}
	if !reflect.DeepEqual(args, want) {
		t.Errorf("args:\n got %q\nwant %q", args, want)
	}
	wantFields := map[string]string{"llama-sql": `{"model":"llama-sql"}`, "llama-chat": `{"model":"llama-chat"}`}
	if got := Adapters(spec); !reflect.DeepEqual(got, wantFields) {
		t.Errorf("request members:\n got %q\nwant %q", got, wantFields)
	}
	spec.Adapters[0].Scale = 0.5
	if _, _, err := Command(spec, 1); err == nil || !strings.Contains(err.Error(), "vllm applies adapters at scale 1") {
		t.Errorf("scale 0.5: got %v, want it refused", err)
	}
}
