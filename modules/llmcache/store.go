package llmcache

import (
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// entry is one cached answer. As a request builds it, it holds the
// question's analysis and the answer as Go values (an, ans); frozen, it
// is a view of its blob (see freeze), which is all the store keeps.
type entry struct {
	key      string // exact key
	id       setKey // a hash of key: its key in the store's byKey
	bucket   string // semantic candidates share it: scope, model, context
	question string // the last user turn, for semantic matching
	size     int64  // its cost, when kept
	vec      []int8 // its embedding by a catalog model, quantized
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
		n += 64 + len(c.Content) + len(c.Reasoning) + len(c.Logprobs) + len(c.StopReason)
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
	// ring is CLOCK's circle of stored entries, each its blob ("" where
	// one left): the store holds no entry objects (see freeze). A place
	// in ring is an entry's number in byKey, the postings and the
	// vector indexes.
	ring  []string
	used  []atomic.Bool // by place in ring: asked for since the hand last passed
	holes []uint32      // free places in ring
	hand  int
	count int
	bytes int64

	exact, semantic, misses, bypass, stored atomic.Int64
	notAdmitted                             atomic.Int64 // answers not kept: a full store, a question asked less than the one it would evict
	freq                                    *sketch      // how often questions were asked lately (see admits)

	shared *shared // when entries are shared through Redis
}

// CacheStats implements llm.CacheAdmin.
func (s *entries) CacheStats() any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return map[string]int64{"entries": int64(s.count), "bytes": s.bytes, "hits_exact": s.exact.Load(),
		"hits_semantic": s.semantic.Load(), "misses": s.misses.Load(), "bypass": s.bypass.Load(), "stored": s.stored.Load(), "not_admitted": s.notAdmitted.Load()}
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
	// About a kilobyte an entry: the sketch counts about as many
	// questions as the store holds, two bytes each.
	return &entries{maxBytes: maxBytes, freq: newSketch(int(min(maxBytes>>10, 1<<22))),
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
	slot, b := s.lookupLocked(key)
	if b == "" || time.Now().UnixNano() > blobExpires(b) {
		s.mu.RUnlock()
		return nil, false
	}
	s.used[slot].Store(true)
	s.mu.RUnlock()
	e := viewOf(b) // the blob does not change: read after the lock
	return &e, true
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
	s.sweepLocked(now, s.addLocked(e))
	s.stored.Add(1)
	return true
}

// entryID is the key of an exact key in byKey.
func entryID(key string) setKey {
	return setKey(maphash.String(sigSeed, key))
}

// lookupLocked returns the place and blob of key's entry, or "";
// s.mu must be held.
func (s *entries) lookupLocked(key string) (uint32, string) {
	slot, ok := s.byKey.get(entryID(key))
	if !ok {
		return 0, ""
	}
	if b := s.ring[slot]; b != "" && blobKey(b) == key {
		return slot, b
	}
	return 0, ""
}

// addLocked makes e one of the store's entries, in place of any with its
// key, and returns its place; s.mu must be held. e is frozen first if it
// is not (putLocal freezes it before taking the lock).
func (s *entries) addLocked(e *entry) uint32 {
	if !e.frozen {
		e.freeze()
	}
	if slot, ok := s.byKey.get(e.id); ok {
		s.unindexLocked(slot) // its key, or another whose hash has its fingerprint
	}
	var slot uint32
	if n := len(s.holes); n > 0 {
		slot = s.holes[n-1]
		s.holes = s.holes[:n-1]
		s.ring[slot] = e.blob
		s.used[slot].Store(false)
	} else {
		slot = uint32(len(s.ring))
		s.ring = append(s.ring, e.blob)
		s.used = append(s.used, atomic.Bool{})
	}
	s.byKey.set(e.id, slot)
	s.count++
	s.bytes += e.size
	if e.analysed {
		s.postLocked(slot, e, true)
	}
	return slot
}

// sweepLocked moves CLOCK's hand: past two entries, taking those expired,
// so that expired entries leave over time; then on while the store is
// over its size. It never takes the entry at keep, the one just put.
func (s *entries) sweepLocked(now time.Time, keep uint32) {
	ns := now.UnixNano()
	for steps := 0; steps < 2 || s.bytes > s.maxBytes; steps++ {
		if len(s.ring) == 0 || steps > 2*len(s.ring)+2 {
			return
		}
		if s.hand >= len(s.ring) {
			s.hand = 0
		}
		slot := uint32(s.hand)
		b := s.ring[slot]
		s.hand++
		switch {
		case b == "" || slot == keep:
		case ns > blobExpires(b):
			s.unindexLocked(slot)
		case s.bytes <= s.maxBytes:
		case s.used[slot].Load():
			s.used[slot].Store(false)
		default:
			s.unindexLocked(slot)
		}
	}
}

// unindexLocked takes the entry at slot out of the store; s.mu must be
// held.
func (s *entries) unindexLocked(slot uint32) {
	if int(slot) >= len(s.ring) || s.ring[slot] == "" {
		return
	}
	b := s.ring[slot]
	s.byKey.del(blobID(b))
	s.count--
	s.bytes -= blobSize(b)
	if blobAnalysed(b) {
		e := viewOf(b)
		s.postLocked(slot, &e, false)
	}
	s.ring[slot] = ""
	s.holes = append(s.holes, slot)
}

// postLocked adds the entry e at slot to (or removes it from) the
// postings of its question's content words, or its bucket's vector
// index; s.mu must be held.
func (s *entries) postLocked(slot uint32, e *entry, add bool) {
	if len(e.vec) == 0 { // the built-in matcher: by sets of words
		if add {
			s.sets.add(slot, e)
		} else {
			s.sets.remove(slot, e)
		}
		return
	}
	x := s.ann[e.bucket]
	switch {
	case add && x == nil:
		x = newANN()
		s.ann[e.bucket] = x
		x.add(slot, e.vec)
	case add:
		x.add(slot, e.vec)
	case x != nil:
		x.remove(slot)
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
		return s.nearestVector(q, x, threshold)
	}
	// The built-in matcher wants the same words, or all but one misspelt:
	// a match shares q's set of words, or q's set less one word. A miss
	// costs a map lookup per word, whatever the store holds.
	best, bestSim := noSlot, threshold
	now := time.Now().UnixNano()
	var kb [maxTouched]setKey
	ks := q.an.appendSetKeys(kb[:0], q.bucket)
	s.sets.keys.touch(ks)
	for _, k := range ks {
		for slot := range s.sets.all(k) {
			b := s.ring[slot]
			// Cheap bounds first.
			if slot == best || !blobBoundsMatch(b, q.an) || !blobAnalysed(b) || now > blobExpires(b) || blobBucket(b) != q.bucket {
				continue
			}
			e := viewOf(b)
			if sim, ok := lexicalMatch(q.an, e.analysis()); ok && sim >= bestSim {
				best, bestSim = slot, sim
			}
		}
	}
	return s.viewAt(best), float32(bestSim)
}

// noSlot is no place in the store's ring.
const noSlot = ^uint32(0)

// viewAt is the entry at slot, or nil for noSlot; s.mu must be held.
func (s *entries) viewAt(slot uint32) *entry {
	if slot == noSlot {
		return nil
	}
	e := viewOf(s.ring[slot])
	return &e
}

// nearestVector finds the entries closest to q in its bucket's index
// and keeps the most similar the verifier accepts; s.mu must be held.
func (s *entries) nearestVector(q *query, x *annIndex, threshold float64) (*entry, float32) {
	best, bestSim := noSlot, float32(threshold)
	now := time.Now().UnixNano()
	for _, c := range x.search(q.vec, annEfFind) {
		slot := x.nodes[c.id].slot
		b := s.ring[slot]
		if slot == best || b == "" || now > blobExpires(b) || blobBucket(b) != q.bucket {
			continue
		}
		e := viewOf(b)
		if sim := cosine(q.vec, e.vec); sim >= bestSim && verified(q.an, e.analysis()) {
			best, bestSim = slot, sim
		}
	}
	return s.viewAt(best), bestSim
}

// purge removes entries of a model and/or scope ("" matches any).
func (s *entries) purge(model, scope string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for slot, b := range s.ring {
		if b == "" {
			continue
		}
		if e := viewOf(b); (model == "" || e.model == model) && (scope == "" || e.scope == scope) {
			s.unindexLocked(uint32(slot)) // it leaves its place in ring; the others stay
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
