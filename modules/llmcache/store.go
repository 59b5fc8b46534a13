package llmcache

import (
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// entry is one cached answer. As a request builds it, it holds the
// question's analysis and the answer as Go values (an, ans); stored, it
// holds them encoded in its blob (see freeze), with the numbers the
// matcher's cheap bounds read.
type entry struct {
	key      string      // exact key
	id       setKey      // a hash of key: its key in the store's byKey
	bucket   string      // semantic candidates share it: scope, model, context
	question string      // the last user turn, for semantic matching
	num      uint32      // its number in the built-in matcher's postings, 0 when not posted
	slot     int         // its place in the store's CLOCK
	size     int64       // its cost, when kept
	used     atomic.Bool // asked for since CLOCK's hand last passed
	vec      []int8      // its embedding by a catalog model, quantized
	expires  time.Time
	scope    string
	model    string

	an  *analysis // until stored: the question, analysed
	ans *answer   // until stored: the answer

	// Stored: key, question, analysis and answer, encoded.
	blob             string
	anAt, ansAt      uint32 // where the analysis and the answer start in blob
	frozen, analysed bool
	nset, neg, nnum  int32 // the analysis's set size, negations and numbers
	sig, sum         uint64
}

// cost estimates an entry's memory in bytes, for max_memory.
func (e *entry) cost() int64 {
	n := 256 + len(e.key) + len(e.bucket) + len(e.question) + len(e.vec) + e.analysis().cost()
	if e.vec != nil {
		n += annLinkBytes
	}
	for _, c := range e.answer().Choices {
		n += 64 + len(c.Content)
		for _, t := range c.ToolCalls {
			n += 64 + len(t.ID) + len(t.Name) + len(t.Arguments)
		}
	}
	return int64(n)
}

// entries holds the answers, bounded by their cost in bytes, with an
// index of them by bucket for semantic lookups and purges. It lives in a
// UsagePool, so reloads keep it. When full it evicts by CLOCK: a hit
// marks its entry, and the hand passing over the entries takes the first
// one not marked since it last passed (clearing the marks it passes),
// which keeps what is asked again without a lock on the hit path.
type entries struct {
	maxBytes int64

	mu sync.RWMutex
	// byKey finds an entry's place in ring by a hash of its exact key
	// (entryID); a hit compares the key itself. It holds no pointers: a
	// map of strings to entries was most of what each garbage collection
	// spent marking a large store. It keeps 32 bits of each hash, so of
	// two keys that share them (about one pair in 100k entries) only the
	// one kept last is found: a miss for the other, never its answer.
	byKey keyTable
	ann   map[string]*annIndex // bucket → entries with an embedding
	sets  postings             // the built-in matcher's index: a set of words (or it less one) → entries
	ring  []*entry             // CLOCK's circle of entries, nil where one left
	holes []int                // free places in ring
	hand  int
	count int
	bytes int64

	exact, semantic, misses, bypass, stored atomic.Int64

	shared *shared // when entries are shared through Redis
}

// CacheStats implements llm.CacheAdmin.
func (s *entries) CacheStats() any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return map[string]int64{"entries": int64(s.count), "bytes": s.bytes, "hits_exact": s.exact.Load(),
		"hits_semantic": s.semantic.Load(), "misses": s.misses.Load(), "bypass": s.bypass.Load(), "stored": s.stored.Load()}
}

// Purge implements llm.CacheAdmin.
func (s *entries) Purge(model, scope string) int {
	n := s.purge(model, scope)
	if s.shared != nil {
		s.shared.purge(model, scope)
	}
	return n
}

func newEntries(maxBytes int64) (*entries, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("max_memory must be positive, not %d", maxBytes)
	}
	return &entries{maxBytes: maxBytes,
		ann: map[string]*annIndex{}, sets: newPostings()}, nil
}

func (s *entries) Destruct() error {
	if s.shared != nil {
		s.shared.close()
	}
	return nil
}

func (s *entries) get(key string) (*entry, bool) {
	s.mu.RLock()
	e := s.lookupLocked(key)
	s.mu.RUnlock()
	if e == nil || time.Now().After(e.expires) {
		return nil, false
	}
	e.used.Store(true)
	return e, true
}

// put keeps an entry and, when shared, hands it to the other instances.
func (s *entries) put(e *entry) {
	if s.putLocal(e) && s.shared != nil {
		s.shared.publish(e)
	}
}

// putLocal keeps an entry in this instance only, evicting others to make
// room; it is visible to the next lookup at once.
func (s *entries) putLocal(e *entry) bool {
	now := time.Now()
	if !e.expires.After(now) {
		return false
	}
	e.size = e.cost()
	if e.size > s.maxBytes {
		return false
	}
	e.freeze()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addLocked(e)
	s.sweepLocked(now, e)
	s.stored.Add(1)
	return true
}

// entryID is the key of an exact key in byKey.
func entryID(key string) setKey {
	return setKey(maphash.String(sigSeed, key))
}

// lookupLocked returns the entry of key, or nil; s.mu must be held.
func (s *entries) lookupLocked(key string) *entry {
	slot, ok := s.byKey.get(entryID(key))
	if !ok {
		return nil
	}
	if e := s.ring[slot]; e != nil && e.key == key {
		return e
	}
	return nil
}

