package place

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// clusterNode is a node as the planner sees it (from its heartbeat).
type Node struct {
	Name string
	// Capacity is what the node offers replicas. As in the node's own
	// ledger, a kind it reports as zero is a kind it has none of: only
	// models that need none of it fit there.
	Capacity catalog.Resources
	// Draining nodes take no new replicas; theirs move elsewhere first.
	Draining bool
	// Cached lists the model sources whose weights are in the node cache.
	Cached map[string]bool
	// Failing is model → why the node cannot start it now (its start
	// failed lately, its engine is missing): no new replica of the model
	// goes there, and its entries there that are not ready move away.
	Failing map[string]string
}

// modelLoad is what the nodes report about a model's use.
type Load struct {
	// Busy: requests are waiting for the model somewhere, or every
	// replica is at its target concurrency.
	Busy bool
	// LastUsed is the latest request anywhere. Zero means no node
	// reported one; the planner then never scales the model down, so a
	// lost report stops nothing. Nodes report a replica's start time
	// until it serves, as the single-node fleet counts idle time.
	LastUsed time.Time
	// Ready is node name → replicas of the model ready there.
	Ready map[string]int
}

// planModel is one model's share of a round: its entries are node
// indices, in the order of the current plan, then new ones.
type planModel struct {
	m       *catalog.Model
	need    catalog.Resources // its first profile's
	rank    int
	want    int
	entries []int
	cached  []bool // by node: the node holds the model's weights
	// shapes are what a replica of each of the model's profiles needs,
	// in order (one for a model without profiles); prof is, by entry,
	// the profile it runs (profiles.go).
	shapes []catalog.Resources
	prof   []int
	// gpuNeed and preferCPU decide whether a CPU profile may take a
	// replica on a node with free GPUs (cpuWait); cpuWhy says why one
	// did not, for explain.
	gpuNeed   int
	preferCPU bool
	cpuWhy    string
}

// planner is one round's working state.
type planner struct {
	nodes  []Node
	index  map[string]int
	free   []catalog.Resources
	mine   []int // scratch: one model's entries per node, zero between uses
	models []planModel
	owners *OwnerTable // the owners' capacities
}

// Plan returns, for every catalog model, the nodes its replicas run on
// (one entry per replica), and for the models it could not fully place,
// why. It is a pure function of its inputs, and a fixed point when
// nothing changes: plan(plan(x)) equals plan(x).
//
// A model's desired count starts from its current entries that are not
// on a draining node (entries on dead nodes count: they are re-placed),
// or its entries on draining nodes when there are more of those, is
// raised to its min, goes up by one when the model is busy and every
// entry is ready (one step a round, none while replicas start), down by
// one when it has been idle for its idle timeout, and stays within
// [min, max]; a stopped model has none. Entries on live nodes stay where
// they are while they fit (no churn); entries on draining nodes stay
// until the model has its desired count ready elsewhere. New entries go,
// critical models first, to the node where the model has the fewest
// entries, then (for a model that needs no GPU) one without GPUs, then
// one that caches its weights, then the one with the most free memory,
// then by name. A critical or standard model that fits nowhere takes the
// place of lower-class entries on one node.
//
// The plan does not say which entries replace draining ones, so a drain
// can cost a model scaled above its min some of its extra replicas (the
// busy rule scales it up again). When the cluster lacks room, a second
// round may still drop entries on draining nodes; after that the plan
// is a fixed point.
func Plan(nodes []Node, models []*catalog.Model, cur map[string][]string, load map[string]Load,
	stopped map[string]bool, now time.Time, owners *OwnerTable) (next map[string][]string, why map[string]string) {
	next, why, _ = PlanProfiles(nodes, models, cur, load, stopped, now, owners)
	return next, why
}

