//go:build !race

package kbindex

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestPrefilterRecall measures recall@10 of the int8 scan and of the
// sign-prefiltered scan (what stores of 50k vectors and more use)
// against exact float cosine, on 100k clustered vectors of 384 dims, with
// and without a direction they all share (as real embeddings do: any two
// have a cosine of 0.7). Too slow under -race.
func TestPrefilterRecall(t *testing.T) {
	for _, shared := range []float32{0, 2} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) { prefilterRecall(t, shared) })
	}
}

func prefilterRecall(t *testing.T, shared float32) {
	const n, dims, queries = 100000, 384, 40
	rng := rand.New(rand.NewPCG(5, 6))
	vecs := clusteredVectors(rng, n, dims, 1000)
	off := randVec(rng, dims)
	for _, v := range vecs {
		for i := range v {
			v[i] += shared * off[i]
		}
	}
	t.Logf("cosine of two vectors: %.2f", cos(vecs[0], vecs[1]))
	ix := New()
	es := make([]Entry, n)
	for i := range es {
		es[i] = Entry{Ref: ref("s", "f", i), Vector: vecs[i]}
	}
	ix.Add(es)
	for _, mode := range []struct {
		name string
		from int
		want float64
	}{{"int8 scan", n + 1, 0.95}, {"signs then int8", 0, 0.95}} {
		ix.prefilterFrom = mode.from
		qrng := rand.New(rand.NewPCG(8, 9))
		found, total := 0, 0
		for qi := 0; qi < queries; qi++ {
			q := perturb(qrng, vecs[qrng.IntN(n)], 0.5)
			got := map[int]bool{}
			for _, h := range ix.Search(Query{Stores: []string{"s"}, Vector: q, Limit: 10}) {
				got[h.Ref.Seq] = true
			}
			for _, e := range exactTop(vecs, q, 10) {
				if got[e] {
					found++
				}
				total++
			}
		}
		recall := float64(found) / float64(total)
		t.Logf("%s: recall@10 against exact float cosine %.3f (%d queries, %d vectors of %d dims)", mode.name, recall, queries, n, dims)
		if recall < mode.want {
			t.Errorf("%s: recall@10 %.3f, want %.2f or more", mode.name, recall, mode.want)
		}
	}
}

// TestVectorCacheKeepsRepeatedQueries: queries asked again and again stay
// while a stream of one-off queries passes through a cache too small
// for all of them (TinyLFU's admission). Not under -race, where the
// sync.Pool that ristretto counts accesses in drops items on purpose.
func TestVectorCacheKeepsRepeatedQueries(t *testing.T) {
	c := NewVectorCache(1 << 20) // about 600 vectors of 384 floats
	defer c.Close()
	v := make([]float32, 384)
	hot := func(i int) string { return fmt.Sprintf("what is the travel policy %d", i) }
	for round := 0; round < 20; round++ {
		for i := 0; i < 100; i++ {
			if _, ok := c.Get("m", hot(i)); !ok {
				c.Put("m", hot(i), v)
			}
		}
		c.wait()
	}
	for i := 0; i < 20000; i++ {
		key := fmt.Sprintf("one-off question %d", i)
		c.Get("m", key)
		c.Put("m", key, v)
	}
	c.wait()
	kept := 0
	for i := 0; i < 100; i++ {
		if _, ok := c.Get("m", hot(i)); ok {
			kept++
		}
	}
	if kept < 80 {
		t.Errorf("%d of 100 repeated queries kept after 20000 one-offs, want 80 or more", kept)
	}
	t.Logf("%d of 100 repeated queries kept after 20000 one-offs", kept)
}
