// Package proc supervises the engine server processes that an engine plugin
// starts: one process per replica, bound to loopback, in a process group
// of its own. A server outlives its plugin (a plugin crash cuts no
// request): the plugin's next run adopts it (Table.Adopt), and a plugin
// whose gateway is gone stops its servers before it exits (see
// engine.Serve).
package proc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/llmgw/llmgw/plugins/engine"
)

// AddrPrefix starts the line an engine server may print on stdout to say
// where it listens, for servers that pick their own port.
const AddrPrefix = "LLMGW_REPLICA_ADDR "

// Process is one supervised engine server.
type Process struct {
	ID      string
	Cmd     *exec.Cmd
	BaseURL string
	// HealthURL, when set, must answer 200 before the replica is ready.
	// HealthPath, with an address read from stdout, sets it.
	HealthURL  string
	HealthPath string
	// CPUs, when set, are the only cores the process (and what it starts)
	// may run on.
	CPUs []int
	// GPUs, when set, are the only GPU devices the process may use: it
	// runs with CUDA_VISIBLE_DEVICES (and HIP_VISIBLE_DEVICES) set to them,
	// replacing what Cmd.Env or this process's environment says.
	GPUs []int

	pid    int // the server's process id, also its process group id
	mu     sync.Mutex
	misses int
	state  string
	msg    string
	done   chan struct{}
	health *http.Client
}

// MaxMisses is how many health checks in a row a ready server may miss
// before Status reports it failed.
const MaxMisses = 3

// Table holds the processes of one plugin.
type Table struct {
	Logger hclog.Logger
	mu     sync.Mutex
	procs  map[string]*Process
}

// Start runs cmd. When addrFromStdout is set, it waits (up to timeout) for
// the server to print its address and derives BaseURL from it with the
// given path suffix (such as "/v1"); otherwise p.BaseURL must be set.
func (t *Table) Start(ctx context.Context, p *Process, addrFromStdout bool, suffix string, timeout time.Duration) error {
	cmd := p.Cmd
	// No Pdeathsig: the server must survive its plugin's death.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr := &logWriter{log: t.Logger.With("replica", p.ID)}
	cmd.Stderr = stderr
	var stdout io.ReadCloser
	if addrFromStdout {
		var err error
		if stdout, err = cmd.StdoutPipe(); err != nil {
			return err
		}
	}
	if env := engine.VisibleDevicesEnv(p.GPUs); env != nil {
		if cmd.Env == nil {
			cmd.Env = os.Environ()
		}
		cmd.Env = append(cmd.Env, env...) // the last value of a name wins
	}
	if err := startOn(cmd, p.CPUs); err != nil {
		return fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	p.pid = cmd.Process.Pid
	p.done = make(chan struct{})
	p.state = engine.StateStarting
	p.health = &http.Client{Timeout: 2 * time.Second}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		if p.state != engine.StateExited {
			p.state, p.msg = engine.StateExited, fmt.Sprintf("engine server exited: %v", err)
		}
		p.mu.Unlock()
		close(p.done)
		t.Logger.Info("engine server exited", "replica", p.ID, "error", fmt.Sprint(err))
	}()
	t.put(p)
	if addrFromStdout {
		addr, err := readAddr(ctx, stdout, p.done, timeout)
		if err != nil {
			_ = t.Stop(p.ID, 0)
			return stderr.explain(err)
		}
		p.BaseURL = "http://" + addr + suffix
		if p.HealthPath != "" {
			p.HealthURL = "http://" + addr + p.HealthPath
		}
		go func() { _, _ = io.Copy(io.Discard, stdout) }()
	}
	return stderr.explain(t.waitHealthy(ctx, p, timeout))
}

func readAddr(ctx context.Context, r io.Reader, done <-chan struct{}, timeout time.Duration) (string, error) {
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if s, ok := strings.CutPrefix(sc.Text(), AddrPrefix); ok {
				found <- strings.TrimSpace(s)
				return
			}
		}
		close(found)
	}()
	select {
	case a, ok := <-found:
		if !ok {
			return "", errors.New("engine server closed stdout without printing its address")
		}
		return a, nil
	case <-done:
		return "", errors.New("engine server exited before listening")
	case <-time.After(timeout):
		return "", fmt.Errorf("engine server did not listen within %s", timeout)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (t *Table) waitHealthy(ctx context.Context, p *Process, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if p.probe() {
			p.mu.Lock()
			if p.state == engine.StateStarting {
				p.state = engine.StateReady
			}
			p.mu.Unlock()
			return nil
		}
		select {
		case <-p.done:
			return errors.New(p.Status().Message)
		case <-ctx.Done():
			_ = t.Stop(p.ID, 0)
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = t.Stop(p.ID, 0)
			return fmt.Errorf("engine server not healthy within %s", timeout)
		}
	}
}

