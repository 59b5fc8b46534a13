// Package vllm is the vLLM engine: each replica is a `vllm serve` process
// on its own loopback port, serving one model directory (safetensors)
// through its OpenAI-compatible API.
package vllm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/llmgw/llmgw/engines/internal/proc"
	"github.com/llmgw/llmgw/plugins/engine"
)

// Version of the vllm engine.
const Version = "0.1.0"

// Engine implements engine.Engine for vLLM's OpenAI-compatible server.
type Engine struct {
	// Servers holds the vllm command (the engine option bin, else vllm on
	// PATH) and the replicas; loading a model may take 20 minutes.
	proc.Servers
}

// New returns the engine with its binary found.
func New(logger hclog.Logger) *Engine {
	e := &Engine{}
	e.Init(logger, "vllm", "vllm", 20*time.Minute)
	return e
}

// Info describes the engine; it fails when vllm cannot be found.
func (e *Engine) Info(context.Context) (engine.Info, error) {
	return e.Describe(info)
}

// info is the engine's description; Command checks specs against it.
var info = engine.Info{Type: "vllm", Version: Version, Protocol: engine.ProtocolVersion,
	Capabilities: []string{engine.CapChat, engine.CapCompletions, engine.CapEmbeddings, engine.CapAdapters, engine.CapResponses},
	Formats:      []string{"safetensors"},
	Options: []engine.Option{
		{Name: "gpus", Description: "GPU indexes, comma-separated (CUDA_VISIBLE_DEVICES; tensor parallel across them); when the model says resources { gpus N } the gateway gives each replica devices of its own and this, if set, must name the same ones"},
		{Name: "gpu_memory_utilization", Type: engine.TypeNumber, Description: "fraction of GPU memory vLLM may take, in (0, 1]"},
		{Name: "dtype", Description: "weights' data type (--dtype)"},
		{Name: "lora", Description: "adapters, comma-separated name=path (--lora-modules)"},
		{Name: "max_lora_rank", Type: engine.TypeInteger, Description: "--max-lora-rank, with lora"},
		{Name: "task", Description: "--task, such as embed"},
		{Name: "enforce_eager", Type: engine.TypeBool, Description: "true for --enforce-eager"},
		{Name: "allow_pickle", Type: engine.TypeBool, Description: "true to load pickle weights (.bin, .pt), which run code when loaded"},
	},
	// vllm serve's listen address, port and Unix socket. Python's argparse
	// also takes abbreviations (--ho), which CheckArgs refuses too.
	ReservedArgs: []string{"--host", "--port", "--uds"},
	Example: `name: llama-8b
engine: vllm
source: hf://meta-llama/Llama-3.1-8B-Instruct
context_length: 8192
resources:
  gpus: 1
scaling:
  min: 1
  max: 1
`,
}

// pickle are weight formats that run code when loaded.
var pickle = []string{".bin", ".pt", ".pth", ".ckpt", ".pkl"}