// PlanProfiles is Plan, with the profile of each entry of the models
// that have profiles, in the order of their entries. Each new entry
// takes the first of its model's profiles that some node has room for
// (a CPU profile not on a node whose free GPUs a GPU profile of the
// model would take, unless the model prefers the CPU); an entry kept
// takes the first that fits where it is.
func PlanProfiles(nodes []Node, models []*catalog.Model, cur map[string][]string, load map[string]Load,
	stopped map[string]bool, now time.Time, owners *OwnerTable) (next map[string][]string, why map[string]string, profiles map[string][]string) {
	p := newPlanner(nodes, models)
	p.owners = owners
	for i := range p.models {
		pm := &p.models[i]
		ld := load[pm.m.Name]
		pm.want = 0
		if !stopped[pm.m.Name] {
			pm.want = p.desired(pm.m, cur[pm.m.Name], ld, now)
		}
		p.keep(pm, cur[pm.m.Name], ld)
	}
	for i := range p.models {
		p.shrink(&p.models[i])
	}
	why = map[string]string{}
	for i := range p.models {
		if w := p.place(&p.models[i]); w != "" {
			why[p.models[i].m.Name] = w
		}
	}
	for i := range p.models {
		p.spread(&p.models[i], load[p.models[i].m.Name])
		p.upgrade(&p.models[i], load[p.models[i].m.Name]) // profiles.go
	}
	next, profiles = make(map[string][]string, len(models)), map[string][]string{}
	for i := range p.models {
		pm := &p.models[i]
		p.settle(pm, load[pm.m.Name])
		var names []string
		if len(pm.entries) > 0 {
			names = make([]string, len(pm.entries))
			for j, idx := range pm.entries {
				names[j] = p.nodes[idx].Name
			}
		}
		next[pm.m.Name] = names
		if len(pm.m.Profiles) > 0 {
			profiles[pm.m.Name] = pm.profileNames()
		}
	}
	return next, why, profiles
}

// newPlanner indexes the nodes (of two with one name, the first counts)
// and orders the models: critical first, then standard, then
// opportunistic, then by name.
func newPlanner(nodes []Node, models []*catalog.Model) *planner {
	p := &planner{index: make(map[string]int, len(nodes)), models: make([]planModel, len(models))}
	for i, n := range nodes {
		if _, dup := p.index[n.Name]; dup {
			nodes = firstOfEachName(nodes)
			break
		}
		p.index[n.Name] = i
	}
	p.nodes, p.free, p.mine = nodes, make([]catalog.Resources, len(nodes)), make([]int, len(nodes))
	for i, n := range nodes {
		p.index[n.Name] = i
		p.free[i] = n.Capacity
	}
	for i, m := range models {
		p.models[i] = newPlanModel(m) // profiles.go
	}
	slices.SortFunc(p.models, func(a, b planModel) int {
		if a.rank != b.rank {
			return b.rank - a.rank
		}
		return strings.Compare(a.m.Name, b.m.Name)
	})
	return p
}

// desired is how many replicas the model should have after this round.
func (p *planner) desired(m *catalog.Model, cur []string, ld Load, now time.Time) int {
	count, drained, ready := 0, 0, 0
	for _, name := range cur {
		idx, live := p.index[name]
		if live && p.nodes[idx].Draining {
			drained++
			continue
		}
		count++
		if live {
			p.mine[idx]++
		}
	}
	for _, name := range cur {
		if idx, live := p.index[name]; live && p.mine[idx] > 0 {
			ready += min(ld.Ready[name], p.mine[idx])
			p.mine[idx] = 0
		}
	}
	s := m.Scaling
	lo, hi := s.MinReplicas(), s.MaxReplicas()
	n := max(count, drained, lo)
	switch {
	case ld.Busy && ready >= n && n < hi:
		n++
	case !ld.Busy && !ld.LastUsed.IsZero() && now.Sub(ld.LastUsed) >= time.Duration(s.Idle()) && n > lo:
		n--
	}
	return min(max(n, lo), hi)
}

