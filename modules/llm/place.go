package llm

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

	"github.com/dustin/go-humanize"
	"github.com/llmgw/llmgw/plugins/engine"
)

// Resources are what a node has or what one replica of a model needs.
type Resources struct {
	// Memory in bytes (the Caddyfile takes sizes such as 8GiB).
	Memory int64 `json:"memory,omitempty"`
	Cores  int   `json:"cores,omitempty"`
	GPUs   int   `json:"gpus,omitempty"`
}

func (r Resources) add(o Resources, sign int64) Resources {
	return Resources{Memory: r.Memory + sign*o.Memory, Cores: r.Cores + int(sign)*o.Cores, GPUs: r.GPUs + int(sign)*o.GPUs}
}

func (r Resources) fits(in Resources) bool {
	return r.Memory <= in.Memory && r.Cores <= in.Cores && r.GPUs <= in.GPUs
}

func (r Resources) String() string { return r.describe(r) }

// describe names r's amounts of the kinds that like has.
func (r Resources) describe(like Resources) string {
	var parts []string
	if like.Memory != 0 {
		parts = append(parts, humanize.IBytes(uint64(max(r.Memory, 0)))+" memory")
	}
	if like.Cores != 0 {
		parts = append(parts, strconv.Itoa(r.Cores)+" cores")
	}
	if like.GPUs != 0 {
		parts = append(parts, strconv.Itoa(r.GPUs)+" GPUs")
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// Model classes, in the order they give way: when a replica does not fit,
// replicas of lower classes are stopped to make room.
const (
	ClassCritical      = "critical"
	ClassStandard      = "standard"
	ClassOpportunistic = "opportunistic"
)

func classRank(c string) int {
	switch c {
	case ClassCritical:
		return 3
	case ClassOpportunistic:
		return 1
	}
	return 2
}

// detectNode reads this machine's memory, cores and NVIDIA GPUs.
func detectNode() Resources {
	n := Resources{Cores: runtime.NumCPU()}
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

// placement is one replica's claim on the node: reserved when its start
// begins, bound to the replica once it runs, released when it stops.
type placement struct {
	fleet   *fleet
	need    Resources
	cpus    []int // the cores it is pinned to, when the node pins cores
	gpus    []int // the GPU devices it holds (gpus.go)
	rank    int
	rep     *Replica
	evicted bool
	owner   string // a planned placement's model owner (owners.go); others read their fleet's
}

// ledger places replicas on this node. There is one per process: the
// node's capacity is the active config's, the placements are everyone's.
type ledger struct {
	mu       sync.Mutex
	capacity atomic.Pointer[Resources]
	pin      atomic.Bool
	places   []*placement
	devices  atomic.Pointer[[]int] // the node's GPU devices (gpus.go)
}

var node = &ledger{}

// setCapacity sets what the node has (declared, or detected) and whether
// replicas are pinned to cores of their own.
func (l *ledger) setCapacity(declared *Resources, pin bool) {
	l.pin.Store(pin)
	c := detectNode()
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

func (l *ledger) cap() Resources {
	if c := l.capacity.Load(); c != nil {
		return *c
	}
	return detectNode()
}

// usedLocked sums the placements that still hold resources.
func (l *ledger) usedLocked() Resources {
	var u Resources
	for _, p := range l.places {
		if !p.evicted {
			u = u.add(p.need, 1)
		}
	}
	return u
}

// NodeStatus is the node's capacity and what its replicas use.
type NodeStatus struct {
	Capacity Amounts `json:"capacity"`
	Used     Amounts `json:"used"`
	Free     Amounts `json:"free"`
	// GPUDevices are the node's GPU devices and those free (gpus.go).
	GPUDevices *DeviceUse `json:"gpu_devices,omitempty"`
}

// Amounts are resources with every kind shown, zero or not.
type Amounts struct {
	Memory int64 `json:"memory"`
	Cores  int   `json:"cores"`
	GPUs   int   `json:"gpus"`
}

func amounts(r Resources) Amounts { return Amounts(r) }

func (l *ledger) status() NodeStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, u := l.cap(), l.usedLocked()
	return NodeStatus{Capacity: amounts(c), Used: amounts(u), Free: amounts(c.add(u, -1)), GPUDevices: l.deviceUseLocked()}
}

// reserve claims room for one replica of f. When the node is full it
// picks replicas of lower classes to stop (idle ones first, newest
// first); when even that is not enough it says why.
func (l *ledger) reserve(f *fleet) (*placement, []*placement, string) {
	need := f.m().needs()
	rank := classRank(f.m().Class)
	p := &placement{fleet: f, need: need, rank: rank}
	l.mu.Lock()
	defer l.mu.Unlock()
	if why := l.ownerCheckLocked(f, need); why != "" { // the owner's capacity (owners.go)
		return nil, nil, why
	}
	victims, why := fit(l.cap(), l.places, need, rank)
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
func fit(c Resources, places []*placement, need Resources, rank int) ([]*placement, string) {
	var used Resources
	for _, q := range places {
		if !q.evicted {
			used = used.add(q.need, 1)
		}
	}
	free := c.add(used, -1)
	if need.fits(free) {
		return nil, ""
	}
	var cands []*placement
	for _, q := range places {
		if !q.evicted && q.rep != nil && q.rank < rank {
			cands = append(cands, q)
		}
	}
	slices.SortStableFunc(cands, func(a, b *placement) int {
		if a.rank != b.rank {
			return a.rank - b.rank
		}
		ai, bi := a.rep.inflight.Load(), b.rep.inflight.Load()
		if (ai == 0) != (bi == 0) {
			if ai == 0 {
				return -1
			}
			return 1
		}
		return b.rep.Started.Compare(a.rep.Started)
	})
	var victims []*placement
	room := free
	for _, q := range cands {
		if need.fits(room) {
			break
		}
		victims = append(victims, q)
		room = room.add(q.need, 1)
	}
	if !need.fits(room) {
		return nil, fmt.Sprintf("waiting for a node with room for it (a replica needs %s; the node has %s free)",
			need, free.describe(need))
	}
	return victims, ""
}

// placeLocked records p, with cores of its own when the node pins them.
func (l *ledger) placeLocked(p *placement) {
	if l.pin.Load() && p.need.Cores > 0 {
		p.cpus = l.freeCPUsLocked(p.need.Cores, allowedCPUs())
	}
	if p.need.GPUs > 0 {
		p.gpus = l.freeGPUsLocked(p.need.GPUs)
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
func (l *ledger) freeCPUsLocked(n int, all []int) []int {
	held := map[int]bool{}
	for _, q := range l.places {
		if !q.evicted {
			for _, c := range q.cpus {
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

// bind records the replica a placement became.
func (l *ledger) bind(p *placement, r *Replica) {
	l.mu.Lock()
	p.rep = r
	l.mu.Unlock()
}

// release gives a placement's room back.
func (l *ledger) release(p *placement) {
	if p == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.places = slices.DeleteFunc(l.places, func(q *placement) bool { return q == p })
}

// releaseReplica gives back the room of a replica that stopped.
func (l *ledger) releaseReplica(r *Replica) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.places = slices.DeleteFunc(l.places, func(q *placement) bool { return q.rep == r })
}

// needs is what one replica of the model needs from the node.
func (m *Model) needs() Resources {
	if m.Resources == nil {
		return Resources{}
	}
	return *m.Resources
}

// Weight formats the gateway recognises in a model's source.
const (
	FormatGGUF        = "gguf"
	FormatSafetensors = "safetensors"
)

// sourceFormat tells a local source's weight format: a GGUF file, or a
// directory of safetensors. It returns "" for what it does not recognise
// (and for URLs and engine-specific sources).
func sourceFormat(source string) (string, error) {
	if source == "" || strings.Contains(source, "://") {
		return "", nil
	}
	st, err := os.Stat(source)
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		entries, _ := os.ReadDir(source)
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".safetensors") {
				return FormatSafetensors, nil
			}
		}
		return "", nil
	}
	f, err := os.Open(source)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var magic [4]byte
	if n, _ := f.Read(magic[:]); n == 4 && string(magic[:]) == "GGUF" {
		return FormatGGUF, nil
	}
	return "", nil
}

// checkFormat refuses a model whose weights its engine cannot load, when
// the engine loads weight files (GGUF, safetensors) at all.
func checkFormat(m *Model, formats []string) error {
	files := slices.Contains(formats, FormatGGUF) || slices.Contains(formats, FormatSafetensors)
	if !files {
		return nil
	}
	if m.Source == "" {
		return fmt.Errorf("model %q: engine %s loads %s weights; set source to them", m.Name, m.Engine, strings.Join(formats, " or "))
	}
	got, err := sourceFormat(m.Source)
	if err != nil {
		return fmt.Errorf("model %q: source: %w", m.Name, err)
	}
	if got == "" && !strings.Contains(m.Source, "://") {
		return fmt.Errorf("model %q: engine %s loads %s weights and %s is neither a GGUF file nor a directory of safetensors",
			m.Name, m.Engine, strings.Join(formats, " or "), m.Source)
	}
	if got != "" && !slices.Contains(formats, got) {
		return fmt.Errorf("model %q: engine %s cannot load %s weights (%s); it loads %s", m.Name, m.Engine, got, m.Source, strings.Join(formats, " or "))
	}
	return nil
}
