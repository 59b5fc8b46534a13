package place

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/plugins/engine"
)

// SetGPUDevices sets the node's GPU devices: declared ones (which then
// also say how many GPUs the node has), else the indexes this process
// sees in CUDA_VISIBLE_DEVICES, else 0 to the node's GPUs minus one.
func (l *Ledger) SetGPUDevices(node *catalog.Resources, declared []int) error {
	c := l.Capacity()
	devs, err := GPUDevices(declared, os.Getenv("CUDA_VISIBLE_DEVICES"), c.GPUs)
	if err != nil {
		return err
	}
	if len(declared) > 0 && node != nil && node.GPUs > 0 && node.GPUs != len(declared) {
		return fmt.Errorf("node: gpus %d and gpu_devices %s disagree; gpu_devices alone says both", node.GPUs, joinInts(declared))
	}
	if c.GPUs != len(devs) {
		c.GPUs = len(devs)
		l.capacity.Store(&c)
	}
	l.devices.Store(&devs)
	return nil
}

// GPUDevices lists the devices a node of n GPUs hands out (see
// setGPUDevices); visible is this process's CUDA_VISIBLE_DEVICES.
func GPUDevices(declared []int, visible string, n int) ([]int, error) {
	if len(declared) > 0 {
		seen := map[int]bool{}
		for _, d := range declared {
			if d < 0 || seen[d] {
				return nil, fmt.Errorf("node: gpu_devices %s: give each device's index once, 0 or more", joinInts(declared))
			}
			seen[d] = true
		}
		return slices.Clone(declared), nil
	}
	if vis, ok := ParseInts(visible); ok && len(vis) > 0 {
		// The gateway itself was given these devices: its replicas get
		// them by the same names, and no more than the node has.
		return vis[:min(n, len(vis))], nil
	}
	out := make([]int, max(n, 0))
	for i := range out {
		out[i] = i
	}
	return out, nil
}

// ParseInts reads a comma-separated list of whole numbers.
func ParseInts(s string) ([]int, bool) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		i, err := strconv.Atoi(f)
		if err != nil || i < 0 {
			return nil, false
		}
		out = append(out, i)
	}
	return out, true
}

// freeGPUsLocked picks n of the node's devices that no placement holds,
// lowest first; nil when there are not that many (the ledger counts GPUs
// as it counts memory, so reserve found room for them).
func (l *Ledger) freeGPUsLocked(n int) []int { return l.freeGPUsIn(l.places, n) }

// freeGPUsIn picks n of the node's devices that none of places holds (a
// plan's copy of the ledger's, or the ledger's own).
func (l *Ledger) freeGPUsIn(places []*Placement, n int) []int {
	if n <= 0 {
		return nil
	}
	held := heldGPUs(places)
	var out []int
	if devs := l.devices.Load(); devs != nil {
		for _, d := range *devs {
			if len(out) < n && held[d] == nil {
				out = append(out, d)
			}
		}
	}
	if len(out) < n {
		return nil
	}
	return out
}

// deviceUseLocked is the node's devices and those free; nil when it has
// none.
func (l *Ledger) deviceUseLocked() *llmapi.DeviceUse {
	devs := l.devices.Load()
	if devs == nil || len(*devs) == 0 {
		return nil
	}
	held := heldGPUs(l.places)
	u := &llmapi.DeviceUse{All: slices.Clone(*devs), Free: []int{}}
	for _, d := range *devs {
		if held[d] == nil {
			u.Free = append(u.Free, d)
		}
	}
	return u
}