// keep takes the model's current entries that stay: those on live
// nodes where they still fit (a failing node keeps only its ready ones),
// and, for now, those on draining nodes.
func (p *planner) keep(pm *planModel, cur []string, ld Load) {
	pm.entries, pm.prof = make([]int, 0, max(len(cur), pm.want)), make([]int, 0, max(len(cur), pm.want))
	for _, name := range cur {
		idx, live := p.index[name]
		if !live {
			continue
		}
		nd := &p.nodes[idx]
		if _, failing := nd.Failing[pm.m.Name]; failing && !nd.Draining && p.mine[idx] >= ld.Ready[name] {
			continue
		}
		k := pm.fitsIn(p.free[idx])
		if k < 0 {
			continue
		}
		p.free[idx] = p.free[idx].Add(pm.shapes[k], -1)
		if !nd.Draining {
			p.mine[idx]++
		}
		pm.add(idx, k)
	}
	p.clearMine(pm)
}

// shrink drops the model's live entries above its desired count: from
// the node with most of them, then the fullest.
func (p *planner) shrink(pm *planModel) {
	live := 0
	for _, idx := range pm.entries {
		if !p.nodes[idx].Draining {
			p.mine[idx]++
			live++
		}
	}
	for ; live > pm.want; live-- {
		victim := -1
		for _, idx := range pm.entries {
			if p.nodes[idx].Draining || idx == victim {
				continue
			}
			if victim < 0 || p.mine[idx] > p.mine[victim] ||
				p.mine[idx] == p.mine[victim] && p.fuller(idx, victim) {
				victim = idx
			}
		}
		at := lastIndex(pm.entries, victim)
		p.free[victim] = p.free[victim].Add(pm.needAt(at), 1)
		pm.remove(at)
		p.mine[victim]--
	}
	p.clearMine(pm)
}

// settle drops the model's entries on draining nodes once its live
// entries have as many ready replicas as it should have, or at once when
// every node is draining (a cluster stopped: nothing is to run).
func (p *planner) settle(pm *planModel, ld Load) {
	if !slices.ContainsFunc(p.nodes, func(n Node) bool { return !n.Draining }) {
		pm.entries, pm.prof = pm.entries[:0], pm.prof[:0]
		return
	}
	for _, idx := range pm.entries {
		if !p.nodes[idx].Draining {
			p.mine[idx]++
		}
	}
	ready := 0
	for _, idx := range pm.entries {
		if p.mine[idx] > 0 {
			ready += min(ld.Ready[p.nodes[idx].Name], p.mine[idx])
			p.mine[idx] = 0
		}
	}
	if ready >= pm.want {
		pm.keepOnly(func(idx int) bool { return !p.nodes[idx].Draining })
	}
}

// spread moves one of the model's replicas from a node that has two or
// more of them more than another node that could take it (a node that
// joined, a node back from a drain), once every replica of the model is
// ready: one move a round, so the model is short of at most one replica
// while the moved one starts.
func (p *planner) spread(pm *planModel, ld Load) {
	defer p.clearMine(pm)
	live := 0
	for _, idx := range pm.entries {
		if !p.nodes[idx].Draining {
			p.mine[idx]++
			live++
		}
	}
	if live < 2 || live != len(pm.entries) {
		return // a drain is under way
	}
	ready, victim := 0, -1
	seen := map[int]bool{}
	for _, idx := range pm.entries {
		if !seen[idx] {
			seen[idx] = true
			ready += min(ld.Ready[p.nodes[idx].Name], p.mine[idx])
		}
		if victim < 0 || p.mine[idx] > p.mine[victim] || p.mine[idx] == p.mine[victim] && p.fuller(idx, victim) {
			victim = idx
		}
	}
	if ready < live || p.mine[victim] < 2 {
		return
	}
	at := lastIndex(pm.entries, victim)
	old := pm.needAt(at)
	p.free[victim] = p.free[victim].Add(old, 1)
	p.mine[victim]--
	to, k := p.best(pm)
	if to < 0 || p.mine[to]+1 > p.mine[victim] || k > pm.prof[at] { // no move to a later profile
		p.free[victim] = p.free[victim].Add(old, -1)
		p.mine[victim]++
		return
	}
	pm.entries[at], pm.prof[at] = to, k
	p.free[to] = p.free[to].Add(pm.shapes[k], -1)
	p.mine[to]++
}

