package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

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

// Describe writes impl's Info as one line of JSON.
func Describe(impl Engine, w io.Writer) error {
	info, err := impl.Info(context.Background())
	if err != nil {
		return fmt.Errorf("describing engine: %w", err)
	}
	info.Protocol = ProtocolVersion
	return json.NewEncoder(w).Encode(info)
}
