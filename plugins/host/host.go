// Package host launches and supervises engine plugin processes: it
// verifies a pinned sha256 before exec, speaks the versioned gRPC protocol
// with AutoMTLS, pings for health, restarts a dead plugin with backoff and
// kills it on Destruct.
package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-plugin"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/llmgw/llmgw/plugins/engine"
)

// ErrPluginDown is returned while a plugin is being restarted.
var ErrPluginDown = errors.New("engine plugin is not running")

// Config says how to run one plugin.
type Config struct {
	Type   string   // engine type, for logs and errors
	Argv   []string // command and arguments
	SHA256 string   // hex digest of Argv[0]; empty = not pinned
	Env    []string // added to the plugin's environment (KEY=value)
	// StartTimeout bounds the handshake. Default: 30s.
	StartTimeout time.Duration
	// HealthInterval is how often the plugin is pinged. Default: 1s.
	HealthInterval time.Duration
}

// Plugin is one supervised plugin process. Its Engine may change when the
// process is restarted; Epoch tells callers that it did.
type Plugin struct {
	cfg    Config
	logger *zap.Logger

	mu     sync.Mutex
	client *plugin.Client
	eng    engine.Engine
	info   engine.Info
	epoch  uint64
	pid    int

	ctx    context.Context
	cancel context.CancelFunc
	kick   chan struct{}
	done   chan struct{}
}

// Launch starts the plugin, reads its Info and supervises it until
// Destruct.
func Launch(cfg Config, logger *zap.Logger) (*Plugin, error) {
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	if cfg.HealthInterval == 0 {
		cfg.HealthInterval = time.Second
	}
	p := &Plugin{cfg: cfg, logger: logger.With(zap.String("engine", cfg.Type)),
		kick: make(chan struct{}, 1), done: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if err := p.start(); err != nil {
		p.cancel()
		close(p.done)
		return nil, err
	}
	go p.supervise()
	return p, nil
}

func (p *Plugin) start() error {
	sec, err := secureConfig(p.cfg.SHA256)
	if err != nil {
		return fmt.Errorf("engine %q: %w", p.cfg.Type, err)
	}
	cmd := exec.Command(p.cfg.Argv[0], p.cfg.Argv[1:]...)
	cmd.Env = append(os.Environ(), p.cfg.Env...)
	cmd.SysProcAttr = pluginProcAttr()
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  engine.Handshake,
		VersionedPlugins: engine.VersionedPlugins(nil),
		Cmd:              cmd,
		SecureConfig:     sec,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		StartTimeout:     p.cfg.StartTimeout,
		Logger:           newHCLog(p.logger.Named("plugin")),
		GRPCDialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(16<<20), grpc.MaxCallSendMsgSize(16<<20))},
	})
	rpc, err := client.Client()
	if err != nil {
		client.Kill()
		return fmt.Errorf("starting engine plugin %q (%s): %w", p.cfg.Type, p.cfg.Argv[0], err)
	}
	raw, err := rpc.Dispense(engine.PluginName)
	if err != nil {
		client.Kill()
		return fmt.Errorf("engine plugin %q: %w", p.cfg.Type, err)
	}
	eng := raw.(engine.Engine)
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.StartTimeout)
	defer cancel()
	info, err := eng.Info(ctx)
	if err != nil {
		client.Kill()
		return fmt.Errorf("engine plugin %q info: %w", p.cfg.Type, err)
	}
	if info.Type != p.cfg.Type {
		client.Kill()
		return fmt.Errorf("plugin %s says it is engine %q, not %q", p.cfg.Argv[0], info.Type, p.cfg.Type)
	}
	p.mu.Lock()
	p.client, p.eng, p.info = client, eng, info
	p.epoch++
	if cmd.Process != nil {
		p.pid = cmd.Process.Pid
	}
	p.mu.Unlock()
	p.logger.Info("engine plugin started", zap.String("version", info.Version), zap.Int("pid", p.pid))
	return nil
}

func secureConfig(sum string) (*plugin.SecureConfig, error) {
	if sum == "" {
		return nil, nil
	}
	b, err := hex.DecodeString(sum)
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("sha256 %q is not 64 hex digits", sum)
	}
	return &plugin.SecureConfig{Checksum: b, Hash: sha256.New()}, nil
}

// Engine returns the current engine client and its epoch.
func (p *Plugin) Engine() (engine.Engine, uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.eng == nil {
		return nil, p.epoch, ErrPluginDown
	}
	return p.eng, p.epoch, nil
}

// Info is the engine's description.
func (p *Plugin) Info() engine.Info {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.info
}

// PID is the plugin process id (0 while down).
func (p *Plugin) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

// Check asks the supervisor to verify the plugin now, after a caller saw
// an error that may mean it died.
func (p *Plugin) Check() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *Plugin) supervise() {
	defer close(p.done)
	defer func() {
		if r := recover(); r != nil {
			p.logger.Error("plugin supervisor panicked", zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
		}
	}()
	t := time.NewTicker(p.cfg.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		case <-p.kick:
		}
		if p.alive() {
			continue
		}
		p.restart()
	}
}

func (p *Plugin) alive() bool {
	p.mu.Lock()
	c := p.client
	p.mu.Unlock()
	if c == nil || c.Exited() {
		return false
	}
	rpc, err := c.Client()
	if err != nil {
		return false
	}
	// A plugin that hangs (stopped, deadlocked) never answers; past
	// pingTimeout it is restarted, and its replicas, which do not depend on
	// it, are adopted by the next run.
	ok := make(chan bool, 1)
	go func() { ok <- rpc.Ping() == nil }()
	select {
	case alive := <-ok:
		return alive
	case <-time.After(pingTimeout):
		return false
	case <-p.ctx.Done():
		return true
	}
}

// pingTimeout is how long a plugin may take to answer a health ping.
const pingTimeout = 5 * time.Second

func (p *Plugin) restart() {
	p.mu.Lock()
	old, pid := p.client, p.pid
	p.client, p.eng, p.pid = nil, nil, 0
	p.mu.Unlock()
	if pid > 0 && old != nil && !old.Exited() {
		// Killed outright, not asked to exit: asked, it would stop its
		// replicas, which the next run adopts instead.
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if old != nil {
		old.Kill()
	}
	p.logger.Warn("engine plugin exited; restarting")
	backoff := 100 * time.Millisecond
	for {
		err := p.start()
		if err == nil {
			return
		}
		p.logger.Error("restarting engine plugin", zap.Error(err), zap.Duration("retry_in", backoff))
		select {
		case <-p.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

// Destruct stops supervising and kills the plugin; go-plugin first asks it
// to exit gracefully. Engine plugins stop their replicas when they exit.
func (p *Plugin) Destruct() error {
	p.cancel()
	<-p.done
	p.mu.Lock()
	c := p.client
	p.client, p.eng = nil, nil
	p.mu.Unlock()
	if c != nil {
		c.Kill()
	}
	p.logger.Info("engine plugin stopped")
	return nil
}
