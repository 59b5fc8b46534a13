package kbindex

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

func ref(store, file string, seq int) kbstore.ChunkRef {
	return kbstore.ChunkRef{Store: store, File: file, Seq: seq}
}

// policyIndex indexes the English and German sentences as chunks of a
// few files of store "vs_a", with attributes.
func policyIndex() *Index {
	ix := New()
	var es []Entry
	for i, s := range enSentences {
		file := fmt.Sprintf("file_en%d", i%4)
		es = append(es, Entry{Ref: ref("vs_a", file, i), Text: s, Attrs: map[string]any{"lang": "en", "year": float64(2020 + i%4), "public": i%2 == 0}})
	}
	for i, s := range deSentences {
		es = append(es, Entry{Ref: ref("vs_a", "file_de", i), Text: s, Attrs: map[string]any{"lang": "de", "year": float64(2024)}})
	}
	ix.Add(es)
	return ix
}

func top(hits []Hit) kbstore.ChunkRef {
	if len(hits) == 0 {
		return kbstore.ChunkRef{}
	}
	return hits[0].Ref
}

func TestSearchKeywordsStemsAndFolds(t *testing.T) {
	ix := policyIndex()
	for _, c := range []struct {
		query string
		want  kbstore.ChunkRef
	}{
		{"reimbursing hotels nightly limits", ref("vs_a", "file_en3", 3)}, // stems
		{"MINIBAR", ref("vs_a", "file_en1", 5)},                           // case
		{"frequent flyers' miles", ref("vs_a", "file_en2", 14)},           // plural, possessive
		{"Abrechnung der Reisekosten", ref("vs_a", "file_de", 3)},         // compound in the chunk
		{"Flug buchen Reiseportal", ref("vs_a", "file_de", 0)},            // German stems: Flüge, buchen
		{"uberNACHTUNGSkosten erstattet", ref("vs_a", "file_de", 2)},      // accents folded
		{"Reisewarnungen", ref("vs_a", "file_de", 9)},                     // German plural
	} {
		hits := ix.Search(Query{Stores: []string{"vs_a"}, Text: c.query})
		if top(hits) != c.want {
			t.Errorf("%q: first hit %v, want %v (hits %v)", c.query, top(hits), c.want, hits)
		}
		for _, h := range hits {
			if h.Score <= 0 || h.Score > 1 {
				t.Errorf("%q: score %v out of (0, 1]", c.query, h.Score)
			}
		}
	}
}

func TestSearchGermanCompoundParts(t *testing.T) {
	ix := New()
	ix.Add([]Entry{
		{Ref: ref("s", "a", 0), Text: "Die Abrechnung der Kosten einer Reise erfolgt im Portal."},
		{Ref: ref("s", "b", 0), Text: "Die Kantine ist montags bis freitags geöffnet."},
		{Ref: ref("s", "c", 0), Text: "Der Urlaub wird im Personalportal beantragt."},
	})
	hits := ix.Search(Query{Stores: []string{"s"}, Text: "Reisekostenabrechnung"})
	if top(hits) != ref("s", "a", 0) {
		t.Errorf("the compound's parts found %v, want the chunk on Abrechnung, Kosten, Reise", hits)
	}
}

func TestSearchOnlyTheStoresAsked(t *testing.T) {
	ix := New()
	secret := "The merger with Initech closes on 3 March; the code name is BLUEBIRD."
	ix.Add([]Entry{
		{Ref: ref("vs_other", "f_secret", 0), Text: secret, Vector: []float32{1, 0, 0}},
		{Ref: ref("vs_mine", "f_public", 0), Text: "The cafeteria opens at eight.", Vector: []float32{0, 1, 0}},
	})
	for _, q := range []Query{
		{Stores: []string{"vs_mine"}, Text: secret, Vector: []float32{1, 0, 0}},
		{Stores: []string{"vs_mine", "vs_mine"}, Text: "BLUEBIRD merger Initech"},
		{Stores: []string{"vs_mine", "vs_none"}, Vector: []float32{1, 0, 0}},
		{Stores: nil, Text: secret},
	} {
		for _, h := range ix.Search(q) {
			if h.Ref.Store != "vs_mine" {
				t.Errorf("query of %v got %v", q.Stores, h.Ref)
			}
		}
	}
	if hits := ix.Search(Query{Stores: []string{"vs_other"}, Text: "BLUEBIRD"}); top(hits) != ref("vs_other", "f_secret", 0) {
		t.Errorf("the owner's own search got %v", hits)
	}
}

