package llmcache

import (
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
)

// Admission. A full store that keeps every answer it is given evicts an
// entry for each, and most questions are asked once: each would push out
// one that may be asked again, and costs the work of keeping it (parsing
// the answer, packing it, indexing its words, unindexing the one it
// evicts). As in TinyLFU (Einziger, Friedman and Manes, "TinyLFU: A
// Highly Efficient Cache Admission Policy", 2017; Caffeine and Ristretto
// do the same), a full store keeps a new answer only when its question
// has been asked more often lately than the entry it would evict: how
// often is estimated by a small count-min sketch of recent questions, by
// their exact key and by their set of words (so that rephrasings of one
// question count together), halved every so often so that it forgets.
// A store with room keeps every answer.

// sketch is a count-min sketch of 4-bit counters: four rows, each a
// power-of-two number of counters packed 16 to a word. Counting is
// lock-free (a lost race loses a count, which an estimate tolerates);
// halving takes a lock only against another halving.
type sketch struct {
	rows  [4][]atomic.Uint64
	mask  uint64 // counters per row - 1
	adds  atomic.Int64
	every int64 // adds between two halvings
	halve sync.Mutex
}

// newSketch sizes a sketch for about n distinct questions at a time.
func newSketch(n int) *sketch {
	width := 1 << bits.Len(uint(max(n, 1024)-1)) // counters per row, a power of two ≥ n
	s := &sketch{mask: uint64(width - 1), every: 10 * int64(width)}
	for i := range s.rows {
		s.rows[i] = make([]atomic.Uint64, width/16)
	}
	return s
}

// sketchSeeds give each row its own counter for a hash.
var sketchSeeds = [4]uint64{0x9e3779b97f4a7c15, 0xbf58476d1ce4e5b9, 0x94d049bb133111eb, 0xd6e8feb86659fd93}

// at is the word and the shift of h's counter in row i.
func (s *sketch) at(i int, h uint64) (*atomic.Uint64, uint) {
	x := h * sketchSeeds[i]
	x ^= x >> 31
	c := x & s.mask
	return &s.rows[i][c>>4], uint(c&15) * 4
}

// add counts one sight of each of hs (0s are left out), then halves every
// counter once the sketch has counted its period.
func (s *sketch) add(hs ...uint64) {
	for _, h := range hs {
		if h == 0 {
			continue
		}
		for i := range s.rows {
			w, sh := s.at(i, h)
			for {
				old := w.Load()
				if (old>>sh)&15 == 15 || w.CompareAndSwap(old, old+1<<sh) {
					break
				}
			}
		}
	}
	if s.adds.Add(1)%s.every == 0 {
		s.halveAll()
	}
}

// estimate is how often h was counted lately: the least of its counters.
func (s *sketch) estimate(h uint64) int {
	if h == 0 {
		return 0
	}
	least := uint64(15)
	for i := range s.rows {
		w, sh := s.at(i, h)
		least = min(least, (w.Load()>>sh)&15)
	}
	return int(least)
}

// halveAll halves every counter, so that what was asked long ago weighs
// less than what is asked now.
func (s *sketch) halveAll() {
	s.halve.Lock()
	defer s.halve.Unlock()
	for i := range s.rows {
		for j := range s.rows[i] {
			w := &s.rows[i][j]
			for {
				old := w.Load()
				if w.CompareAndSwap(old, (old>>1)&0x7777777777777777) {
					break
				}
			}
		}
	}
}

// setID identifies a question by its set of words (their hashes add up
// to sum) in its bucket, as the built-in matcher's first key does; 0 for
// a question without one.
func setID(bucket string, sum uint64) uint64 {
	if sum == 0 {
		return 0
	}
	return maphash.String(sigSeed, bucket) ^ sum
}

// seen counts a lookup of the question with exact key id and set of
// words set (0 when it has none).
func (s *entries) seen(id setKey, set uint64) {
	s.freq.add(uint64(id), set)
}

// frequency is how often a question was asked lately: by its exact key
// or by its set of words, whichever was asked more.
func (s *entries) frequency(id setKey, set uint64) int {
	return max(s.freq.estimate(uint64(id)), s.freq.estimate(set))
}

// admits says whether an answer to the question with exact key id and
// set of words set is worth keeping: always while the store has room for
// an entry of the average size; when full, only if the question was asked more
// often lately than the entry the CLOCK hand would evict for it. The
// hand moves to that entry (clearing the marks it passes, as an eviction
// would), so a kept answer evicts it.
func (s *entries) admits(id setKey, set uint64, nowNS int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.count == 0 || s.bytes+s.bytes/int64(s.count) <= s.maxBytes {
		return true
	}
	for steps := 0; steps <= 2*len(s.ring)+2; steps++ {
		if s.hand >= len(s.ring) {
			s.hand = 0
		}
		slot := s.hand
		b := s.ring[slot]
		switch {
		case b == "":
		case nowNS > blobExpires(b):
			return true // it evicts an expired entry
		case s.used[slot].Load():
			s.used[slot].Store(false)
		default:
			victim := s.frequency(blobID(b), setID(blobBucket(b), blobSetSum(b)))
			return s.frequency(id, set) > victim
		}
		s.hand++
	}
	return true
}
