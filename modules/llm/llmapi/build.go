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