// AwaitGPUs waits until no replica stopped to make room for p (an
// evicted placement, still in the ledger until its process has stopped)
// holds one of p's devices, at most limit: an engine that loads weights on
// a GPU another process still fills would fail for want of memory.
func (l *Ledger) AwaitGPUs(ctx context.Context, p *Placement, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for {
		l.mu.Lock()
		busy := false
		for _, q := range l.places {
			if q != p && q.evicted && slices.ContainsFunc(q.GPUs, func(d int) bool { return slices.Contains(p.GPUs, d) }) {
				busy = true
			}
		}
		l.mu.Unlock()
		if !busy || time.Now().After(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// heldGPUs maps each device held in places to the placement holding it.
func heldGPUs(places []*Placement) map[int]*Placement {
	held := map[int]*Placement{}
	for _, q := range places {
		if !q.evicted {
			for _, d := range q.GPUs {
				held[d] = q
			}
		}
	}
	return held
}

// gpusHeldLocked says, for a replica that cannot be placed, which
// replicas hold the devices it waits for; "" when GPUs are not short.
func (l *Ledger) gpusHeldLocked(need catalog.Resources) string {
	if need.GPUs == 0 {
		return ""
	}
	var parts []string
	free := 0
	if devs := l.devices.Load(); devs != nil {
		free = len(*devs)
	}
	for _, q := range l.places {
		if q.evicted || len(q.GPUs) == 0 {
			continue
		}
		free -= len(q.GPUs)
		who := "a replica of " + q.holder.Model().Name + " that is starting"
		if q.rep != nil {
			who = q.rep.ReplicaID()
		}
		parts = append(parts, fmt.Sprintf("%s by %s", joinInts(q.GPUs), who))
	}
	if free >= need.GPUs || len(parts) == 0 {
		return ""
	}
	return "; GPUs in use: " + strings.Join(parts, ", ")
}

// joinInts writes devices as CUDA_VISIBLE_DEVICES does: 0,1.
func joinInts(ds []int) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = strconv.Itoa(d)
	}
	return strings.Join(s, ",")
}

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
			for _, idx := range q.entries {
				if !p.nodes[idx].Draining {
					u.Add(q.need)
				}
			}
		}
		if over := overCapacity(lv.cap, u, pm.need); over != "" {
			return ownerReason(lv.kind, path, over)
		}
	}
	return ""
}

// DetectNode reads this machine's memory, cores and NVIDIA GPUs.
func DetectNode() catalog.Resources {
	n := catalog.Resources{Cores: runtime.NumCPU()}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				n.Memory = kb << 10
			}
		}
		f.Close()
	}
	if gpus, err := os.ReadDir("/proc/driver/nvidia/gpus"); err == nil {
		n.GPUs = len(gpus)
	}
	return n
}

// Placement is one replica's claim on the node: reserved when its start
// begins, bound to the replica once it runs, released when it stops.
type Placement struct {
	holder  Holder
	need    catalog.Resources
	CPUs    []int // the cores it is pinned to, when the node pins cores
	GPUs    []int // the GPU devices it holds (gpus.go)
	rank    int
	rep     Running
	evicted bool
	owner   string // a planned placement's model owner (owners.go); others read their fleet's
}

// Ledger places replicas on this node. There is one per process: the
// node's capacity is the active config's, the placements are everyone's.
type Ledger struct {
	mu       sync.Mutex
	capacity atomic.Pointer[catalog.Resources]
	pin      atomic.Bool
	places   []*Placement
	devices  atomic.Pointer[[]int] // the node's GPU devices (gpus.go)
	owners   atomic.Pointer[OwnerTable]
}

// SetCapacity sets what the node has (declared, or detected) and whether
// replicas are pinned to cores of their own.
func (l *Ledger) SetCapacity(declared *catalog.Resources, pin bool) {
	l.pin.Store(pin)
	c := DetectNode()
	if declared != nil {
		if declared.Memory > 0 {
			c.Memory = declared.Memory
		}
		if declared.Cores > 0 {
			c.Cores = declared.Cores
		}
		if declared.GPUs > 0 || declared.Memory > 0 || declared.Cores > 0 {
			c.GPUs = declared.GPUs
		}
	}
	l.capacity.Store(&c)
}

// Capacity is what the node offers replicas: declared, else detected.
func (l *Ledger) Capacity() catalog.Resources {
	if c := l.capacity.Load(); c != nil {
		return *c
	}
	return DetectNode()
}

// usedLocked sums the placements that still hold resources.
func (l *Ledger) usedLocked() catalog.Resources {
	var u catalog.Resources
	for _, p := range l.places {
		if !p.evicted {
			u = u.Add(p.need, 1)
		}
	}
	return u
}

// AmountsOf is r as the admin API shows it.
func AmountsOf(r catalog.Resources) llmapi.Amounts { return llmapi.Amounts(r) }

