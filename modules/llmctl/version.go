package llmctl

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/spf13/cobra"
)

// version and commit are llmgw's, stamped by a release build:
//
//	go build -ldflags "-X github.com/llmgw/llmgw/modules/llmctl.version=v0.16.0 \
//	  -X github.com/llmgw/llmgw/modules/llmctl.commit=<sha>" ./cmd/llmgw
//
// The linker writes them; nothing changes them while llmgw runs. Without
// them, the module's build information gives what it has.
var version, commit string

// BuildInfo is what this llmgw binary is.
type BuildInfo struct {
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"` // built from a tree with changes not committed
	Caddy    string `json:"caddy"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// Build is this binary's build information.
func Build() BuildInfo {
	b := BuildInfo{Version: version, Commit: commit, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	b.Caddy, _ = caddy.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && b.Commit == "":
				b.Commit = s.Value
			case s.Key == "vcs.modified" && commit == "":
				b.Modified = s.Value == "true"
			}
		}
	}
	if b.Version == "" {
		b.Version = "devel" // built from source without a version stamped
	}
	return b
}

// Line is the build in one line: llmgw v0.16.0 (commit 1a2b3c4d5e6f, caddy v2.10.2, go1.26 linux/amd64).
func (b BuildInfo) Line() string {
	var parts []string
	if b.Commit != "" {
		c := b.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		if b.Modified {
			c += "+changes"
		}
		parts = append(parts, "commit "+c)
	}
	parts = append(parts, "caddy "+b.Caddy, b.Go+" "+b.Platform)
	return fmt.Sprintf("llmgw %s (%s)", b.Version, strings.Join(parts, ", "))
}

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
// plain Caddy (upgrade, add-package, remove-package download a Caddy
// build): in llmgw they refuse and say what to do instead. They are
// hidden from the help.
func CaddyOnly() []*cobra.Command {
	var out []*cobra.Command
	for _, name := range []string{"upgrade", "add-package", "remove-package"} {
		out = append(out, &cobra.Command{Use: name, Hidden: true, DisableFlagParsing: true,
			Short: "Caddy's " + name + ", which would replace llmgw with a plain Caddy: refused",
			RunE: func(*cobra.Command, []string) error {
				return fmt.Errorf("llmgw %s is Caddy's command, which would replace this llmgw (%s) with a plain Caddy build without the llm modules; "+
					"to change llmgw's version, replace the binary with another llmgw release (or build one: go build ./cmd/llmgw); "+
					"to add Caddy modules, build llmgw with them (xcaddy build --with github.com/llmgw/llmgw --with <module>)", name, Build().Version)
			}})
	}
	return out
}
