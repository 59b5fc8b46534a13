package place

import (
	"fmt"
	"slices"
	"strings"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// choice is where one replica of a model would go on a node: the profile
// (an index in the model's profiles; 0 for a model without), the
// replicas of lower classes to stop first, why the profiles before it
// were passed over (Note), or, when none fits, why (Why).
type choice struct {
	profile int
	victims []*Placement
	note    string
	why     string
}

// choose places one replica of m, of class rank, on a node of capacity
// c holding places, with owners' capacities t: the first of its first
// upto profiles that fits in the free room, else the first that fits once
// replicas of lower classes stop (when evict). A CPU profile waits while
// the free GPUs would take a GPU profile of the model (cpuWait). It
// changes nothing.
func choose(c catalog.Resources, places []*Placement, t *OwnerTable, m *catalog.Model, rank, upto int, evict bool) choice {
	passes := []int{0}
	if evict {
		passes = append(passes, rank)
	}
	var whys []string
	for _, r := range passes {
		whys = whys[:0]
		for i := range upto {
			s := m.Shape(i)
			need := s.Needs()
			why := cpuWait(c, places, m, need)
			if why == "" {
				why = ownerCheck(t, m.Owner, places, need) // the owner's capacity (owners.go)
			}
			var victims []*Placement
			if why == "" {
				victims, why = fit(c, places, need, r)
			}
			if why == "" {
				return choice{profile: i, victims: victims, note: passedOver(m, whys)}
			}
			whys = append(whys, profileWhy(s, why))
		}
	}
	if len(m.Profiles) == 0 {
		return choice{profile: -1, why: whys[0]}
	}
	return choice{profile: -1, why: strings.Join(whys, "; ")}
}

// cpuWait is why a CPU profile (need asks no GPU) of m does not take a
// replica now: the node has free as many GPUs as a GPU profile of the
// model needs, and the model does not prefer the CPU. It is "" otherwise.
func cpuWait(c catalog.Resources, places []*Placement, m *catalog.Model, need catalog.Resources) string {
	if need.GPUs > 0 || m.Prefer == catalog.PreferCPU {
		return ""
	}
	g := m.GPUProfileNeed()
	if g == 0 {
		return ""
	}
	free := c.GPUs
	for _, q := range places {
		if !q.evicted {
			free -= q.need.GPUs
		}
	}
	if free < g {
		return ""
	}
	are := "are"
	if free == 1 {
		are = "is"
	}
	return fmt.Sprintf("it would run on the CPU while %s %s free (a GPU profile needs %d); put prefer cpu in model %q if running it on the CPU is on purpose",
		Plural(free, "GPU"), are, g, m.Name)
}

// profileWhy names the profile a reason is about (nothing for a model
// without profiles).
func profileWhy(s *catalog.Model, why string) string {
	if s.ProfileName() == "" {
		return why
	}
	return "profile " + s.ProfileName() + ": " + why
}

// passedOver says why the profiles before the one chosen were not.
func passedOver(m *catalog.Model, whys []string) string {
	if len(whys) == 0 {
		return ""
	}
	return "not on an earlier profile: " + strings.Join(whys, "; ")
}

// ReserveBetter claims room, without stopping any replica, for a replica
// of f on one of the profiles before than (a replica running on profile
// than moves back to it). It returns nil when none has room.
func (l *Ledger) ReserveBetter(f Holder, than int) *Placement {
	m := f.Model()
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := choose(l.Capacity(), l.places, l.owners.Load(), m, 0, min(than, m.Shapes()), false)
	if ch.profile < 0 {
		return nil
	}
	p := &Placement{holder: f, need: m.Shape(ch.profile).Needs(), rank: catalog.ClassRank(m.Class), Profile: ch.profile, Note: ch.note}
	l.placeLocked(p)
	return p
}

// newPlanModel is m's share of a planning round, before its entries.
func newPlanModel(m *catalog.Model) planModel {
	pm := planModel{m: m, need: m.Needs(), rank: catalog.ClassRank(m.Class), gpuNeed: m.GPUProfileNeed(),
		preferCPU: m.Prefer == catalog.PreferCPU}
	for i := range m.Shapes() {
		pm.shapes = append(pm.shapes, m.Shape(i).Needs())
	}
	return pm
}

// needAt is what the model's entry at holds: its profile's need.
func (pm *planModel) needAt(at int) catalog.Resources { return pm.shapes[pm.prof[at]] }

// add appends an entry on node idx, of profile k.
func (pm *planModel) add(idx, k int) {
	pm.entries = append(pm.entries, idx)
	pm.prof = append(pm.prof, k)
}

// remove drops the entry at.
func (pm *planModel) remove(at int) {
	pm.entries = slices.Delete(pm.entries, at, at+1)
	pm.prof = slices.Delete(pm.prof, at, at+1)
}

// keepOnly keeps the entries whose node ok accepts.
func (pm *planModel) keepOnly(ok func(idx int) bool) {
	n := 0
	for at, idx := range pm.entries {
		if ok(idx) {
			pm.entries[n], pm.prof[n] = idx, pm.prof[at]
			n++
		}
	}
	pm.entries, pm.prof = pm.entries[:n], pm.prof[:n]
}

// fitsIn is the first of the model's profiles whose replica fits in
// free, -1 when none does. An entry kept where it runs takes it; the CPU
// rule (cpuWaits) is for new entries only: no running replica is stopped
// for it.
func (pm *planModel) fitsIn(free catalog.Resources) int {
	for k, need := range pm.shapes {
		if need.Fits(free) {
			return k
		}
	}
	return -1
}

// profileNames are the profiles of the model's entries, in order.
func (pm *planModel) profileNames() []string {
	out := make([]string, len(pm.prof))
	for at, k := range pm.prof {
		out[at] = pm.m.Profiles[k].Name
	}
	return out
}

// cpuWaits tells whether a replica of the model's profile that needs
// need stays off node i: it is a CPU profile, and the node has free the
// GPUs a GPU profile of the model needs (unless the model prefers the
// CPU). It notes why for explain.
func (p *planner) cpuWaits(pm *planModel, need catalog.Resources, i int) bool {
	if need.GPUs > 0 || pm.gpuNeed == 0 || pm.preferCPU || p.free[i].GPUs < pm.gpuNeed {
		return false
	}
	if pm.cpuWhy == "" {
		pm.cpuWhy = fmt.Sprintf("node %q has %s free, so a CPU profile of %q does not run there (a GPU profile needs %d); put prefer cpu in the model if running it on the CPU is on purpose",
			p.nodes[i].Name, Plural(p.free[i].GPUs, "GPU"), pm.m.Name, pm.gpuNeed)
	}
	return true
}

// upgrade moves the model's entry on its latest profile to an earlier
// profile when some node has room for one now, once every replica of the
// model is ready (as spread does): on the same node the entry just
// changes profile (the node's fleet moves its replica back without a
// gap), on another node the replica there starts and this one drains.
// One move a round.
func (p *planner) upgrade(pm *planModel, ld Load) {
	if len(pm.shapes) < 2 {
		return
	}
	defer p.clearMine(pm)
	at := -1
	for j, idx := range pm.entries {
		if p.nodes[idx].Draining {
			return // a drain is under way
		}
		p.mine[idx]++
		if pm.prof[j] > 0 && (at < 0 || pm.prof[j] > pm.prof[at]) {
			at = j
		}
	}
	if at < 0 || !p.allReady(pm, ld) {
		return
	}
	from, old := pm.entries[at], pm.prof[at]
	p.free[from] = p.free[from].Add(pm.shapes[old], 1)
	p.mine[from]--
	to, k := p.best(pm)
	if to < 0 || k >= old {
		to, k = from, old // nothing better: it stays
	}
	pm.entries[at], pm.prof[at] = to, k
	p.free[to] = p.free[to].Add(pm.shapes[k], -1)
	p.mine[to]++
}

// allReady tells whether every entry of the model has a ready replica;
// p.mine holds the model's entries per node.
func (p *planner) allReady(pm *planModel, ld Load) bool {
	ready, seen := 0, map[int]bool{}
	for _, idx := range pm.entries {
		if !seen[idx] {
			seen[idx] = true
			ready += min(ld.Ready[p.nodes[idx].Name], p.mine[idx])
		}
	}
	return ready >= len(pm.entries)
}
