//go:build !unix

package llmproc

import (
	"net/http"

	"go.uber.org/zap"
)

func restartable() error {
	return apiErr(http.StatusNotImplemented, "restarting in place works on Linux and macOS only; restart the service instead")
}

func reexecOnExit(*zap.Logger) {}

// RestartSoon is not available off Unix.
func RestartSoon(*zap.Logger) (string, func(), error) { return "", nil, restartable() }