// Status is the node's capacity, use, free room and GPU devices.
func (l *Ledger) Status() llmapi.NodeStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, u := l.Capacity(), l.usedLocked()
	return llmapi.NodeStatus{Capacity: AmountsOf(c), Used: AmountsOf(u), Free: AmountsOf(c.Add(u, -1)), GPUDevices: l.deviceUseLocked()}
}

// Reserve claims room for one replica of f. When the node is full it
// picks replicas of lower classes to stop (idle ones first, newest
// first); when even that is not enough it says why.
func (l *Ledger) Reserve(f Holder) (*Placement, []*Placement, string) {
	need := f.Model().Needs()
	rank := catalog.ClassRank(f.Model().Class)
	p := &Placement{holder: f, need: need, rank: rank}
	l.mu.Lock()
	defer l.mu.Unlock()
	if why := l.ownerCheckLocked(f, need); why != "" { // the owner's capacity (owners.go)
		return nil, nil, why
	}
	victims, why := fit(l.Capacity(), l.places, need, rank)
	if why != "" {
		return nil, nil, why + l.gpusHeldLocked(need)
	}
	for _, q := range victims {
		q.evicted = true
	}
	l.placeLocked(p)
	return p, victims, ""
}

// fit decides whether one replica that needs need, of class rank, fits a
// node of capacity c holding places: the replicas of lower classes to
// stop first (idle ones first, newest first), or why it cannot fit. It
// changes nothing: reserve and the placement plan both act on its answer.
func fit(c catalog.Resources, places []*Placement, need catalog.Resources, rank int) ([]*Placement, string) {
	var used catalog.Resources
	for _, q := range places {
		if !q.evicted {
			used = used.Add(q.need, 1)
		}
	}
	free := c.Add(used, -1)
	if need.Fits(free) {
		return nil, ""
	}
	var cands []*Placement
	for _, q := range places {
		if !q.evicted && q.rep != nil && q.rank < rank {
			cands = append(cands, q)
		}
	}
	slices.SortStableFunc(cands, func(a, b *Placement) int {
		if a.rank != b.rank {
			return a.rank - b.rank
		}
		ai, bi := a.rep.Inflight(), b.rep.Inflight()
		if (ai == 0) != (bi == 0) {
			if ai == 0 {
				return -1
			}
			return 1
		}
		return b.rep.StartedAt().Compare(a.rep.StartedAt())
	})
	var victims []*Placement
	room := free
	for _, q := range cands {
		if need.Fits(room) {
			break
		}
		victims = append(victims, q)
		room = room.Add(q.need, 1)
	}
	if !need.Fits(room) {
		return nil, fmt.Sprintf("waiting for a node with room for it (a replica needs %s; the node has %s free)",
			need, free.Describe(need))
	}
	return victims, ""
}

// placeLocked records p, with cores of its own when the node pins them.
func (l *Ledger) placeLocked(p *Placement) {
	if l.pin.Load() && p.need.Cores > 0 {
		p.CPUs = l.freeCPUsLocked(p.need.Cores, allowedCPUs())
	}
	if p.need.GPUs > 0 {
		p.GPUs = l.freeGPUsLocked(p.need.GPUs)
	}
	l.places = append(l.places, p)
}

// allowedCPUs lists the cores this process may run on, in order.
var allowedCPUs = sync.OnceValue(func() []int {
	cpus, _ := engine.CPUsOf(0)
	return cpus
})

// freeCPUsLocked picks n of the cores in all that no other placement
// holds, highest first; nil when there are not that many (the node
// declares more cores than this process may use): the replica then runs
// unpinned.
func (l *Ledger) freeCPUsLocked(n int, all []int) []int {
	held := map[int]bool{}
	for _, q := range l.places {
		if !q.evicted {
			for _, c := range q.CPUs {
				held[c] = true
			}
		}
	}
	var out []int
	for i := len(all) - 1; i >= 0 && len(out) < n; i-- {
		if !held[all[i]] {
			out = append(out, all[i])
		}
	}
	if len(out) < n {
		return nil
	}
	slices.Sort(out)
	return out
}

// Bind records the replica a placement became.
func (l *Ledger) Bind(p *Placement, r Running) {
	l.mu.Lock()
	p.rep = r
	l.mu.Unlock()
}

// Release gives a placement's room back.
func (l *Ledger) Release(p *Placement) {
	if p == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.places = slices.DeleteFunc(l.places, func(q *Placement) bool { return q == p })
}

