// Package sim is the simulator engine: a simulated model for demos, load
// tests and end-to-end tests. It is not inference. Each replica is a real
// HTTP server process that speaks the OpenAI API, streams generated words
// at a set time to first token and token rate, reports usage, serves
// deterministic embeddings, calls tools (arguments made from their JSON
// schemas) and emits reasoning_content as vLLM and llama.cpp do.
package sim

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/llmgw/llmgw/engines/internal/proc"
	"github.com/llmgw/llmgw/plugins/engine"
)

// Version of the sim engine.
const Version = "0.1.0"

// Engine implements engine.Engine for the simulator.
type Engine struct {
	// Command is the argv prefix that runs a replica server; the replica
	// flags are appended. Default: this executable's "engine sim replica".
	Command []string
	table   proc.Table
}

// New returns the sim engine.
func New(logger hclog.Logger) *Engine {
	e := &Engine{}
	e.table.Logger = logger
	return e
}

// Info describes the engine: its options, and the replica flags a model's
// args may carry (the options' flags; the listen address is the engine's).
func (e *Engine) Info(context.Context) (engine.Info, error) {
	var flags []string
	for _, o := range options {
		flags = append(flags, "--"+o.flag)
	}
	info := engine.Info{
		Type: "sim", Version: Version, Protocol: engine.ProtocolVersion,
		Capabilities: []string{engine.CapChat, engine.CapCompletions, engine.CapEmbeddings},
		Formats:      []string{"sim"},
		ReservedArgs: []string{"-listen", "--listen", "-context-length", "--context-length", "-weights", "--weights"},
		ArgFlags:     flags,
		Example:      "name: demo\nengine: sim\noptions:\n  tokens_per_second: 50\n  max_tokens: 64\nscaling:\n  min: 1\n  max: 2\n",
	}
	for _, o := range options {
		info.Options = append(info.Options, o.Option)
	}
	return info, nil
}

// options the sim engine understands, all optional, with the replica flag
// each sets.
var options = []struct {
	engine.Option
	flag string
}{
	{engine.Option{Name: "ttft", Type: engine.TypeDuration, Description: "time to first token; default 0"}, "ttft"},
	{engine.Option{Name: "tokens_per_second", Type: engine.TypeNumber, Description: "token rate; 0 (the default) is as fast as possible"}, "tokens-per-second"},
	{engine.Option{Name: "max_tokens", Type: engine.TypeInteger, Description: "answer length when the request sets none; default 16"}, "max-tokens"},
	{engine.Option{Name: "embedding_dims", Type: engine.TypeInteger, Description: "embedding dimensions; default 64"}, "embedding-dims"},
	{engine.Option{Name: "embedding_delay", Type: engine.TypeDuration, Description: "time each /v1/embeddings call takes, whatever its inputs; default 0"}, "embedding-delay"},
	{engine.Option{Name: "fail_status", Type: engine.TypeInteger, Description: "answer every generation with this HTTP status"}, "fail-status"},
	{engine.Option{Name: "echo", Type: engine.TypeBool, Description: "answer with the last message's text, in 3-byte pieces"}, "echo"},
	{engine.Option{Name: "prefix_cache_tokens", Type: engine.TypeInteger, Description: "simulate an engine's prefix cache of this many tokens: usage reports cached_tokens (a simulator, not inference)"}, "prefix-cache-tokens"},
	{engine.Option{Name: "prefill_tokens_per_second", Type: engine.TypeNumber, Description: "with prefix_cache_tokens: uncached prompt tokens add to the time to first token at this rate"}, "prefill-tokens-per-second"},
	{engine.Option{Name: "reasoning", Type: engine.TypeBool, Description: "start every chat answer with reasoning_content (8 tokens), as reasoning models do; a request's reasoning_effort sets the length (none: no reasoning)"}, "reasoning"},
}

// Start starts a replica server process. Options and args are checked
// first, as the gateway does at config load, so that a replica never
// starts with flags it would die of.
func (e *Engine) Start(ctx context.Context, spec engine.ReplicaSpec) (engine.Replica, error) {
	info, _ := e.Info(ctx)
	if err := info.CheckOptions(spec.Options); err != nil {
		return engine.Replica{}, err
	}
	if err := info.CheckArgs(spec.Args); err != nil {
		return engine.Replica{}, err
	}
	argv := e.Command
	if len(argv) == 0 {
		exe, err := proc.Executable()
		if err != nil {
			return engine.Replica{}, err
		}
		argv = []string{exe, "engine", "sim", "replica"}
	}
	var flags []string
	for _, o := range options {
		if v, ok := spec.Options[o.Name]; ok {
			flags = append(flags, "--"+o.flag+"="+v)
		}
	}
	flags = append(flags, spec.Args...)
	if _, _, err := parseFlags(flags); err != nil {
		msg := err.Error()
		if len(msg) > 512 { // a flag's value is quoted in it
			msg = msg[:512] + "…"
		}
		return engine.Replica{}, fmt.Errorf("sim replica of %q: %s", spec.Model, msg)
	}
	args := append([]string{}, argv[1:]...)
	args = append(args, "--listen", "127.0.0.1:0", "--model", spec.Model)
	if spec.ContextLength > 0 {
		args = append(args, "--context-length", strconv.FormatInt(spec.ContextLength, 10))
	}
	if spec.Source != "" {
		args = append(args, "--weights", spec.Source)
	}
	args = append(args, flags...)
	p := &proc.Process{ID: spec.ReplicaID, Cmd: exec.Command(argv[0], args...), HealthPath: "/health", CPUs: spec.CPUs, GPUs: spec.GPUDevices}
	if err := e.table.Start(ctx, p, true, "/v1", 30*time.Second); err != nil {
		return engine.Replica{}, fmt.Errorf("starting sim replica of %q: %w", spec.Model, err)
	}
	st := p.Status()
	return engine.Replica{ID: p.ID, BaseURL: p.BaseURL, PID: st.PID, HealthURL: p.HealthURL}, nil
}

// Adopt supervises a replica that an earlier run of the plugin started.
func (e *Engine) Adopt(_ context.Context, r engine.Replica) error {
	return e.table.Adopt(r)
}

// Status reports a replica's state.
func (e *Engine) Status(_ context.Context, id string) (engine.Status, error) {
	return e.table.Status(id)
}

// Stop stops a replica.
func (e *Engine) Stop(_ context.Context, id string, grace time.Duration) error {
	return e.table.Stop(id, grace)
}

// Shutdown stops every replica.
func (e *Engine) Shutdown() { e.table.StopAll(2 * time.Second) }
