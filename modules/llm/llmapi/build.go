package llmapi

import "github.com/llmgw/llmgw/modules/internal/buildinfo"

// BuildInfo is what an llmgw binary is: what "llmgw version --json"
// prints and GET /llm/version answers for the running process (with its
// PID).
type BuildInfo = buildinfo.Info

// Restarting is POST /llm/restart's answer (202).
type Restarting struct {
	Status  string    `json:"status"` // "restarting"
	Binary  string    `json:"binary"` // the file it re-runs: the process's own
	PID     int       `json:"pid"`    // kept by the restart
	Running BuildInfo `json:"running"`
}

// NodeUpgrade is POST /llm/nodes/{name}/upgrade's answer: the node
// installed the release and restarts on it once its open requests end.
type NodeUpgrade struct {
	Node    string `json:"node"`
	From    string `json:"from"`    // the version it ran
	To      string `json:"to"`      // the release's
	Binary  string `json:"binary"`  // the file replaced (the old one is kept as <binary>.previous)
	Restart string `json:"restart"` // how it restarts: in place, or by its service manager
}
