package llmcache

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

const dims = 384 // as small sentence-embedding models (MiniLM, bge-small)

func randomVec(rng *rand.Rand) []float32 {
	v := make([]float32, dims)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return normalize(v)
}

// near is v moved by noise of the given size, as a paraphrase's
// embedding is near its question's.
func near(rng *rand.Rand, v []float32, noise float64) []float32 {
	w := slices.Clone(v)
	for i := range w {
		w[i] += float32(rng.NormFloat64() * noise / 20) // |noise vector| ≈ noise
	}
	return normalize(w)
}

func vecEntry(i int, bucket string, v []float32) *entry {
	return &entry{key: fmt.Sprint(i), bucket: bucket, vec: quantize(v), expires: time.Now().Add(time.Hour)}
}

// TestANNFindsNearDuplicates checks that the index finds, among its
// candidates, the stored vector a query was moved a little from (cosine
// about 0.96), among many random ones, and never returns a removed entry.
func TestANNFindsNearDuplicates(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	x := newANN()
	const n = 5000
	vecs := make([][]float32, n)
	es := make([]*entry, n)
	for i := range n {
		vecs[i] = randomVec(rng)
		es[i] = vecEntry(i, "b", vecs[i])
		x.add(uint32(i), es[i].vec)
	}
	found := func(i int) bool {
		res := x.search(quantize(near(rng, vecs[i], 0.3)), annEfFind)
		return slices.ContainsFunc(res, func(r scored) bool { return x.nodes[r.id].live && x.nodes[r.id].slot == uint32(i) })
	}
	missed := 0
	for i := range n {
		if !found(i) {
			missed++
		}
	}
	// Approximate: allow one in a thousand (none are missed today).
	if missed > n/1000 {
		t.Errorf("%d of %d near-duplicates not found", missed, n)
	}
	// Remove every other entry: the rest are still found, the removed
	// never are.
	for i := 0; i < n; i += 2 {
		x.remove(uint32(i))
	}
	if x.len() != n/2 {
		t.Fatalf("after removing half: %d entries, want %d", x.len(), n/2)
	}
	missed = 0
	for i := range n {
		res := x.search(quantize(vecs[i]), annEfFind)
		for _, r := range res {
			if node := x.nodes[r.id]; !node.live || node.slot%2 == 0 {
				t.Fatalf("search returned a removed entry")
			}
		}
		if i%2 == 1 && !found(i) {
			missed++
		}
	}
	if missed > n/2/1000 {
		t.Errorf("after removing half: %d of %d near-duplicates not found", missed, n/2)
	}
	// Freed slots are reused, and the index empties.
	for i := 0; i < n; i += 2 {
		x.add(uint32(i), es[i].vec)
	}
	if len(x.nodes) != n {
		t.Errorf("after re-adding: %d slots, want %d", len(x.nodes), n)
	}
	for i := range es {
		x.remove(uint32(i))
	}
	if x.len() != 0 || x.top != -1 || len(x.search(quantize(vecs[0]), 8)) != 0 {
		t.Errorf("an emptied index still holds %d entries (top %d)", x.len(), x.top)
	}
}

// TestANNStoreScopingAndPurge checks the store's use of the index: a
// bucket's lookup never sees another bucket's entries, and purges and
// evictions take entries out of the index.
func TestANNStoreScopingAndPurge(t *testing.T) {
	s, err := newEntries(1 << 20) // 1 MiB: the entries below do not all fit
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destruct()
	rng := rand.New(rand.NewPCG(2, 2))
	v := randomVec(rng)
	put := func(key, bucket, model, question string, v []float32) {
		s.putLocal(&entry{key: key, bucket: bucket, question: question, an: analyze(question), vec: quantize(v),
			ans: &answer{Chat: true, Choices: []answerChoice{{Content: "yes"}}}, expires: time.Now().Add(time.Hour), model: model, scope: "p"})
	}
	put("a", "tenant-a", "m1", "what is the capital of france", v)
	q := &query{bucket: "tenant-b", question: "what is the capital of france", an: analyze("what is the capital of france"), vec: quantize(v)}
	if e, _ := s.nearest(q, 0.9); e != nil {
		t.Fatalf("tenant-b found tenant-a's entry")
	}
	q.bucket = "tenant-a"
	if e, _ := s.nearest(q, 0.9); e == nil || e.key != "a" {
		t.Fatalf("tenant-a did not find its own entry")
	}
	// The verifier has the last word: a near vector for another number
	// is refused.
	q2 := &query{bucket: "tenant-a", question: "what is the capital of france in 1900", an: analyze("what is the capital of france in 1900"), vec: quantize(v)}
	if e, _ := s.nearest(q2, 0.9); e != nil {
		t.Errorf("a question with another number was answered from %q", e.question)
	}
	if n := s.Purge("m1", ""); n != 1 {
		t.Errorf("purge: %d, want 1", n)
	}
	if len(s.ann) != 0 {
		t.Errorf("after a purge the index still has %d buckets", len(s.ann))
	}
	// Fill past max_memory: evictions keep the index the size of the store.
	text := strings.Repeat("x", 2000)
	for i := range 2000 {
		put(fmt.Sprint("k", i), "tenant-a", "m1", fmt.Sprint("question number ", i, text), randomVec(rng))
	}
	s.mu.RLock()
	idx, count := s.ann["tenant-a"].len(), s.count
	s.mu.RUnlock()
	if idx != count || count >= 2000 || count == 0 {
		t.Errorf("after evictions: %d in the index, %d in the store (of 2000 put)", idx, count)
	}
}

// filledVectors returns a store with n entries with random 384-dim
// vectors in one bucket (one tenant, one model, one context: the worst
// case), and the memory an entry takes (its blob, with its vector, and
// its index links, without question or answer).
func filledVectors(tb testing.TB, n int) (*entries, float64) {
	s, err := newEntries(1 << 40)
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	ans := &answer{Chat: true}
	an := analyze("how does it work")
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		s.addLocked(&entry{key: fmt.Sprint(i), bucket: "b", an: an, vec: quantize(randomVec(rng)), ans: ans, expires: time.Now().Add(time.Hour)})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	return s, float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

var vectorStores = map[int]struct {
	s        *entries
	perEntry float64
}{}

// BenchmarkANNMiss measures a semantic lookup of a new question with a
// catalog embedder, in a bucket of 10k, 100k and 1M entries with random
// 384-dim vectors (random vectors are the hard case for a graph index:
// real embeddings cluster). The embedding call is not included. 1M
// takes minutes to build (13 on a shared 2-core machine) and 3.6 GB at
// its peak.
func BenchmarkANNMiss(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			st, ok := vectorStores[n]
			if !ok {
				st.s, st.perEntry = filledVectors(b, n)
				vectorStores[n] = st
			}
			rng := rand.New(rand.NewPCG(5, 6))
			qs := make([][]int8, 1024)
			for i := range qs {
				qs[i] = quantize(randomVec(rng))
			}
			an := analyze("how does it work")
			times := make([]time.Duration, 0, 1<<16)
			hits := 0
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				if e, _ := st.s.nearest(&query{bucket: "b", an: an, vec: qs[i%len(qs)]}, 0.9); e != nil {
					hits++
				}
				times = append(times, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Nanoseconds())/1000, "p50-µs")
			b.ReportMetric(float64(times[len(times)*99/100].Nanoseconds())/1000, "p99-µs")
			b.ReportMetric(st.perEntry, "bytes/entry")
			b.ReportMetric(float64(hits)/float64(len(times)), "hits/op")
		})
	}
}
