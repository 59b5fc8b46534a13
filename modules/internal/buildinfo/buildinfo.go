// Package buildinfo is what an llmgw binary is: llmgw's version and
// commit (stamped by a release build), and the Caddy and Go inside. The
// CLI prints it, the app serves it and puts it in its heartbeats.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/caddyserver/caddy/v2"
)

// version and commit are llmgw's, stamped by a release build:
//
//	go build -ldflags "-X github.com/llmgw/llmgw/modules/internal/buildinfo.version=v0.16.0 \
//	  -X github.com/llmgw/llmgw/modules/internal/buildinfo.commit=<sha>" ./cmd/llmgw
//
// The linker writes them; nothing changes them while llmgw runs. Without
// them, the module's build information gives what it has.
var version, commit string

// Info is what this llmgw binary is.
type Info struct {
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"` // built from a tree with changes not committed
	Caddy    string `json:"caddy"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
	// PID is the process's id, in GET /llm/version only: an in-place
	// restart (POST /llm/restart) keeps it.
	PID int `json:"pid,omitempty"`
}

// Get is this binary's build information.
func Get() Info {
	b := Info{Version: version, Commit: commit, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
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
func (b Info) Line() string {
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
