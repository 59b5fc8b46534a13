// Package simimage is the image simulator engine: a simulated ComfyUI
// server for demos, load tests and end-to-end tests. It is not image
// generation. Each replica is a real HTTP server process that speaks
// ComfyUI's HTTP and WebSocket API (/prompt, /queue, /history, /view,
// /upload/image, /interrupt, /object_info, /system_stats, /ws) and runs
// workflows in ComfyUI's API format one at a time: each sampler step
// takes a set time and is a progress event (and, unless previews are
// off, a binary preview message with a small JPEG, as ComfyUI sends with
// a --preview-method), and the outputs are deterministic pictures (PNG
// of the requested size, drawn from a hash of everything the workflow
// says; an image to image workflow keeps part of its uploaded picture,
// so what comes out shows what went in) and tiny GLB meshes.
package simimage

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/llmgw/llmgw/engines/internal/proc"
	"github.com/llmgw/llmgw/plugins/engine"
)

// Version of the image simulator.
const Version = "0.1.0"

// Engine implements engine.Engine for the image simulator.
type Engine struct {
	// Command is the argv prefix that runs a replica server; the replica
	// flags are appended. Default: this executable's "engine simimage
	// replica".
	Command []string
	table   proc.Table
}

// New returns the image simulator engine.
func New(logger hclog.Logger) *Engine {
	e := &Engine{}
	e.table.Logger = logger
	return e
}

// options the image simulator understands, with the replica flag each
// sets.
var options = []struct {
	engine.Option
	flag string
}{
	{engine.Option{Name: "step_time", Type: engine.TypeDuration, Description: "how long one sampler step takes; default 50ms"}, "step-time"},
	{engine.Option{Name: "fail_step", Type: engine.TypeInteger, Description: "fail every sampler at this step (to test failures)"}, "fail-step"},
	{engine.Option{Name: "previews", Type: engine.TypeBool, Description: "send a preview picture at each sampler step, as ComfyUI with a --preview-method does; default true"}, "previews"},
}

// Info describes the engine.
func (e *Engine) Info(context.Context) (engine.Info, error) {
	info := engine.Info{
		Type: "simimage", Version: Version, Protocol: engine.ProtocolVersion,
		Capabilities: []string{engine.CapComfyUI},
		Formats:      []string{"sim"},
		ReservedArgs: []string{"-listen", "--listen", "-dir", "--dir", "-model", "--model"},
		ArgFlags:     []string{"--step-time", "--fail-step", "--previews"},
		Example:      "name: pictures\nengine: simimage\noptions:\n  step_time: 50ms\n",
	}
	for _, o := range options {
		info.Options = append(info.Options, o.Option)
	}
	return info, nil
}

// Start starts a replica server process in a folder of its own.
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
		argv = []string{exe, "engine", "simimage", "replica"}
	}
	dir, err := os.MkdirTemp("", "llmgw-simimage-")
	if err != nil {
		return engine.Replica{}, err
	}
	args := append([]string{}, argv[1:]...)
	args = append(args, "--listen", "127.0.0.1:0", "--model", spec.Model, "--dir", dir)
	for _, o := range options {
		if v, ok := spec.Options[o.Name]; ok {
			args = append(args, "--"+o.flag+"="+v)
		}
	}
	args = append(args, spec.Args...)
	p := &proc.Process{ID: spec.ReplicaID, Cmd: exec.Command(argv[0], args...), HealthPath: "/system_stats", CPUs: spec.CPUs, GPUs: spec.GPUDevices}
	if err := e.table.Start(ctx, p, true, "", 30*time.Second); err != nil {
		os.RemoveAll(dir)
		return engine.Replica{}, fmt.Errorf("starting simimage replica of %q: %w", spec.Model, err)
	}
	st := p.Status()
	return engine.Replica{ID: p.ID, BaseURL: p.BaseURL, PID: st.PID, HealthURL: p.HealthURL}, nil
}

// Adopt supervises a replica that an earlier run of the plugin started.
func (e *Engine) Adopt(_ context.Context, r engine.Replica) error { return e.table.Adopt(r) }

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

// parseFlags reads a replica's flags.
func parseFlags(args []string) (Config, string, error) {
	fs := flag.NewFlagSet("simimage replica", flag.ContinueOnError)
	fs.SetOutput(new(discard))
	var cfg Config
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	fs.StringVar(&cfg.Model, "model", "sim-image", "the model served")
	fs.StringVar(&cfg.Dir, "dir", "", "folder of the input, output and temp folders")
	fs.DurationVar(&cfg.StepTime, "step-time", 50*time.Millisecond, "one sampler step")
	fs.IntVar(&cfg.FailStep, "fail-step", 0, "fail every sampler at this step")
	fs.BoolVar(&cfg.Previews, "previews", true, "send a preview picture at each sampler step")
	if err := fs.Parse(args); err != nil {
		return cfg, "", err
	}
	if fs.NArg() > 0 {
		return cfg, "", fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if cfg.StepTime < 0 || cfg.FailStep < 0 {
		return cfg, "", errors.New("step-time and fail-step must not be negative")
	}
	return cfg, *listen, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// RunReplica runs one replica server until SIGTERM.
func RunReplica(args []string) error {
	cfg, listen, err := parseFlags(args)
	if err != nil {
		return err
	}
	if cfg.Dir == "" {
		if cfg.Dir, err = os.MkdirTemp("", "llmgw-simimage-"); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := NewServer(ctx, cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("simimage replica: %w", err)
	}
	fmt.Fprintf(os.Stdout, "%s%s\n", proc.AddrPrefix, ln.Addr())
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		cancel()
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return os.RemoveAll(cfg.Dir)
}