func TestSearchScoresAndThreshold(t *testing.T) {
	ix := policyIndex()
	q := Query{Stores: []string{"vs_a"}, Text: "hotel receipts itemised"}
	hits := ix.Search(q)
	if len(hits) < 2 {
		t.Fatalf("hits %v", hits)
	}
	for i := 1; i < len(hits); i++ {
		if hits[i].Score > hits[i-1].Score {
			t.Errorf("hits not best first: %v", hits)
		}
	}
	q.ScoreThreshold = (hits[0].Score + hits[1].Score) / 2
	if got := ix.Search(q); len(got) != 1 || got[0] != hits[0] {
		t.Errorf("threshold %.3f: got %v, want only %v", q.ScoreThreshold, got, hits[0])
	}
	// A chunk with every query word once scores about 1 − 1/e.
	one := New()
	one.Add([]Entry{{Ref: ref("s", "f", 0), Text: "alpha beta gamma"}, {Ref: ref("s", "g", 0), Text: "delta epsilon zeta"}})
	if h := one.Search(Query{Stores: []string{"s"}, Text: "alpha gamma"}); len(h) != 1 || math.Abs(h[0].Score-0.63) > 0.1 {
		t.Errorf("every word once: %v, want a score near 0.63", h)
	}
	if h := one.Search(Query{Stores: []string{"s"}, Text: "alpha unknownword"}); len(h) != 1 || h[0].Score > 0.5 {
		t.Errorf("half the words: %v, want a score under 0.5", h)
	}
}

func TestSearchOnePerFileAndLimit(t *testing.T) {
	ix := New()
	var es []Entry
	for f := 0; f < 5; f++ {
		for s := 0; s < 20; s++ {
			es = append(es, Entry{Ref: ref("s", fmt.Sprintf("f%d", f), s), Text: fmt.Sprintf("quarterly report section %d of file %d on revenue", s, f)})
		}
	}
	ix.Add(es)
	hits := ix.Search(Query{Stores: []string{"s"}, Text: "revenue report", OnePerFile: true, Limit: 50})
	if len(hits) != 5 {
		t.Errorf("OnePerFile gave %d hits, want one for each of 5 files: %v", len(hits), hits)
	}
	seen := map[string]bool{}
	for _, h := range hits {
		if seen[h.Ref.File] {
			t.Errorf("file %s twice", h.Ref.File)
		}
		seen[h.Ref.File] = true
	}
	if n := len(ix.Search(Query{Stores: []string{"s"}, Text: "revenue"})); n != DefaultLimit {
		t.Errorf("default limit: %d hits", n)
	}
	if n := len(ix.Search(Query{Stores: []string{"s"}, Text: "revenue", Limit: 500})); n != MaxLimit {
		t.Errorf("limit 500: %d hits, want %d", n, MaxLimit)
	}
}

func TestRemoveFileAndStore(t *testing.T) {
	ix := New()
	var es []Entry
	for f := 0; f < 40; f++ {
		for s := 0; s < 100; s++ {
			es = append(es, Entry{Ref: ref("s", fmt.Sprintf("f%02d", f), s), Text: fmt.Sprintf("chunk %d of file%02d about topic%d", s, f, s%7), Vector: []float32{float32(f), 1, float32(s)}})
		}
	}
	ix.Add(es)
	ix.Add([]Entry{{Ref: ref("t", "x", 0), Text: "topic3 elsewhere"}})
	for f := 0; f < 40; f += 2 { // half the files: compaction runs
		ix.RemoveFile("s", fmt.Sprintf("f%02d", f))
	}
	st := ix.Stats()
	if st.Chunks != 2001 || st.Files != 21 || st.Stores != 2 {
		t.Errorf("stats after removing 20 files: %+v", st)
	}
	hits := ix.Search(Query{Stores: []string{"s"}, Text: "topic3", Limit: 50, Vector: []float32{10, 1, 3}})
	if len(hits) == 0 {
		t.Fatal("nothing left")
	}
	for _, h := range hits {
		var f int
		fmt.Sscanf(h.Ref.File, "f%d", &f)
		if f%2 == 0 {
			t.Errorf("hit %v of a removed file", h.Ref)
		}
	}
	if hits := ix.Search(Query{Stores: []string{"s"}, Text: "file05", Limit: 50}); len(hits) != 50 || hits[0].Ref.File != "f05" {
		t.Errorf("file05 after compaction: %d hits, first %v", len(hits), top(hits))
	}
	ix.RemoveStore("s")
	if hits := ix.Search(Query{Stores: []string{"s", "t"}, Text: "topic3"}); len(hits) != 1 || hits[0].Ref.Store != "t" {
		t.Errorf("after RemoveStore: %v", hits)
	}
	for f := 0; f < 1; f++ {
		ix.RemoveFile("t", "x")
	}
	if st := ix.Stats(); st.Chunks != 0 {
		t.Errorf("stats after removing everything: %+v", st)
	}
}

