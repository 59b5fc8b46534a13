package llmapi

import (
	"fmt"
	"strings"
)

// BuildInfo is what an llmgw binary is: what "llmgw version --json"
// prints and GET /llm/version answers for the running process.
type BuildInfo struct {
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

// BuildModuleID is the Caddy module that carries the binary's build
// (modules/llmctl registers it, where the release build stamps the
// version): its New returns a BuildSource. The llm app answers GET
// /llm/version from it without importing the command line.
const BuildModuleID = "llm.build_info"

// BuildSource is what the BuildModuleID module's New returns.
type BuildSource interface {
	BuildInfo() BuildInfo
}
