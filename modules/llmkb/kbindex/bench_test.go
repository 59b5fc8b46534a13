package kbindex

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llmkb/docread"
)

// The synthetic corpus: a vocabulary of made-up words drawn with a Zipf
// distribution (s = 1.1: a few words everywhere, a long tail of rare
// ones), English function words between them as in prose, sentences of
// 6 to 24 words, chunks of 80 to 320 words (about 110 to 430 tokens),
// and 384-dim vectors drawn around 1,000 topic centres.
const (
	benchVocab = 60000
	benchDims  = 384
)

type corpus struct {
	vocab   []string
	zipf    *rand.Zipf
	rng     *rand.Rand
	centres [][]float32
}

func newCorpus(seed uint64) *corpus {
	rng := rand.New(rand.NewPCG(seed, 42))
	c := &corpus{rng: rng, zipf: rand.NewZipf(rng, 1.1, 2, benchVocab-1)}
	syll := []string{"ka", "ro", "tem", "lin", "da", "ve", "mor", "is", "pa", "shu", "qua", "ner", "ti", "bo", "sel", "gra", "un", "fe", "lo", "wit", "ing", "ed", "ment", "tion"}
	seen := map[string]bool{}
	for len(c.vocab) < benchVocab {
		n := 1 + rng.IntN(4)
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteString(syll[rng.IntN(len(syll))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			c.vocab = append(c.vocab, w)
		}
	}
	for i := 0; i < 1000; i++ {
		c.centres = append(c.centres, randVec(rng, benchDims))
	}
	return c
}

var function = []string{"the", "of", "and", "to", "in", "is", "for", "that", "with", "on", "as", "by", "are", "this", "be", "from", "or", "at"}

func (c *corpus) word() string { return c.vocab[c.zipf.Uint64()] }

func (c *corpus) text(words int) string {
	var b strings.Builder
	for n := 0; n < words; {
		sl := 6 + c.rng.IntN(19)
		for i := 0; i < sl && n < words; i++ {
			if i > 0 {
				b.WriteByte(' ')
			}
			if i%3 == 1 {
				b.WriteString(function[c.rng.IntN(len(function))])
			} else {
				w := c.word()
				if i == 0 {
					w = strings.ToUpper(w[:1]) + w[1:]
				}
				b.WriteString(w)
			}
			n++
		}
		b.WriteString(". ")
	}
	return b.String()
}

func (c *corpus) vector() []float32 {
	return perturb(c.rng, c.centres[c.rng.IntN(len(c.centres))], 0.8)
}

// entries makes n chunks of store in files of 20 chunks, from chunk from.
func (c *corpus) entries(store string, from, n int, vectors bool) []Entry {
	es := make([]Entry, n)
	for i := range es {
		k := from + i
		es[i] = Entry{Ref: ref(store, fmt.Sprintf("file-%07d", k/20), k%20), Text: c.text(80 + c.rng.IntN(241)),
			Attrs: map[string]any{"year": float64(2015 + k%10)}}
		if vectors {
			es[i].Vector = c.vector()
		}
	}
	return es
}

// build indexes n chunks in batches and logs the heap it holds.
func build(b *testing.B, n int, vectors bool) *Index {
	ix, _ := buildMeasured(b, n, vectors)
	return ix
}

// buildMeasured indexes n chunks and returns the heap held a chunk.
func buildMeasured(b *testing.B, n int, vectors bool) (*Index, float64) {
	c := newCorpus(1)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ix := New()
	const batch = 10000
	for i := 0; i < n; i += batch {
		ix.Add(c.entries("vs_bench", i, min(batch, n-i), vectors))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	st := ix.Stats()
	perChunk := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
	b.Logf("%d chunks (vectors %v): heap %.0f B/chunk, Stats.Bytes %.0f B/chunk, %d terms",
		n, vectors, perChunk, float64(st.Bytes)/float64(n), st.Terms)
	return ix, perChunk
}

// BenchmarkMemory reports the heap the index holds a chunk at 100k
// chunks (runtime.MemStats before and after, after a GC), with and
// without 384-dim vectors. Run it with -benchtime 1x.
func BenchmarkMemory(b *testing.B) {
	for _, vectors := range []bool{false, true} {
		b.Run(fmt.Sprintf("vectors=%v", vectors), func(b *testing.B) {
			var per float64
			for i := 0; i < b.N; i++ {
				var ix *Index
				ix, per = buildMeasured(b, 100000, vectors)
				runtime.KeepAlive(ix)
			}
			b.ReportMetric(per, "B/chunk")
		})
	}
}

// queries are 1 to 4 words drawn from the middle of the vocabulary's
// frequencies, and a vector near a topic.
func (c *corpus) queries(n int) []Query {
	qs := make([]Query, n)
	for i := range qs {
		var ws []string
		for k := 0; k < 1+c.rng.IntN(4); k++ {
			ws = append(ws, c.vocab[10+int(c.zipf.Uint64()%5000)])
		}
		qs[i] = Query{Stores: []string{"vs_bench"}, Text: strings.Join(ws, " "), Vector: c.vector(), Limit: 10}
	}
	return qs
}

func benchSizes() []int {
	sizes := []int{10000, 100000}
	if os.Getenv("KBINDEX_BENCH_1M") != "" {
		sizes = append(sizes, 1000000)
	}
	return sizes
}

// BenchmarkSearch: keywords alone and hybrid (384 dims) at 10k and 100k
// chunks, and 1M with KBINDEX_BENCH_1M=1; p50 and p99 in µs.
func BenchmarkSearch(b *testing.B) {
	for _, n := range benchSizes() {
		var ix *Index
		qs := newCorpus(2).queries(512)
		for _, mode := range []string{"keywords", "hybrid"} {
			b.Run(fmt.Sprintf("%s/%d", mode, n), func(b *testing.B) {
				if ix == nil {
					ix = build(b, n, true)
				}
				lat := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					q := qs[i%len(qs)]
					if mode == "keywords" {
						q.Vector = nil
					}
					t := time.Now()
					ix.Search(q)
					lat = append(lat, time.Since(t))
				}
				b.StopTimer()
				reportLatency(b, lat)
			})
		}
	}
}

func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkAdd indexes batches of 1,000 chunks (a large file) with
// vectors into a fresh index, in chunks/s.
func BenchmarkAdd(b *testing.B) {
	c := newCorpus(3)
	batches := make([][]Entry, 20)
	for i := range batches {
		batches[i] = c.entries("vs_add", i*1000, 1000, true)
	}
	ix := New()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%len(batches) == 0 {
			ix = New()
		}
		ix.Add(batches[i%len(batches)])
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "chunks/s")
}