func TestSearchWithFilter(t *testing.T) {
	ix := policyIndex()
	f, err := ParseFilter([]byte(`{"type":"and","filters":[{"type":"eq","key":"lang","value":"en"},{"type":"gte","key":"year","value":2022}]}`))
	if err != nil {
		t.Fatal(err)
	}
	hits := ix.Search(Query{Stores: []string{"vs_a"}, Text: "flights hotel claims employees", Filter: f, Limit: 50})
	if len(hits) == 0 {
		t.Fatal("no hits")
	}
	for _, h := range hits {
		if h.Ref.File != "file_en2" && h.Ref.File != "file_en3" {
			t.Errorf("hit %v fails the filter", h.Ref)
		}
	}
	ix.SetAttributes("vs_a", "file_en2", map[string]any{"lang": "fr"})
	for _, h := range ix.Search(Query{Stores: []string{"vs_a"}, Text: "flights hotel claims employees", Filter: f, Limit: 50}) {
		if h.Ref.File != "file_en3" {
			t.Errorf("after SetAttributes, hit %v fails the filter", h.Ref)
		}
	}
}

func TestVectorSearchAndHybrid(t *testing.T) {
	ix := New()
	rng := rand.New(rand.NewPCG(1, 2))
	vecs := make([][]float32, 200)
	var es []Entry
	for i := range vecs {
		vecs[i] = randVec(rng, 32)
		es = append(es, Entry{Ref: ref("s", "f", i), Text: fmt.Sprintf("passage %d", i), Vector: vecs[i]})
	}
	ix.Add(es)
	hits := ix.Search(Query{Stores: []string{"s"}, Vector: vecs[42]})
	if top(hits) != ref("s", "f", 42) || math.Abs(hits[0].Score-1) > 0.02 {
		t.Errorf("the chunk's own vector: %v, want seq 42 at about 1", hits[:min(3, len(hits))])
	}
	hy := ix.Search(Query{Stores: []string{"s"}, Vector: vecs[42], Text: "passage 42"})
	if top(hy) != ref("s", "f", 42) || hy[0].Score > 1 || hy[0].Score < 0.5 {
		t.Errorf("hybrid: %v", hy[:min(3, len(hy))])
	}
	// A vector of another length is ignored, keywords still work.
	if h := ix.Search(Query{Stores: []string{"s"}, Vector: []float32{1, 2}, Text: "passage 7"}); top(h) != ref("s", "f", 7) {
		t.Errorf("wrong-length vector: %v", h)
	}
}

