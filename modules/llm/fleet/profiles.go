package fleet

import (
	"fmt"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/plugins/host"
	"go.uber.org/zap"
)

// pluginOf is the engine plugin that runs the replicas of the model's
// profile i: its own for a model with profiles, else the fleet's.
func (f *Fleet) pluginOf(i int) *host.Plugin {
	if i >= 0 && i < len(f.opts.Plugins) && f.opts.Plugins[i] != nil {
		return f.opts.Plugins[i]
	}
	return f.plugin
}

// pluginOr is the plugin that runs r, else def (a replica of another
// node, or one made outside a fleet).
func (r *Replica) pluginOr(def *host.Plugin) *host.Plugin {
	if r.plugin != nil {
		return r.plugin
	}
	return def
}

// laterProfileLocked is a replica that runs on a later profile than the
// model's first (the latest), or nil.
func (f *Fleet) laterProfileLocked() *Replica {
	var last *Replica
	for _, r := range f.replicas {
		if r.ProfileIndex > 0 && r.State() == ReplicaReady && (last == nil || r.ProfileIndex > last.ProfileIndex) {
			last = r
		}
	}
	return last
}

// profileStatus lists m's profiles for the admin API.
func profileStatus(m *catalog.Model) []llmapi.ProfileStatus {
	var out []llmapi.ProfileStatus
	for i := range m.Profiles {
		s := m.Shape(i)
		n := s.Needs()
		out = append(out, llmapi.ProfileStatus{Name: s.ProfileName(), Engine: s.Engine, ContextLength: s.ContextLength, Resources: &n})
	}
	return out
}

// profileErr names the profile whose start failed, for a model with
// profiles.
func profileErr(shape *catalog.Model, err error) error {
	if shape.ProfileName() == "" {
		return err
	}
	return fmt.Errorf("profile %s (engine %s): %w", shape.ProfileName(), shape.Engine, err)
}

// moveBack moves one replica that runs on a later profile than the
// model's first to an earlier one when the node has room for that now,
// without stopping anything: a replica of the earlier profile starts,
// and once it is ready the old one leaves the serving set and drains
// (its requests end where they began). One move at a time, none while
// another replica starts or after a failed start until its backoff ends.
func (f *Fleet) moveBack() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Model().Shapes() < 2 || f.starting > 0 || !f.canStartLocked() || f.opts.Unavailable != nil {
		return
	}
	last := f.laterProfileLocked()
	if last == nil {
		return
	}
	p := f.opts.Node.Ledger.ReserveBetter(f, last.ProfileIndex)
	if p == nil {
		return
	}
	f.logger.Info("moving a replica back to an earlier profile", zap.String("replica", last.ID),
		zap.String("from", last.Profile), zap.String("to", f.Model().Shape(p.Profile).ProfileName()))
	f.launchLocked(p, false, last)
}
