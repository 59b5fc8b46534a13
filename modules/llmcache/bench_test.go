package llmcache

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/modules/openai"
)

// vocabulary for generated questions: 4000 made-up words.
var vocabulary = func() []string {
	rng := rand.New(rand.NewPCG(1, 2))
	const letters = "abcdefghijklmnopqrstuvwxyz"
	words := make([]string, 4000)
	for i := range words {
		b := make([]byte, 4+rng.IntN(6))
		for j := range b {
			b[j] = letters[rng.IntN(len(letters))]
		}
		words[i] = string(b)
	}
	return words
}()

func question(rng *rand.Rand) string {
	n := 5 + rng.IntN(6)
	w := make([]string, n)
	for i := range w {
		w[i] = vocabulary[rng.IntN(len(vocabulary))]
	}
	return "How does " + strings.Join(w, " ") + " work?"
}

// filled returns a store with n entries in one bucket (the worst case: one
// tenant, one model, one context) and the memory they take.
func filled(tb testing.TB, n int) (*entries, float64) {
	s, perEntry, _ := filledObjects(tb, n)
	return s, perEntry
}

// filledObjects is filled, with the heap objects each entry takes too:
// what a garbage collection visits.
func filledObjects(tb testing.TB, n int) (*entries, float64, float64) {
	s, err := newEntries(max(1<<30, int64(n)<<11)) // room for n: what the store counts for one is under 2 KB
	if err != nil {
		tb.Fatal(err)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range n {
		q := question(rng)
		// Each its own answer, as answers parsed from engines are.
		ans := &answer{Chat: true, Choices: []answerChoice{{Content: strings.Repeat("an answer of some length ", 8) + fmt.Sprint(i), FinishReason: "stop"}}}
		s.putLocal(&entry{key: fmt.Sprintf("%064x", i), bucket: "b", question: q, an: analyze(q), ans: ans, expires: time.Now().Add(time.Hour)})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	return s, float64(after.HeapAlloc-before.HeapAlloc) / float64(n), float64(after.HeapObjects-before.HeapObjects) / float64(n)
}

// benchLookup measures a semantic lookup that misses (every question is
// new, as with unique prompts), the question's analysis included: what
// the miss path costs a request.
func benchLookup(b *testing.B, n int) {
	s, perEntry := filled(b, n)
	defer s.Destruct()
	rng := rand.New(rand.NewPCG(5, 6))
	qs := make([]string, 4096)
	for i := range qs {
		qs[i] = question(rng)
	}
	times := make([]time.Duration, 0, 1<<16)
	hits := 0
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		q := &query{bucket: "b", question: qs[i%len(qs)]}
		q.an = analyze(q.question)
		if e, _ := s.nearest(q, 0.8); e != nil {
			hits++
		}
		times = append(times, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Nanoseconds())/1000, "p50-µs")
	b.ReportMetric(float64(times[len(times)*99/100].Nanoseconds())/1000, "p99-µs")
	b.ReportMetric(perEntry, "bytes/entry")
	b.ReportMetric(float64(hits)/float64(len(times)), "hits/op")
}

// BenchmarkSemanticMiss measures a lookup of a new question in a bucket
// of 10k, 100k and 1M entries (one tenant, one model, one context: the
// worst case), with the built-in matcher.
func BenchmarkSemanticMiss(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) { benchLookup(b, n) })
	}
}

