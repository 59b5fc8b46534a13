package llm

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/llmgw/llmgw/modules/internal/buildinfo"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/cluster"
	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/nodeupgrade"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"go.uber.org/zap"
)

// drainedStorageKey keeps the nodes an administrator drained (cluster
// only): they take no new replicas, and theirs move elsewhere.
const drainedStorageKey = "llmgw/drained-nodes.json"

// beat is this node's heartbeat.
func (a *App) beat(m *cluster.Member, started time.Time) *cluster.NodeBeat {
	st := a.node.Ledger.Status()
	nb := &cluster.NodeBeat{Name: m.NodeName(), Addr: m.Advertise(), Version: buildinfo.Get().Version, At: now(), Started: started,
		Capacity: st.Capacity, Used: st.Used, Replicas: []llmapi.NodeReplica{}, Load: map[string]cluster.BeatLoad{}}
	v := a.v()
	for name, f := range v.fleets {
		if !f.Planned() {
			continue // a peer's model: not in the plan
		}
		rp := f.TakeReport()
		nb.Replicas = append(nb.Replicas, rp.Replicas...)
		if rp.Failing != "" {
			if nb.Failing == nil {
				nb.Failing = map[string]string{}
			}
			nb.Failing[name] = rp.Failing
		}
		// Load only for models used since their fleet began: the leader
		// needs nothing about the others, and every node reads every
		// heartbeat.
		if rp.Used {
			nb.Load[name] = cluster.BeatLoad{Busy: rp.Busy, LastUsed: rp.LastUsed, Waiting: rp.Waiting}
		}
	}
	sort.Slice(nb.Replicas, func(i, j int) bool { return nb.Replicas[i].ID < nb.Replicas[j].ID })
	nb.Cached = m.CachedWeights(a.mirror)
	return nb
}

// applyPlan gives each fleet the number of replicas the plan puts on this
// node and the ready replicas other nodes run.
func (a *App) applyPlan(m *cluster.Member, p cluster.Plan, nodes map[string]*cluster.NodeBeat) {
	v := a.v()
	remote := m.RemoteReady(nodes)
	here := map[string]int{}
	for name := range v.fleets {
		for _, on := range p.Models[name] {
			if on == m.NodeName() {
				here[name]++
			}
		}
	}
	room := roomWanted(v, here)
	for name, f := range v.fleets {
		if !f.Planned() {
			continue // a peer's model: every node reaches the peer itself
		}
		rs := remote[name]
		slices.SortFunc(rs, func(x, y *fleet.Replica) int { return strings.Compare(x.ID, y.ID) })
		n := here[name]
		if catalog.ClassRank(f.Model().Class) >= room {
			n = makeBeforeBreak(f, n, len(p.Models[name]), len(rs))
		}
		f.SetCluster(m.NodeName(), n, rs, p.Why[name], m.AnnounceReady)
	}
}

// roomWanted is the highest class rank of the models the plan gives this
// node more replicas of than it runs (0 when none): a replica of a lower
// class the plan takes away is stopped at once, since the room it holds
// may be what that model waits for (a class eviction); others wait for
// their replacement (makeBeforeBreak).
func roomWanted(v *view, here map[string]int) int {
	rank := 0
	for name, f := range v.fleets {
		if f.Short(here[name]) {
			rank = max(rank, catalog.ClassRank(f.Model().Class))
		}
	}
	return rank
}

// makeBeforeBreak is how many replicas of the fleet this node keeps when
// the plan puts n here: when the plan moves one of them elsewhere (the
// spread step, after a node joined or came back from a drain), this node
// keeps its ready replica until the model has as many ready replicas on
// the other nodes as the plan gives them, so the model never runs short
// while the new one starts. planned is the model's entries in the plan,
// ready the model's ready replicas on other nodes. A model scaled down or
// stopped is trimmed at once (planned falls).
func makeBeforeBreak(f *fleet.Fleet, n, planned, ready int) int {
	return max(n, min(f.ReadyCount(), planned-ready))
}

