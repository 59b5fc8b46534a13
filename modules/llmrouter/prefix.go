package llmrouter

import (
	"hash/maphash"
	"math/bits"
	"net/http"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/openai"
)

func init() {
	caddy.RegisterModule(PrefixAffinity{})
}

// PrefixAffinity sends each request where its prompt's prefix is most
// likely still in an engine's key/value cache, so that engines reuse it
// instead of computing it again: an agent's turns share an ever-growing
// prefix, and many users share a system prompt.
//
// Per model it keeps an approximate index of the prompts each replica has
// recently been sent: the prompt (tools, then messages, as the request
// carries them) is cut into blocks of BlockBytes, each block's hash
// chained to the ones before it, so a block matches only after the same
// prefix. Each replica holds at most CacheTokens worth of blocks, the
// least recently sent evicted first, mirroring what an engine's cache can
// hold. A request goes to the ready replica whose blocks match the longest
// prefix of its prompt, unless that replica is overloaded relative to the
// least loaded one (see BalanceAbs and BalanceRel): then load wins, and the
// index learns the new home. A request that matches nothing, or only a
// prefix many conversations share (a system prompt: the blocks after
// which several different blocks have been seen), goes to the replica
// keeping the fewest conversations among those with at most two requests
// in flight more than the least loaded (then the one holding fewest
// blocks, then the least loaded), so that new
// conversations spread evenly over the replicas' caches while each keeps
// to its replica.
//
// Explicit affinity comes first: a request with prompt_cache_key (or
// user, or the Header when set) stays on the replica its key was last
// sent to while that replica is ready and not overloaded.
//
// The index lives for the process (it survives reloads); a replica's part
// is dropped when the replica stops.
type PrefixAffinity struct {
	// BlockBytes is the size of the prompt's blocks. Default 256 (about
	// 64 tokens).
	BlockBytes int `json:"block_bytes,omitempty"`
	// CacheTokens is how many prompt tokens of recent requests a replica
	// is assumed to keep (its engine's prefix cache). Default 65536.
	CacheTokens int `json:"cache_tokens,omitempty"`
	// BalanceAbs and BalanceRel say when the best-matching replica is
	// overloaded: when its requests in flight exceed the least loaded
	// replica's by more than BalanceAbs and are more than BalanceRel times
	// as many. Defaults 4 and 1.5.
	BalanceAbs int     `json:"balance_abs,omitempty"`
	BalanceRel float64 `json:"balance_rel,omitempty"`
	// Header, when set, names a request header whose value keeps a
	// session on one replica, like prompt_cache_key.
	Header string `json:"header,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (PrefixAffinity) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.llm_router.policies.prefix_affinity",
		New: func() caddy.Module { return new(PrefixAffinity) },
	}
}

// Provision sets the defaults.
func (p *PrefixAffinity) Provision(caddy.Context) error {
	if p.BlockBytes <= 0 {
		p.BlockBytes = 256
	}
	if p.CacheTokens <= 0 {
		p.CacheTokens = 65536
	}
	if p.BalanceAbs <= 0 {
		p.BalanceAbs = 4
	}
	if p.BalanceRel <= 1 {
		p.BalanceRel = 1.5
	}
	return nil
}

// Select implements fleet.Selector for callers without a request: the
// least loaded replica.
func (p *PrefixAffinity) Select(ready []*fleet.Replica) *fleet.Replica {
	return fleet.LeastOutstanding{}.Select(ready)
}

// requestPolicy is a policy that reads the request: the router asks it
// for the selector of each request and model.
type requestPolicy interface {
	forRequest(r *http.Request, req *openai.Request, model string) fleet.Selector
}

// seed hashes every prompt block of the process.
var seed = maphash.MakeSeed()

// forRequest hashes the request's prompt into chained block hashes.
func (p *PrefixAffinity) forRequest(r *http.Request, req *openai.Request, model string) fleet.Selector {
	pk := &prefixPick{p: p, ix: indexOf(model, p), session: p.session(r, req)}
	prompt := req.Messages
	if len(prompt) == 0 {
		prompt = req.Prompt
	}
	pk.hashes = chainHashes(req.Tools, prompt, p.BlockBytes)
	return pk
}

// session returns the request's session key hashed (never 0), from
// prompt_cache_key, user or the Header, or 0 when it has none.
func (p *PrefixAffinity) session(r *http.Request, req *openai.Request) uint64 {
	if len(req.CacheKey) > 0 {
		return maphash.Bytes(seed, req.CacheKey) | 1
	}
	if p.Header != "" {
		if v := r.Header.Get(p.Header); v != "" {
			return maphash.String(seed, v) | 1
		}
	}
	return 0
}

// conversation returns a number naming the request's conversation, the
// same for every turn of it: its session key, else a hash of its tools
// and its messages up to its first user message (a system prompt alone
// is shared by many conversations); 0 when it has neither.
func (p *PrefixAffinity) conversation(r *http.Request, req *openai.Request) uint64 {
	if s := p.session(r, req); s != 0 {
		return s
	}
	n := openai.FirstUserEnd(req.Messages)
	if n == 0 {
		return 0
	}
	var h maphash.Hash
	h.SetSeed(seed)
	_, _ = h.Write(req.Tools)
	_, _ = h.Write(req.Messages[:n])
	return h.Sum64() | 1
}

// chainHashes cuts the prompt into blocks (tools first) and returns each
// block's hash chained to the ones before it. A last partial block is
// not hashed: the next turn extends it.
func chainHashes(tools, prompt []byte, block int) []uint64 {
	n := (len(tools) + len(prompt)) / block
	if n == 0 {
		return nil
	}
	out := make([]uint64, 0, n)
	var h uint64
	add := func(b []byte) {
		h = (bits.RotateLeft64(h*0x9E3779B97F4A7C15, 31) ^ maphash.Bytes(seed, b)) | 1 // never 0
		out = append(out, h)
	}
	for len(tools) >= block {
		add(tools[:block])
		tools = tools[block:]
	}
	if len(tools) > 0 {
		need := block - len(tools)
		if len(prompt) < need {
			return out
		}
		add(append(append(make([]byte, 0, block), tools...), prompt[:need]...))
		prompt = prompt[need:]
	}
	for len(prompt) >= block {
		add(prompt[:block])
		prompt = prompt[block:]
	}
	return out
}

// maxSlots bounds the replicas of a model the index tells apart.
const maxSlots = 64

// prefixIndex is one model's index.
type prefixIndex struct {
	mu       sync.Mutex
	blocks   map[uint64]block // by block hash
	slots    [maxSlots]slot
	byID     map[string]int
	sessions map[uint64]session
	swept    int64
	picked   int64 // when the last pick was made (unix nanos)
	capacity int   // blocks per replica
	metrics  map[string]*prefixMetrics
}

// block is one block of prompts in the index.
type block struct {
	slots uint64 // the replicas holding it (bit i: slot i)
	// fanout counts the different blocks seen after it: 2 or more
	// mark the end of a prefix that several conversations share (a
	// system prompt), where their own parts begin.
	fanout uint32
}

// slot is one replica's part of the index.
type slot struct {
	id   string
	rep  *fleet.Replica
	seen int64             // when it was last among the ready ones (unix nanos)
	held map[uint64]uint32 // block hash → the touch that last sent it
	// heads are the first blocks of the conversations it was sent (a
	// conversation's first block past the prefix it shares with others),
	// as long as it holds them: how many conversations it keeps.
	heads map[uint64]struct{}
	queue []touch // touches, oldest first; stale ones are skipped
	seq   uint32
}

type touch struct {
	h   uint64
	seq uint32
}

type session struct {
	slot int
	at   int64
}

var indexes sync.Map // model name → *prefixIndex

func indexOf(model string, p *PrefixAffinity) *prefixIndex {
	capacity := max(p.CacheTokens*4/p.BlockBytes, 1)
	if v, ok := indexes.Load(model); ok {
		ix := v.(*prefixIndex)
		if ix.capacity != capacity {
			ix.mu.Lock()
			ix.capacity = capacity
			ix.mu.Unlock()
		}
		return ix
	}
	v, _ := indexes.LoadOrStore(model, &prefixIndex{blocks: map[uint64]block{}, byID: map[string]int{},
		sessions: map[uint64]session{}, capacity: capacity, metrics: map[string]*prefixMetrics{}})
	return v.(*prefixIndex)
}

// prefixPick is one request's selector.
type prefixPick struct {
	p       *PrefixAffinity
	ix      *prefixIndex
	hashes  []uint64
	session uint64
}

// Pick reasons, as counted.
const (
	pickPrefix  = "prefix"
	pickSession = "session"
	pickLoad    = "load" // the best match was overloaded
	pickNew     = "new"  // nothing matched
)

// Select picks among the ready replicas (the fleet's lock is held).
func (pk *prefixPick) Select(ready []*fleet.Replica) *fleet.Replica {
	ix := pk.ix
	now := time.Now().UnixNano()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.sweep(now)
	var slotOf [maxSlots]*fleet.Replica
	var readyMask uint64
	least, leastHeld := ready[0], -1
	for _, r := range ready {
		i := ix.slotFor(r, now)
		held := 0
		if i >= 0 {
			slotOf[i] = r
			readyMask |= 1 << i
			held = len(ix.slots[i].held)
		}
		// The least loaded; among equals, the one holding least (the
		// most room in its cache).
		if n, lo := r.Inflight(), least.Inflight(); n < lo || (n == lo && (leastHeld < 0 || held < leastHeld)) {
			least, leastHeld = r, held
		}
	}
	ix.picked = now
	overloaded := func(r *fleet.Replica) bool {
		n, lo := float64(r.Inflight()), float64(least.Inflight())
		return n-lo > float64(pk.p.BalanceAbs) && n > pk.p.BalanceRel*lo
	}
	var chosen *fleet.Replica
	reason := pickNew
	if pk.session != 0 {
		if s, ok := ix.sessions[pk.session]; ok && readyMask&(1<<s.slot) != 0 && !overloaded(slotOf[s.slot]) {
			chosen, reason = slotOf[s.slot], pickSession
		}
	}
	// The longest match, and whether it goes past the shared part of
	// the prompt into a conversation's own: a match of a shared system
	// prompt alone is no reason to crowd one replica, which would then
	// hold every new conversation.
	depth, shared := 0, 0
	cand := readyMask
	for _, h := range pk.hashes {
		b := ix.blocks[h]
		m := b.slots & cand
		if m == 0 {
			break
		}
		cand = m
		depth++
		if b.fanout >= 2 {
			shared = depth
		}
	}
	if chosen == nil && depth > shared {
		// The longest match; among equals, the least loaded.
		var best *fleet.Replica
		for m := cand; m != 0; m &= m - 1 {
			r := slotOf[bits.TrailingZeros64(m)]
			if best == nil || r.Inflight() < best.Inflight() {
				best = r
			}
		}
		if overloaded(best) {
			chosen, reason = least, pickLoad
		} else {
			chosen, reason = best, pickPrefix
		}
	}
	if chosen == nil {
		chosen = ix.home(ready, least)
	}
	i, ok := ix.byID[chosen.ID]
	if !ok {
		return chosen // more replicas than the index tells apart
	}
	// What the chosen replica already holds of this prompt, for metrics.
	matched := 0
	for _, h := range pk.hashes {
		if ix.blocks[h].slots&(1<<i) == 0 {
			break
		}
		matched++
	}
	ix.learn(i, pk.hashes)
	if shared < len(pk.hashes) {
		ix.slots[i].heads[pk.hashes[shared]] = struct{}{}
	}
	if pk.session != 0 {
		ix.sessions[pk.session] = session{slot: i, at: now}
	}
	ix.count(chosen, reason, matched, len(pk.hashes), pk.p.BlockBytes)
	return chosen
}

// home picks a new conversation's replica: among the replicas with at most
// two requests in flight more than the least loaded, the one keeping the
// fewest conversations; among equals, the one holding least of the index
// (the most room in its engine's cache), then the least loaded. Requests
// in flight alone would not spread conversations when few are in flight
// at once: the replica a turn just left would take every new
// conversation, and one busy with a long prompt for a moment none, so
// that others keep more conversations than their engines have slots for.
// Nor would blocks held: a replica whose few conversations run fast holds
// more of them than a crowded, slow one.
func (ix *prefixIndex) home(ready []*fleet.Replica, least *fleet.Replica) *fleet.Replica {
	rank := func(r *fleet.Replica) (convs, held int) {
		if i, ok := ix.byID[r.ID]; ok {
			return len(ix.slots[i].heads), len(ix.slots[i].held)
		}
		return 0, 0
	}
	roomiest := least
	rc, rh := rank(least)
	for _, r := range ready {
		if r == least || r.Inflight() > least.Inflight()+2 {
			continue
		}
		c, h := rank(r)
		if c < rc || (c == rc && (h < rh || (h == rh && r.Inflight() < roomiest.Inflight()))) {
			roomiest, rc, rh = r, c, h
		}
	}
	return roomiest
}

// slotFor returns r's slot, giving it a free one if it has none (-1 when
// none is free).
func (ix *prefixIndex) slotFor(r *fleet.Replica, now int64) int {
	i, ok := ix.byID[r.ID]
	if !ok {
		i = -1
		for j := range ix.slots {
			if ix.slots[j].id == "" {
				i = j
				break
			}
		}
		if i < 0 {
			return -1
		}
		ix.slots[i] = slot{id: r.ID, held: map[uint64]uint32{}, heads: map[uint64]struct{}{}}
		ix.byID[r.ID] = i
	}
	s := &ix.slots[i]
	s.rep, s.seen = r, now
	return i
}

// learn records that slot i was sent the blocks, evicting its least
// recently sent blocks beyond the capacity.
func (ix *prefixIndex) learn(i int, hashes []uint64) {
	s := &ix.slots[i]
	bit := uint64(1) << i
	for j, h := range hashes {
		s.seq++
		if _, ok := s.held[h]; !ok {
			b, known := ix.blocks[h]
			if !known && j > 0 {
				if prev, ok := ix.blocks[hashes[j-1]]; ok {
					prev.fanout++
					ix.blocks[hashes[j-1]] = prev
				}
			}
			b.slots |= bit
			ix.blocks[h] = b
		}
		s.held[h] = s.seq
		s.queue = append(s.queue, touch{h, s.seq})
	}
	for len(s.held) > ix.capacity && len(s.queue) > 0 {
		t := s.queue[0]
		s.queue = s.queue[1:]
		if s.held[t.h] == t.seq {
			delete(s.held, t.h)
			delete(s.heads, t.h)
			ix.unset(t.h, bit)
		}
	}
	if len(s.queue) > 4*ix.capacity+64 {
		// Mostly stale touches: keep the live ones, in order.
		live := s.queue[:0:0]
		for _, t := range s.queue {
			if s.held[t.h] == t.seq {
				live = append(live, t)
			}
		}
		s.queue = live
	}
}

func (ix *prefixIndex) unset(h, bit uint64) {
	b := ix.blocks[h]
	if b.slots &^= bit; b.slots == 0 {
		delete(ix.blocks, h)
	} else {
		ix.blocks[h] = b
	}
}

// sweep, at most once a second, drops the slots of replicas that stopped
// (or were not among the ready ones of the picks made in the last minute)
// and sessions idle for an hour.
func (ix *prefixIndex) sweep(now int64) {
	if now-ix.swept < int64(time.Second) {
		return
	}
	ix.swept = now
	for i := range ix.slots {
		s := &ix.slots[i]
		if s.id == "" {
			continue
		}
		// A replica missing from the picks of the last minute (another
		// node's that its node no longer offers, one held back as a
		// suspect) loses its part. Picks that were not made do not count:
		// with every request a long one, a minute may pass between picks
		// while the replicas serve their conversations.
		st := s.rep.State()
		if st == fleet.ReplicaReady || st == fleet.ReplicaDraining || st == fleet.ReplicaStarting {
			if ix.picked-s.seen < int64(time.Minute) {
				continue
			}
		}
		ix.drop(i)
	}
	for k, s := range ix.sessions {
		if now-s.at > int64(time.Hour) {
			delete(ix.sessions, k)
		}
	}
}

// drop forgets slot i.
func (ix *prefixIndex) drop(i int) {
	s := &ix.slots[i]
	bit := uint64(1) << i
	for h := range s.held {
		ix.unset(h, bit)
	}
	delete(ix.byID, s.id)
	delete(ix.metrics, s.id)
	for k, se := range ix.sessions {
		if se.slot == i {
			delete(ix.sessions, k)
		}
	}
	*s = slot{}
}

// prefixMetrics are one replica's children.
type prefixMetrics struct {
	matched, unmatched prometheus.Counter
	picks              map[string]prometheus.Counter
}

var (
	metricPrefixTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llmgw", Name: "prefix_routed_prompt_tokens_total",
		Help: "Prompt tokens (estimated, 4 bytes each) the prefix_affinity policy sent to each replica, by whether the replica had been sent that prefix before (matched) or not.",
	}, []string{"model", "replica", "matched"})
	metricPrefixPicks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "llmgw", Name: "prefix_picks_total",
		Help: "Replica choices of the prefix_affinity policy, by reason: prefix (the longest match), session (prompt_cache_key, user or the header), load (the best match was overloaded) or new (nothing matched: the least loaded).",
	}, []string{"model", "replica", "reason"})
)

func (ix *prefixIndex) count(r *fleet.Replica, reason string, matched, total, block int) {
	pm := ix.metrics[r.ID]
	if pm == nil {
		pm = &prefixMetrics{
			matched:   metricPrefixTokens.WithLabelValues(r.Model, r.ID, "true"),
			unmatched: metricPrefixTokens.WithLabelValues(r.Model, r.ID, "false"),
			picks:     map[string]prometheus.Counter{},
		}
		for _, why := range []string{pickPrefix, pickSession, pickLoad, pickNew} {
			pm.picks[why] = metricPrefixPicks.WithLabelValues(r.Model, r.ID, why)
		}
		ix.metrics[r.ID] = pm
	}
	pm.picks[reason].Inc()
	if total > 0 {
		pm.matched.Add(float64(matched * block / 4))
		pm.unmatched.Add(float64((total - matched) * block / 4))
	}
}

// Interface guards
var (
	_ fleet.Selector    = (*PrefixAffinity)(nil)
	_ fleet.Selector    = (*prefixPick)(nil)
	_ requestPolicy     = (*PrefixAffinity)(nil)
	_ caddy.Provisioner = (*PrefixAffinity)(nil)
)
