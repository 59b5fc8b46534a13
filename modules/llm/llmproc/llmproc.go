// Package llmproc is the llmgw process on the admin API: GET /llm/version
// (the build of the running binary) and POST /llm/restart (re-run the
// binary at the process's own path, in place, once its open requests and
// streams have ended). The llm app serves both (modules/llm/restart.go).
package llmproc

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/internal/buildinfo"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// Build is the running binary's build.
func Build() llmapi.BuildInfo { return buildinfo.Get() }

// Version answers GET /llm/version: the running process's build and PID.
func Version(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return apiErr(http.StatusMethodNotAllowed, "GET /llm/version: method %s not allowed; use GET", r.Method)
	}
	b := Build()
	b.PID = os.Getpid()
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(b)
}

// Restart answers POST /llm/restart: 202, then the process stops taking
// requests, waits for the open ones (streams included) to end as Caddy's
// graceful stop does, and re-runs its own binary with its own arguments
// and environment (same PID). The caller chooses nothing: a body or a
// query is refused, so an admin caller cannot make llmgw run another
// file; whoever may replace the binary's file decides what runs.
func Restart(w http.ResponseWriter, r *http.Request, logger *zap.Logger) error {
	if r.Method != http.MethodPost {
		return apiErr(http.StatusMethodNotAllowed, "POST /llm/restart: method %s not allowed; use POST", r.Method)
	}
	if r.URL.RawQuery != "" {
		return apiErr(http.StatusBadRequest, "POST /llm/restart takes no query (got %q): llmgw re-runs the binary at its own path with its own arguments; to run another version, replace that file (llmgw upgrade)", r.URL.RawQuery)
	}
	if b, _ := io.ReadAll(io.LimitReader(r.Body, 4096)); len(b) > 0 && string(b) != "{}" {
		return apiErr(http.StatusBadRequest, "POST /llm/restart takes no body (got %d bytes): llmgw re-runs the binary at its own path with its own arguments, never a path or arguments a caller names; to run another version, replace that file (llmgw upgrade)", len(b))
	}
	exe, err := ownBinary()
	if err != nil {
		return err
	}
	if err := restartable(); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	if err := json.NewEncoder(w).Encode(llmapi.Restarting{Status: "restarting", Binary: exe, PID: os.Getpid(), Running: Build()}); err != nil {
		return err
	}
	logger.Info("restarting in place: waiting for open requests to end", zap.String("binary", exe), zap.Int("pid", os.Getpid()))
	go func() {
		defer func() {
			if v := recover(); v != nil {
				logger.Error("restarting", zap.Any("panic", v), zap.Stack("stack"))
			}
		}()
		reexecOnExit(logger)
	}()
	return nil
}

// ownBinary is the process's own executable, checked to be a file it can
// run again.
func ownBinary() (string, error) {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return "", apiErr(http.StatusInternalServerError, "restarting: finding llmgw's own binary: %v", err)
	}
	fi, err := os.Stat(exe)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", apiErr(http.StatusConflict, "restarting: llmgw's binary %s is missing or not executable (%v); put an llmgw binary back there before restarting", exe, err)
	}
	return exe, nil
}

func apiErr(status int, format string, args ...any) error {
	return caddy.APIError{HTTPStatus: status, Err: fmt.Errorf(format, args...)}
}

// restartArgs are the arguments the process runs again with: its own,
// without run's --pingback, by which "llmgw start" learns that the
// process it started is serving (that start has long returned, and the
// pingback would fail the new start).
func restartArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--pingback" || a == "-pingback":
			i++ // and its value
		case strings.HasPrefix(a, "--pingback=") || strings.HasPrefix(a, "-pingback="):
		default:
			out = append(out, a)
		}
	}
	return out
}