// CheckWeights refuses sources vLLM should not load: anything but a model
// directory with config.json and safetensors weights. Pickle weights are
// refused unless allowPickle.
func CheckWeights(source string, allowPickle bool) error {
	if source == "" {
		return errors.New("vllm needs the model's weights: set source to a model directory (config.json and *.safetensors)")
	}
	st, err := os.Stat(source)
	if err != nil {
		return fmt.Errorf("vllm cannot read the weights: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("vllm loads model directories and %s is a file; point source at the directory holding config.json and the .safetensors files", source)
	}
	if _, err := os.Stat(filepath.Join(source, "config.json")); err != nil {
		return fmt.Errorf("%s has no config.json; vllm needs a model directory in the Hugging Face layout", source)
	}
	entries, _ := os.ReadDir(source)
	var safe, pick []string
	for _, en := range entries {
		name := en.Name()
		switch {
		case strings.HasSuffix(name, ".safetensors"):
			safe = append(safe, name)
		case hasSuffix(name, pickle):
			pick = append(pick, name)
		}
	}
	switch {
	case len(safe) > 0:
		return nil
	case len(pick) > 0 && allowPickle:
		return nil
	case len(pick) > 0:
		return fmt.Errorf("%s holds only pickle weights (%s), which run code when loaded; convert them to safetensors, or set option allow_pickle true if you trust them", source, strings.Join(pick, ", "))
	}
	return fmt.Errorf("%s has no .safetensors weights", source)
}

func hasSuffix(name string, suffixes []string) bool {
	for _, s := range suffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// Command returns vllm's arguments and extra environment for a replica on
// port.
func Command(spec engine.ReplicaSpec, port int) (args, env []string, err error) {
	if err := info.CheckOptions(spec.Options); err != nil {
		return nil, nil, err
	}
	if err := info.CheckArgs(spec.Args); err != nil {
		return nil, nil, err
	}
	opt := spec.Options
	args = []string{"serve", spec.Source, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--served-model-name", spec.Model}
	if g := opt["gpus"]; g != "" {
		ids := strings.Split(g, ",")
		for i, id := range ids {
			ids[i] = strings.TrimSpace(id)
			if _, err := strconv.Atoi(ids[i]); err != nil {
				return nil, nil, fmt.Errorf("vllm option gpus %q: give GPU indexes, comma-separated, such as 0,1", g)
			}
		}
		if err := sameDevices(ids, spec.GPUDevices); err != nil {
			return nil, nil, err
		}
		env = append(env, "CUDA_VISIBLE_DEVICES="+strings.Join(ids, ","))
		args = append(args, "--tensor-parallel-size", strconv.Itoa(len(ids)))
	} else if n := len(spec.GPUDevices); n > 1 {
		args = append(args, "--tensor-parallel-size", strconv.Itoa(n)) // the devices the gateway gave it
	} else if spec.GPUs > 1 {
		args = append(args, "--tensor-parallel-size", strconv.Itoa(spec.GPUs)) // the model's resources gpus
	}
	if spec.ContextLength > 0 {
		args = append(args, "--max-model-len", strconv.FormatInt(spec.ContextLength, 10))
	}
	if spec.Concurrency > 0 {
		args = append(args, "--max-num-seqs", strconv.FormatInt(spec.Concurrency, 10))
	}
	if v := opt["gpu_memory_utilization"]; v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || f > 1 {
			return nil, nil, fmt.Errorf("vllm option gpu_memory_utilization %q must be a fraction in (0, 1]", v)
		}
		args = append(args, "--gpu-memory-utilization", v)
	}
	if v := opt["dtype"]; v != "" {
		args = append(args, "--dtype", v)
	}
	if v := opt["task"]; v != "" {
		args = append(args, "--task", v)
	}
	if v := opt["enforce_eager"]; v == "true" {
		args = append(args, "--enforce-eager")
	}
	var modules []string
	if l := opt["lora"]; l != "" {
		for _, m := range strings.Split(l, ",") {
			name, path, ok := strings.Cut(strings.TrimSpace(m), "=")
			if !ok || name == "" || path == "" {
				return nil, nil, fmt.Errorf("vllm option lora %q: give name=path adapters, comma-separated", l)
			}
			modules = append(modules, name+"="+path)
		}
	}
	for _, a := range spec.Adapters {
		if a.ScaleOr1() != 1 {
			return nil, nil, fmt.Errorf("model %q: adapter %q: vllm applies adapters at scale 1; remove scale", spec.Model, a.Name)
		}
		modules = append(modules, a.Name+"="+a.Path)
	}
	if len(modules) > 0 {
		args = append(args, "--enable-lora")
		if r := opt["max_lora_rank"]; r != "" {
			if _, err := strconv.Atoi(r); err != nil {
				return nil, nil, fmt.Errorf("vllm option max_lora_rank %q is not a whole number", r)
			}
			args = append(args, "--max-lora-rank", r)
		}
		args = append(args, "--lora-modules")
		args = append(args, modules...)
	}
	return append(args, spec.Args...), env, nil
}

// sameDevices checks option gpus against the devices the gateway gave the
// replica (when it gave some: the model says resources { gpus N }). The
// gateway's devices are the replica's alone; an option naming others
// would share them, so it is refused rather than silently overridden.
func sameDevices(ids []string, given []int) error {
	if len(given) == 0 {
		return nil
	}
	got := make([]int, len(ids))
	for i, id := range ids {
		got[i], _ = strconv.Atoi(id) // checked by the caller
	}
	want := slices.Clone(given)
	slices.Sort(got)
	slices.Sort(want)
	if slices.Equal(got, want) {
		return nil
	}
	return fmt.Errorf("vllm option gpus %s names other devices than the gateway gave this replica (%s): the model's resources { gpus %d } make the gateway give each replica devices of its own; remove option gpus (or declare the node's devices with gpu_devices)",
		strings.Join(ids, ","), strings.Trim(strings.Join(strings.Fields(fmt.Sprint(given)), ","), "[]"), len(given))
}

// Start runs vllm serve for one replica and waits until /health answers.
func (e *Engine) Start(ctx context.Context, spec engine.ReplicaSpec) (engine.Replica, error) {
	if e.BinErr != nil {
		return engine.Replica{}, e.BinErr
	}
	if err := CheckWeights(spec.Source, spec.Options["allow_pickle"] == "true"); err != nil {
		return engine.Replica{}, fmt.Errorf("model %q: %w", spec.Model, err)
	}
	port, err := proc.FreePort()
	if err != nil {
		return engine.Replica{}, err
	}
	args, env, err := Command(spec, port)
	if err != nil {
		return engine.Replica{}, err
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(e.Bin, args...)
	cmd.Env = append(os.Environ(), env...)
	p := &proc.Process{ID: spec.ReplicaID, Cmd: cmd, BaseURL: base + "/v1", HealthURL: base + "/health", CPUs: spec.CPUs, GPUs: spec.GPUDevices}
	if err := e.Table.Start(ctx, p, false, "", e.StartTimeout); err != nil {
		return engine.Replica{}, fmt.Errorf("starting vllm for %q: %w", spec.Model, err)
	}
	return engine.Replica{ID: p.ID, BaseURL: p.BaseURL, PID: p.Status().PID, Adapters: Adapters(spec)}, nil
}

// Adapters returns, for each of the spec's adapters, the request body
// member that selects it in vllm: the model, the adapter's name given to
// --lora-modules.
func Adapters(spec engine.ReplicaSpec) map[string]string {
	if len(spec.Adapters) == 0 {
		return nil
	}
	out := make(map[string]string, len(spec.Adapters))
	for _, a := range spec.Adapters {
		b, _ := json.Marshal(map[string]string{"model": a.Name})
		out[a.Name] = string(b)
	}
	return out
}
