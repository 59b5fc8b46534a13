package place

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/plugins/engine"
)

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
	holder Holder
	need   catalog.Resources
	CPUs   []int // the cores it is pinned to, when the node pins cores
	GPUs   []int // the GPU devices it holds (gpus.go)
	// Profile is the model's profile it is for (profiles.go; 0 for a
	// model without profiles), Note why earlier profiles were not.
	Profile int
	Note    string
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

// Reserve claims room for one replica of f, on the first of its model's
// profiles that fits (profiles.go). When the node is full it picks
// replicas of lower classes to stop (idle ones first, newest first);
// when even that is not enough it says why.
func (l *Ledger) Reserve(f Holder) (*Placement, []*Placement, string) {
	m := f.Model()
	rank := catalog.ClassRank(m.Class)
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := choose(l.Capacity(), l.places, l.owners.Load(), m, rank, m.Shapes(), true)
	if ch.profile < 0 {
		return nil, nil, ch.why + l.gpusHeldLocked(m.Needs())
	}
	for _, q := range ch.victims {
		q.evicted = true
	}
	p := &Placement{holder: f, need: m.Shape(ch.profile).Needs(), rank: rank, Profile: ch.profile, Note: ch.note}
	l.placeLocked(p)
	return p, ch.victims, ""
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

// Holder is what a placement is for: the replicas of one model (the
// fleet that asked for the room).
type Holder interface {
	Model() *catalog.Model
	// Evict stops r, a replica of the holder's, to make room for a
	// replica of model by.
	Evict(r Running, by string)
}

// SetOwners sets the capacities of the tenancy tree in force, which
// Reserve checks a model's owner against.
func (l *Ledger) SetOwners(t *OwnerTable) { l.owners.Store(t) }

// Owners are the capacities SetOwners set last (nil: none).
func (l *Ledger) Owners() *OwnerTable { return l.owners.Load() }

// Evict has the holder stop the replica p was bound to.
func (p *Placement) Evict(by string) { p.holder.Evict(p.rep, by) }

// Running is the replica a placement became.
type Running interface {
	ReplicaID() string
	StartedAt() time.Time
	Inflight() int64
}
