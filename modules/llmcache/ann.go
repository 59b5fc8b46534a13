package llmcache

import (
	"math"
	"math/bits"
	"slices"
	"sync"
)

// annIndex is an approximate nearest-neighbour index (HNSW: Malkov and
// Yashunin, "Efficient and robust approximate nearest neighbor search
// using Hierarchical Navigable Small World graphs", 2016) over the
// embeddings of one bucket's entries. A lookup visits a few hundred
// nodes whatever the bucket holds, comparing their sign codes (see
// signs), and returns the closest for the caller to score by their
// vectors. It refers to the entries' own vectors (no copy): its memory
// is a code (48 bytes at 384 dimensions) and the links, 4 bytes each,
// 2*annM at level 0 plus annM per level above (1/annM of the nodes).
// Deleting a node links its neighbours to each other, so evictions and
// purges leave the graph navigable. It is not safe for concurrent use:
// entries.mu guards it (searches under the read lock only read).
type annIndex struct {
	nodes  []annNode
	free   []int32          // slots of deleted nodes
	node   map[uint32]int32 // an entry's place in the store → its node
	top    int32            // the entry point, -1 when empty
	levels []int            // how many live nodes reach each level
	rng    uint64
}

type annNode struct {
	slot  uint32   // the entry's place in the store
	live  bool     // false when the node is free
	code  []uint64 // signs of the entry's vector
	links [][]int32
}

const (
	annM      = 16  // links per node above level 0; level 0 has 2*annM
	annEfAdd  = 100 // candidates kept while inserting
	annEfFind = 64  // candidates kept while searching
)

func newANN() *annIndex {
	return &annIndex{node: map[uint32]int32{}, top: -1, rng: 0x9e3779b97f4a7c15}
}

func (x *annIndex) len() int { return len(x.node) }

// annLinkBytes estimates the index's memory for one entry, for its cost.
const annLinkBytes = 4*(2*annM+annM/(annM-1)) + 96 + 72

// signs is a unit vector's code for the graph: the sign of each
// component, a bit each. The share of bits two codes differ in estimates
// the angle between the vectors over π (as SimHash), and comparing two
// codes of 384 dimensions costs six XORs and popcounts where the int8
// product costs 384 multiplications: the graph is built and walked on
// codes, and the entries it finds are scored by their vectors.
func signs(v []int8) []uint64 {
	c := make([]uint64, (len(v)+63)/64)
	for i, f := range v {
		if f > 0 {
			c[i/64] |= 1 << (i % 64)
		}
	}
	return c
}

// sim is the similarity of two codes: minus the bits they differ in.
func sim(a, b []uint64) int32 {
	if len(a) != len(b) {
		return math.MinInt32
	}
	n := 0
	for i := range a {
		n += bits.OnesCount64(a[i] ^ b[i])
	}
	return int32(-n)
}

// scored is a node with its similarity to the query.
type scored struct {
	id  int32
	sim int32
}

// visited marks the nodes a search has seen: stamps, so that it is
// cleared by bumping the stamp. Searches run concurrently under the read
// lock, so each takes its own from a pool.
type visited struct {
	stamp uint32
	marks []uint32
}

var visitedPool = sync.Pool{New: func() any { return new(visited) }}

func takeVisited(n int) *visited {
	v := visitedPool.Get().(*visited)
	if len(v.marks) < n {
		v.marks = make([]uint32, n+n/4)
		v.stamp = 0
	}
	v.stamp++
	if v.stamp == 0 {
		clear(v.marks)
		v.stamp = 1
	}
	return v
}

func (v *visited) seen(id int32) bool {
	if v.marks[id] == v.stamp {
		return true
	}
	v.marks[id] = v.stamp
	return false
}

func (x *annIndex) randomLevel() int {
	// xorshift: a level is geometric with ratio 1/annM.
	x.rng ^= x.rng << 13
	x.rng ^= x.rng >> 7
	x.rng ^= x.rng << 17
	l := 0
	for r := x.rng; r%annM == 0 && l < 16; r /= annM {
		l++
	}
	return l
}

func (x *annIndex) code(id int32) []uint64 { return x.nodes[id].code }

// greedy walks from ep towards q on one level and returns the closest
// node it reaches.
func (x *annIndex) greedy(q []uint64, ep scored, level int) scored {
	for changed := true; changed; {
		changed = false
		for _, n := range x.nodes[ep.id].links[level] {
			if !x.live(n, level) {
				continue
			}
			if d := sim(q, x.code(n)); d > ep.sim {
				ep, changed = scored{n, d}, true
			}
		}
	}
	return ep
}

