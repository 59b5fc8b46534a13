// Package llamacpp is the llama.cpp engine: each replica is a
// llama-server process on its own loopback port, serving one GGUF model
// through its OpenAI-compatible API.
package llamacpp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/llmgw/llmgw/engines/internal/proc"
	"github.com/llmgw/llmgw/plugins/engine"
)

// Version of the llamacpp engine.
const Version = "0.1.0"

// Engine implements engine.Engine for llama.cpp's llama-server.
type Engine struct {
	// Servers holds llama-server's path (the engine option bin, else
	// llama-server on PATH) and the replicas; loading may take 10 minutes.
	proc.Servers
	client *http.Client
}

// New returns the engine with its binary found.
func New(logger hclog.Logger) *Engine {
	e := &Engine{client: &http.Client{Timeout: 2 * time.Second}}
	e.Init(logger, "llama-server", "llamacpp", 10*time.Minute)
	return e
}

// Info describes the engine; it fails when llama-server cannot be found,
// so the gateway refuses the config at once rather than at the first
// request.
func (e *Engine) Info(context.Context) (engine.Info, error) {
	return e.Describe(info)
}

// info is the engine's description; Command checks specs against it.
var info = engine.Info{Type: "llamacpp", Version: Version, Protocol: engine.ProtocolVersion,
	Capabilities: []string{engine.CapChat, engine.CapCompletions, engine.CapEmbeddings, engine.CapAdapters},
	Formats:      []string{"gguf"},
	Options: []engine.Option{
		{Name: "threads", Type: engine.TypeInteger, Description: "CPU threads (llama-server --threads); default: the model's resources cores, else llama-server's"},
		{Name: "embeddings", Type: engine.TypeBool, Description: "true to serve /v1/embeddings (--embeddings)"},
		{Name: "lora", Description: "adapters, comma-separated path[:scale] (--lora / --lora-scaled)"},
		{Name: "gpu_layers", Type: engine.TypeInteger, Description: "layers to offload to GPUs (--n-gpu-layers)"},
		{Name: "metrics", Type: engine.TypeBool, Description: "false to turn off llama-server's /metrics (on by default: slot load)"},
		{Name: "flash_attn", Type: engine.TypeBool, Description: "true for --flash-attn"},
		{Name: "batch_size", Type: engine.TypeInteger, Description: "logical batch size (--batch-size)"},
		{Name: "ubatch_size", Type: engine.TypeInteger, Description: "physical batch size (--ubatch-size)"},
		{Name: "cache_type_k", Description: "KV cache type for K (--cache-type-k)"},
		{Name: "cache_type_v", Description: "KV cache type for V (--cache-type-v)"},
	},
	// llama-server's listen address (a host ending in .sock is a Unix
	// socket) and port; neither has a short form.
	ReservedArgs: []string{"--host", "--port"},
	Example: `name: qwen-small
engine: llamacpp
source: mirror://qwen2.5-0.5b/v1
context_length: 4096
resources:
  memory: 2147483648
  cores: 4
scaling:
  min: 1
  max: 2
`,
}

// CheckWeights refuses sources llama-server cannot load: anything but a
// GGUF file.
func CheckWeights(source string) error { return proc.CheckGGUF(source, "llamacpp") }