func (p *Process) probe() bool {
	if p.HealthURL == "" {
		return true
	}
	resp, err := p.health.Get(p.HealthURL)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Status reports the process's state.
func (p *Process) Status() engine.Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return engine.Status{State: p.state, Message: p.msg, PID: int64(p.pid)}
}

// Get returns the process with id.
func (t *Table) Get(id string) (*Process, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.procs[id]
	if !ok {
		return nil, engine.ErrUnknownReplica
	}
	return p, nil
}

// Status reports the state of replica id, probing its health.
func (t *Table) Status(id string) (engine.Status, error) {
	p, err := t.Get(id)
	if err != nil {
		return engine.Status{}, err
	}
	s := p.Status()
	if s.State != engine.StateReady {
		return s, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.probe() {
		p.misses = 0
		return s, nil
	}
	// A busy server can miss one probe; a live process that keeps not
	// answering is reported, not killed: the gateway decides.
	p.misses++
	if p.misses >= MaxMisses {
		s.State, s.Message = engine.StateFailed, fmt.Sprintf("engine server missed %d health checks in a row", p.misses)
	}
	return s, nil
}

// Stop sends SIGTERM to the process group, waits up to grace, then kills.
func (t *Table) Stop(id string, grace time.Duration) error {
	p, err := t.Get(id)
	if err != nil {
		return err
	}
	t.mu.Lock()
	delete(t.procs, id)
	t.mu.Unlock()
	p.mu.Lock()
	p.state, p.msg = engine.StateExited, "stopped"
	p.mu.Unlock()
	if p.pid == 0 {
		return nil
	}
	pgid := -p.pid
	if grace > 0 {
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		select {
		case <-p.done:
			return nil
		case <-time.After(grace):
		}
	}
	_ = syscall.Kill(pgid, syscall.SIGKILL)
	<-p.done
	return nil
}

// Adopt supervises a server that an earlier run of this plugin started
// and that outlived it: its exit is watched through a pidfd (it is not
// this process's child), and Status and Stop treat it as any other.
func (t *Table) Adopt(r engine.Replica) error {
	if _, err := t.Get(r.ID); err == nil {
		return nil // ours already
	}
	pid := int(r.PID)
	if pid <= 0 {
		return fmt.Errorf("replica %s has no process to adopt", r.ID)
	}
	wait, err := watchExit(pid)
	if err != nil {
		return fmt.Errorf("replica %s: process %d is gone: %w", r.ID, pid, err)
	}
	if pgid, err := unix.Getpgid(pid); err != nil || pgid != pid {
		wait(true)
		return fmt.Errorf("replica %s: process %d does not lead its own process group, so it is not the engine server started for it", r.ID, pid)
	}
	p := &Process{ID: r.ID, BaseURL: r.BaseURL, HealthURL: r.HealthURL, pid: pid, state: engine.StateReady,
		done: make(chan struct{}), health: &http.Client{Timeout: 2 * time.Second}}
	go func() {
		wait(false)
		p.mu.Lock()
		if p.state != engine.StateExited {
			p.state, p.msg = engine.StateExited, "engine server exited"
		}
		p.mu.Unlock()
		close(p.done)
		t.Logger.Info("engine server exited", "replica", p.ID)
	}()
	t.put(p)
	t.Logger.Info("adopted engine server", "replica", r.ID, "pid", pid)
	return nil
}

// StopAll stops every process, for plugin shutdown.
func (t *Table) StopAll(grace time.Duration) {
	t.mu.Lock()
	ids := make([]string, 0, len(t.procs))
	for id := range t.procs {
		ids = append(ids, id)
	}
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() { defer wg.Done(); _ = t.Stop(id, grace) }()
	}
	wg.Wait()
}