// fuller tells whether node a has less free memory than node b (then
// fewer free cores, then the later name).
func (p *planner) fuller(a, b int) bool {
	fa, fb := p.free[a], p.free[b]
	if fa.Memory != fb.Memory {
		return fa.Memory < fb.Memory
	}
	if fa.Cores != fb.Cores {
		return fa.Cores < fb.Cores
	}
	return p.nodes[a].Name > p.nodes[b].Name
}

// place adds entries until the model has its desired count on live
// nodes, and says why when it cannot.
func (p *planner) place(pm *planModel) string {
	live := 0
	for _, idx := range pm.entries {
		if !p.nodes[idx].Draining {
			p.mine[idx]++
			live++
		}
	}
	defer p.clearMine(pm)
	if live >= pm.want {
		return ""
	}
	if src := pm.m.Source; src != "" {
		pm.cached = make([]bool, len(p.nodes))
		for i := range p.nodes {
			pm.cached[i] = p.nodes[i].Cached[src]
		}
	}
	pm.cpuWhy = ""
	for ; live < pm.want; live++ {
		if why := p.ownerFull(pm); why != "" { // the owner's capacity, cluster-wide (owners.go)
			return why
		}
		idx, k := p.best(pm)
		if idx < 0 && pm.rank > catalog.ClassRank(catalog.ClassOpportunistic) {
			idx, k = p.evict(pm)
		}
		if idx < 0 {
			return p.explain(pm, live)
		}
		p.free[idx] = p.free[idx].Add(pm.shapes[k], -1)
		p.mine[idx]++
		pm.add(idx, k)
	}
	return ""
}

// eligible tells whether node i may take a new replica of the model at
// all (room aside).
func (p *planner) eligible(pm *planModel, i int) bool {
	nd := &p.nodes[i]
	if nd.Draining {
		return false
	}
	_, failing := nd.Failing[pm.m.Name]
	return !failing
}

// better tells whether node a is a better home than node b for the
// model's next replica: fewer of its entries, no GPUs when the model
// needs none (GPU nodes stay free for the models that need them), its
// weights cached, more free memory, then the earlier name.
func (p *planner) better(pm *planModel, need catalog.Resources, a, b int) bool {
	if p.mine[a] != p.mine[b] {
		return p.mine[a] < p.mine[b]
	}
	if ga, gb := p.nodes[a].Capacity.GPUs > 0, p.nodes[b].Capacity.GPUs > 0; need.GPUs == 0 && ga != gb {
		return gb
	}
	if pm.cached != nil && pm.cached[a] != pm.cached[b] {
		return pm.cached[a]
	}
	if p.free[a].Memory != p.free[b].Memory {
		return p.free[a].Memory > p.free[b].Memory
	}
	return p.nodes[a].Name < p.nodes[b].Name
}

// best picks the node and profile for the model's next replica: the
// first profile some node has room for, on the best such node; -1 when
// none has room.
func (p *planner) best(pm *planModel) (int, int) {
	for k, need := range pm.shapes {
		pick := -1
		for i := range p.nodes {
			if !p.eligible(pm, i) || !need.Fits(p.free[i]) || p.cpuWaits(pm, need, i) {
				continue
			}
			if pick < 0 || p.better(pm, need, i, pick) {
				pick = i
			}
		}
		if pick >= 0 {
			return pick, k
		}
	}
	return -1, -1
}

// evict makes room for one replica of the model by dropping entries of
// lower classes on one node (lowest class first), choosing the node
// where that takes the fewest; it returns the node, or -1.
func (p *planner) evict(pm *planModel) (int, int) {
	for k, need := range pm.shapes {
		pick, pickN := -1, 0
		for i := range p.nodes {
			if !p.eligible(pm, i) || !need.Fits(p.nodes[i].Capacity) || p.cpuWaits(pm, need, i) {
				continue
			}
			n := p.victims(pm, need, i, false)
			if n > 0 && (pick < 0 || n < pickN || n == pickN && p.better(pm, need, i, pick)) {
				pick, pickN = i, n
			}
		}
		if pick >= 0 {
			p.victims(pm, need, pick, true)
			return pick, k
		}
	}
	return -1, -1
}

