// Package sim is the simulator engine: a simulated model for demos, load
// tests and end-to-end tests. It is not inference. Each replica is a real
// HTTP server process that speaks the OpenAI API, streams generated words
// at a set time to first token and token rate, reports usage, serves
// deterministic embeddings and answers forced tool calls.
package sim

import (
	"context"
	"fmt"
	"os/exec"
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

// Info describes the engine.
func (e *Engine) Info(context.Context) (engine.Info, error) {
	return engine.Info{
		Type: "sim", Version: Version, Protocol: engine.ProtocolVersion,
		Capabilities: []string{engine.CapChat, engine.CapCompletions, engine.CapEmbeddings},
		Formats:      []string{"sim"},
	}, nil
}

// Options the sim engine understands, all optional.
var optionFlags = map[string]string{
	"ttft":              "ttft",              // time to first token, Go duration; default 0
	"tokens_per_second": "tokens-per-second", // 0 = as fast as possible; default 0
	"max_tokens":        "max-tokens",        // answer length when the request sets none; default 16
	"embedding_dims":    "embedding-dims",    // default 64
	"fail_status":       "fail-status",       // answer every generation with this HTTP status
	"echo":              "echo",              // answer with the last message's text, in 3-byte pieces
}

// Start starts a replica server process.
func (e *Engine) Start(ctx context.Context, spec engine.ReplicaSpec) (engine.Replica, error) {
	argv := e.Command
	if len(argv) == 0 {
		exe, err := proc.Executable()
		if err != nil {
			return engine.Replica{}, err
		}
		argv = []string{exe, "engine", "sim", "replica"}
	}
	args := append([]string{}, argv[1:]...)
	args = append(args, "--listen", "127.0.0.1:0", "--model", spec.Model)
	for k, v := range spec.Options {
		flag, ok := optionFlags[k]
		if !ok {
			return engine.Replica{}, fmt.Errorf("sim engine has no option %q; known: ttft, tokens_per_second, max_tokens, embedding_dims, fail_status, echo", k)
		}
		args = append(args, "--"+flag+"="+v)
	}
	args = append(args, spec.Args...)
	p := &proc.Process{ID: spec.ReplicaID, Cmd: exec.Command(argv[0], args...), HealthPath: "/health", CPUs: spec.CPUs}
	if err := e.table.Start(ctx, p, true, "/v1", 30*time.Second); err != nil {
		return engine.Replica{}, fmt.Errorf("starting sim replica of %q: %w", spec.Model, err)
	}
	st := p.Status()
	return engine.Replica{ID: p.ID, BaseURL: p.BaseURL, PID: st.PID}, nil
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