func randVec(rng *rand.Rand, dims int) []float32 {
	v := make([]float32, dims)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// TestQuantisedRecall measures recall@10 of the int8 scan against exact
// float cosine on clustered vectors of 384 dims (embeddings cluster: a
// uniform random set is the worst case and no embedder's output).
func TestQuantisedRecall(t *testing.T) {
	const n, dims, queries = 10000, 384, 60
	rng := rand.New(rand.NewPCG(3, 4))
	vecs := clusteredVectors(rng, n, dims, 200)
	ix := New()
	es := make([]Entry, n)
	for i := range es {
		es[i] = Entry{Ref: ref("s", "f", i), Vector: vecs[i]}
	}
	ix.Add(es)
	found, total := 0, 0
	for qi := 0; qi < queries; qi++ {
		q := perturb(rng, vecs[rng.IntN(n)], 0.5)
		exact := exactTop(vecs, q, 10)
		got := map[int]bool{}
		for _, h := range ix.Search(Query{Stores: []string{"s"}, Vector: q, Limit: 10}) {
			got[h.Ref.Seq] = true
		}
		for _, e := range exact {
			if got[e] {
				found++
			}
			total++
		}
	}
	recall := float64(found) / float64(total)
	t.Logf("int8 recall@10 against exact float cosine: %.3f (%d queries, %d vectors of %d dims)", recall, queries, n, dims)
	if recall < 0.95 {
		t.Errorf("recall@10 %.3f, want 0.95 or more", recall)
	}
}

// clusteredVectors draws n vectors around k centres.
func clusteredVectors(rng *rand.Rand, n, dims, k int) [][]float32 {
	centres := make([][]float32, k)
	for i := range centres {
		centres[i] = randVec(rng, dims)
	}
	out := make([][]float32, n)
	for i := range out {
		out[i] = perturb(rng, centres[rng.IntN(k)], 0.8)
	}
	return out
}

func perturb(rng *rand.Rand, v []float32, noise float64) []float32 {
	out := make([]float32, len(v))
	for i := range v {
		out[i] = v[i] + float32(noise*rng.NormFloat64())
	}
	return out
}

func exactTop(vecs [][]float32, q []float32, k int) []int {
	t := newTopK(k)
	for i, v := range vecs {
		t.push(cand{doc: uint32(i), score: float32(cos(v, q))})
	}
	var out []int
	for _, c := range t.items {
		out = append(out, int(c.doc))
	}
	return out
}

func cos(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

func TestConcurrentAddSearchRemove(t *testing.T) {
	ix := New()
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for f := 0; f < 30; f++ {
				file := fmt.Sprintf("w%d-f%d", w, f)
				var es []Entry
				for s := 0; s < 20; s++ {
					es = append(es, Entry{Ref: ref(fmt.Sprintf("s%d", f%3), file, s), Text: enSentences[(f+s)%len(enSentences)], Vector: randVec(rng, 8), Attrs: map[string]any{"w": float64(w)}})
				}
				ix.Add(es)
				if f%3 == 0 {
					ix.RemoveFile(fmt.Sprintf("s%d", f%3), file)
				}
				ix.SetAttributes("s1", file, map[string]any{"w": float64(w + 1)})
			}
		}()
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 10))
			filter := &Filter{Type: "gte", Key: "w", Value: float64(1)}
			for i := 0; i < 200; i++ {
				hits := ix.Search(Query{Stores: []string{"s0", "s1", "s2"}, Text: "hotel receipts", Vector: randVec(rng, 8), Filter: filter, OnePerFile: i%2 == 0})
				for _, h := range hits {
					if h.Score < 0 || h.Score > 1 {
						t.Errorf("score %v", h.Score)
					}
				}
				_ = ix.Stats()
			}
		}()
	}
	wg.Wait()
	if st := ix.Stats(); st.Chunks != 4*20*20 {
		t.Errorf("chunks %d, want %d", st.Chunks, 4*20*20)
	}
}

func TestVectorCache(t *testing.T) {
	c := NewVectorCache(4 << 20)
	defer c.Close()
	v := []float32{1, 2, 3}
	c.Put("embed", "hello", v)
	c.wait()
	v[0] = 9
	got, ok := c.Get("embed", "hello")
	if !ok || got[0] != 1 {
		t.Errorf("Get = %v, %v; want the copy put", got, ok)
	}
	if _, ok := c.Get("other-model", "hello"); ok {
		t.Error("another model's vector was returned")
	}
	var nilCache *VectorCache
	nilCache.Put("m", "t", v)
	if _, ok := nilCache.Get("m", "t"); ok {
		t.Error("a nil cache returned a vector")
	}
}

// TestIndexKeepsNoText: the index holds terms, not the chunks' text
// (which the store has): a term that is a slice of an 8 MB text must not
// keep the text alive.
func TestIndexKeepsNoText(t *testing.T) {
	ix := New()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	func() {
		text := strings.Repeat("zebra ", 8<<20/6) + fmt.Sprint(rand.Int()) // built at run time, on the heap
		ix.Add([]Entry{{Ref: ref("s", "file-with-a-long-name", 0), Text: text}})
	}()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if held := int64(after.HeapAlloc) - int64(before.HeapAlloc); held > 2<<20 {
		t.Errorf("the index holds %d bytes after indexing an 8 MB text: it keeps the text", held)
	}
	if top(ix.Search(Query{Stores: []string{"s"}, Text: "zebras"})) != ref("s", "file-with-a-long-name", 0) {
		t.Error("the chunk is not found")
	}
}
