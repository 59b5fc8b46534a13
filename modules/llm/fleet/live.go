package fleet

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// Roll replaces each replica the fleet has now with a new one started
// from the fleet's model as it is now. The new one starts beside the old
// when the node has room; the old one drains once the new one is ready.
func (f *Fleet) Roll(ctx context.Context, reason string) (llmapi.Rollout, error) {
	return f.RollWith(ctx, reason, true)
}

// RollInPlace replaces each of the fleet's replicas: the old one drains
// first and a new one takes its place, so that the node keeps the count
// the cluster's plan gives it.
func (f *Fleet) RollInPlace(ctx context.Context, reason string) (llmapi.Rollout, error) {
	return f.RollWith(ctx, reason, false)
}

// RollWith is roll, starting new replicas beside the old only when
// beside is allowed (and the node has room).
func (f *Fleet) RollWith(ctx context.Context, reason string, besideOK bool) (llmapi.Rollout, error) {
	f.rolling.Lock()
	defer f.rolling.Unlock()
	f.mu.Lock()
	old := slices.Clone(f.replicas)
	f.mu.Unlock()
	out := llmapi.Rollout{Replaced: []string{}, Started: []string{}}
	known := map[*Replica]bool{}
	for _, r := range old {
		known[r] = true
	}
	for _, o := range old {
		f.mu.Lock()
		beside := besideOK && f.canStartLocked() && f.startLocked()
		f.mu.Unlock()
		if !beside {
			out.OneAtATime = true
			f.retire(o, reason)
			out.Replaced = append(out.Replaced, o.ID)
			if err := f.startWhenRoom(ctx); err != nil {
				return out, err
			}
		}
		r, err := f.awaitNew(ctx, known)
		if err != nil {
			return out, err
		}
		known[r] = true
		out.Started = append(out.Started, r.ID)
		if beside {
			f.retire(o, reason)
			out.Replaced = append(out.Replaced, o.ID)
		}
	}
	return out, nil
}

// startWhenRoom starts a replica as soon as the node has room (a drained
// replica freed it), unless one is already starting.
func (f *Fleet) startWhenRoom(ctx context.Context) error {
	for {
		f.mu.Lock()
		if f.starting > 0 {
			f.mu.Unlock()
			return nil
		}
		if f.canStartLocked() && f.startLocked() {
			f.mu.Unlock()
			return nil
		}
		why := f.waitFor
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("model %q: no room for its new replica: %s", f.Model().Name, why)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// awaitNew waits for a ready replica not in known.
func (f *Fleet) awaitNew(ctx context.Context, known map[*Replica]bool) (*Replica, error) {
	for {
		f.mu.Lock()
		for _, r := range f.replicas {
			if !known[r] && r.State() == ReplicaReady {
				f.mu.Unlock()
				return r, nil
			}
		}
		if f.starting == 0 {
			err := f.lastErr
			f.mu.Unlock()
			if err == nil {
				err = fmt.Errorf("no new replica is starting")
			}
			return nil, fmt.Errorf("model %q: its new replica did not start: %w", f.Model().Name, err)
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("model %q: its new replica was not ready in time", f.Model().Name)
		}
	}
}
