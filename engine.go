// Package llmgw wires the gateway together: importing it registers every
// llmgw Caddy module and the "engine" command that runs the built-in engine
// plugins. cmd/llmgw imports it; so does an xcaddy build made
// --with github.com/llmgw/llmgw.
package llmgw

import (
	"fmt"
	"io"
	"os"
	"strings"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	anthropiceng "github.com/llmgw/llmgw/engines/anthropic"
	"github.com/llmgw/llmgw/engines/comfyui"
	"github.com/llmgw/llmgw/engines/llamacpp"
	"github.com/llmgw/llmgw/engines/ollama"
	openaieng "github.com/llmgw/llmgw/engines/openai"
	"github.com/llmgw/llmgw/engines/sim"
	"github.com/llmgw/llmgw/engines/simimage"
	"github.com/llmgw/llmgw/engines/vllm"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	_ "github.com/llmgw/llmgw/modules/llmadmin"
	_ "github.com/llmgw/llmgw/modules/llmcache"
	_ "github.com/llmgw/llmgw/modules/llmconsole"
	_ "github.com/llmgw/llmgw/modules/llmguard"
	_ "github.com/llmgw/llmgw/modules/llmjobs"
	_ "github.com/llmgw/llmgw/modules/llmkb"
	_ "github.com/llmgw/llmgw/modules/llmmcp"
	_ "github.com/llmgw/llmgw/modules/llmquota"
	_ "github.com/llmgw/llmgw/modules/llmrouter"
	"github.com/llmgw/llmgw/plugins/engine"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "hash-key",
		Usage: "[--new] [<secret>]",
		Short: "Prints the hash of an API key for the llm app's key directive",
		Long: `
Prints the SHA-256 of an API key's secret, which is what a Caddyfile's
"key <id> <sha256>" keeps. With --new, it makes a new secret and prints the
secret (give it to the caller; it is not stored) and its hash. Without a
secret argument, the secret is read from standard input.`,
		CobraFunc: func(cmd *cobra.Command) {
			fresh := cmd.Flags().Bool("new", false, "make a new secret")
			cmd.RunE = func(_ *cobra.Command, args []string) error {
				return hashKey(*fresh, args)
			}
		},
	})
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "engine",
		Usage: "<type> [describe]",
		Short: "Runs a built-in engine plugin (started by llmgw itself)",
		Long: `
Runs one of the engine plugins built into llmgw: sim (a simulated model for
demos and load tests), openai (an outside OpenAI-compatible provider, Azure
OpenAI included), anthropic (an Anthropic Messages provider), llamacpp, vllm
or ollama.
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
		fmt.Fprintln(os.Stderr, "usage: llmgw engine <sim|simimage|comfyui|openai|anthropic|llamacpp|vllm|ollama> [describe]")
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
	case "simimage":
		if len(args) > 1 && args[1] == "replica" {
			if err := simimage.RunReplica(args[2:]); err != nil {
				fmt.Fprintln(os.Stderr, "simimage replica:", err)
				return 1
			}
			return 0
		}
		e := simimage.New(logger)
		defer e.Shutdown()
		impl = e
	case "comfyui":
		e := comfyui.New(logger)
		defer e.Shutdown()
		impl = e
	case "openai":
		impl = openaieng.New()
	case "anthropic":
		impl = anthropiceng.New()
	case "llamacpp":
		e := llamacpp.New(logger)
		defer e.Shutdown()
		impl = e
	case "vllm":
		e := vllm.New(logger)
		defer e.Shutdown()
		impl = e
	case "ollama":
		e := ollama.New(logger)
		defer e.Shutdown()
		impl = e
	default:
		fmt.Fprintf(os.Stderr, "llmgw has no built-in engine %q; built in: sim, simimage, comfyui, openai, anthropic, llamacpp, vllm, ollama\n", args[0])
		return 2
	}
	engine.Serve(impl, args[1:])
	return 0
}

func hashKey(fresh bool, args []string) error {
	var secret string
	switch {
	case fresh:
		s, err := tenancy.NewSecret()
		if err != nil {
			return err
		}
		secret = s
		fmt.Println("secret:", secret)
	case len(args) == 1:
		secret = args[0]
	case len(args) == 0:
		b, err := io.ReadAll(io.LimitReader(os.Stdin, 4096))
		if err != nil {
			return err
		}
		secret = strings.TrimSpace(string(b))
	default:
		return fmt.Errorf("give one secret, or --new")
	}
	if secret == "" {
		return fmt.Errorf("the secret is empty; give one, or use --new")
	}
	if fresh {
		fmt.Print("sha256: ")
	}
	fmt.Println(tenancy.HashKey(secret))
	return nil
}
