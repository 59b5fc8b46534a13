package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
)

// Serve runs impl as an engine plugin and does not return. When the gateway
// lets it go, Serve calls impl's Shutdown method, if it has one, so the
// engine can stop its replicas gracefully. Called with the
// single argument "describe", it prints the engine's Info as JSON instead,
// which is how the gateway (and an operator) learns what a binary is.
func Serve(impl Engine, args []string) {
	if len(args) > 0 && args[0] == "describe" {
		if err := Describe(impl, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	watchGateway(impl)
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: VersionedPlugins(impl),
		GRPCServer:       plugin.DefaultGRPCServer,
		Logger: hclog.New(&hclog.LoggerOptions{
			Output: os.Stderr, JSONFormat: true, Level: hclog.Info,
		}),
	})
	if sh, ok := impl.(interface{ Shutdown() }); ok {
		sh.Shutdown()
	}
	os.Exit(0)
}

// watchGateway stops impl's replicas and exits when the gateway that
// started the plugin is gone. Replicas outlive their plugin (a plugin that
// crashes is restarted and adopts them), so they must not outlive the
// gateway: the gateway asks for SIGTERM when it dies (Pdeathsig), and the
// parent is also checked every second, for a gateway killed in a way that
// sent nothing. A SIGTERM while the gateway lives ends the plugin alone;
// its replicas wait for the next run to adopt them.
func watchGateway(impl Engine) {
	parent := os.Getppid()
	gone := func() bool { return os.Getppid() != parent }
	stop := func() {
		if sh, ok := impl.(interface{ Shutdown() }); ok {
			sh.Shutdown()
		}
		os.Exit(0)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-sig:
				// Pdeathsig can arrive while the dying gateway's other
				// threads still stand as the parent: give the exit a moment
				// to finish before deciding.
				for range 40 {
					if gone() {
						stop()
					}
					time.Sleep(50 * time.Millisecond)
				}
				os.Exit(0)
			case <-t.C:
				if gone() {
					stop()
				}
			}
		}
	}()
}

// Described is what describe prints: the engine's Info and, when it
// cannot run here (its server's binary is missing), why.
type Described struct {
	Info
	Error string `json:"error,omitempty"`
}

// Describe writes impl's Info as one line of JSON. When Info fails but
// still names the engine, the line carries the Info and the error, and
// the error is returned too (the command exits 1).
func Describe(impl Engine, w io.Writer) error {
	info, err := impl.Info(context.Background())
	if err != nil && info.Type == "" {
		return fmt.Errorf("describing engine: %w", err)
	}
	info.Protocol = ProtocolVersion
	d := Described{Info: info}
	if err != nil {
		d.Error = err.Error()
	}
	if werr := json.NewEncoder(w).Encode(d); werr != nil {
		return werr
	}
	if err != nil {
		return fmt.Errorf("describing engine: %w", err)
	}
	return nil
}