// lookupLocal finds a replica of this node for the node-to-node endpoint
// and counts the request in flight on it.
func (a *App) lookupLocal(id string) (*fleet.Replica, func(), bool) {
	v := a.v()
	for _, f := range v.fleets {
		if r, release, ok := f.Hold(func(r *fleet.Replica) bool { return r.ID == id }); ok {
			return r, release, true
		}
	}
	// The replica drained or stopped after the sending node last heard of
	// it (a rolling restart, an update, a live change: the other nodes
	// learn it at the next heartbeat). Its model's other ready replica
	// here, the least busy, answers instead, so the request is not lost.
	// The model is the id's part before its random suffix (fleet.go).
	if i := strings.LastIndexByte(id, '-'); i > 0 {
		if f := v.fleets[id[:i]]; f != nil {
			if best := f.LeastBusy(); best != nil {
				return f.Hold(func(r *fleet.Replica) bool { return r == best })
			}
		}
	}
	return nil, nil, false
}

// applyShared applies state another node changed: keys, models, their
// settings, stopped flags.
func (a *App) applyShared(ctx context.Context, changed map[string]bool) error {
	if changed[keysStorageKey] || changed[tenantsStorageKey] {
		a.shared.keysMu.Lock()
		err := a.loadTenants(ctx) // the tenancy tree changed at runtime (tenancy.go)
		a.putOwners()
		var rt []*tenancy.APIKey
		if err == nil {
			rt, err = a.loadRuntimeKeys(ctx)
		}
		if err == nil {
			err = a.rebuildKeys(rt)
		}
		a.shared.keysMu.Unlock()
		if err != nil {
			return err
		}
		a.logger.Info("API keys changed on another node; applied", zap.Int("runtime_keys", len(rt)))
	}
	if changed[modelsStorageKey] || changed[settingsStorageKey] {
		if err := a.reloadShared(ctx); err != nil {
			return err
		}
	}
	if changed[modelsStorageKey] || changed[stoppedStorageKey] {
		if err := a.applyStopped(ctx); err != nil {
			return err
		}
	}
	return nil
}

// reloadShared rebuilds the catalog from the config and the shared
// runtime models and settings, keeping the fleets of unchanged models.
func (a *App) reloadShared(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	before := a.Models
	a.Models = slices.Clone(a.declared)
	if err := a.applySettings(ctx); err != nil {
		a.Models = before
		return err
	}
	added, err := a.loadRuntimeModels(ctx)
	if err != nil {
		a.Models = before
		return err
	}
	cur := a.v()
	oldKeys := maps.Clone(a.fkeys)
	// A model removed and added again with another engine or source gets
	// a new fleet. One changed live (its context length, resources,
	// options, args or adapters) keeps its fleet, filed under its new
	// shape below; the node that made the change asks every node to
	// replace its replicas (POST /models/roll on the node-to-node
	// endpoint).
	for _, m := range added {
		if f, ok := cur.fleets[m.Name]; ok && m.Key("") != f.Model().Key("") && (m.Engine != f.Model().Engine || m.Source != f.Model().Source) {
			delete(a.fkeys, m.Name)
		}
	}
	v, err := a.buildView(append(slices.Clone(a.Models), added...), added)
	if err != nil {
		a.Models = before
		maps.Copy(a.fkeys, oldKeys)
		return err
	}
	for _, m := range v.models {
		f := v.fleets[m.Name]
		if f.Model() != m {
			f.SetModel(m)
			f.Kick()
		}
		f.Run()
	}
	a.view.Store(v)
	for _, m := range v.models {
		if k, ok := oldKeys[m.Name]; ok && a.fkeys[m.Name] == k {
			a.rekey(v.fleets[m.Name], m) // a no-op when its shape is the same
			oldKeys[m.Name] = a.fkeys[m.Name]
		}
	}
	// Fleets replaced or removed drain their replicas.
	for name, k := range oldKeys {
		if _, ok := v.fleets[name]; !ok {
			delete(a.fkeys, name)
		}
		if a.fkeys[name] != k {
			_, _ = fleets.Delete(k)
		}
	}
	a.logger.Info("catalog changed on another node; applied", zap.Int("models", len(v.models)), zap.Int("runtime", len(added)))
	return nil
}

