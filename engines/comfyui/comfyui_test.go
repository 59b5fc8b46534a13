package comfyui

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/llmgw/llmgw/engines/simimage"
	"github.com/llmgw/llmgw/plugins/engine"
	"github.com/llmgw/llmgw/plugins/enginetest"
)

// ComfyUI needs Python packages and a GPU these machines lack: the test
// binary stands in for the Python that runs ComfyUI's main.py. Run with
// standInEnv set, it takes ComfyUI's command line, writes it (and the
// GPUs it was given) to argvEnv's file, and serves ComfyUI's API with
// the image simulator on the port and folders it was told.
const (
	standInEnv = "LLMGW_COMFYUI_STANDIN"
	argvEnv    = "LLMGW_COMFYUI_STANDIN_ARGV"
)

func TestMain(m *testing.M) {
	if os.Getenv(standInEnv) == "1" {
		if err := standIn(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "ComfyUI stand-in:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// standIn parses ComfyUI's flags as main.py does and serves on them.
func standIn(args []string) error {
	if len(args) == 0 || !strings.HasSuffix(args[0], "main.py") {
		return fmt.Errorf("the first argument is not main.py: %q", args)
	}
	if f := os.Getenv(argvEnv); f != "" {
		b, _ := json.Marshal(map[string]any{"argv": args, "cuda": os.Getenv("CUDA_VISIBLE_DEVICES")})
		if err := os.WriteFile(f, b, 0o600); err != nil {
			return err
		}
	}
	fs := flag.NewFlagSet("main.py", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1", "")
	port := fs.Int("port", 8188, "")
	out := fs.String("output-directory", "", "")
	for _, f := range []string{"input-directory", "temp-directory", "preview-method"} {
		fs.String(f, "", "")
	}
	for _, f := range []string{"disable-auto-launch", "cpu", "lowvram", "normalvram", "highvram", "novram", "deterministic"} {
		fs.Bool(f, false, "")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	return simimage.RunReplica([]string{"--listen", fmt.Sprintf("%s:%d", *listen, *port), "--dir", filepath.Dir(*out), "--step-time", "1ms"})
}

func newTestEngine(t *testing.T) (*Engine, string) {
	t.Helper()
	main := filepath.Join(t.TempDir(), "ComfyUI", "main.py")
	_ = os.MkdirAll(filepath.Dir(main), 0o755)
	if err := os.WriteFile(main, []byte("# ComfyUI's entry point (the stand-in ignores it)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	argv := filepath.Join(t.TempDir(), "argv.json")
	t.Setenv(standInEnv, "1")
	t.Setenv(argvEnv, argv)
	t.Setenv("LLMGW_ENGINE_BIN", os.Args[0])
	t.Setenv("LLMGW_ENGINE_MAIN", main)
	e := New(hclog.NewNullLogger())
	t.Cleanup(e.Shutdown)
	return e, argv
}

func TestConformance(t *testing.T) {
	opts := enginetest.Options{Spec: engine.ReplicaSpec{Model: "sdxl"}, ProbePath: "/object_info"}
	t.Run("direct", func(t *testing.T) { e, _ := newTestEngine(t); enginetest.Run(t, e, opts) })
}

// The replica runs main.py with the Python configured, on loopback, with
// folders of its own, the GPUs it holds (or --cpu without one); it
// serves ComfyUI's API; Stop stops it and removes its folders.
func TestCommandLineAndSupervision(t *testing.T) {
	e, argvFile := newTestEngine(t)
	ctx := context.Background()
	r, err := e.Start(ctx, engine.ReplicaSpec{Model: "sdxl", ReplicaID: "r1", GPUs: 1, GPUDevices: []int{3},
		Options: map[string]string{"vram": "low", "preview_method": "auto"}, Args: []string{"--deterministic"}})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Argv []string
		Cuda string
	}
	b, _ := os.ReadFile(argvFile)
	_ = json.Unmarshal(b, &got)
	line := strings.Join(got.Argv, " ")
	for _, want := range []string{"main.py --listen 127.0.0.1 --port ", "--output-directory ", "--input-directory ", "--temp-directory ",
		"--disable-auto-launch", "--lowvram", "--preview-method auto", "--deterministic"} {
		if !strings.Contains(line, want) {
			t.Errorf("command line %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "--cpu") || got.Cuda != "3" {
		t.Errorf("a replica of GPU 3: %q, CUDA_VISIBLE_DEVICES=%q", line, got.Cuda)
	}
	resp, err := http.Get(r.BaseURL + "/system_stats")
	if err != nil || resp.StatusCode != 200 || r.HealthURL != r.BaseURL+"/system_stats" {
		t.Fatalf("the replica's API: %v %+v", err, r)
	}
	resp.Body.Close()
	var dir string
	for i, a := range got.Argv {
		if a == "--output-directory" {
			dir = filepath.Dir(got.Argv[i+1])
		}
	}
	if err := e.Stop(ctx, "r1", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the replica's folder %s is still there: %v", dir, err)
	}
	// No GPU: --cpu.
	if _, err := e.Start(ctx, engine.ReplicaSpec{Model: "sdxl", ReplicaID: "r2"}); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(argvFile)
	if !strings.Contains(string(b), `"--cpu"`) {
		t.Errorf("a replica without a GPU: %s", b)
	}
}

// Flags that would move the server or its folders, unknown flags and
// bad option values are refused before anything runs; without main.py
// the engine says how to set it.
func TestRefusals(t *testing.T) {
	e, _ := newTestEngine(t)
	for _, tc := range []struct {
		spec engine.ReplicaSpec
		want string
	}{
		{engine.ReplicaSpec{Model: "m", ReplicaID: "a", Args: []string{"--listen", "0.0.0.0"}}, "--listen"},
		{engine.ReplicaSpec{Model: "m", ReplicaID: "b", Args: []string{"--output-directory=/etc"}}, "--output-directory"},
		{engine.ReplicaSpec{Model: "m", ReplicaID: "c", Args: []string{"--extra-model-paths-config", "/root/x.yaml"}}, "--extra-model-paths-config"},
		{engine.ReplicaSpec{Model: "m", ReplicaID: "d", Args: []string{"--front-end-root", "/"}}, "no flag --front-end-root"},
		{engine.ReplicaSpec{Model: "m", ReplicaID: "e", Options: map[string]string{"vram": "huge"}}, "use low, normal, high or none"},
		{engine.ReplicaSpec{Model: "m", ReplicaID: "f", Options: map[string]string{"python": "/bin/sh"}}, "python"},
	} {
		if _, err := e.Start(context.Background(), tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %s", tc.spec, err, tc.want)
		}
	}
	t.Setenv("LLMGW_ENGINE_MAIN", "")
	if _, err := New(hclog.NewNullLogger()).Info(context.Background()); err == nil || !strings.Contains(err.Error(), "option main") {
		t.Errorf("no main.py: %v", err)
	}
}
