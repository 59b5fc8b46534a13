//go:build !race

package kbindex

import (
	"math/rand/v2"
	"testing"
)

// TestPrefilterRecall measures recall@10 of the sign-prefiltered scan
// (what stores of 50k vectors and more use) against exact float cosine,
// on 100k clustered vectors of 384 dims. Too slow under -race.
func TestPrefilterRecall(t *testing.T) {
	const n, dims, queries = 100000, 384, 40
	rng := rand.New(rand.NewPCG(5, 6))
	vecs := clusteredVectors(rng, n, dims, 1000)
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
	}{{"int8 scan", n + 1, 0.95}, {"signs then int8", 0, 0.9}} {
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
