// Package llmgw wires the gateway together: importing it registers every
// llmgw Caddy module and the "engine" command that runs the built-in engine
// plugins. cmd/llmgw imports it; so does an xcaddy build made
// --with github.com/llmgw/llmgw.
package llmgw

import (
	"fmt"
	"os"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	openaieng "github.com/llmgw/llmgw/engines/openai"
	"github.com/llmgw/llmgw/engines/sim"
	_ "github.com/llmgw/llmgw/modules/llm"
	_ "github.com/llmgw/llmgw/modules/llmrouter"
	"github.com/llmgw/llmgw/plugins/engine"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "engine",
		Usage: "<type> [describe]",
		Short: "Runs a built-in engine plugin (started by llmgw itself)",
		Long: `
Runs one of the engine plugins built into llmgw: sim (a simulated model for
demos and load tests) or openai (an outside OpenAI-compatible provider).
llmgw starts these as child processes; run by hand, "describe" prints the
engine's type, version and protocol as JSON.`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.DisableFlagParsing = true // the sim replica has flags of its own
			cmd.RunE = func(_ *cobra.Command, args []string) error {
				if code := RunEngine(args); code != 0 {
					os.Exit(code)
				}
				return nil
			}
		},
	})
}

// RunEngine runs a built-in engine plugin (or the sim engine's replica
// server) and returns the exit code.
func RunEngine(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: llmgw engine <sim|openai> [describe]")
		return 2
	}
	logger := hclog.New(&hclog.LoggerOptions{Output: os.Stderr, JSONFormat: true, Name: "engine." + args[0]})
	var impl engine.Engine
	switch args[0] {
	case "sim":
		if len(args) > 1 && args[1] == "replica" {
			if err := sim.RunReplica(args[2:]); err != nil {
				fmt.Fprintln(os.Stderr, "sim replica:", err)
				return 1
			}
			return 0
		}
		impl = sim.New(logger)
	case "openai":
		impl = openaieng.New()
	default:
		fmt.Fprintf(os.Stderr, "llmgw has no built-in engine %q; built in: sim, openai\n", args[0])
		return 2
	}
	engine.Serve(impl, args[1:])
	return 0
}
