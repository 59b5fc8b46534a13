package llmcache

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/llmgw/llmgw/modules/openai"
)

// TestStoreEvictsByClock fills a store past its size: it stays within
// it, an entry asked for between puts survives, the built-in matcher's
// index holds exactly the entries kept, and expired entries leave.
// postedLocked counts the store's entries found under every one of their
// keys in the built-in matcher's index; s.mu must be held.
func postedLocked(s *entries) int {
	n := 0
	for slot, b := range s.ring {
		if b == "" || !blobAnalysed(b) {
			continue
		}
		e := viewOf(b)
		all := true
		for _, k := range e.appendSetKeys(nil) {
			if !slices.Contains(slices.Collect(s.sets.all(k)), uint32(slot)) {
				all = false
			}
		}
		if all {
			n++
		}
	}
	return n
}

func TestStoreEvictsByClock(t *testing.T) {
	s, err := newEntries(200_000)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destruct()
	mk := func(key, q string, ttl time.Duration) *entry {
		return &entry{key: key, bucket: "b", question: q, an: analyze(q), expires: time.Now().Add(ttl),
			ans: &answer{Chat: true, Choices: []answerChoice{{Content: strings.Repeat("an answer ", 50), FinishReason: "stop"}}}}
	}
	if !s.putLocal(mk("hot", "what is the capital of peru", time.Hour)) {
		t.Fatal("the first entry was refused")
	}
	for i := range 2000 {
		s.putLocal(mk(fmt.Sprint("k", i), fmt.Sprintf("how do I reset ticket %d", i), time.Hour))
		if _, ok := s.get("hot"); !ok {
			t.Fatalf("the entry asked for after every put was evicted after %d puts", i+1)
		}
	}
	s.mu.RLock()
	count, bytes, keys := s.count, s.bytes, s.byKey.n
	posted := postedLocked(s)
	s.mu.RUnlock()
	if bytes > 200_000 || count != keys || posted != count || count < 50 {
		t.Errorf("after 2001 puts: %d entries, %d bytes (max 200000), %d keys, %d in the index", count, bytes, keys, posted)
	}
	// The same key again replaces its entry.
	s.putLocal(mk("hot", "what is the capital of peru", time.Hour))
	if s.count != count {
		t.Errorf("putting a key again changed the count from %d to %d", count, s.count)
	}
	// Expired entries leave as the hand passes, without pressure.
	short, err := newEntries(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		short.putLocal(mk(fmt.Sprint("e", i), fmt.Sprintf("question %d", i), 20*time.Millisecond))
	}
	time.Sleep(30 * time.Millisecond)
	for i := range 100 {
		short.putLocal(mk(fmt.Sprint("f", i), fmt.Sprintf("other %d", i), time.Hour))
	}
	if short.count > 110 {
		t.Errorf("%d entries left of 100 expired and 100 live", short.count)
	}
	if _, ok := short.get("e1"); ok {
		t.Error("an expired entry was served")
	}
	// An entry larger than the whole store is refused.
	tiny, _ := newEntries(100)
	if tiny.putLocal(mk("x", "anything at all", time.Hour)) {
		t.Error("an entry larger than max_memory was kept")
	}
}

