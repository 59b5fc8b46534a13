package fleet

import (
	"context"
	"strings"
	"syscall"
	"time"

	"github.com/llmgw/llmgw/plugins/engine"
	"go.uber.org/zap"
)

// supervisor returns the engine plugin run that supervises r. Engine
// servers outlive their plugin, so after a plugin restart the new run is
// handed r first (engine.Adopt); from then on it answers Status and Stop
// for r as for its own replicas. The error is host.ErrPluginDown while the
// plugin is restarting, or why the new run could not take r.
func (f *Fleet) supervisor(r *Replica) (engine.Engine, error) {
	eng, epoch, err := r.pluginOr(f.plugin).Engine()
	if err != nil || epoch == r.epoch.Load() {
		return eng, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := make(map[string]string, len(r.Header))
	for k := range r.Header {
		h[k] = strings.Join(r.Header[k], "\n")
	}
	err = engine.Adopt(ctx, eng, engine.Replica{ID: r.ID, BaseURL: r.BaseURL, PID: r.PID, Headers: h,
		UpstreamModel: r.UpstreamModel, HealthURL: r.healthURL, Adapters: r.Adapters})
	if err != nil {
		return nil, err
	}
	r.epoch.Store(epoch)
	f.logger.Info("replica adopted by the restarted engine plugin", zap.String("replica", r.ID), zap.Int64("pid", r.PID))
	return eng, nil
}

// stopOrphan stops a local replica whose plugin cannot (it is down, or
// could not adopt it): SIGTERM to the server's process group, then SIGKILL
// after grace. A process that no longer leads its own group is not the
// server any more (its id was reused) and is left alone.
func stopOrphan(r *Replica, grace time.Duration) {
	pid := int(r.PID)
	if pid <= 0 {
		return
	}
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		return
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}