// searchLevel is the beam search of one level from the entry points eps:
// the ef closest nodes found, closest first.
func (x *annIndex) searchLevel(q []uint64, eps []scored, ef, level int, vis *visited) []scored {
	// cands is a max-heap on sim (the next to expand); best a min-heap
	// (its root is the worst kept).
	cands := make(maxHeap, 0, ef*2)
	best := make(minHeap, 0, ef+1)
	for _, e := range eps {
		vis.seen(e.id)
		cands.push(e)
		best.push(e)
	}
	for len(cands) > 0 {
		c := cands.pop()
		if len(best) >= ef && c.sim < best[0].sim {
			break
		}
		for _, n := range x.nodes[c.id].links[level] {
			if vis.seen(n) || !x.live(n, level) {
				continue
			}
			d := sim(q, x.code(n))
			if len(best) < ef || d > best[0].sim {
				cands.push(scored{n, d})
				best.push(scored{n, d})
				if len(best) > ef {
					best.pop()
				}
			}
		}
	}
	out := []scored(best)
	slices.SortFunc(out, func(a, b scored) int { return int(b.sim) - int(a.sim) })
	return out
}

// search returns up to ef entries closest to q by their codes, closest
// first.
func (x *annIndex) search(v []int8, ef int) []scored {
	q := signs(v)
	if x.top < 0 {
		return nil
	}
	ep := scored{x.top, sim(q, x.code(x.top))}
	for l := len(x.nodes[x.top].links) - 1; l > 0; l-- {
		ep = x.greedy(q, ep, l)
	}
	vis := takeVisited(len(x.nodes))
	defer visitedPool.Put(vis)
	return x.searchLevel(q, []scored{ep}, ef, 0, vis)
}

// add indexes the entry at slot by its vector.
func (x *annIndex) add(slot uint32, vec []int8) {
	if _, ok := x.node[slot]; ok || len(vec) == 0 {
		return
	}
	level := x.randomLevel()
	var id int32
	if n := len(x.free); n > 0 {
		id = x.free[n-1]
		x.free = x.free[:n-1]
	} else {
		id = int32(len(x.nodes))
		x.nodes = append(x.nodes, annNode{})
	}
	x.nodes[id] = annNode{slot: slot, live: true, code: signs(vec), links: make([][]int32, level+1)}
	x.node[slot] = id
	for len(x.levels) <= level {
		x.levels = append(x.levels, 0)
	}
	for l := 0; l <= level; l++ {
		x.levels[l]++
	}
	if x.top < 0 {
		x.top = id
		return
	}
	q := x.nodes[id].code
	ep := scored{x.top, sim(q, x.code(x.top))}
	topLevel := len(x.nodes[x.top].links) - 1
	for l := topLevel; l > level; l-- {
		ep = x.greedy(q, ep, l)
	}
	vis := takeVisited(len(x.nodes))
	defer visitedPool.Put(vis)
	eps := []scored{ep}
	for l := min(level, topLevel); l >= 0; l-- {
		vis.stamp++ // a fresh visited set per level
		if vis.stamp == 0 {
			clear(vis.marks)
			vis.stamp = 1
		}
		found := x.searchLevel(q, eps, annEfAdd, l, vis)
		links := x.selectNeighbours(found, maxLinks(l))
		x.nodes[id].links[l] = links
		for _, n := range links {
			x.link(n, id, l)
		}
		eps = found
	}
	if level > topLevel {
		x.top = id
	}
}

func maxLinks(level int) int {
	if level == 0 {
		return 2 * annM
	}
	return annM
}

// selectNeighbours keeps up to m of the candidates (closest first), each
// closer to the new node than to any neighbour already kept: the paper's
// heuristic, which keeps links in every direction, so that clusters stay
// connected. Places left are filled with the closest dropped ones.
func (x *annIndex) selectNeighbours(cands []scored, m int) []int32 {
	out := make([]int32, 0, m)
	var dropped []int32
	for _, c := range cands {
		if len(out) >= m {
			break
		}
		ok := true
		for _, k := range out {
			if sim(x.code(c.id), x.code(k)) > c.sim {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, c.id)
		} else {
			dropped = append(dropped, c.id)
		}
	}
	for _, d := range dropped {
		if len(out) >= m {
			break
		}
		out = append(out, d)
	}
	return out
}