// addLocked makes e one of the store's entries, in place of any with
// its key; s.mu must be held.
func (s *entries) addLocked(e *entry) {
	e.id = entryID(e.key)
	if slot, ok := s.byKey.get(e.id); ok {
		s.unindexLocked(s.ring[slot]) // its key, or another whose hash has its fingerprint
	}
	if n := len(s.holes); n > 0 {
		e.slot = s.holes[n-1]
		s.holes = s.holes[:n-1]
		s.ring[e.slot] = e
	} else {
		e.slot = len(s.ring)
		s.ring = append(s.ring, e)
	}
	s.byKey.set(e.id, uint32(e.slot))
	s.count++
	s.bytes += e.size
	if e.hasAnalysis() {
		s.postLocked(e, true)
	}
}

// sweepLocked moves CLOCK's hand: past two entries, taking those expired,
// so that expired entries leave over time; then on while the store is
// over its size. It never takes keep, the entry just put.
func (s *entries) sweepLocked(now time.Time, keep *entry) {
	for steps := 0; steps < 2 || s.bytes > s.maxBytes; steps++ {
		if len(s.ring) == 0 || steps > 2*len(s.ring)+2 {
			return
		}
		if s.hand >= len(s.ring) {
			s.hand = 0
		}
		e := s.ring[s.hand]
		s.hand++
		switch {
		case e == nil || e == keep:
		case now.After(e.expires):
			s.unindexLocked(e)
		case s.bytes <= s.maxBytes:
		case e.used.Load():
			e.used.Store(false)
		default:
			s.unindexLocked(e)
		}
	}
}

func (s *entries) unindex(e *entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unindexLocked(e)
}

// unindexLocked takes e out of the store; s.mu must be held.
func (s *entries) unindexLocked(e *entry) {
	if e == nil || e.slot >= len(s.ring) || s.ring[e.slot] != e {
		return
	}
	s.byKey.del(e.id)
	s.count--
	s.bytes -= e.size
	if e.hasAnalysis() {
		s.postLocked(e, false)
	}
	s.ring[e.slot] = nil
	s.holes = append(s.holes, e.slot)
}

// postLocked adds e to (or removes it from) the postings of its
// question's content words; s.mu must be held.
func (s *entries) postLocked(e *entry, add bool) {
	if e.vec == nil { // the built-in matcher: by sets of words
		if add {
			s.sets.add(e)
		} else {
			s.sets.remove(e)
		}
		return
	}
	x := s.ann[e.bucket]
	switch {
	case add && x == nil:
		x = newANN()
		s.ann[e.bucket] = x
		x.add(e)
	case add:
		x.add(e)
	case x != nil:
		x.remove(e)
		if x.len() == 0 {
			delete(s.ann, e.bucket)
		}
	}
}

// nearest returns the live entry of q's bucket that answers q, with its
// similarity, or nil. It looks only at entries that share q's rarest
// words, and checks cheap bounds before expensive ones.
func (s *entries) nearest(q *query, threshold float64) (*entry, float32) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if q.an.nset == 0 {
		return nil, 0
	}
	if q.vec != nil {
		x := s.ann[q.bucket]
		if x == nil {
			return nil, 0
		}
		return nearestVector(q, x, threshold)
	}
	// The built-in matcher wants the same words, or all but one misspelt:
	// a match shares q's set of words, or q's set less one word. A miss
	// costs a map lookup per word, whatever the store holds.
	var best *entry
	bestSim := threshold
	now := time.Now()
	var kb [maxTouched]setKey
	ks := q.an.appendSetKeys(kb[:0], q.bucket)
	s.sets.keys.touch(ks)
	for _, k := range ks {
		for e := range s.sets.all(k) {
			// Cheap bounds first: as many words, negations and numbers, and
			// word signatures apart by at most one word each way.
			if !e.analysed || int(e.nset) != q.an.nset || int(e.neg) != q.an.neg || int(e.nnum) != len(q.an.numbers) ||
				bits.OnesCount64(e.sig^q.an.sig) > 2 || now.After(e.expires) || e.bucket != q.bucket || e == best {
				continue
			}
			if sim, ok := lexicalMatch(q.an, e.analysis()); ok && sim >= bestSim {
				best, bestSim = e, sim
			}
		}
	}
	return best, float32(bestSim)
}

// nearestVector finds the entries closest to q in its bucket's index
// and keeps the most similar the verifier accepts.
func nearestVector(q *query, x *annIndex, threshold float64) (*entry, float32) {
	var best *entry
	bestSim := float32(threshold)
	now := time.Now()
	for _, c := range x.search(q.vec, annEfFind) {
		e := x.nodes[c.id].e
		if now.After(e.expires) || e.bucket != q.bucket {
			continue
		}
		if sim := cosine(q.vec, e.vec); sim >= bestSim && e != best && verified(q.an, e.analysis()) {
			best, bestSim = e, sim
		}
	}
	return best, bestSim
}

// purge removes entries of a model and/or scope ("" matches any).
func (s *entries) purge(model, scope string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.ring {
		if e != nil && (model == "" || e.model == model) && (scope == "" || e.scope == scope) {
			s.unindexLocked(e) // it leaves its place in ring; the others stay
			n++
		}
	}
	return n
}

// cosine is the cosine of two quantized vectors, in [-1, 1]: rounding
// each component leaves them not quite unit length, so they are divided
// by their own norms.
func cosine(a, b []int8) float32 {
	if len(a) != len(b) {
		return -1
	}
	var dot, na, nb int64
	for i := range a {
		x, y := int64(a[i]), int64(b[i])
		dot += x * y
		na += x * x
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return float32(max(-1, min(1, float64(dot)/math.Sqrt(float64(na)*float64(nb)))))
}
