package llmapi

import "github.com/llmgw/llmgw/modules/internal/buildinfo"

// BuildInfo is what an llmgw binary is: what "llmgw version --json"
// prints and GET /llm/version answers for the running process (with its
// PID).
type BuildInfo = buildinfo.Info