// TestFreezeKeepsWhatWasPut stores entries packed into few objects: what
// a lookup and a hit read back is what was put (long questions and
// answers of several choices with tool calls too), and the request's own
// analysis is left as it was.
func TestFreezeKeepsWhatWasPut(t *testing.T) {
	s, err := newEntries(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destruct()
	cases := []struct{ q string }{
		{"What is the capital of Peru?"},
		{"Convert 100 USD to EUR at today's rate, then compare it with the rate from 2019 for Alice, Bob, Carol, Dave, Erin and Frank in Berlin, Paris and Tokyo"},
		{"Why?"},
	}
	for i, c := range cases {
		an := analyze(c.q)
		want := *an
		want.words, want.numbers, want.names = slices.Clone(an.words), slices.Clone(an.numbers), slices.Clone(an.names)
		ans := &answer{Chat: true, Model: "m", Usage: openai.Usage{PromptTokens: 12 + int64(i), CompletionTokens: 300, TotalTokens: 312 + int64(i)}, Choices: []answerChoice{
			{Index: 0, Content: fmt.Sprint("first answer ", i), FinishReason: "stop"},
			{Index: 1, ToolCalls: []toolCall{{ID: "call_1", Name: "lookup", Arguments: `{"city":"Lima"}`}}, FinishReason: "tool_calls"},
		}}
		if i == 0 {
			ans.Choices = ans.Choices[:1]
		}
		wantAns := *ans
		wantAns.Choices = slices.Clone(ans.Choices)
		key := fmt.Sprint("key-", i)
		if !s.putLocal(&entry{key: key, bucket: "b", question: c.q, an: an, ans: ans, expires: time.Now().Add(time.Hour)}) {
			t.Fatalf("%q was refused", c.q)
		}
		got, ok := s.get(key)
		if !ok {
			t.Fatalf("%q is not found by its key", c.q)
		}
		if got.key != key || got.question != c.q || !cmp.Equal(*got.answer(), wantAns, ignoreInline) {
			t.Errorf("%q came back as key %q question %q answer %+v, want %+v", c.q, got.key, got.question, *got.answer(), wantAns)
		}
		if got.an != nil || got.ans != nil {
			t.Errorf("%q: the stored entry still holds the analysis and answer it was put with", c.q)
		}
		g := got.analysis()
		if !slices.Equal(g.words, want.words) || !slices.Equal(g.numbers, want.numbers) || !slices.Equal(g.names, want.names) ||
			!reflect.DeepEqual(g.orders, want.orders) || !slices.Equal(g.wh, want.wh) || g.sum != want.sum || g.sig != want.sig || g.neg != want.neg ||
			g.nset != want.nset || g.qtype != want.qtype {
			t.Errorf("%q: the stored analysis %+v differs from %+v", c.q, *g, want)
		}
		if !reflect.DeepEqual(*an, want) {
			t.Errorf("%q: storing changed the request's analysis: %+v, was %+v", c.q, *an, want)
		}
		q := &query{bucket: "b", question: c.q, an: analyze(c.q)}
		if e, _ := s.nearest(q, defaultThreshold); e == nil || e.blob != got.blob {
			t.Errorf("%q: asking it again found %v, want the entry put", c.q, e)
		}
	}
}

// TestStoreFindsWhatItHolds puts, replaces, evicts and purges entries in
// random order, and checks after each step that every key is found
// exactly when its entry is held, with its own answer, and that the
// store's counts agree.
func TestStoreFindsWhatItHolds(t *testing.T) {
	for _, maxBytes := range []int64{1 << 30, 60_000} {
		s, err := newEntries(maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(7, uint64(maxBytes)))
		last := map[string]string{} // key → the answer last put under it
		for step := range 3000 {
			switch op := rng.IntN(20); {
			case op == 0:
				model := fmt.Sprint("m", rng.IntN(3))
				s.Purge(model, "")
				for k := range last {
					if strings.HasSuffix(k, "/"+model) {
						delete(last, k)
					}
				}
			default:
				k := fmt.Sprintf("k%d/m%d", rng.IntN(400), rng.IntN(3))
				q := fmt.Sprintf("how do I renew the %s for account %d", k, rng.IntN(5))
				content := fmt.Sprint("answer ", step)
				s.putLocal(&entry{key: k, bucket: "b", question: q, an: analyze(q), expires: time.Now().Add(time.Hour),
					model: k[strings.IndexByte(k, '/')+1:],
					ans:   &answer{Chat: true, Choices: []answerChoice{{Content: content, FinishReason: "stop"}}}})
				last[k] = content
			}
			held := 0
			for i := range 400 {
				for m := range 3 {
					k := fmt.Sprintf("k%d/m%d", i, m)
					e, ok := s.get(k)
					want, put := last[k]
					switch {
					case ok && !put:
						t.Fatalf("step %d, max %d: %s found, but it was never put or was purged", step, maxBytes, k)
					case ok && e.key != k:
						t.Fatalf("step %d, max %d: %s found the entry of %s", step, maxBytes, k, e.key)
					case ok && e.answer().Choices[0].Content != want:
						t.Fatalf("step %d, max %d: %s answers %q, want %q", step, maxBytes, k, e.answer().Choices[0].Content, want)
					case !ok && put && maxBytes == 1<<30:
						t.Fatalf("step %d: %s lost without eviction", step, k)
					case ok:
						held++
					}
				}
			}
			inRing := 0
			for _, b := range s.ring {
				if b != "" {
					inRing++
				}
			}
			if held != s.count || inRing != s.count || s.byKey.n != s.count {
				t.Fatalf("step %d, max %d: %d found, %d counted, %d in the ring, %d in byKey", step, maxBytes, held, s.count, inRing, s.byKey.n)
			}
		}
		if maxBytes < 1<<30 && s.bytes > maxBytes {
			t.Errorf("the store holds %d bytes, over its %d", s.bytes, maxBytes)
		}
	}
}

// Two exact keys whose hashes share a fingerprint (the key table keeps
// 32 bits of each) are each answered with their own answer or not at
// all (keeping one drops the other), and the store's counts stay right.
func TestStoreKeysSharingAFingerprint(t *testing.T) {
	seen := map[uint32]string{}
	var a, b string
	for i := 0; b == ""; i++ {
		k := fmt.Sprintf("exact key %d", i)
		fp := fingerprint(entryID(k))
		if other, ok := seen[fp]; ok {
			a, b = other, k
		}
		seen[fp] = k
	}
	s, err := newEntries(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destruct()
	mk := func(key, content string) *entry {
		return &entry{key: key, expires: time.Now().Add(time.Hour),
			ans: &answer{Chat: true, Choices: []answerChoice{{Content: content, FinishReason: "stop"}}}}
	}
	answerOf := func(key string) string {
		e, ok := s.get(key)
		if !ok {
			return ""
		}
		return e.answer().Choices[0].Content
	}
	s.putLocal(mk("another key", "another answer"))
	s.putLocal(mk(a, "answer to a"))
	if got := answerOf(a); got != "answer to a" {
		t.Fatalf("%q: %q", a, got)
	}
	if got := answerOf(b); got != "" {
		t.Fatalf("%q, never kept, was answered with %q", b, got)
	}
	s.putLocal(mk(b, "answer to b"))
	if got, other := answerOf(b), answerOf(a); got != "answer to b" || other != "" && other != "answer to a" {
		t.Fatalf("after keeping %q: it is answered %q, %q is answered %q", b, got, a, other)
	}
	if answerOf("another key") != "another answer" || s.count != s.byKey.n {
		t.Fatalf("%d entries, %d keys", s.count, s.byKey.n)
	}
	if n := s.purge("", ""); n < 2 || s.count != 0 || s.byKey.n != 0 || s.bytes != 0 {
		t.Fatalf("purge took %d; left %d entries, %d keys, %d bytes", n, s.count, s.byKey.n, s.bytes)
	}
}