func BenchmarkExactKey(b *testing.B) {
	body := []byte(`{"model":"sim-chat","temperature":0,"max_tokens":64,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write a short poem about the sea and the mountains, in four lines."}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := exactKey("p:a", "sim-chat", "chat/completions", body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMissPath measures what llm_cache adds to a request that
// misses, without HTTP: the request's keys and question analysis, the
// exact and semantic lookups in a store of 10k and 100k questions, and
// keeping the answer. The store is full, so that each answer kept evicts
// another, as in a cache that has run a while; with admission, as
// llm_cache does by default, a question asked once is not kept over the
// entry it would evict (see admits).
func BenchmarkMissPath(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) { benchMissPath(b, n, admitAll) })
		b.Run(fmt.Sprintf("%dk/admission", n/1000), func(b *testing.B) { benchMissPath(b, n, admitFrequency) })
	}
}

func benchMissPath(b *testing.B, n int, admission string) {
	s, _ := filled(b, n)
	defer s.Destruct()
	s.maxBytes = s.bytes
	c := &Cache{Semantic: &Semantic{Threshold: defaultThreshold}, store: s, TTL: caddy.Duration(time.Hour), Admission: admission}
	ans := &answer{Chat: true, Choices: []answerChoice{{Content: "an answer of some length", FinishReason: "stop"}}}
	if admission != admitAll { // each stored question was asked once
		for _, e := range s.ring {
			if e != "" {
				s.seen(blobID(e), setID(blobBucket(e), blobSetSum(e)))
			}
		}
	}
	rng := rand.New(rand.NewPCG(7, 8))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		body := fmt.Appendf(nil, `{"model":"bench","stream":false,"max_tokens":20,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":%q}]}`,
			fmt.Sprintf("%s for ticket %d", question(rng), i))
		req, err := openai.Parse(openai.ChatCompletions, body)
		if err != nil {
			b.Fatal(err)
		}
		q, err := newQuery("p:bench", "bench", req, true, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, _, hit := c.lookup(q); hit {
			b.Fatal("a new question hit")
		}
		if admission != admitAll && !s.admits(q.id, q.set, time.Now().UnixNano()) {
			continue
		}
		s.put(&entry{key: q.key, bucket: q.bucket, question: q.question, an: q.an, ans: ans,
			expires: time.Now().Add(time.Hour), scope: q.scope, model: q.model})
	}
	if s.count > n+1 {
		b.Fatalf("the store grew to %d entries", s.count)
	}
}

// BenchmarkGCMark measures what a store of 100k questions costs each
// garbage collection: the collector marks every pointer the entries hold,
// and a gateway that misses the cache collects often.
func BenchmarkGCMark(b *testing.B) {
	s, _, objects := filledObjects(b, 100_000)
	defer s.Destruct()
	runtime.GC()
	gcCPU := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(gcCPU)
	before := gcCPU[0].Value.Float64()
	for b.Loop() {
		runtime.GC()
	}
	metrics.Read(gcCPU)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100_000, "ns/entry")
	// The collector's CPU, all its workers together: what a gateway pays.
	b.ReportMetric((gcCPU[0].Value.Float64()-before)*1e9/float64(b.N)/100_000, "gc-cpu-ns/entry")
	b.ReportMetric(objects, "objects/entry")
}

// BenchmarkParseWhole measures reading a whole answer to keep it, with
// the usage the router already read (as the cache does) and without.
func BenchmarkParseWhole(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-8f2d1c","object":"chat.completion","created":1796220850,"model":"bench","system_fingerprint":"fp_sim","choices":[{"index":0,"message":{"role":"assistant","content":"To reset your router, hold the reset button for ten seconds, wait for the lights to blink, then sign in again with the default password printed on its label."},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":31,"completion_tokens":36,"total_tokens":67}}`)
	u := openai.Usage{PromptTokens: 31, CompletionTokens: 36, TotalTokens: 67}
	b.Run("usage-known", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := parseWhole(body, &u); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("usage-found", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := parseWhole(body, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Valid-alone", func(b *testing.B) {
		for b.Loop() {
			if !json.Valid(body) {
				b.Fatal("invalid")
			}
		}
	})
}

// BenchmarkAnalyze measures analysing a question, over the project's
// paraphrase and near-miss sets (real phrasings, of every length).
func BenchmarkAnalyze(b *testing.B) {
	var qs []string
	for _, q := range projectQuestions(b) {
		if len(q) > 12 {
			qs = append(qs, q)
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = analyze(qs[i%len(qs)])
	}
}
