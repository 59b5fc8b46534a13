package llm

import (
	"errors"

	"github.com/caddyserver/caddy/v2"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/cluster"
	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llm/place"
	"go.uber.org/zap"
)

var members = caddy.NewUsagePool()

// clusterInputs are what plan reads besides the models and the current
// plan: the nodes as their heartbeats describe them, the models' load,
// and which models an administrator stopped.
func (a *App) clusterInputs(nodes map[string]*cluster.NodeBeat) ([]place.Node, map[string]place.Load, map[string]bool) {
	v := a.v()
	var cn []place.Node
	drained := a.drainedNodes()
	for _, nb := range nodes {
		c := place.Node{Name: nb.Name, Capacity: catalog.Resources{Memory: nb.Capacity.Memory, Cores: nb.Capacity.Cores, GPUs: nb.Capacity.GPUs},
			Draining: drained[nb.Name], Failing: nb.Failing}
		if len(nb.Cached) > 0 {
			has := map[string]bool{}
			for _, s := range nb.Cached {
				has[s] = true
			}
			c.Cached = map[string]bool{}
			for _, mod := range v.models {
				if mod.Source != "" && has[cluster.WeightsKey(mod.Source)] {
					c.Cached[mod.Source] = true
				}
			}
		}
		cn = append(cn, c)
	}
	load := map[string]place.Load{}
	for _, nb := range nodes {
		for model, l := range nb.Load {
			ml := load[model]
			ml.Busy = ml.Busy || l.Busy
			if l.LastUsed.After(ml.LastUsed) {
				ml.LastUsed = l.LastUsed
			}
			load[model] = ml
		}
		for _, r := range nb.Replicas {
			if fleet.State(r.State) != fleet.ReplicaReady {
				continue
			}
			ml := load[r.Model]
			if ml.Ready == nil {
				ml.Ready = map[string]int{}
			}
			ml.Ready[nb.Name]++
			load[r.Model] = ml
		}
	}
	stopped := map[string]bool{}
	for name, f := range v.fleets {
		stopped[name] = f.Stopped()
	}
	return cn, load, stopped
}

// joinCluster connects this node to the cluster (or reuses the
// connection of the previous config) and makes Redis the app's state
// store.
func (a *App) joinCluster(ctx caddy.Context) error {
	if err := a.Cluster.Provision(); err != nil {
		return err
	}
	key := cluster.Key(a.Cluster)
	v, _, err := members.LoadOrNew(key, func() (caddy.Destructor, error) {
		return cluster.NewMember(*a.Cluster, a.logger.Named("cluster"))
	})
	if err != nil {
		return err
	}
	a.cluster, a.clusterKey = v.(*cluster.Member), key
	a.storage = a.cluster.Storage()
	a.cluster.SetLocalStore(a.local)
	if err := a.cluster.SecretRefused(ctx); err != nil {
		a.logger.Error("not joining the cluster", zap.Error(err))
		return err
	}
	if err := a.cluster.Pull(ctx, nil); err != nil {
		var down *cluster.StoreDownError
		if !errors.As(err, &down) {
			return err
		}
		a.logger.Warn("starting with the cluster state this node last saw: the store does not answer", zap.Error(err))
		a.cluster.StoreLost(err)
	}
	return nil
}
