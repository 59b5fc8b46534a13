//go:build unix

package llmproc

import (
	"context"
	"net/http"
	"os"
	"syscall"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
)

// restartable refuses a restart in place where it would go wrong: while
// the process is already exiting, and under systemd's notify protocol,
// where Caddy's stop tells systemd the service is stopping (systemd would
// then kill the process it re-runs): restart the unit instead.
func restartable() error {
	if caddy.Exiting() {
		return apiErr(http.StatusConflict, "restarting: llmgw is already stopping or restarting; wait for it")
	}
	if os.Getenv("NOTIFY_SOCKET") != "" {
		return apiErr(http.StatusConflict, "restarting: llmgw runs as a systemd service (NOTIFY_SOCKET is set), which must restart it itself: systemctl restart <unit>, or llmgw upgrade --service <unit>")
	}
	return nil
}

// reexecOnExit stops the process as SIGTERM does (Caddy's graceful stop:
// the servers stop accepting, open requests and streams end within the
// http app's grace_period, default none, then the apps are cleaned up),
// and, at its end, replaces the process with its own binary, run again
// with the same arguments and environment.
func reexecOnExit(logger *zap.Logger) {
	caddy.OnExit(func(context.Context) {
		exe, err := ownBinary()
		if err != nil {
			logger.Error("restarting: not re-running llmgw; it exits", zap.Error(err))
			return
		}
		logger.Info("restarting: re-running llmgw", zap.String("binary", exe), zap.Strings("args", restartArgs(os.Args)[1:]))
		err = syscall.Exec(exe, restartArgs(os.Args), os.Environ())
		logger.Error("restarting: re-running llmgw failed; it exits", zap.String("binary", exe), zap.Error(err))
	})
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		logger.Error("restarting: signalling the stop", zap.Error(err))
	}
}

// ExitRestart is the status llmgw exits with to be started again by its
// service manager (a unit's Restart=on-failure) after a cluster upgrade
// replaced its binary.
const ExitRestart = 75

// RestartSoon readies a restart of the process with the binary now at
// its path, once its open requests and streams end: in place, or under
// systemd's notify protocol by exiting with ExitRestart for the unit to
// start it again. It says which; start begins it (after the answer that
// announces it is written: the stop closes the admin endpoint).
func RestartSoon(logger *zap.Logger) (how string, start func(), err error) {
	if caddy.Exiting() {
		return "", nil, apiErr(http.StatusConflict, "restarting: llmgw is already stopping or restarting; wait for it")
	}
	if _, err := ownBinary(); err != nil {
		return "", nil, err
	}
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return "in place", func() { go reexecOnExit(logger) }, nil
	}
	return "by its service manager (exit status 75, Restart=on-failure)", func() {
		caddy.OnExit(func(context.Context) {
			logger.Info("restarting: exiting for the service manager to start llmgw again", zap.Int("status", ExitRestart))
			os.Exit(ExitRestart)
		})
		go func() {
			if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
				logger.Error("restarting: signalling the stop", zap.Error(err))
			}
		}()
	}, nil
}