// victims counts the lower-class entries on node i that must go for one
// replica of the model that needs need to fit there (0 when dropping all is not enough),
// and drops them when drop is set. Victims go lowest class first, then
// the later model name first.
func (p *planner) victims(pm *planModel, need catalog.Resources, i int, drop bool) int {
	free, n := p.free[i], 0
	for j := len(p.models) - 1; j >= 0 && !need.Fits(free); j-- {
		v := &p.models[j]
		if v.rank >= pm.rank {
			break
		}
		for at := len(v.entries) - 1; at >= 0 && !need.Fits(free); at-- {
			if v.entries[at] != i || !frees(v.needAt(at), need, free) {
				continue
			}
			free = free.Add(v.needAt(at), 1)
			n++
			if drop {
				v.remove(at)
			}
		}
	}
	if !need.Fits(free) {
		return 0
	}
	if drop {
		p.free[i] = free
	}
	return n
}

// frees tells whether dropping a replica that holds v gives back some of
// a kind that need lacks in free.
func frees(v, need, free catalog.Resources) bool {
	return v.Memory > 0 && need.Memory > free.Memory || v.Cores > 0 && need.Cores > free.Cores ||
		v.GPUs > 0 && need.GPUs > free.GPUs
}

// explain says why the model has only live of its desired replicas.
func (p *planner) explain(pm *planModel, live int) string {
	name := pm.m.Name
	var out strings.Builder
	if live > 0 {
		fmt.Fprintf(&out, "%q has %d of %d replicas placed: ", name, live, pm.want)
	}
	const shown = 3 // nodes left out that the sentence names
	most, left := -1, 0
	var notes strings.Builder
	for i := range p.nodes {
		nd := &p.nodes[i]
		why, failing := nd.Failing[name]
		if nd.Draining || failing {
			if left++; left <= shown && nd.Draining {
				fmt.Fprintf(&notes, "; node %q is draining", nd.Name)
			} else if left <= shown {
				fmt.Fprintf(&notes, "; node %q cannot start it (%s)", nd.Name, why)
			}
			continue
		}
		if most < 0 || roomier(p.free[i], p.free[most], pm.need) {
			most = i
		}
	}
	switch {
	case len(p.nodes) == 0:
		fmt.Fprintf(&out, "no node is up to run %q", name)
	case most < 0:
		fmt.Fprintf(&out, "no node can run %q", name)
	default:
		if live > 0 {
			out.WriteString("no node has room for another")
		} else {
			fmt.Fprintf(&out, "no node has room for %q", name)
		}
		fmt.Fprintf(&out, " (a replica needs %s); the most free is node %q with %s free",
			pm.need.Describe(pm.need), p.nodes[most].Name, p.free[most].Describe(pm.need))
	}
	out.WriteString(notes.String())
	if pm.cpuWhy != "" {
		out.WriteString("; " + pm.cpuWhy)
	}
	if left > shown {
		fmt.Fprintf(&out, "; and %d more nodes draining or failing", left-shown)
	}
	return out.String()
}

// roomier tells whether a has more free room than b of the kinds need
// asks for: GPUs first, then memory, then cores.
func roomier(a, b, need catalog.Resources) bool {
	switch {
	case need.GPUs > 0 && a.GPUs != b.GPUs:
		return a.GPUs > b.GPUs
	case a.Memory != b.Memory && (need.Memory > 0 || need.Cores == 0):
		return a.Memory > b.Memory
	}
	return a.Cores > b.Cores
}

// clearMine zeroes the scratch counts of the model's entries.
func (p *planner) clearMine(pm *planModel) {
	for _, idx := range pm.entries {
		p.mine[idx] = 0
	}
}

func firstOfEachName(nodes []Node) []Node {
	seen := make(map[string]bool, len(nodes))
	var out []Node
	for _, n := range nodes {
		if !seen[n.Name] {
			seen[n.Name] = true
			out = append(out, n)
		}
	}
	return out
}

func lastIndex(s []int, v int) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == v {
			return i
		}
	}
	return -1
}