// applyStopped makes the fleets' stopped flags what the store says.
func (a *App) applyStopped(ctx context.Context) error {
	stopped := map[string]bool{}
	b, err := a.storage.Load(ctx, stoppedStorageKey)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err == nil {
		var names []string
		if err := json.Unmarshal(b, &names); err != nil {
			return err
		}
		for _, n := range names {
			stopped[n] = true
		}
	}
	for name, f := range a.v().fleets {
		if f.Stopped() != stopped[name] {
			f.SetStopped(stopped[name])
		}
	}
	return nil
}

// drainedNodes are the nodes an administrator drained.
func (a *App) drainedNodes() map[string]bool {
	out := map[string]bool{}
	if a.cluster == nil {
		return out
	}
	s := a.cluster.AppliedValue(drainedStorageKey)
	var names []string
	_ = json.Unmarshal([]byte(s), &names)
	for _, n := range names {
		out[n] = true
	}
	return out
}

// LookupLatest is Lookup for the first handler a request meets (llm_quota,
// or the router without it): in a cluster, a name not in the catalog may
// be a model added on another node a moment ago, before its change
// reached this node. The shared catalog is then read once (bounded, one
// read for all callers at a time, none while the store is known down) and
// the name looked up again, so a model answers on every node as soon as
// its add has answered 201.
func (a *App) LookupLatest(name string) (*catalog.Model, error) {
	m, err := a.Lookup(name)
	var unknown *catalog.UnknownModelError
	if err == nil || a.cluster == nil || !errors.As(err, &unknown) {
		return m, err
	}
	if !a.cluster.Refresh(a.clusterSide()) {
		return m, err
	}
	return a.Lookup(name)
}

// ReplicaNode names the node a replica runs on: its cluster node, or this
// node (its cluster name, else the host's) for a local replica.
func (a *App) ReplicaNode(r *fleet.Replica) string {
	if r.Node != "" {
		return r.Node
	}
	return a.nodeName()
}

// clusterSide is the app as its cluster member sees it (Local).
type clusterSide struct{ a *App }

func (a *App) clusterSide() clusterSide { return clusterSide{a} }

// Beat is this node's heartbeat.
func (c clusterSide) Beat(m *cluster.Member, started time.Time) *cluster.NodeBeat {
	return c.a.beat(m, started)
}

// ApplyShared applies the shared state's changed fields.
func (c clusterSide) ApplyShared(ctx context.Context, changed map[string]bool) error {
	return c.a.applyShared(ctx, changed)
}

// ApplyPlan gives the fleets what the plan puts on this node.
func (c clusterSide) ApplyPlan(m *cluster.Member, p cluster.Plan, nodes map[string]*cluster.NodeBeat) {
	c.a.applyPlan(m, p, nodes)
}

// PlanInputs are the planner's inputs: the nodes from their heartbeats,
// the catalog, the models' load, the stopped models, the owners'
// capacities.
func (c clusterSide) PlanInputs(nodes map[string]*cluster.NodeBeat) cluster.PlanInputs {
	cn, load, stopped := c.a.clusterInputs(nodes)
	var models []*catalog.Model
	for _, m := range c.a.v().models {
		if f := c.a.v().fleets[m.Name]; f == nil || f.Planned() { // peers' models are every node's own
			models = append(models, m)
		}
	}
	return cluster.PlanInputs{Nodes: cn, Models: models, Load: load, Stopped: stopped, Owners: c.a.node.Ledger.Owners()}
}

// servePeerLocal answers the app's own routes on the node-to-node
// endpoint.
func (a *App) servePeerLocal(w http.ResponseWriter, r *http.Request) {
	switch r.URL.EscapedPath() {
	case "/models/roll":
		a.servePeerRoll(w, r)
		return
	case "/models/retry":
		a.servePeerRetry(w, r)
		return
	case cluster.UpgradePath:
		nodeupgrade.ServePeer(w, r, a.cluster, a.logger.Named("upgrade"))
		return
	}
	a.servePeerWeights(w, r)
}