// Command returns llama-server's arguments for a replica on port.
func Command(spec engine.ReplicaSpec, port int) ([]string, error) {
	if err := info.CheckOptions(spec.Options); err != nil {
		return nil, err
	}
	if err := info.CheckArgs(spec.Args); err != nil {
		return nil, err
	}
	parallel := max(spec.Concurrency, 1)
	args := []string{"--model", spec.Source, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--alias", spec.Model, "--parallel", strconv.FormatInt(parallel, 10)}
	if spec.ContextLength > 0 {
		// llama-server splits its context between the slots: each gets the
		// model's context length.
		args = append(args, "--ctx-size", strconv.FormatInt(spec.ContextLength*parallel, 10))
	}
	opt := spec.Options
	num := func(k, flag string) error {
		v, ok := opt[k]
		if !ok {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("llamacpp option %s %q is not a whole number", k, v)
		}
		args = append(args, flag, strconv.Itoa(n))
		return nil
	}
	if _, set := opt["threads"]; !set && spec.Cores > 0 {
		args = append(args, "--threads", strconv.Itoa(spec.Cores)) // the model's cores
	}
	for _, f := range [][2]string{{"threads", "--threads"}, {"gpu_layers", "--n-gpu-layers"},
		{"batch_size", "--batch-size"}, {"ubatch_size", "--ubatch-size"}} {
		if err := num(f[0], f[1]); err != nil {
			return nil, err
		}
	}
	flag := func(k string, def bool) (bool, error) {
		v, ok := opt[k]
		if !ok {
			return def, nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("llamacpp option %s %q: use true or false", k, v)
		}
		return b, nil
	}
	if on, err := flag("embeddings", false); err != nil {
		return nil, err
	} else if on {
		args = append(args, "--embeddings")
	}
	if on, err := flag("flash_attn", false); err != nil {
		return nil, err
	} else if on {
		args = append(args, "--flash-attn")
	}
	if on, err := flag("metrics", true); err != nil {
		return nil, err
	} else if on {
		args = append(args, "--metrics")
	}
	for _, k := range []string{"cache_type_k", "cache_type_v"} {
		if v := opt[k]; v != "" {
			args = append(args, "--"+strings.ReplaceAll(k, "_", "-"), v)
		}
	}
	if l := opt["lora"]; l != "" {
		for _, a := range strings.Split(l, ",") {
			a = strings.TrimSpace(a)
			path, scale, scaled := strings.Cut(a, ":")
			if path == "" {
				return nil, fmt.Errorf("llamacpp option lora %q: give path[:scale], comma-separated", l)
			}
			if !scaled {
				args = append(args, "--lora", path)
				continue
			}
			if _, err := strconv.ParseFloat(scale, 64); err != nil {
				return nil, fmt.Errorf("llamacpp option lora: scale %q of %s is not a number", scale, path)
			}
			args = append(args, "--lora-scaled", path, scale)
		}
	}
	if len(spec.Adapters) > 0 {
		if opt["lora"] != "" {
			return nil, fmt.Errorf("model %q: llamacpp option lora and adapters cannot be used together; declare each adapter with adapter <name> { source … }", spec.Model)
		}
		// Loaded at scale 0: requests for the model alone get none of
		// them; a request for an adapter names it in its lora member
		// (see Adapters).
		args = append(args, "--lora-init-without-apply")
		for _, a := range spec.Adapters {
			args = append(args, "--lora-scaled", a.Path, strconv.FormatFloat(a.ScaleOr1(), 'g', -1, 64))
		}
	}
	return append(args, spec.Args...), nil
}

// Adapters returns, for each of the spec's adapters, the request body
// member that applies it in llama-server: lora, the adapter's index (the
// order of --lora-scaled) and scale; the adapters a request does not name
// stay at scale 0.
func Adapters(spec engine.ReplicaSpec) map[string]string {
	if len(spec.Adapters) == 0 {
		return nil
	}
	out := make(map[string]string, len(spec.Adapters))
	for i, a := range spec.Adapters {
		b, _ := json.Marshal(map[string]any{"lora": []map[string]any{{"id": i, "scale": a.ScaleOr1()}}})
		out[a.Name] = string(b)
	}
	return out
}

// Start runs llama-server for one replica and waits until /health says
// the model is loaded.
func (e *Engine) Start(ctx context.Context, spec engine.ReplicaSpec) (engine.Replica, error) {
	if e.BinErr != nil {
		return engine.Replica{}, e.BinErr
	}
	if err := CheckWeights(spec.Source); err != nil {
		return engine.Replica{}, fmt.Errorf("model %q: %w", spec.Model, err)
	}
	port, err := proc.FreePort()
	if err != nil {
		return engine.Replica{}, err
	}
	args, err := Command(spec, port)
	if err != nil {
		return engine.Replica{}, err
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(e.Bin, args...)
	cmd.Dir = filepath.Dir(spec.Source)
	p := &proc.Process{ID: spec.ReplicaID, Cmd: cmd, BaseURL: base + "/v1", HealthURL: base + "/health", CPUs: spec.CPUs, GPUs: spec.GPUDevices}
	if err := e.Table.Start(ctx, p, false, "", e.StartTimeout); err != nil {
		return engine.Replica{}, fmt.Errorf("starting llama-server for %q: %w", spec.Model, err)
	}
	return engine.Replica{ID: p.ID, BaseURL: p.BaseURL, PID: p.Status().PID, Adapters: Adapters(spec)}, nil
}

// Status reports a replica's state and, from llama-server's metrics, the
// requests it is processing.
func (e *Engine) Status(ctx context.Context, id string) (engine.Status, error) {
	st, err := e.Table.Status(id)
	if err != nil || st.State != engine.StateReady {
		return st, err
	}
	p, err := e.Table.Get(id)
	if err != nil {
		return st, nil
	}
	if n, ok := e.processing(ctx, strings.TrimSuffix(p.BaseURL, "/v1")+"/metrics"); ok {
		st.Inflight = n
	}
	return st, nil
}

// processing reads llamacpp:requests_processing from /metrics.
func (e *Engine) processing(ctx context.Context, url string) (int64, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, false
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false
	}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 1<<20))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "llamacpp:requests_processing "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int64(f), err == nil
		}
	}
	return 0, false
}
