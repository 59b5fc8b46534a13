// Package kbindex cuts the documents of the knowledge bases into chunks
// and searches them: an in-memory hybrid index of keywords (BM25 over
// English and German stems) and vectors (cosine over int8-quantised
// vectors, scanned in parallel), fused into one score in [0, 1]. It keeps
// no chunk text: results name chunks by kbstore.ChunkRef and the caller
// reads their text from the store.
package kbindex

import (
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// Index is the search index of every store's chunks. It is safe for
// concurrent use: each store has its own lock, searches only read-lock
// the stores they search (searches never wait on one another), and the
// costly analysis of Add runs before any lock is taken.
type Index struct {
	mu     sync.RWMutex
	stores map[string]*shard
	accs   sync.Pool // *accumulator, reused by keyword searches
	fusion fusion
	// prefilterFrom is the number of vectors of a store from which its
	// scan first ranks by the signs' Hamming distance (see vector.go).
	prefilterFrom int
}

// Entry is one chunk to index.
type Entry struct {
	Ref    kbstore.ChunkRef
	Text   string
	Vector []float32      // nil when the store has no embedder
	Attrs  map[string]any // the file's attributes (string, number, bool), for filters
}

// Stats is what the index holds.
type Stats struct {
	Chunks, Files, Stores int
	Terms                 int   // distinct terms, over stores
	Bytes                 int64 // approximate memory held
}

// New returns an empty index.
func New() *Index {
	return &Index{stores: map[string]*shard{}, fusion: defaultFusion, prefilterFrom: defaultPrefilterFrom}
}

// deadFile marks a removed chunk until the store's postings are compacted.
const deadFile = ^uint32(0)

// shard is the index of one store. Chunks are numbered in the order they
// were added; postings list chunk numbers in increasing order.
type shard struct {
	id string
	mu sync.RWMutex

	files   []fileInfo // by file number; id "" is a removed file
	fileNum map[string]uint32

	docFile []uint32 // by chunk number: file number, deadFile when removed
	docSeq  []int32
	docLen  []uint16 // terms in the chunk, for BM25
	live    int
	dead    int
	sumLen  int64 // of live chunks

	terms    map[string]*posting
	postings int64 // entries over all postings
	// compounds holds the long terms of German chunks: a query word
	// found at the start or end of one matches it (Kosten, Reisekosten).
	compounds map[string]struct{}

	dims  int       // of the store's vectors, 0 before the first
	vecs  []int8    // dims a chunk, by chunk number
	scale []float32 // by chunk number: the dequantisation factor, 0 without a vector
	mean  []float32 // the direction the vectors are kept as differences from
	sw    int       // words of signs a chunk: dims/64 rounded up
	signs []uint64  // the signs of each vector's components, for the prefilter
}

type fileInfo struct {
	id     string
	attrs  map[string]any
	chunks int32
}

func newShard(id string) *shard {
	return &shard{id: id, fileNum: map[string]uint32{}, terms: map[string]*posting{}, compounds: map[string]struct{}{}}
}

// shard returns the store's shard, creating it when create is set.
func (ix *Index) shard(store string, create bool) *shard {
	ix.mu.RLock()
	s := ix.stores[store]
	ix.mu.RUnlock()
	if s != nil || !create {
		return s
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if s = ix.stores[store]; s == nil {
		s = newShard(strings.Clone(store))
		ix.stores[store] = s
	}
	return s
}

// prepared is an entry analysed, ready to go in a shard.
type prepared struct {
	ref    kbstore.ChunkRef
	terms  []termTF
	length int
	german bool
	vec    []float32 // normalised
	attrs  map[string]any
}

type termTF struct {
	term string
	tf   uint16
}

// addBatch is the most chunks added under one hold of a store's lock, so
// that searches of the store wait little behind a large file.
const addBatch = 512

// Add indexes entries of one or more files. A file's old entries must be
// removed first (RemoveFile). A vector whose length differs from the
// store's first one is left out (the chunk is found by keywords alone).
func (ix *Index) Add(entries []Entry) {
	prep := prepare(entries)
	for i := 0; i < len(prep); {
		j := i
		for j < len(prep) && j-i < addBatch && prep[j].ref.Store == prep[i].ref.Store {
			j++
		}
		ix.shard(prep[i].ref.Store, true).add(prep[i:j])
		i = j
	}
}

// prepare analyses entries, in parallel for large batches.
func prepare(entries []Entry) []prepared {
	out := make([]prepared, len(entries))
	workers := min(runtime.GOMAXPROCS(0), len(entries)/256+1)
	var wg sync.WaitGroup
	per := (len(entries) + workers - 1) / max(workers, 1)
	for w := 0; w < workers; w++ {
		lo, hi := w*per, min((w+1)*per, len(entries))
		if lo >= hi {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := newStemmer()
			counts := map[string]int{}
			var buf []string
			for i := lo; i < hi; i++ {
				out[i] = st.prepare(entries[i], counts, &buf)
			}
		}()
	}
	wg.Wait()
	slices.SortStableFunc(out, func(a, b prepared) int {
		if a.ref.Store < b.ref.Store {
			return -1
		}
		if a.ref.Store > b.ref.Store {
			return 1
		}
		return 0
	})
	return out
}

func (st *stemmer) prepare(e Entry, counts map[string]int, buf *[]string) prepared {
	terms, l := st.terms(e.Text, *buf)
	*buf = terms
	clear(counts)
	p := prepared{ref: e.Ref, attrs: e.Attrs, length: len(terms), german: l == langDE}
	for _, t := range terms {
		if counts[t] == 0 {
			p.terms = append(p.terms, termTF{term: t})
		}
		counts[t]++
	}
	for i := range p.terms {
		p.terms[i].tf = uint16(min(counts[p.terms[i].term], 0xffff))
	}
	if len(e.Vector) > 0 {
		p.vec = normalise(e.Vector)
	}
	return p
}

// add puts analysed chunks of this store in the shard.
func (s *shard) add(ps []prepared) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dims == 0 {
		s.initVectors(ps)
	}
	for i := range ps {
		p := &ps[i]
		f := s.file(p.ref.File)
		if p.attrs != nil {
			s.files[f].attrs = p.attrs
		}
		s.files[f].chunks++
		doc := uint32(len(s.docFile))
		s.docFile = append(s.docFile, f)
		s.docSeq = append(s.docSeq, int32(p.ref.Seq))
		s.docLen = append(s.docLen, uint16(min(p.length, 0xffff)))
		s.live++
		s.sumLen += int64(min(p.length, 0xffff))
		for _, t := range p.terms {
			pt := s.terms[t.term]
			if pt == nil {
				// A term may be a slice of the chunk's text: the index
				// keeps its own copy, never the text.
				term := strings.Clone(t.term)
				pt = &posting{}
				s.terms[term] = pt
				if p.german && len(term) >= minCompound {
					s.compounds[term] = struct{}{}
				}
			}
			pt.add(doc, t.tf)
		}
		s.postings += int64(len(p.terms))
		s.addVector(p.vec)
	}
}

// initVectors readies the shard for vectors of the first batch that has
// some: their length, their mean, room, zeros for the chunks before.
func (s *shard) initVectors(ps []prepared) {
	n := 0
	for _, p := range ps {
		if p.vec == nil {
			continue
		}
		if s.dims == 0 {
			s.dims, s.sw = len(p.vec), (len(p.vec)+63)/64
			s.mean = make([]float32, s.dims)
		}
		if len(p.vec) == s.dims {
			n++
			for i, x := range p.vec {
				s.mean[i] += x
			}
		}
	}
	if s.dims == 0 {
		return
	}
	for i := range s.mean {
		s.mean[i] /= float32(n)
	}
	prior, room := len(s.docFile), max(len(s.docFile)+len(ps), 1024)
	s.vecs = make([]int8, prior*s.dims, room*s.dims)
	s.signs = make([]uint64, prior*s.sw, room*s.sw)
	s.scale = make([]float32, prior, room)
}

func (s *shard) addVector(v []float32) {
	if s.dims == 0 {
		return
	}
	if len(v) != s.dims {
		s.vecs = append(s.vecs, make([]int8, s.dims)...)
		s.signs = append(s.signs, make([]uint64, s.sw)...)
		s.scale = append(s.scale, 0)
		return
	}
	q, scale := quantiseDiff(v, s.mean)
	s.vecs = append(s.vecs, q...)
	s.signs = appendSigns(s.signs, q)
	s.scale = append(s.scale, scale)
}

// file returns the number of a file, adding it when new.
func (s *shard) file(id string) uint32 {
	if f, ok := s.fileNum[id]; ok {
		return f
	}
	f := uint32(len(s.files))
	id = strings.Clone(id)
	s.files = append(s.files, fileInfo{id: id})
	s.fileNum[id] = f
	return f
}

// RemoveFile removes a file's chunks from a store's index.
func (ix *Index) RemoveFile(store, file string) {
	s := ix.shard(store, false)
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.fileNum[file]
	if !ok {
		return
	}
	if s.files[f].chunks > 0 {
		for d, df := range s.docFile {
			if df == f {
				s.docFile[d] = deadFile
				s.live--
				s.dead++
				s.sumLen -= int64(s.docLen[d])
			}
		}
	}
	delete(s.fileNum, file)
	s.files[f] = fileInfo{}
	if s.dead > 1024 && s.dead > s.live/4 || s.live == 0 {
		s.compact()
	}
}

// RemoveStore drops a store's index.
func (ix *Index) RemoveStore(store string) {
	ix.mu.Lock()
	delete(ix.stores, store)
	ix.mu.Unlock()
}

// SetAttributes replaces a file's attributes, which filters test.
func (ix *Index) SetAttributes(store, file string, attrs map[string]any) {
	s := ix.shard(store, true)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[s.file(file)].attrs = attrs
}

// Stats tells what the index holds.
func (ix *Index) Stats() Stats {
	ix.mu.RLock()
	shards := make([]*shard, 0, len(ix.stores))
	for _, s := range ix.stores {
		shards = append(shards, s)
	}
	ix.mu.RUnlock()
	st := Stats{Stores: len(shards)}
	for _, s := range shards {
		s.mu.RLock()
		st.Chunks += s.live
		st.Files += len(s.fileNum)
		st.Terms += len(s.terms)
		st.Bytes += s.bytes()
		s.mu.RUnlock()
	}
	return st
}

// bytes estimates the memory a shard holds: its arrays by capacity, its
// maps by entry at Go's usual overheads.
func (s *shard) bytes() int64 {
	n := int64(cap(s.docFile))*4 + int64(cap(s.docSeq))*4 + int64(cap(s.docLen))*2
	n += int64(cap(s.vecs)) + int64(cap(s.scale))*4 + int64(cap(s.signs))*8
	n += int64(cap(s.files))*40 + int64(len(s.fileNum))*48
	for t, p := range s.terms {
		n += int64(len(t)) + 16 + 8 + 16 // key, string header, pointer, map slot
		n += 40 + int64(cap(p.buf))
	}
	for _, f := range s.files {
		n += int64(len(f.id)) + int64(len(f.attrs))*64
	}
	return n
}
