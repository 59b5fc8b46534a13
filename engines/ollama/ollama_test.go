package ollama

import (
	"context"
	"encoding/json"
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

// The test binary doubles as a stand-in for the ollama command in the
// unit tests (the end-to-end tests run the real Ollama): with
// LLMGW_STANDIN=ollama, "serve" answers on OLLAMA_HOST and "create"
// records the Modelfile where serve finds it.
func TestMain(m *testing.M) {
	if os.Getenv("LLMGW_STANDIN") == "ollama" {
		os.Exit(standIn(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func standIn(args []string) int {
	host, models := os.Getenv("OLLAMA_HOST"), os.Getenv("OLLAMA_MODELS")
	switch {
	case len(args) == 1 && args[0] == "serve":
		mux := http.NewServeMux()
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("Ollama is running")) })
		mux.HandleFunc("/api/generate", func(w http.ResponseWriter, r *http.Request) {
			entries, _ := os.ReadDir(models)
			if len(entries) == 0 {
				http.Error(w, `{"error":"model not found"}`, 404)
				return
			}
			_, _ = w.Write([]byte(`{"done":true}`))
		})
		return exitOn(http.ListenAndServe(host, mux))
	case len(args) == 4 && args[0] == "create" && args[2] == "-f":
		if resp, err := http.Get("http://" + host + "/"); err != nil {
			fmt.Fprintln(os.Stderr, "Error: could not connect to ollama app, is it running?")
			return 1
		} else {
			resp.Body.Close()
		}
		mf, err := os.ReadFile(args[3])
		if err != nil || os.Getenv("STANDIN_FAIL_CREATE") != "" {
			fmt.Fprintln(os.Stderr, "gathering model components\nError: invalid model file")
			return 1
		}
		return exitOn(os.WriteFile(filepath.Join(models, args[1]), mf, 0o644))
	}
	return 2
}

func exitOn(err error) int {
	if err != nil {
		return 1
	}
	return 0
}

func TestModelfileAndEnv(t *testing.T) {
	spec := engine.ReplicaSpec{Model: "Tiny Chat", Source: "/m/tiny.gguf", ContextLength: 2048, Concurrency: 4,
		Options: map[string]string{"param_temperature": "0.2", "param_stop": "</s>\x1fuser:", "system": "Be brief."}}
	mf, err := Modelfile(spec)
	if err != nil {
		t.Fatal(err)
	}
	want := "FROM /m/tiny.gguf\nTEMPLATE \"\"\"" + DefaultTemplate + "\"\"\"\nSYSTEM \"\"\"Be brief.\"\"\"\nPARAMETER num_ctx 2048\n" +
		"PARAMETER stop </s>\nPARAMETER stop user:\nPARAMETER temperature 0.2\n"
	if mf != want {
		t.Errorf("Modelfile:\n%s\nwant:\n%s", mf, want)
	}
	spec.Cores = 3
	if mf, _ := Modelfile(spec); !strings.Contains(mf, "PARAMETER num_ctx 2048\nPARAMETER num_thread 3\n") {
		t.Errorf("with cores 3, Modelfile:\n%s", mf)
	}
	spec.Options["param_num_thread"] = "2"
	if mf, _ := Modelfile(spec); strings.Contains(mf, "num_thread 3") || !strings.Contains(mf, "PARAMETER num_thread 2\n") {
		t.Errorf("with param_num_thread 2 and cores 3, Modelfile:\n%s", mf)
	}
	delete(spec.Options, "param_num_thread")
	env := Env(spec, 40123, "/run/r1")
	wantEnv := []string{"OLLAMA_HOST=127.0.0.1:40123", "HOME=/run/r1/home", "OLLAMA_MODELS=/run/r1/models",
		"OLLAMA_NUM_PARALLEL=4", "OLLAMA_KEEP_ALIVE=-1", "OLLAMA_MAX_LOADED_MODELS=1", "OLLAMA_NOPRUNE=1", "OLLAMA_MULTIUSER_CACHE=1"}
	if !reflect.DeepEqual(env, wantEnv) {
		t.Errorf("env %q", env)
	}
	spec.Options["flash_attention"], spec.Options["kv_cache_type"] = "true", "q8_0"
	if _, err := Modelfile(spec); err != nil {
		t.Errorf("flash_attention true, kv_cache_type q8_0: %v", err)
	}
	if env := Env(spec, 40123, "/run/r1"); !reflect.DeepEqual(env[len(env)-2:], []string{"OLLAMA_FLASH_ATTENTION=1", "OLLAMA_KV_CACHE_TYPE=q8_0"}) {
		t.Errorf("env with flash attention and q8_0: %q", env)
	}
	spec.Options["flash_attention"] = "false"
	if _, err := Modelfile(spec); err == nil || !strings.Contains(err.Error(), "needs flash_attention true") {
		t.Errorf("q8_0 without flash attention: %v", err)
	}
	spec.Options["kv_cache_type"] = "q5_1"
	if _, err := Modelfile(spec); err == nil || !strings.Contains(err.Error(), "use f16, q8_0 or q4_0") {
		t.Errorf("kv_cache_type q5_1: %v", err)
	}
	spec.Options["flash_attention"] = "yes"
	if _, err := Modelfile(spec); err == nil || !strings.Contains(err.Error(), "use true or false") {
		t.Errorf("flash_attention yes: %v", err)
	}
	delete(spec.Options, "flash_attention")
	delete(spec.Options, "kv_cache_type")
	if n := ModelName("Tiny Chat/v2"); n != "tiny-chat-v2" {
		t.Errorf("ModelName: %s", n)
	}
	if _, err := Modelfile(engine.ReplicaSpec{Source: "/m.gguf", Options: map[string]string{"colour": "red"}}); err == nil || !strings.Contains(err.Error(), `ollama has no option "colour"`) {
		t.Errorf("unknown option: %v", err)
	}
	if _, err := Modelfile(engine.ReplicaSpec{Model: "m", Source: "/m.gguf", Args: []string{"--host", "0.0.0.0"}}); err == nil || !strings.Contains(err.Error(), "passes no args to ollama serve") {
		t.Errorf("args: %v", err)
	}
	// A system message cannot end its Modelfile string and add lines.
	if _, err := Modelfile(engine.ReplicaSpec{Model: "m", Source: "/m.gguf", Options: map[string]string{"system": "hi\"\"\"\nADAPTER /x"}}); err == nil || !strings.Contains(err.Error(), "three quotes") {
		t.Errorf("system with three quotes: %v", err)
	}
}

func TestMissingBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("LLMGW_ENGINE_BIN", "")
	if _, err := New(hclog.NewNullLogger()).Info(context.Background()); err == nil || err.Error() != "ollama not found on PATH; install it or set engine ollama { option bin /path/to/ollama }" {
		t.Errorf("Info: %v", err)
	}
}

func TestStartCreatesAndLoads(t *testing.T) {
	t.Setenv("LLMGW_STANDIN", "ollama")
	t.Setenv("LLMGW_ENGINE_BIN", os.Args[0])
	e := New(hclog.NewNullLogger())
	e.StartTimeout = 10 * time.Second
	defer e.Shutdown()
	model := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := tinygguf.WriteFile(model, tinygguf.Default()); err != nil {
		t.Fatal(err)
	}
	rep, err := e.Start(context.Background(), engine.ReplicaSpec{Model: "tiny", ReplicaID: "tiny-1", Source: model, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.UpstreamModel != "" || !strings.HasSuffix(rep.BaseURL, "/v1") {
		t.Errorf("replica %+v", rep)
	}
	e.mu.Lock()
	dir := e.dirs["tiny-1"]
	e.mu.Unlock()
	mf, err := os.ReadFile(filepath.Join(dir, "models", "tiny"))
	if err != nil || !strings.HasPrefix(string(mf), "FROM "+model+"\n") {
		t.Errorf("the model was not created from the catalog's file: %v %q", err, mf)
	}
	if err := e.Stop(context.Background(), "tiny-1", time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the replica's directory is left after Stop: %v", err)
	}
	// A model Ollama refuses: the error says what ollama create said.
	t.Setenv("STANDIN_FAIL_CREATE", "1")
	_, err = e.Start(context.Background(), engine.ReplicaSpec{Model: "tiny", ReplicaID: "tiny-2", Source: model})
	if err == nil || !strings.Contains(err.Error(), "ollama create") || !strings.Contains(err.Error(), "Error: invalid model file") {
		t.Errorf("a refused model: %v", err)
	}
}

// The conformance suite against the real Ollama that .ci/install builds.
func TestConformanceRealOllama(t *testing.T) {
	bin := enginetest.OllamaBin()
	if bin == "" {
		t.Fatal(enginetest.OllamaMissing)
	}
	model := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := tinygguf.WriteFile(model, tinygguf.Default()); err != nil {
		t.Fatal(err)
	}
	newEngine := func(t *testing.T) *Engine {
		t.Setenv("LLMGW_ENGINE_BIN", bin)
		e := New(hclog.NewNullLogger())
		t.Cleanup(e.Shutdown)
		return e
	}
	opts := enginetest.Options{Spec: engine.ReplicaSpec{Model: "tiny", Source: model, ContextLength: 256}, ProbePath: "/models", StartTimeout: 2 * time.Minute}
	t.Run("direct", func(t *testing.T) { enginetest.Run(t, newEngine(t), opts) })
	t.Run("grpc", func(t *testing.T) { enginetest.Run(t, enginetest.OverGRPC(t, newEngine(t)), opts) })
}

// A replica with a LoRA adapter, on the real Ollama: the adapter is its
// own Ollama model, and its greedy answers are the favoured words where
// the model's are not.
func TestAdaptersRealOllama(t *testing.T) {
	bin := enginetest.OllamaBin()
	if bin == "" {
		t.Fatal(enginetest.OllamaMissing)
	}
	dir := t.TempDir()
	model, lora := filepath.Join(dir, "tiny.gguf"), filepath.Join(dir, "rivers.gguf")
	c := tinygguf.Default()
	if err := tinygguf.WriteFile(model, c); err != nil {
		t.Fatal(err)
	}
	if err := tinygguf.WriteAdapterFile(lora, c, tinygguf.Adapter{Favour: []string{"river"}}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LLMGW_ENGINE_BIN", bin)
	e := New(hclog.NewNullLogger())
	defer e.Shutdown()
	rep, err := e.Start(context.Background(), engine.ReplicaSpec{Model: "tiny", ReplicaID: "tiny-lora-1", Source: model,
		Adapters: []engine.Adapter{{Name: "tiny-rivers", Path: lora}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"tiny-rivers": `{"model":"tiny-rivers"}`}; !reflect.DeepEqual(rep.Adapters, want) {
		t.Errorf("adapters %q, want %q", rep.Adapters, want)
	}
	answer := func(model string) string {
		body := fmt.Sprintf(`{"model":%q,"temperature":0,"max_tokens":8,"messages":[{"role":"user","content":"tell me"}]}`, model)
		resp, err := http.Post(rep.BaseURL+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Choices []struct{ Message struct{ Content string } }
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) != 1 {
			t.Fatalf("%s: %d %v", model, resp.StatusCode, err)
		}
		return out.Choices[0].Message.Content
	}
	base, adapted := answer("tiny"), answer("tiny-rivers")
	t.Logf("model: %q; adapter: %q", base, adapted)
	if strings.Count(adapted, "river") < 4 || strings.Contains(base, "river") {
		t.Errorf("model answered %q, adapter %q: want the adapter's answer made of river", base, adapted)
	}
	if again := answer("tiny"); again != base {
		t.Errorf("the model answers %q after the adapter, %q before", again, base)
	}
}

func TestAdapterModelfile(t *testing.T) {
	spec := engine.ReplicaSpec{Model: "Tiny Chat", Adapters: []engine.Adapter{{Name: "sql", Path: "/a/sql.gguf"}}}
	mf, err := AdapterModelfile(spec, spec.Adapters[0])
	if err != nil || mf != "FROM tiny-chat\nADAPTER /a/sql.gguf\n" {
		t.Errorf("Modelfile %q, %v", mf, err)
	}
	if _, err := AdapterModelfile(spec, engine.Adapter{Name: "x", Path: "/a/x.gguf", Scale: 0.5}); err == nil || !strings.Contains(err.Error(), "ollama applies adapters at scale 1") {
		t.Errorf("scale 0.5: %v", err)
	}
	if _, err := AdapterModelfile(spec, engine.Adapter{Name: "x", Path: "/a/x\nFROM evil"}); err == nil || !strings.Contains(err.Error(), "one line") {
		t.Errorf("a path of two lines: %v", err)
	}
	env := strings.Join(Env(spec, 1, "/d"), " ")
	if !strings.Contains(env, "OLLAMA_MAX_LOADED_MODELS=2") {
		t.Errorf("env %s: want room for the model and its adapter's model", env)
	}
}
