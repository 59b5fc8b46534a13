// Package kbeval measures how well the knowledge bases find the passage
// that answers a question, on the made-up company corpus of testdata/:
// the document reader, the chunker and the hybrid index together, without
// Caddy or a store.
//
//	go test -run TestRetrievalQuality -v ./modules/llmkb/kbeval
//
// prints recall@5 and MRR per kind of question, keywords alone and hybrid.
// The hybrid's vectors come from the sim engine's Embed: signed feature
// hashing of words. That embedder is lexical, not semantic: it knows no
// synonyms and no other language, so "hybrid" here measures the fusion's
// plumbing (vectors flow, scores fuse, nothing breaks the keyword ranking),
// not the semantic recall a real embedding model would add.
package kbeval

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/llmgw/llmgw/engines/sim"
	"github.com/llmgw/llmgw/modules/llmkb/docread"
	"github.com/llmgw/llmgw/modules/llmkb/kbindex"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// simDims is the sim engine's default embedding size (its -embedding-dims).
const simDims = 64

// question is one entry of testdata/questions.json.
type question struct {
	Q              string   `json:"q"`
	Kind           string   `json:"kind"`
	Files          []string `json:"files"`
	AnswerContains string   `json:"answer_contains"`
}

// corpus is the testdata documents cut into chunks.
type corpus struct {
	pieces map[string][]kbindex.Piece // by file name
	bytes  int64
}

func loadQuestions(t testing.TB) []question {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "questions.json"))
	if err != nil {
		t.Fatal(err)
	}
	var qs []question
	if err := json.Unmarshal(data, &qs); err != nil {
		t.Fatalf("questions.json: %v", err)
	}
	return qs
}

func loadCorpus(t testing.TB, opt kbindex.ChunkOptions) corpus {
	t.Helper()
	dir := filepath.Join("testdata", "corpus")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := corpus{pieces: map[string][]kbindex.Piece{}}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := docread.Read(e.Name(), data)
		if err != nil {
			t.Fatalf("reading %s: %v", e.Name(), err)
		}
		c.pieces[e.Name()] = kbindex.Chunk(doc, opt)
		c.bytes += int64(len(data))
	}
	return c
}

func (c corpus) chunks() int {
	n := 0
	for _, p := range c.pieces {
		n += len(p)
	}
	return n
}

// embedder gives a text's vector; nil means keywords alone.
type embedder func(string) []float32

func simEmbed(s string) []float32 { return sim.Embed(s, simDims) }

func (c corpus) index(embed embedder) *kbindex.Index {
	ix := kbindex.New()
	for _, name := range slices.Sorted(maps.Keys(c.pieces)) {
		var entries []kbindex.Entry
		for i, p := range c.pieces[name] {
			e := kbindex.Entry{Ref: kbstore.ChunkRef{Store: "eval", File: name, Seq: i}, Text: p.Text}
			if embed != nil {
				e.Vector = embed(p.Text)
			}
			entries = append(entries, e)
		}
		ix.Add(entries)
	}
	return ix
}

// outcome is one question's result.
type outcome struct {
	q    question
	rank int     // 1-based rank of the first chunk of a relevant file; 0 if none in the results
	pass int     // 1-based rank of the first chunk holding the answer; 0 if none
	top  float64 // the best result's score; 0 when nothing was found
	best string  // the best result's file
}

func (c corpus) ask(ix *kbindex.Index, q question, embed embedder) outcome {
	query := kbindex.Query{Stores: []string{"eval"}, Text: q.Q, Limit: kbindex.MaxLimit}
	if embed != nil {
		query.Vector = embed(q.Q)
	}
	hits := ix.Search(query)
	o := outcome{q: q}
	if len(hits) > 0 {
		o.top, o.best = hits[0].Score, hits[0].Ref.File
	}
	for i, h := range hits {
		if o.rank == 0 && slices.Contains(q.Files, h.Ref.File) {
			o.rank = i + 1
		}
		if o.pass == 0 && slices.Contains(q.Files, h.Ref.File) && strings.Contains(c.pieces[h.Ref.File][h.Ref.Seq].Text, q.AnswerContains) {
			o.pass = i + 1
		}
	}
	return o
}

// score sums outcomes of one kind of question.
type score struct {
	n, hits5 int
	pass5    int // the answer's passage among the first five
	rr       float64
	under    int // negatives: best score under the threshold
	over     int // answerable: best score at or over the threshold
}

func (s *score) add(o outcome, threshold float64) {
	s.n++
	if len(o.q.Files) == 0 {
		if o.top < threshold {
			s.under++
		}
		return
	}
	if o.top >= threshold {
		s.over++
	}
	if o.rank >= 1 && o.rank <= 5 {
		s.hits5++
	}
	if o.pass >= 1 && o.pass <= 5 {
		s.pass5++
	}
	if o.rank > 0 {
		s.rr += 1 / float64(o.rank)
	}
}

func (s score) recall() float64  { return float64(s.hits5) / float64(s.n) }
func (s score) passage() float64 { return float64(s.pass5) / float64(s.n) }
func (s score) mrr() float64     { return s.rr / float64(s.n) }
func (s score) neg() float64     { return float64(s.under) / float64(s.n) }
func (s score) kept() float64    { return float64(s.over) / float64(s.n) }

// kinds lists the kinds of question in table order; "all" sums the
// positive kinds.
var kinds = []string{"fact", "table", "versioned", "german", "paraphrase", "all", "negative"}

// run asks every question and sums the outcomes by kind.
func (c corpus) run(ix *kbindex.Index, qs []question, embed embedder, threshold float64) (map[string]*score, []outcome) {
	by := map[string]*score{}
	for _, k := range kinds {
		by[k] = &score{}
	}
	var outs []outcome
	for _, q := range qs {
		o := c.ask(ix, q, embed)
		outs = append(outs, o)
		by[q.Kind].add(o, threshold)
		if q.Kind != "negative" {
			by["all"].add(o, threshold)
		}
	}
	return by, outs
}

// holds tells whether a chunk of a file answering q holds its answer.
func (c corpus) holds(q question) bool {
	for _, f := range q.Files {
		for _, p := range c.pieces[f] {
			if strings.Contains(p.Text, q.AnswerContains) {
				return true
			}
		}
	}
	return false
}
