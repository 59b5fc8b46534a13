package place

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// ownerLevel is one level of the tenancy tree that has a capacity.
type ownerLevel struct {
	kind string // org, team or project
	cap  tenancy.Capacity
}

// OwnerTable holds the capacities of the active tenancy tree, by path
// (acme, acme/research, acme/research/alpha). Like the node's ledger it
// is one per process: the active config's tree, changed at runtime.
type OwnerTable struct {
	levels map[string]ownerLevel
}

// NewOwnerTable notes the capacity of every level of orgs that has one.
func NewOwnerTable(orgs []*tenancy.Org) *OwnerTable {
	t := &OwnerTable{levels: map[string]ownerLevel{}}
	note := func(kind, path string, c *tenancy.Capacity) {
		if !c.IsZero() {
			t.levels[path] = ownerLevel{kind: kind, cap: *c}
		}
	}
	for _, o := range orgs {
		note("org", o.Name, o.Capacity)
		for _, tm := range o.Teams {
			note("team", o.Name+"/"+tm.Name, tm.Capacity)
			for _, p := range tm.Projects {
				note("project", o.Name+"/"+tm.Name+"/"+p.Name, p.Capacity)
			}
		}
	}
	return t
}

// ownerPaths returns the paths from the organisation down to owner:
// acme/research/alpha gives acme, acme/research, acme/research/alpha.
func ownerPaths(owner string) []string {
	if owner == "" {
		return nil
	}
	parts := strings.Split(owner, "/")
	out := make([]string, 0, len(parts))
	for i := range parts {
		out = append(out, strings.Join(parts[:i+1], "/"))
	}
	return out
}

// Under says whether owner is path or a level below it.
func Under(owner, path string) bool {
	return strings.HasPrefix(owner, path) && (len(owner) == len(path) || owner[len(path)] == '/')
}

// placementOwner is the owner of a placement's model: the fleet's model
// as it is now, or for a placement a plan made up, the one it was given.
func placementOwner(p *Placement) string {
	if p.holder != nil {
		return p.holder.Model().Owner
	}
	return p.owner
}

// ownerUse sums what the placements of path's models hold.
func ownerUse(path string, places []*Placement) llmapi.OwnerUse {
	var u llmapi.OwnerUse
	for _, q := range places {
		if !q.evicted && Under(placementOwner(q), path) {
			u.Add(q.need)
		}
	}
	return u
}

// ownerCheck says why one more replica that needs need, of a model that
// owner owns, would take its owner or a level above it over its
// capacity, or "" when it fits. Levels are checked from the organisation
// down; the first that is full is named.
func ownerCheck(t *OwnerTable, owner string, places []*Placement, need catalog.Resources) string {
	if t == nil || len(t.levels) == 0 {
		return ""
	}
	var paths [3]string // the levels of owner that have a capacity, from the top
	n := 0
	for _, path := range ownerPaths(owner) {
		if _, ok := t.levels[path]; ok && n < len(paths) {
			paths[n] = path
			n++
		}
	}
	if n == 0 {
		return ""
	}
	var use [3]llmapi.OwnerUse // one pass over the placements for every level
	for _, q := range places {
		if q.evicted {
			continue
		}
		o := placementOwner(q)
		for i := range n {
			if Under(o, paths[i]) {
				use[i].Add(q.need)
			}
		}
	}
	for i := range n {
		lv := t.levels[paths[i]]
		if over := overCapacity(lv.cap, use[i], need); over != "" {
			return ownerReason(lv.kind, paths[i], over)
		}
	}
	return ""
}

func ownerReason(kind, path, over string) string {
	return fmt.Sprintf("waiting for capacity: %s %s: %s; remove or scale down another model it owns, or raise its capacity (PATCH /llm/tenants/…, llmgw ctl tenants set)",
		kind, path, over)
}

// overCapacity names the first kind that one more replica needing need
// takes over c, given what is used: "4.0 GiB of memory over its
// capacity of 64 GiB".
func overCapacity(c tenancy.Capacity, used llmapi.OwnerUse, need catalog.Resources) string {
	if c.Replicas > 0 && used.Replicas+1 > c.Replicas {
		return fmt.Sprintf("%s over its capacity of %s", Plural(used.Replicas+1-c.Replicas, "replica"), Plural(c.Replicas, "replica"))
	}
	if c.Memory > 0 && need.Memory > 0 && used.Memory+need.Memory > c.Memory {
		return fmt.Sprintf("%s of memory over its capacity of %s",
			humanize.IBytes(uint64(used.Memory+need.Memory-c.Memory)), humanize.IBytes(uint64(c.Memory)))
	}
	if c.Cores > 0 && need.Cores > 0 && used.Cores+need.Cores > c.Cores {
		return fmt.Sprintf("%s over its capacity of %s", Plural(used.Cores+need.Cores-c.Cores, "core"), Plural(c.Cores, "core"))
	}
	if c.GPUs > 0 && need.GPUs > 0 && used.GPUs+need.GPUs > c.GPUs {
		return fmt.Sprintf("%s over its capacity of %s", Plural(used.GPUs+need.GPUs-c.GPUs, "GPU"), Plural(c.GPUs, "GPU"))
	}
	return ""
}

// Plural is n what, with an s when n is not 1.
func Plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// ownerCheck is the ledger's hook: one more replica of f's model.
func (l *Ledger) ownerCheckLocked(f Holder, need catalog.Resources) string {
	return ownerCheck(l.owners.Load(), f.Model().Owner, l.places, need)
}

// UseOf is what path's models hold on this node now.
func (l *Ledger) UseOf(path string) llmapi.OwnerUse {
	l.mu.Lock()
	defer l.mu.Unlock()
	return ownerUse(path, l.places)
}

// ownerFull is the cluster planner's hook: why one more replica of pm's
// model would take its owner, or a level above it, over its capacity,
// counting the entries of every model of the plan across the cluster
// (those on draining nodes aside: they are being replaced). Entries the
// plan keeps are never dropped for it: a capacity lowered at runtime
// holds back new replicas and stops none.
func (p *planner) ownerFull(pm *planModel) string {
	t := p.owners
	if t == nil || len(t.levels) == 0 || pm.m.Owner == "" {
		return ""
	}
	for _, path := range ownerPaths(pm.m.Owner) {
		lv, ok := t.levels[path]
		if !ok {
			continue
		}
		var u llmapi.OwnerUse
		for i := range p.models {
			q := &p.models[i]
			if !Under(q.m.Owner, path) {
				continue
			}
			for at, idx := range q.entries {
				if !p.nodes[idx].Draining {
					u.Add(q.needAt(at))
				}
			}
		}
		if over := overCapacity(lv.cap, u, pm.need); over != "" {
			return ownerReason(lv.kind, path, over)
		}
	}
	return ""
}
