package llmcache

import (
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"
)

// entry is one cached answer.
type entry struct {
	key      string    // exact key
	bucket   string    // semantic candidates share it: scope, model, context
	question string    // the last user turn, for semantic matching
	an       *analysis // the question, analysed
	vec      []int8    // its embedding by a catalog model, quantized
	ans      *answer
	expires  time.Time
	scope    string
	model    string
}

// cost estimates an entry's memory in bytes, for max_memory.
func (e *entry) cost() int64 {
	n := 256 + len(e.key) + len(e.bucket) + len(e.question) + len(e.vec) + e.an.cost()
	if e.vec != nil {
		n += annLinkBytes
	}
	for _, c := range e.ans.Choices {
		n += 64 + len(c.Content)
		for _, t := range c.ToolCalls {
			n += 64 + len(t.ID) + len(t.Name) + len(t.Arguments)
		}
	}
	return int64(n)
}

// entries holds the answers (ristretto, bounded by cost in bytes) and an
// index of them by bucket, for semantic lookups and purges. It lives in a UsagePool, so reloads keep it.
type entries struct {
	cache *ristretto.Cache[string, *entry]

	mu      sync.RWMutex
	buckets map[string]map[string]*entry // bucket → key → entry
	ann     map[string]*annIndex         // bucket → entries with an embedding
	sets    map[setKey][]*entry          // the built-in matcher's index: a set of words (or it less one) → entries
	count   int
	bytes   int64

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
	s := &entries{buckets: map[string]map[string]*entry{}, ann: map[string]*annIndex{},
		sets: map[setKey][]*entry{}}
	c, err := ristretto.NewCache(&ristretto.Config[string, *entry]{
		NumCounters: max(maxBytes/100, 10_000), // ~10 per expected entry of ~1 KB
		MaxCost:     maxBytes,
		BufferItems: 64,
		OnEvict:     func(it *ristretto.Item[*entry]) { s.unindex(it.Value) },
		OnReject:    func(it *ristretto.Item[*entry]) { s.unindex(it.Value) },
	})
	if err != nil {
		return nil, err
	}
	s.cache = c
	return s, nil
}

func (s *entries) Destruct() error {
	if s.shared != nil {
		s.shared.close()
	}
	s.cache.Close()
	return nil
}

func (s *entries) get(key string) (*entry, bool) {
	e, ok := s.cache.Get(key)
	if !ok || time.Now().After(e.expires) {
		return nil, false
	}
	return e, true
}

// put keeps an entry and, when shared, hands it to the other instances.
func (s *entries) put(e *entry) {
	if s.putLocal(e) && s.shared != nil {
		s.shared.publish(e)
	}
}

// putLocal keeps an entry in this instance only.
func (s *entries) putLocal(e *entry) bool {
	ttl := time.Until(e.expires)
	if ttl <= 0 {
		return false
	}
	if old, ok := s.cache.Get(e.key); ok {
		s.unindex(old)
	}
	{
		s.mu.Lock()
		b := s.buckets[e.bucket]
		if b == nil {
			b = map[string]*entry{}
			s.buckets[e.bucket] = b
		}
		if _, had := b[e.key]; !had {
			s.count++
			s.bytes += e.cost()
		}
		b[e.key] = e
		if e.an != nil {
			s.postLocked(e, true)
		}
		s.mu.Unlock()
	}
	if !s.cache.SetWithTTL(e.key, e, e.cost(), ttl) {
		s.unindex(e)
		return false
	}
	s.cache.Wait() // visible to the next lookup
	s.stored.Add(1)
	return true
}

func (s *entries) unindex(e *entry) {
	if e == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.buckets[e.bucket]; b != nil && b[e.key] == e {
		delete(b, e.key)
		s.count--
		s.bytes -= e.cost()
		if e.an != nil {
			s.postLocked(e, false)
		}
		if len(b) == 0 {
			delete(s.buckets, e.bucket)
		}
	}
}

// postLocked adds e to (or removes it from) the postings of its
// question's content words; s.mu must be held.
func (s *entries) postLocked(e *entry, add bool) {
	if e.vec == nil { // the built-in matcher: by sets of words
		e.an.setKeys(e.bucket, func(k setKey) {
			if add {
				s.sets[k] = append(s.sets[k], e)
				return
			}
			list := s.sets[k]
			if i := slices.Index(list, e); i >= 0 {
				list[i] = list[len(list)-1]
				list = list[:len(list)-1]
			}
			if len(list) == 0 {
				delete(s.sets, k)
			} else {
				s.sets[k] = list
			}
		})
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
	if len(q.an.set) == 0 {
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
	q.an.setKeys(q.bucket, func(k setKey) {
		for _, e := range s.sets[k] {
			// Cheap bounds first: as many words, negations and numbers, and
			// word signatures apart by at most one word each way.
			c := e.an
			if len(c.set) != len(q.an.set) || c.neg != q.an.neg || len(c.numbers) != len(q.an.numbers) ||
				bits.OnesCount64(c.sig^q.an.sig) > 2 || now.After(e.expires) || e.bucket != q.bucket {
				continue
			}
			if sim, ok := lexicalMatch(q.an, c); ok && sim >= bestSim && e != best {
				best, bestSim = e, sim
			}
		}
	})
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
		if sim := cosine(q.vec, e.vec); sim >= bestSim && e != best && verified(q.an, e.an) {
			best, bestSim = e, sim
		}
	}
	return best, bestSim
}

// purge removes entries of a model and/or scope ("" matches any).
func (s *entries) purge(model, scope string) int {
	s.mu.Lock()
	var victims []string
	for _, b := range s.buckets {
		for k, e := range b {
			if (model == "" || e.model == model) && (scope == "" || e.scope == scope) {
				victims = append(victims, k)
			}
		}
	}
	s.mu.Unlock()
	if model == "" && scope == "" {
		s.cache.Clear()
		s.mu.Lock()
		s.buckets = map[string]map[string]*entry{}
		s.ann = map[string]*annIndex{}
		s.sets = map[setKey][]*entry{}
		s.count, s.bytes = 0, 0
		s.mu.Unlock()
		return len(victims)
	}
	for _, k := range victims {
		if e, ok := s.cache.Get(k); ok {
			s.unindex(e)
		}
		s.cache.Del(k)
	}
	s.cache.Wait()
	return len(victims)
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
