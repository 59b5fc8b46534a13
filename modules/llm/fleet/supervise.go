package fleet

import (
	"context"
	"errors"
	"io"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/llmgw/llmgw/plugins/engine"
	"github.com/llmgw/llmgw/plugins/host"
	"go.uber.org/zap"
)

// supervise keeps the fleet at its scaling bounds: it replaces replicas
// that died (or whose plugin restarted), starts the minimum, and stops
// replicas above the minimum that have been idle for the idle timeout.
func (f *Fleet) supervise() {
	defer close(f.done)
	defer func() {
		if r := recover(); r != nil {
			f.logger.Error("fleet supervisor panicked", zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
		}
	}()
	t := time.NewTicker(f.opts.Interval)
	defer t.Stop()
	for {
		f.Tick()
		select {
		case <-f.ctx.Done():
			return
		case <-t.C:
		case <-f.kick:
		}
	}
}

// Tick runs one round of supervision now.
func (f *Fleet) Tick() {
	f.mu.Lock()
	rs := append([]*Replica(nil), f.replicas...)
	f.mu.Unlock()
	for _, r := range rs {
		if reason := f.check(r); reason != "" {
			f.drop(r, reason)
		}
	}
	f.mu.Lock()
	clustered, want := f.clustered, f.assigned
	f.mu.Unlock()
	if clustered {
		f.trimToAssigned()
	} else {
		f.trimTo(f.Model().Scaling.MaxReplicas(), "its model was scaled down to max "+strconv.Itoa(f.Model().Scaling.MaxReplicas()))
		f.scaleDown()
		want = f.Model().Scaling.MinReplicas()
	}
	f.mu.Lock()
	if clustered && f.waitFor != "" && len(f.replicas)+f.starting >= want {
		// The plan no longer asks this node for a replica it had no room
		// for (it moved the entry elsewhere): the reason is stale, and in
		// the heartbeat it would keep the planner from placing the model
		// here ever again.
		f.waitFor = ""
		f.Notify()
	}
	for len(f.replicas)+f.starting < want && f.canStartLocked() {
		if !f.startLocked() {
			break
		}
	}
	f.mu.Unlock()
	f.moveBack() // profiles.go
}

// check returns why r is no longer usable, or "". The plugin's word
// (Status) comes first; when the plugin cannot give it (it is down, hung or
// restarting) the replica is judged by itself, over HTTP, so a plugin's
// trouble never takes down a replica that still serves.
func (f *Fleet) check(r *Replica) string {
	eng, err := f.supervisor(r)
	switch {
	case errors.Is(err, host.ErrPluginDown):
		if f.Reachable(r) {
			if r.suspect.Load() != 0 {
				f.clearSuspect(r)
			}
			return ""
		}
		return "its engine plugin is down and the replica does not answer"
	case err != nil:
		return "its engine plugin restarted and could not take it over: " + err.Error()
	}
	ctx, cancel := context.WithTimeout(f.ctx, 3*time.Second)
	defer cancel()
	st, err := eng.Status(ctx, r.ID)
	if u := f.opts.Upstream; err == nil && u != nil && (st.State == engine.StateReady || st.State == engine.StateFailing) {
		// A peer gateway: its own checks (with its CA and key) say
		// whether it serves, not the engine's.
		st = engine.Status{State: engine.StateReady}
		if why := u.Down(); why != "" {
			st = engine.Status{State: engine.StateFailing, Message: why}
		}
	}
	switch {
	case f.ctx.Err() != nil:
		return ""
	case err != nil:
		r.pluginOr(f.plugin).Check()
		if f.Reachable(r) {
			return ""
		}
		return "status: " + err.Error()
	case st.State == engine.StateExited || st.State == engine.StateFailed:
		if st.Message == "" {
			return st.State
		}
		return st.Message
	case st.State == engine.StateFailing || r.State() == ReplicaFailing:
		f.health(r, st)
	}
	if r.suspect.Load() != 0 {
		if !f.Reachable(r) {
			return "it does not answer"
		}
		f.clearSuspect(r)
	}
	return ""
}

// clearSuspect lets requests use r again, and wakes those that were
// waiting for a replica other than r.
func (f *Fleet) clearSuspect(r *Replica) {
	r.suspect.Store(0)
	f.mu.Lock()
	f.Notify()
	f.mu.Unlock()
}

// probeClient checks replicas directly; its timeout bounds a hung server.
var probeClient = &http.Client{Timeout: 2 * time.Second}

// Reachable reports whether r's server answers: 200 from its health URL
// when the engine gave one, else any answer below 500 to GET
// <base>/models, with the replica's headers.
func (f *Fleet) Reachable(r *Replica) bool {
	url, ok := r.BaseURL+"/models", func(code int) bool { return code < http.StatusInternalServerError }
	if r.healthURL != "" {
		url, ok = r.healthURL, func(code int) bool { return code == http.StatusOK }
	}
	req, err := http.NewRequestWithContext(f.ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	for k, v := range r.Header {
		req.Header[k] = v
	}
	resp, err := ClientFor(probeClient, r).Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return ok(resp.StatusCode)
}

func (f *Fleet) drop(r *Replica, reason string) {
	f.mu.Lock()
	f.removeLocked(r)
	f.Notify()
	f.mu.Unlock()
	f.logger.Info("replica lost", zap.String("replica", r.ID), zap.String("reason", reason))
	go f.stopReplica(r)
}

func (f *Fleet) scaleDown() {
	idle := time.Duration(f.Model().Scaling.Idle())
	f.mu.Lock()
	var stop []*Replica
	keep := f.replicas[:0:0]
	n := len(f.replicas)
	for _, r := range f.replicas {
		last := time.Unix(0, r.lastUsed.Load())
		if n > f.Model().Scaling.MinReplicas() && r.inflight.Load() == 0 && f.waiting == 0 && now().Sub(last) >= idle {
			stop = append(stop, r)
			n--
			continue
		}
		keep = append(keep, r)
	}
	f.replicas = keep
	if len(stop) > 0 {
		f.Notify()
	}
	f.mu.Unlock()
	for _, r := range stop {
		f.logger.Info("stopping idle replica", zap.String("replica", r.ID), zap.Duration("idle_timeout", idle))
		go f.stopReplica(r)
	}
}
