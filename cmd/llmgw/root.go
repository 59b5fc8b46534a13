package main

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"sort"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/modules/llmctl"
	"github.com/llmgw/llmgw/modules/llmctl/setup"
)

// The command tree is built here rather than by caddycmd.Main so that
// every help text names llmgw: Caddy's own commands (run, reload, …) are
// registered with texts that say "caddy run", which this rewrites. It
// builds what Main builds: a root command and one subcommand for each
// registered command, as caddycmd does.

const rootLong = `llmgw is an OpenAI-compatible gateway to models: Caddy with the llm
modules compiled in. It starts models through engine plugins and serves
them on /v1 with quotas, guardrails and a cache in front, configured by a
Caddyfile (the global llm { … } option and the llm_* directives).

	- 'llmgw run --config Caddyfile' runs it in the foreground (recommended);
	  'llmgw start' runs it in the background until 'llmgw stop'.
	- 'llmgw reload --config Caddyfile' applies a changed config; models
	  that did not change keep their replicas.
	- 'llmgw validate --config Caddyfile' checks a config without serving.
	- 'llmgw ctl' operates a running llmgw (models, keys, usage, cache);
	  'llmgw mirror' manages the weights mirror.
	- 'llmgw setup' sets up this machine: a Caddyfile, its secrets and a
	  systemd unit, asking or from flags.

One llmgw runs per data directory; a second one with the same data
directory refuses to start. The commands that come from Caddy behave as
Caddy's, documented at https://caddyserver.com/docs/command-line (where
it says caddy, read llmgw).`

const rootExample = `  $ sudo llmgw setup
  $ llmgw run --config Caddyfile
  $ llmgw reload --config Caddyfile
  $ llmgw ctl models
  $ llmgw stop`

// caddyWord is the command's name where a help text shows it being run.
var caddyWord = regexp.MustCompile("(^|[\\s'\"`$>(])caddy(\\s)")

func llmgwText(s string) string { return caddyWord.ReplaceAllString(s, "${1}llmgw${2}") }

// rootCommand builds the command tree.
func rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:          "llmgw",
		Long:         rootLong,
		Example:      rootExample,
		SilenceUsage: true, // not after a failed start
		Version:      llmctl.Build().Line(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	all := caddycmd.Commands()
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if replaced[name] {
			continue
		}
		c := all[name]
		cmd := &cobra.Command{Use: c.Name + " " + c.Usage, Short: c.Short, Long: c.Long}
		if c.CobraFunc != nil {
			c.CobraFunc(cmd)
		} else {
			cmd.RunE = caddycmd.WrapCommandFuncForCobra(c.Func)
			cmd.Flags().AddGoFlagSet(c.Flags)
		}
		root.AddCommand(cmd)
	}
	root.AddCommand(llmctl.VersionCommand(), llmctl.UpgradeCommand(), setup.Command())
	root.AddCommand(llmctl.CaddyOnly()...)
	rename(root)
	return root
}

// replaced are Caddy's commands llmgw has its own of: version (llmgw's
// version first), upgrade (to a signed llmgw release), and those that
// would swap llmgw for a plain Caddy (llmctl.CaddyOnly).
var replaced = map[string]bool{"version": true, "upgrade": true, "add-package": true, "remove-package": true}

// rename rewrites a command's texts, and its subcommands', to say llmgw,
// and makes a group of commands (llmgw ctl, llmgw ctl model, …) refuse a
// subcommand it does not have instead of printing its help and
// succeeding.
func rename(c *cobra.Command) {
	c.Use, c.Short, c.Long, c.Example = llmgwText(c.Use), llmgwText(c.Short), llmgwText(c.Long), llmgwText(c.Example)
	if c.HasSubCommands() && !c.Runnable() && c.HasParent() {
		c.Args = cobra.ArbitraryArgs
		c.RunE = unknownSubcommand
	}
	for _, sub := range c.Commands() {
		rename(sub)
	}
}

// unknownSubcommand is a command group run with no subcommand (its help)
// or an unknown one (an error naming it).
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	return fmt.Errorf("unknown command %q for %q; %q lists its commands", args[0], cmd.CommandPath(), cmd.CommandPath()+" --help")
}

// execute runs the command line and exits with the command's status.
func execute() {
	if err := rootCommand().Execute(); err != nil {
		os.Exit(exitCode(err))
	}
}

// exitCode is the status a command asked for: caddycmd carries it in an
// error with an ExitCode field (unexported type); any other error is 1.
func exitCode(err error) int {
	for e := err; e != nil; e = errors.Unwrap(e) {
		v := reflect.ValueOf(e)
		if v.Kind() == reflect.Pointer && v.Elem().Kind() == reflect.Struct {
			if f := v.Elem().FieldByName("ExitCode"); f.IsValid() && f.Kind() == reflect.Int {
				return int(f.Int())
			}
		}
	}
	return 1
}