// ReleaseReplica gives back the room of a replica that stopped.
func (l *Ledger) ReleaseReplica(r Running) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.places = slices.DeleteFunc(l.places, func(q *Placement) bool { return q.rep == r })
}

// PlanOn places n replicas of m on a copy of the ledger with fit, the
// function reserve uses, and changes nothing.
func (l *Ledger) PlanOn(m *catalog.Model, n int, nodeName string) llmapi.Plan {
	return l.PlanWithout(m, n, nodeName, nil)
}

// PlanWithout plans as planOn does, as if the replicas of without (when
// set) were gone: the room a replacement of all of them has.
func (l *Ledger) PlanWithout(m *catalog.Model, n int, nodeName string, without Holder) llmapi.Plan {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.Capacity()
	places := make([]*Placement, 0, len(l.places))
	for _, q := range l.places {
		if without != nil && q.holder == without {
			continue
		}
		cp := *q
		places = append(places, &cp)
	}
	need, rank := m.Needs(), catalog.ClassRank(m.Class)
	pl := llmapi.Plan{Model: m.Name, Fits: true, Replicas: []llmapi.PlannedReplica{}, Evict: []llmapi.PlannedEviction{}}
	for range n {
		if why := ownerCheck(l.owners.Load(), m.Owner, places, need); why != "" { // the owner's capacity (owners.go)
			pl.Fits, pl.Reason = false, why
			break
		}
		victims, why := fit(c, places, need, rank)
		if why != "" {
			pl.Fits, pl.Reason = false, why
			pl.Missing = missing(c, places, need, rank)
			break
		}
		for _, q := range victims {
			q.evicted = true
			pl.Evict = append(pl.Evict, llmapi.PlannedEviction{Model: q.holder.Model().Name, Replica: q.rep.ReplicaID(),
				Class: catalog.ClassName(q.holder.Model().Class), Resources: AmountsOf(q.need)})
		}
		np := &Placement{need: need, rank: rank, owner: m.Owner, GPUs: l.freeGPUsIn(places, need.GPUs)}
		places = append(places, np)
		pl.Replicas = append(pl.Replicas, llmapi.PlannedReplica{Node: nodeName, Resources: AmountsOf(need), GPUs: np.GPUs})
	}
	return pl
}

// missing is what need lacks on the node once every replica of a lower
// class is counted as stopped.
func missing(c catalog.Resources, places []*Placement, need catalog.Resources, rank int) *llmapi.Amounts {
	room := c
	for _, q := range places {
		if !q.evicted && !(q.rep != nil && q.rank < rank) {
			room = room.Add(q.need, -1)
		}
	}
	short := need.Add(room, -1)
	out := llmapi.Amounts{Memory: max(short.Memory, 0), Cores: max(short.Cores, 0), GPUs: max(short.GPUs, 0)}
	return &out
}

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
	need    catalog.Resources
	rank    int
	want    int
	entries []int
	cached  []bool // by node: the node holds the model's weights
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
	}
	next = make(map[string][]string, len(models))
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
	}
	return next, why
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
		p.models[i] = planModel{m: m, need: m.Needs(), rank: catalog.ClassRank(m.Class)}
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
	pm.entries = make([]int, 0, max(len(cur), pm.want))
	for _, name := range cur {
		idx, live := p.index[name]
		if !live {
			continue
		}
		nd := &p.nodes[idx]
		if _, failing := nd.Failing[pm.m.Name]; failing && !nd.Draining && p.mine[idx] >= ld.Ready[name] {
			continue
		}
		if !pm.need.Fits(p.free[idx]) {
			continue
		}
		p.free[idx] = p.free[idx].Add(pm.need, -1)
		if !nd.Draining {
			p.mine[idx]++
		}
		pm.entries = append(pm.entries, idx)
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
		pm.entries = slices.Delete(pm.entries, at, at+1)
		p.mine[victim]--
		p.free[victim] = p.free[victim].Add(pm.need, 1)
	}
	p.clearMine(pm)
}

