package cluster

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/place"
)

// PlanAdd places n replicas of m as the cluster's leader would once
// m is in the catalog: the same plan function, on the nodes' last
// heartbeats and the current plan. The replicas of other models that m's
// arrival would stop are those the plan keeps without m and drops with
// it. nodes and cur are the member's Snapshot, in the planner's inputs
// without m.
func PlanAdd(nodes map[string]*NodeBeat, cur Plan, in PlanInputs, m *catalog.Model, n int, t time.Time) llmapi.Plan {
	cn, load, stopped := in.Nodes, in.Load, in.Stopped
	planned := *m // started with n replicas, as if its min were n
	var sc catalog.Scaling
	if m.Scaling != nil {
		sc = *m.Scaling // a copy: m's own stays as it was
	}
	lo, hi := n, max(n, m.Scaling.MaxReplicas())
	sc.Min, sc.Max = &lo, &hi
	planned.Scaling = &sc
	others := in.Models
	before, _ := place.Plan(cn, others, cur.Models, load, stopped, t, in.Owners)
	after, why, profiles := place.PlanProfiles(cn, append(slices.Clone(others), &planned), cur.Models, load, stopped, t, in.Owners)
	pl := llmapi.Plan{Model: m.Name, Replicas: []llmapi.PlannedReplica{}, Evict: []llmapi.PlannedEviction{}}
	for j, node := range after[m.Name] {
		s := m.Shape(0)
		if ps := profiles[m.Name]; j < len(ps) {
			s = m.Shape(m.ProfileIndex(ps[j]))
		}
		pl.Replicas = append(pl.Replicas, llmapi.PlannedReplica{Node: node, Resources: place.AmountsOf(s.Needs()), Profile: s.ProfileName()})
	}
	pl.Fits = len(pl.Replicas) >= n
	if !pl.Fits {
		pl.Reason = why[m.Name]
		if pl.Reason == "" {
			pl.Reason = fmt.Sprintf("the cluster has room for %d of its %d replicas", len(pl.Replicas), n)
		}
	}
	byName := map[string]*catalog.Model{}
	for _, o := range others {
		byName[o.Name] = o
	}
	for _, name := range slices.Sorted(maps.Keys(before)) {
		left := slices.Clone(after[name])
		for _, node := range before[name] {
			if i := slices.Index(left, node); i >= 0 {
				left = slices.Delete(left, i, i+1)
				continue
			}
			o := byName[name]
			ev := llmapi.PlannedEviction{Model: name, Replica: "on " + node}
			if o != nil {
				ev.Class, ev.Resources = catalog.ClassName(o.Class), place.AmountsOf(o.Needs())
			}
			if nb := nodes[node]; nb != nil {
				for _, r := range nb.Replicas {
					if r.Model == name {
						ev.Replica = r.ID
						break
					}
				}
			}
			pl.Evict = append(pl.Evict, ev)
		}
	}
	return pl
}