// link adds to n's links at level l. When they overflow, the farthest
// goes: the heuristic of selectNeighbours here would cost a quadratic
// number of products on every insert.
func (x *annIndex) link(n, to int32, l int) {
	links := slices.DeleteFunc(x.nodes[n].links[l], func(k int32) bool { return !x.live(k, l) })
	if slices.Contains(links, to) || n == to {
		x.nodes[n].links[l] = links
		return
	}
	if len(links) < maxLinks(l) {
		x.nodes[n].links[l] = append(links, to)
		return
	}
	v := x.code(n)
	worst, worstDot := -1, sim(v, x.code(to))
	for i, k := range links {
		if d := sim(v, x.code(k)); d < worstDot {
			worst, worstDot = i, d
		}
	}
	if worst >= 0 {
		links[worst] = to
	}
	x.nodes[n].links[l] = links
}

// remove unindexes the entry at slot: its neighbours lose their link to
// it and gain links to its other neighbours, so that the graph stays
// navigable.
func (x *annIndex) remove(slot uint32) {
	id, ok := x.node[slot]
	if !ok {
		return
	}
	delete(x.node, slot)
	node := x.nodes[id]
	for l, links := range node.links {
		x.levels[l]--
		for _, n := range links {
			if x.live(n, l) {
				x.unlink(n, id, l, links)
			}
		}
	}
	// Nodes that linked to it without being linked back keep a stale link
	// (finding them would cost a scan): searches skip it, and the next
	// change to their links drops it. Once the slot is reused, it is a
	// long link to another node, which does no harm.
	x.nodes[id] = annNode{}
	x.free = append(x.free, id)
	for len(x.levels) > 0 && x.levels[len(x.levels)-1] == 0 {
		x.levels = x.levels[:len(x.levels)-1]
	}
	if x.top == id {
		x.top = x.newTop()
	}
}

// unlink drops id from n's links at level l and keeps the closest of
// its other links and id's neighbours.
func (x *annIndex) unlink(n, id int32, l int, repl []int32) {
	if l >= len(x.nodes[n].links) {
		return
	}
	links := slices.DeleteFunc(x.nodes[n].links[l], func(v int32) bool { return v == id || !x.live(v, l) })
	x.nodes[n].links[l] = links
	v := x.code(n)
	cands := make([]scored, 0, len(repl)+len(links))
	for _, k := range links {
		cands = append(cands, scored{k, sim(v, x.code(k))})
	}
	for _, k := range repl {
		if k != n && k != id && !slices.Contains(links, k) && x.live(k, l) {
			cands = append(cands, scored{k, sim(v, x.code(k))})
		}
	}
	slices.SortFunc(cands, func(a, b scored) int { return int(b.sim) - int(a.sim) })
	out := links[:0]
	for _, c := range cands[:min(len(cands), maxLinks(l))] {
		out = append(out, c.id)
	}
	x.nodes[n].links[l] = out
}

// newTop picks a node of the highest level left as the entry point.
func (x *annIndex) newTop() int32 {
	best, bestLevel := int32(-1), -1
	for _, id := range x.node {
		if l := len(x.nodes[id].links) - 1; l > bestLevel {
			best, bestLevel = id, l
			if l == len(x.levels)-1 {
				break
			}
		}
	}
	return best
}

// maxHeap and minHeap are binary heaps of scored on sim.
type maxHeap []scored
type minHeap []scored

func (h *maxHeap) push(s scored) {
	*h = append(*h, s)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if a[p].sim >= a[i].sim {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *maxHeap) pop() scored {
	a := *h
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a = a[:n]
	for i := 0; ; {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && a[c+1].sim > a[c].sim {
			c++
		}
		if a[i].sim >= a[c].sim {
			break
		}
		a[i], a[c] = a[c], a[i]
		i = c
	}
	*h = a
	return top
}

func (h *minHeap) push(s scored) {
	*h = append(*h, s)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if a[p].sim <= a[i].sim {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *minHeap) pop() scored {
	a := *h
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a = a[:n]
	for i := 0; ; {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && a[c+1].sim < a[c].sim {
			c++
		}
		if a[i].sim <= a[c].sim {
			break
		}
		a[i], a[c] = a[c], a[i]
		i = c
	}
	*h = a
	return top
}

// live reports whether n is a node that reaches level l.
func (x *annIndex) live(n int32, l int) bool {
	return x.nodes[n].live && l < len(x.nodes[n].links)
}
