package kbindex

import (
	"math"
	"slices"
	"strings"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// Query is a search over some stores.
type Query struct {
	Stores         []string
	Text           string
	Vector         []float32 // nil: keywords alone
	Limit          int       // 1..50, default 10
	Filter         *Filter
	ScoreThreshold float64 // results scoring below are dropped
	OnePerFile     bool    // results deduplicated: best chunk of each file
}

// Hit is a chunk found.
type Hit struct {
	Ref   kbstore.ChunkRef
	Score float64 // in [0, 1], higher is better
}

// Limits of a query.
const (
	DefaultLimit = 10
	MaxLimit     = 50
)

// BM25's parameters.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// compoundWeight is the weight of the parts of a German compound of the
// query, against 1 for the compound itself.
const compoundWeight = 0.5

// searched is a shard being searched, read-locked, with its scratch.
type searched struct {
	s    *shard
	pass []bool       // by file number, nil without a filter
	acc  *accumulator // keyword scores, nil without keywords
	kw   []cand       // best by keywords
	vec  []cand       // best by vector
	mu   float32      // the query vector's offset for the shard
}

// Search finds the chunks of the stores in q.Stores (and of no other
// store) that best match q, best first. Scores are in [0, 1]: with
// keywords alone 1 − e^(−BM25/W), where W is the BM25 score of a chunk of
// average length that holds each query word once, so a chunk with every
// word once scores about 0.63 whatever the query; with a vector alone the
// cosine (0 when negative); with both the fusion of the two (see fusion).
func (ix *Index) Search(q Query) []Hit {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	ss := ix.lockStores(q.Stores)
	defer func() {
		for _, x := range ss {
			if x.acc != nil {
				x.acc.reset()
				ix.accs.Put(x.acc)
			}
			x.s.mu.RUnlock()
		}
	}()
	if len(ss) == 0 {
		return nil
	}
	for i := range ss {
		if q.Filter != nil {
			ss[i].pass = ss[i].s.passing(q.Filter)
		}
	}
	depth := max(limit*4, 100)
	if q.OnePerFile {
		depth = max(limit*20, 400)
	}
	kwNorm := ix.keywords(ss, q.Text, depth)
	vq := newVQuery(q.Vector)
	for i := range ss {
		if x := &ss[i]; vq != nil && x.s.dims == len(vq.q) {
			x.mu = vq.offset(x.s)
			x.vec = x.s.scanVectors(vq, x.mu, depth, x.pass, ix.prefilterFrom)
		}
	}
	return finish(ss, ix.fuse(ss, kwNorm, vq), q, limit)
}

// lockStores read-locks the shards of the stores named, each once, in
// the order of their ids.
func (ix *Index) lockStores(stores []string) []searched {
	ids := slices.Clone(stores)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var ss []searched
	ix.mu.RLock()
	for _, id := range ids {
		if s := ix.stores[id]; s != nil {
			ss = append(ss, searched{s: s})
		}
	}
	ix.mu.RUnlock()
	for _, x := range ss {
		x.s.mu.RLock()
	}
	return ss
}

// passing evaluates the filter once per file of the shard.
func (s *shard) passing(f *Filter) []bool {
	pass := make([]bool, len(s.files))
	for i, fi := range s.files {
		pass[i] = fi.id != "" && f.Match(fi.attrs)
	}
	return pass
}

// accumulator holds the BM25 scores of a shard's chunks during a search,
// and which chunks it touched, to reset only those.
type accumulator struct {
	score   []float32
	touched []uint32
}

func (a *accumulator) reset() {
	for _, d := range a.touched {
		a.score[d] = 0
	}
	a.touched = a.touched[:0]
}

func (ix *Index) accumulator(n int) *accumulator {
	a, _ := ix.accs.Get().(*accumulator)
	if a == nil {
		a = &accumulator{}
	}
	if len(a.score) < n {
		a.score = make([]float32, n+n/4)
	}
	return a
}

// qterm is a term of a query with its weight and BM25 idf.
type qterm struct {
	term   string
	weight float64
	idf    float64
}

// keywords scores the shards' chunks by BM25 and keeps the best of each
// shard. It returns W, the normaliser of scores (0 without keywords).
func (ix *Index) keywords(ss []searched, text string, depth int) float64 {
	if strings.TrimSpace(text) == "" {
		return 0
	}
	terms, norm, avgLen := ix.queryTerms(ss, text)
	if len(terms) == 0 {
		return 0
	}
	for i := range ss {
		x := &ss[i]
		x.acc = ix.accumulator(len(x.s.docFile))
		x.s.bm25(terms, avgLen, x.pass, x.acc)
		t := newTopK(depth)
		for _, d := range x.acc.touched {
			t.push(cand{doc: d, score: x.acc.score[d]})
		}
		x.kw = t.items
	}
	return norm
}

// queryTerms analyses the query: the stems of its words (both languages'
// when it could be either) and the parts of its German compounds, with
// their idf over the shards searched. norm is Σ weight·max idf by word.
func (ix *Index) queryTerms(ss []searched, text string) (terms []qterm, norm, avgLen float64) {
	st := newStemmer()
	n, sumLen := 0, int64(0)
	for _, x := range ss {
		n += x.s.live
		sumLen += x.s.sumLen
	}
	if n == 0 {
		return nil, 0, 0
	}
	avgLen = math.Max(float64(sumLen)/float64(n), 1)
	df := func(t string) int {
		k := 0
		for _, x := range ss {
			if p := x.s.terms[t]; p != nil {
				k += int(p.n)
			}
		}
		return min(k, n)
	}
	idf := func(k int) float64 { return math.Log(1 + (float64(n)-float64(k)+0.5)/(float64(k)+0.5)) }
	for _, w := range st.queryWords(text) {
		best := idf(0) // a word no chunk has still counts in W
		for _, t := range w.terms {
			if k := df(t); k > 0 {
				terms = append(terms, qterm{term: t, weight: 1, idf: idf(k)})
				best = idf(k)
			}
		}
		norm += best
		if !w.german {
			continue
		}
		de := w.terms[len(w.terms)-1]
		var more []string
		if df(de) < n/100+2 {
			more = st.splitCompound(w.word, func(t string) bool { return df(t) > 0 })
		}
		more = append(more, compoundsWith(ss, de, w.terms)...)
		for _, t := range more {
			terms = append(terms, qterm{term: t, weight: compoundWeight, idf: idf(df(t))})
		}
	}
	return terms, norm, avgLen
}

// minCompound is the shortest term of a German chunk taken for a
// compound; minPart the shortest query stem looked for inside them.
const (
	minCompound     = 10
	minPart         = 4
	maxCompoundsHit = 32
)

// compoundsWith finds the compounds of German chunks that start or end
// with the stem t (Reise → Reisekosten, Kosten → Reisekosten), leaving
// out the word's own terms; at most maxCompoundsHit, shortest first.
func compoundsWith(ss []searched, t string, own []string) []string {
	if len(t) < minPart {
		return nil
	}
	var out []string
	for _, x := range ss {
		for c := range x.s.compounds {
			if c != t && (strings.HasPrefix(c, t) || strings.HasSuffix(c, t)) && !slices.Contains(own, c) && !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	return out[:min(len(out), maxCompoundsHit)]
}

// bm25 adds the terms' BM25 scores to the chunks of the shard.
func (s *shard) bm25(terms []qterm, avgLen float64, pass []bool, acc *accumulator) {
	for _, t := range terms {
		p := s.terms[t.term]
		if p == nil {
			continue
		}
		w := float32(t.weight * t.idf)
		k1 := float32(bm25K1)
		a := float32(bm25K1 * (1 - bm25B))
		b := float32(bm25K1 * bm25B / avgLen)
		for it := p.iter(); it.next(); {
			d := it.doc
			f := s.docFile[d]
			if f == deadFile || pass != nil && !pass[f] {
				continue
			}
			tf := float32(it.tf)
			sc := w * tf * (k1 + 1) / (tf + a + b*float32(s.docLen[d]))
			if acc.score[d] == 0 {
				acc.touched = append(acc.touched, d)
			}
			acc.score[d] += sc
		}
	}
}

// found is a candidate of the fusion: a chunk of a searched shard.
type found struct {
	shard int
	doc   uint32
	score float64
}

// fuse merges the keyword and vector candidates of every shard into one
// scored list.
func (ix *Index) fuse(ss []searched, kwNorm float64, vq *vquery) []found {
	var kwList, vecList []found
	for i, x := range ss {
		for _, c := range x.kw {
			kwList = append(kwList, found{shard: i, doc: c.doc, score: 1 - math.Exp(-float64(c.score)/kwNorm)})
		}
		for _, c := range x.vec {
			vecList = append(vecList, found{shard: i, doc: c.doc, score: math.Max(0, float64(c.score))})
		}
	}
	switch {
	case vq == nil:
		return kwList
	case kwNorm == 0:
		return vecList
	}
	// The other signal of each candidate, computed exactly: keyword
	// scores are in the accumulators, cosines are one product away.
	kwOf := func(f found) float64 {
		x := ss[f.shard]
		if x.acc == nil {
			return 0
		}
		return 1 - math.Exp(-float64(x.acc.score[f.doc])/kwNorm)
	}
	vecOf := func(f found) float64 {
		x := ss[f.shard]
		if x.s.dims != len(vq.q) {
			return 0
		}
		return math.Max(0, x.s.cosine(f.doc, vq, x.mu))
	}
	return ix.fusion.fuse(kwList, vecList, kwOf, vecOf)
}

// finish applies the threshold and OnePerFile, sorts best first and
// cuts to limit.
func finish(ss []searched, fs []found, q Query, limit int) []Hit {
	fs = slices.DeleteFunc(fs, func(f found) bool { return f.score < q.ScoreThreshold })
	slices.SortFunc(fs, func(a, b found) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		case a.shard != b.shard:
			return a.shard - b.shard
		}
		return int(a.doc) - int(b.doc)
	})
	type fileKey struct {
		shard int
		file  uint32
	}
	seen := map[fileKey]bool{}
	var hits []Hit
	for _, f := range fs {
		s := ss[f.shard].s
		file := s.docFile[f.doc]
		if q.OnePerFile {
			if seen[fileKey{f.shard, file}] {
				continue
			}
			seen[fileKey{f.shard, file}] = true
		}
		ref := kbstore.ChunkRef{Store: s.id, File: s.files[file].id, Seq: int(s.docSeq[f.doc])}
		hits = append(hits, Hit{Ref: ref, Score: min(1, max(0, f.score))})
		if len(hits) == limit {
			break
		}
	}
	return hits
}