// BenchmarkChunk cuts a 1 MB document of headings, paragraphs, lists and
// a table at OpenAI's auto sizes; MB/s of text.
func BenchmarkChunk(b *testing.B) {
	c := newCorpus(4)
	d := &docread.Document{Format: "markdown", Title: "Synthetic handbook"}
	size := 0
	for s := 0; size < 1<<20; s++ {
		blocks := []docread.Block{{Kind: docread.Heading, Level: 1 + s%3, Text: c.text(4)}}
		for p := 0; p < 3+s%4; p++ {
			blocks = append(blocks, docread.Block{Kind: docread.Paragraph, Text: c.text(40 + c.rng.IntN(200))})
		}
		if s%5 == 0 {
			for r := 0; r < 30; r++ {
				blocks = append(blocks, docread.Block{Kind: docread.TableRow, Text: fmt.Sprintf("%s | %d | %s", c.word(), r, c.text(5))})
			}
		}
		if s%3 == 0 {
			for r := 0; r < 5; r++ {
				blocks = append(blocks, docread.Block{Kind: docread.ListItem, Text: c.text(15)})
			}
		}
		for _, bl := range blocks {
			size += len(bl.Text)
		}
		d.Blocks = append(d.Blocks, blocks...)
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Chunk(d, ChunkOptions{})
	}
}
