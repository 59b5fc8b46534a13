package kbindex

import (
	"math"
	"runtime"
	"sync"
)

// Vectors are normalised and quantised to int8 on Add, one scale a
// vector (its largest component maps to 127): a quarter of the memory of
// float32 and a scan of integer products. The cosine of two vectors is
// then scale_a · scale_b · Σ a_i b_i; the query is quantised the same
// way. TestQuantisedRecall measures the recall against exact float
// cosine.

// quantise normalises v and returns it as int8 with its scale.
func quantise(v []float32) ([]int8, float32) {
	var norm, peak float64
	for _, x := range v {
		norm += float64(x) * float64(x)
		peak = max(peak, math.Abs(float64(x)))
	}
	if norm == 0 || math.IsNaN(norm) || math.IsInf(norm, 0) {
		return make([]int8, len(v)), 0
	}
	norm = math.Sqrt(norm)
	q := make([]int8, len(v))
	k := 127 / peak
	for i, x := range v {
		q[i] = int8(math.Round(float64(x) * k))
	}
	return q, float32(peak / norm / 127)
}

// dot8 is Σ a_i b_i over int8 vectors of one length.
func dot8(a, b []int8) int32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 int32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		s0 += int32(a[i])*int32(b[i]) + int32(a[i+4])*int32(b[i+4])
		s1 += int32(a[i+1])*int32(b[i+1]) + int32(a[i+5])*int32(b[i+5])
		s2 += int32(a[i+2])*int32(b[i+2]) + int32(a[i+6])*int32(b[i+6])
		s3 += int32(a[i+3])*int32(b[i+3]) + int32(a[i+7])*int32(b[i+7])
	}
	for ; i < len(a); i++ {
		s0 += int32(a[i]) * int32(b[i])
	}
	return s0 + s1 + s2 + s3
}

// cosine is the cosine of a chunk's vector with a quantised query.
func (s *shard) cosine(doc uint32, q []int8, qscale float32) float64 {
	sc := s.scale[doc]
	if sc == 0 {
		return 0
	}
	d := int(doc) * s.dims
	return float64(sc) * float64(qscale) * float64(dot8(q, s.vecs[d:d+s.dims]))
}

// parallelFrom is the number of chunks from which a scan is split across
// the cores.
const parallelFrom = 16384

// scanVectors returns the k chunks of the shard nearest to the query,
// skipping removed chunks and those whose file fails the filter (pass).
func (s *shard) scanVectors(q []int8, qscale float32, k int, pass []bool) []cand {
	n := len(s.docFile)
	workers := min(runtime.GOMAXPROCS(0), n/parallelFrom+1)
	per := (n + workers - 1) / workers
	tops := make([]topK, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := w*per, min((w+1)*per, n)
		tops[w] = newTopK(k)
		wg.Add(1)
		go func(t *topK) {
			defer wg.Done()
			s.scanRange(q, qscale, lo, hi, pass, t)
		}(&tops[w])
	}
	wg.Wait()
	all := tops[0]
	for _, t := range tops[1:] {
		for _, c := range t.items {
			all.push(c)
		}
	}
	return all.items
}

func (s *shard) scanRange(q []int8, qscale float32, lo, hi int, pass []bool, t *topK) {
	dims := s.dims
	for d := lo; d < hi; d++ {
		f := s.docFile[d]
		if f == deadFile || pass != nil && !pass[f] {
			continue
		}
		sc := s.scale[d]
		if sc == 0 {
			continue
		}
		score := float32(dot8(q, s.vecs[d*dims:(d+1)*dims])) * sc * qscale
		if len(t.items) < t.k || score > t.items[0].score {
			t.push(cand{doc: uint32(d), score: score})
		}
	}
}

// cand is a candidate chunk of a shard with a score.
type cand struct {
	doc   uint32
	score float32
}

// topK keeps the k best candidates in a min-heap.
type topK struct {
	k     int
	items []cand
}

func newTopK(k int) topK { return topK{k: k, items: make([]cand, 0, k)} }

func (t *topK) push(c cand) {
	if len(t.items) < t.k {
		t.items = append(t.items, c)
		for i := len(t.items) - 1; i > 0; {
			p := (i - 1) / 2
			if !less(t.items[i], t.items[p]) {
				break
			}
			t.items[i], t.items[p] = t.items[p], t.items[i]
			i = p
		}
		return
	}
	if !less(t.items[0], c) {
		return
	}
	t.items[0] = c
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(t.items) && less(t.items[l], t.items[m]) {
			m = l
		}
		if r < len(t.items) && less(t.items[r], t.items[m]) {
			m = r
		}
		if m == i {
			return
		}
		t.items[i], t.items[m] = t.items[m], t.items[i]
		i = m
	}
}

// less orders candidates by score, then by chunk number (later first
// out), so that results are deterministic.
func less(a, b cand) bool {
	if a.score != b.score {
		return a.score < b.score
	}
	return a.doc > b.doc
}
