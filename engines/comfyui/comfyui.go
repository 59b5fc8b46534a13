// Package comfyui is the ComfyUI engine: each replica is a ComfyUI server
// (its main.py, run by the Python the operator configures) on its own
// loopback port, with folders of its own for inputs, outputs and
// temporary files and the replica's GPUs. Jobs reach it through
// ComfyUI's HTTP and WebSocket API.
//
// What runs is decided by the config file only: the engine's bin option
// (the Python; default python3 on PATH) and main option (ComfyUI's
// main.py) come to the plugin in its environment, never from a model.
package comfyui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/llmgw/llmgw/engines/internal/proc"
	"github.com/llmgw/llmgw/plugins/engine"
)

// Version of the comfyui engine.
const Version = "0.1.0"

// Engine implements engine.Engine for ComfyUI.
type Engine struct {
	// Servers holds the Python (the engine option bin, else python3 on
	// PATH) and the replicas; ComfyUI loads its nodes in up to minutes.
	proc.Servers
	// Main is ComfyUI's main.py (the engine option main).
	Main    string
	mainErr error
	dirs    sync.Map // replica id → its folder, removed when it stops
}

// New returns the engine with its Python and main.py found.
func New(logger hclog.Logger) *Engine {
	e := &Engine{}
	e.Init(logger, "python3", "comfyui", 5*time.Minute)
	e.Main = os.Getenv("LLMGW_ENGINE_MAIN")
	switch st, err := os.Stat(e.Main); {
	case e.Main == "":
		e.mainErr = errors.New("ComfyUI's main.py is not set; set engine comfyui { option main /path/to/ComfyUI/main.py } in the llm app")
	case err != nil || st.IsDir():
		e.mainErr = fmt.Errorf("%s (from the engine's main option) is not ComfyUI's main.py; fix engine comfyui { option main … }", e.Main)
	}
	return e
}

// info is the engine's description.
var info = engine.Info{Type: "comfyui", Version: Version, Protocol: engine.ProtocolVersion,
	Capabilities: []string{engine.CapComfyUI},
	Formats:      []string{"comfyui"}, // its models are in ComfyUI's own folders
	Options: []engine.Option{
		{Name: "vram", Description: "ComfyUI's VRAM mode: low, normal, high, none (--lowvram …); default: ComfyUI's choice"},
		{Name: "preview_method", Description: "previews while sampling: none, auto, latent2rgb, taesd (--preview-method)"},
	},
	// ComfyUI's flags that place the server and its folders: the engine's.
	ReservedArgs: []string{"--listen", "--port", "--output-directory", "--input-directory", "--temp-directory",
		"--user-directory", "--base-directory", "--extra-model-paths-config", "--enable-cors-header", "--tls-keyfile", "--tls-certfile"},
	ArgFlags: []string{"--cpu", "--fp16-vae", "--bf16-vae", "--fp32-vae", "--force-fp16", "--force-fp32", "--disable-smart-memory",
		"--deterministic", "--fast", "--use-split-cross-attention", "--use-quad-cross-attention", "--use-pytorch-cross-attention",
		"--disable-xformers", "--reserve-vram", "--cache-lru", "--cache-none", "--disable-metadata"},
	Example: "name: sdxl\nengine: comfyui\nresources:\n  gpus: 1\nscaling:\n  target_concurrency: 1\n",
}

// Info describes the engine; it fails when the Python or main.py cannot
// be found, so that the gateway says so at once.
func (e *Engine) Info(context.Context) (engine.Info, error) {
	i, err := e.Describe(info)
	if err == nil {
		err = e.mainErr
	}
	return i, err
}

// vramFlags are the vram option's values.
var vramFlags = map[string]string{"low": "--lowvram", "normal": "--normalvram", "high": "--highvram", "none": "--novram"}

// Command is ComfyUI's command line for a replica of spec on port, with
// its folders under dir.
func Command(main string, spec engine.ReplicaSpec, port int, dir string) ([]string, error) {
	if err := info.CheckOptions(spec.Options); err != nil {
		return nil, err
	}
	if err := info.CheckArgs(spec.Args); err != nil {
		return nil, err
	}
	args := []string{main, "--listen", "127.0.0.1", "--port", strconv.Itoa(port),
		"--output-directory", filepath.Join(dir, "output"), "--input-directory", filepath.Join(dir, "input"),
		"--temp-directory", filepath.Join(dir, "temp"), "--disable-auto-launch"}
	if v, ok := spec.Options["vram"]; ok {
		f, known := vramFlags[v]
		if !known {
			return nil, fmt.Errorf("option vram %q: use low, normal, high or none", v)
		}
		args = append(args, f)
	}
	if v, ok := spec.Options["preview_method"]; ok {
		switch v {
		case "none", "auto", "latent2rgb", "taesd":
		default:
			return nil, fmt.Errorf("option preview_method %q: use none, auto, latent2rgb or taesd", v)
		}
		args = append(args, "--preview-method", v)
	}
	if spec.GPUs == 0 && len(spec.GPUDevices) == 0 && !slices.Contains(spec.Args, "--cpu") {
		args = append(args, "--cpu") // a replica given no GPU runs on the CPU
	}
	return append(args, spec.Args...), nil
}

// Start starts a ComfyUI server for the replica, in a folder of its own.
func (e *Engine) Start(ctx context.Context, spec engine.ReplicaSpec) (engine.Replica, error) {
	if e.BinErr != nil {
		return engine.Replica{}, e.BinErr
	}
	if e.mainErr != nil {
		return engine.Replica{}, e.mainErr
	}
	port, err := proc.FreePort()
	if err != nil {
		return engine.Replica{}, err
	}
	dir, err := os.MkdirTemp("", "llmgw-comfyui-"+spec.ReplicaID+"-")
	if err != nil {
		return engine.Replica{}, err
	}
	args, err := Command(e.Main, spec, port, dir)
	if err != nil {
		os.RemoveAll(dir)
		return engine.Replica{}, fmt.Errorf("model %q: %w", spec.Model, err)
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(e.Bin, args...)
	cmd.Dir = filepath.Dir(e.Main)
	p := &proc.Process{ID: spec.ReplicaID, Cmd: cmd, BaseURL: base, HealthURL: base + "/system_stats", CPUs: spec.CPUs, GPUs: spec.GPUDevices}
	if err := e.Table.Start(ctx, p, false, "", e.StartTimeout); err != nil {
		os.RemoveAll(dir)
		return engine.Replica{}, fmt.Errorf("starting ComfyUI for %q: %w", spec.Model, err)
	}
	e.dirs.Store(p.ID, dir)
	return engine.Replica{ID: p.ID, BaseURL: p.BaseURL, PID: p.Status().PID, HealthURL: p.HealthURL}, nil
}

// Stop stops a replica and removes its folder (outputs that jobs keep
// were copied out of it).
func (e *Engine) Stop(ctx context.Context, id string, grace time.Duration) error {
	err := e.Servers.Stop(ctx, id, grace)
	if d, ok := e.dirs.LoadAndDelete(id); ok {
		_ = os.RemoveAll(d.(string))
	}
	return err
}

// Shutdown stops every replica and removes their folders.
func (e *Engine) Shutdown() {
	e.Servers.Shutdown()
	e.dirs.Range(func(id, d any) bool {
		_ = os.RemoveAll(d.(string))
		e.dirs.Delete(id)
		return true
	})
}