// settle drops the model's entries on draining nodes once its live
// entries have as many ready replicas as it should have.
func (p *planner) settle(pm *planModel, ld Load) {
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
		pm.entries = slices.DeleteFunc(pm.entries, func(idx int) bool { return p.nodes[idx].Draining })
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
	p.free[victim] = p.free[victim].Add(pm.need, 1)
	p.mine[victim]--
	to := p.best(pm)
	if to < 0 || p.mine[to]+1 > p.mine[victim] {
		p.free[victim] = p.free[victim].Add(pm.need, -1)
		p.mine[victim]++
		return
	}
	at := lastIndex(pm.entries, victim)
	pm.entries[at] = to
	p.free[to] = p.free[to].Add(pm.need, -1)
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
	for ; live < pm.want; live++ {
		if why := p.ownerFull(pm); why != "" { // the owner's capacity, cluster-wide (owners.go)
			return why
		}
		idx := p.best(pm)
		if idx < 0 && pm.rank > catalog.ClassRank(catalog.ClassOpportunistic) {
			idx = p.evict(pm)
		}
		if idx < 0 {
			return p.explain(pm, live)
		}
		p.free[idx] = p.free[idx].Add(pm.need, -1)
		p.mine[idx]++
		pm.entries = append(pm.entries, idx)
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
func (p *planner) better(pm *planModel, a, b int) bool {
	if p.mine[a] != p.mine[b] {
		return p.mine[a] < p.mine[b]
	}
	if ga, gb := p.nodes[a].Capacity.GPUs > 0, p.nodes[b].Capacity.GPUs > 0; pm.need.GPUs == 0 && ga != gb {
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

// best picks the node for the model's next replica, -1 when none has room.
func (p *planner) best(pm *planModel) int {
	pick := -1
	for i := range p.nodes {
		if !p.eligible(pm, i) || !pm.need.Fits(p.free[i]) {
			continue
		}
		if pick < 0 || p.better(pm, i, pick) {
			pick = i
		}
	}
	return pick
}

// evict makes room for one replica of the model by dropping entries of
// lower classes on one node (lowest class first), choosing the node
// where that takes the fewest; it returns the node, or -1.
func (p *planner) evict(pm *planModel) int {
	pick, pickN := -1, 0
	for i := range p.nodes {
		if !p.eligible(pm, i) || !pm.need.Fits(p.nodes[i].Capacity) {
			continue
		}
		n := p.victims(pm, i, false)
		if n > 0 && (pick < 0 || n < pickN || n == pickN && p.better(pm, i, pick)) {
			pick, pickN = i, n
		}
	}
	if pick >= 0 {
		p.victims(pm, pick, true)
	}
	return pick
}

// victims counts the lower-class entries on node i that must go for one
// replica of the model to fit there (0 when dropping all is not enough),
// and drops them when drop is set. Victims go lowest class first, then
// the later model name first.
func (p *planner) victims(pm *planModel, i int, drop bool) int {
	free, n := p.free[i], 0
	for j := len(p.models) - 1; j >= 0 && !pm.need.Fits(free); j-- {
		v := &p.models[j]
		if v.rank >= pm.rank {
			break
		}
		if !frees(v.need, pm.need, free) {
			continue
		}
		for at := len(v.entries) - 1; at >= 0 && !pm.need.Fits(free); at-- {
			if v.entries[at] != i {
				continue
			}
			free = free.Add(v.need, 1)
			n++
			if drop {
				v.entries = slices.Delete(v.entries, at, at+1)
			}
		}
	}
	if !pm.need.Fits(free) {
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

// Holder is what a placement is for: the replicas of one model (the
// fleet that asked for the room).
type Holder interface {
	Model() *catalog.Model
	// Evict stops r, a replica of the holder's, to make room for a
	// replica of model by.
	Evict(r Running, by string)
}

// Running is the replica a placement became.
type Running interface {
	ReplicaID() string
	StartedAt() time.Time
	Inflight() int64
}

// SetOwners sets the capacities of the tenancy tree in force, which
// Reserve checks a model's owner against.
func (l *Ledger) SetOwners(t *OwnerTable) { l.owners.Store(t) }

// Owners are the capacities SetOwners set last (nil: none).
func (l *Ledger) Owners() *OwnerTable { return l.owners.Load() }

// Evict has the holder stop the replica p was bound to.
func (p *Placement) Evict(by string) { p.holder.Evict(p.rep, by) }