func (t *Table) put(p *Process) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.procs == nil {
		t.procs = make(map[string]*Process)
	}
	t.procs[p.ID] = p
}

// Executable is the running binary, for engines that run a subcommand of it.
func Executable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding own executable: %w", err)
	}
	return exe, nil
}

// logWriter logs an engine server's stderr line by line and keeps its
// last lines, which a failed start quotes: that is where the server says
// why it could not start.
type logWriter struct {
	log  hclog.Logger
	mu   sync.Mutex
	last []string
}

// Bounds on what a failed start quotes of the server's stderr.
const (
	tailLines = 5
	tailWidth = 300
)

func (w *logWriter) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		w.log.Info("engine server", "line", line)
		if len(line) > tailWidth {
			line = line[:tailWidth] + "…"
		}
		w.mu.Lock()
		w.last = append(w.last, line)
		if len(w.last) > tailLines {
			w.last = w.last[len(w.last)-tailLines:]
		}
		w.mu.Unlock()
	}
	return len(b), nil
}

// explain adds the server's last stderr lines to a start error.
func (w *logWriter) explain(err error) error {
	if err == nil {
		return nil
	}
	w.mu.Lock()
	last := strings.Join(w.last, " | ")
	w.mu.Unlock()
	if last == "" {
		return fmt.Errorf("%w (the engine server wrote nothing to stderr)", err)
	}
	return fmt.Errorf("%w; the engine server said: %s", err, last)
}

// FindBin resolves an engine server's binary: the configured path (the
// engine option bin), else name on PATH, with an error that says how to
// fix it.
func FindBin(configured, name, typ string) (string, error) {
	if configured != "" {
		if st, err := os.Stat(configured); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%s (from the engine's bin option) is not an executable file; fix engine %s { option bin … }", configured, typ)
		}
		return configured, nil
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s not found on PATH; install it or set engine %s { option bin /path/to/%s }", name, typ, name)
	}
	return p, nil
}

// FreePort asks the kernel for a free loopback port, for servers that
// must be told theirs.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// CheckGGUF refuses weights an engine that loads GGUF files cannot load,
// saying why.
func CheckGGUF(source, typ string) error {
	if source == "" {
		return fmt.Errorf("%s needs the model's weights: set source to a .gguf file", typ)
	}
	f, err := os.Open(source)
	if err != nil {
		return fmt.Errorf("%s cannot read the weights: %w", typ, err)
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil || string(magic[:]) != "GGUF" {
		return fmt.Errorf("%s loads GGUF files and %s is not one (no GGUF header); convert it with llama.cpp's convert_hf_to_gguf.py", typ, source)
	}
	return nil
}

// Servers is what engines whose replicas are local server processes
// share: the server's binary (from the engine's bin option, else PATH),
// a start timeout and the process table. Engines embed it and add their
// own Info and Start.
type Servers struct {
	// Bin is the engine server's binary.
	Bin string
	// StartTimeout bounds starting one replica.
	StartTimeout time.Duration
	// BinErr says why Bin could not be found; Info and Start return it.
	BinErr error
	Table  Table
}

// Init finds the binary called name for engine typ and sets the logger.
func (s *Servers) Init(logger hclog.Logger, name, typ string, startTimeout time.Duration) {
	s.Table.Logger = logger
	s.StartTimeout = startTimeout
	s.Bin, s.BinErr = FindBin(os.Getenv("LLMGW_ENGINE_BIN"), name, typ)
}

// Describe returns info, and why the engine server's binary is missing:
// the engine cannot run, and says what it would take (engine.Describe
// shows both).
func (s *Servers) Describe(info engine.Info) (engine.Info, error) {
	info.Protocol = engine.ProtocolVersion
	return info, s.BinErr
}

// Status reports a replica's state.
func (s *Servers) Status(_ context.Context, id string) (engine.Status, error) {
	return s.Table.Status(id)
}

// Adopt supervises a replica an earlier run of the plugin started.
func (s *Servers) Adopt(_ context.Context, r engine.Replica) error {
	return s.Table.Adopt(r)
}

// Stop stops a replica.
func (s *Servers) Stop(_ context.Context, id string, grace time.Duration) error {
	return s.Table.Stop(id, grace)
}

// Shutdown stops every replica.
func (s *Servers) Shutdown() { s.Table.StopAll(5 * time.Second) }
