package llmctl

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/modules/internal/buildinfo"
)

// BuildInfo is what this llmgw binary is (modules/internal/buildinfo,
// where a release build stamps the version and commit).
type BuildInfo = buildinfo.Info

// Build is this binary's build information.
func Build() BuildInfo { return buildinfo.Get() }

// VersionCommand is "llmgw version": llmgw's version and commit, and the
// Caddy and Go inside.
func VersionCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{Use: "version", Short: "Prints llmgw's version and commit, and the Caddy and Go versions it is built with", Args: cobra.NoArgs,
		Example: "  $ llmgw version\n  llmgw v0.16.0 (commit 1a2b3c4d5e6f, caddy v2.10.2, go1.26.0 linux/amd64)\n  $ llmgw version --json",
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := Build()
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(b)
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), b.Line())
			return err
		}}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print it as JSON")
	return cmd
}

// CaddyOnly are Caddy's commands that would replace this binary with a
// plain Caddy (add-package, remove-package download a Caddy build): in
// llmgw they refuse and say what to do instead. They are hidden from the
// help. Caddy's upgrade is replaced by llmgw's (UpgradeCommand).
func CaddyOnly() []*cobra.Command {
	var out []*cobra.Command
	for _, name := range []string{"add-package", "remove-package"} {
		out = append(out, &cobra.Command{Use: name, Hidden: true, DisableFlagParsing: true,
			Short: "Caddy's " + name + ", which would replace llmgw with a plain Caddy: refused",
			RunE: func(*cobra.Command, []string) error {
				return fmt.Errorf("llmgw %s is Caddy's command, which would replace this llmgw (%s) with a plain Caddy build without the llm modules; "+
					"to change llmgw's version, use llmgw upgrade (or build one: go build ./cmd/llmgw); "+
					"to add Caddy modules, build llmgw with them (xcaddy build --with github.com/llmgw/llmgw --with <module>)", name, Build().Version)
			}})
	}
	return out
}
