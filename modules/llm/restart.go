package llm

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/modules/llm/llmproc"
)

// processOperations are the process's routes (modules/llm/llmproc): its
// build, and its restart in place, which "llmgw upgrade" asks for once it
// has replaced the binary.
var processOperations = []operation{
	{"GET", "/llm/version", "The running process's build: llmgw's version and commit, the Caddy and Go inside, the platform, and its PID (which a restart in place keeps)", "/llm/version", llmproc.Version, ""},
	{"POST", "/llm/restart", "Restart llmgw in place: 202 at once, then it stops taking new requests, lets the open ones and their streams end (within the http app's grace_period, default unbounded), and re-runs the binary at its own path with its own arguments and environment, keeping its PID; the new process loads the config again. It takes no body or query (400): a caller cannot name another binary, only whoever may replace the file can. 409 when llmgw runs under systemd (restart the unit: llmgw upgrade --service) or is already stopping", "/llm/restart", postRestart, ""},
}

func postRestart(w http.ResponseWriter, r *http.Request) error {
	logger := caddy.Log().Named("llm.restart")
	if a := runningApp(); a != nil {
		logger = a.logger.Named("restart")
	}
	return llmproc.Restart(w, r, logger)
}
