package llmcache

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// The project's paraphrase sets, written by hand (testdata/*.tsv): pairs
// that ask the same thing, and near-misses that must never be answered
// with each other, each with a kind. The test reports, per kind and at
// several thresholds, how many pairs the built-in matcher and verifier
// match, and fails when, at the default threshold, more than 0.5% of the
// near-misses match or fewer than half of the paraphrases do.

type pair struct{ kind, a, b string }

func readPairs(t *testing.T, name string) []pair {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []pair
	s := bufio.NewScanner(f)
	for line := 1; s.Scan(); line++ {
		text := s.Text()
		if text == "" || strings.HasPrefix(text, "#") || strings.HasPrefix(text, "kind\t") {
			continue
		}
		f := strings.Split(text, "\t")
		if len(f) != 3 {
			t.Fatalf("%s:%d: want 3 tab-separated columns, got %d", name, line, len(f))
		}
		out = append(out, pair{f[0], f[1], f[2]})
	}
	return out
}

// matchAt reports whether the built-in matcher answers b with a's entry,
// in both directions, at a threshold.
func matchAt(a, b string, threshold float64) bool {
	x, y := analyze(a), analyze(b)
	s1, ok1 := lexicalMatch(x, y)
	s2, ok2 := lexicalMatch(y, x)
	return ok1 && s1 >= threshold || ok2 && s2 >= threshold
}

var thresholds = []float64{0.5, 0.6, 0.7, 0.8, 0.9, 1.0}

type rates struct{ n, hits int }

func (r rates) String() string {
	return fmt.Sprintf("%5.1f%% (%d/%d)", 100*float64(r.hits)/float64(max(r.n, 1)), r.hits, r.n)
}

// score counts matches per kind and per threshold.
func score(pairs []pair, threshold float64) (map[string]*rates, rates) {
	kinds := map[string]*rates{}
	var all rates
	for _, p := range pairs {
		r := kinds[p.kind]
		if r == nil {
			r = &rates{}
			kinds[p.kind] = r
		}
		r.n++
		all.n++
		if matchAt(p.a, p.b, threshold) {
			r.hits++
			all.hits++
		}
	}
	return kinds, all
}

func TestParaphraseSets(t *testing.T) {
	paraphrases, nearMisses := readPairs(t, "paraphrases.tsv"), readPairs(t, "near-misses.tsv")
	if len(paraphrases) < 300 || len(nearMisses) < 300 {
		t.Fatalf("the sets are too small: %d paraphrases, %d near-misses; want 300 of each", len(paraphrases), len(nearMisses))
	}
	for _, th := range thresholds {
		_, hit := score(paraphrases, th)
		_, falseHit := score(nearMisses, th)
		t.Logf("threshold %.1f: paraphrases hit %s, near-misses hit %s", th, hit, falseHit)
	}
	hitKinds, hit := score(paraphrases, defaultThreshold)
	falseKinds, falseHit := score(nearMisses, defaultThreshold)
	t.Logf("at the default threshold %.2f, per kind:", defaultThreshold)
	for _, k := range slices.Sorted(maps.Keys(hitKinds)) {
		t.Logf("  paraphrase %-12s hit  %s", k, hitKinds[k])
	}
	for _, k := range slices.Sorted(maps.Keys(falseKinds)) {
		t.Logf("  near-miss  %-12s false hit %s", k, falseKinds[k])
	}
	for _, p := range nearMisses {
		if matchAt(p.a, p.b, defaultThreshold) {
			t.Logf("false hit (%s): %q ~ %q", p.kind, p.a, p.b)
		}
	}
	if testing.Verbose() {
		for _, p := range paraphrases {
			if !matchAt(p.a, p.b, defaultThreshold) {
				t.Logf("missed (%s): %q ~ %q", p.kind, p.a, p.b)
			}
		}
	}
	if r := float64(falseHit.hits) / float64(falseHit.n); r > 0.005 {
		t.Errorf("false hits %s: more than 0.5%%", falseHit)
	}
	if r := float64(hit.hits) / float64(hit.n); r < 0.5 {
		t.Errorf("hit rate %s: below 50%%", hit)
	}
}

// TestParaphraseSetsThroughStore looks each paraphrase up in a store that
// holds every other question of both sets, as the handler does: a
// paraphrase's match is found among 1,300 entries, and no near-miss is.
func TestParaphraseSetsThroughStore(t *testing.T) {
	paraphrases, nearMisses := readPairs(t, "paraphrases.tsv"), readPairs(t, "near-misses.tsv")
	s, err := newEntries(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destruct()
	ans := &answer{Chat: true, Choices: []answerChoice{{Content: "an answer", FinishReason: "stop"}}}
	for i, p := range append(slices.Clone(paraphrases), nearMisses...) {
		e := &entry{key: fmt.Sprint(i), bucket: "b", question: p.a, an: analyze(p.a), ans: ans, expires: time.Now().Add(time.Hour)}
		s.putLocal(e)
	}
	found := 0
	for _, p := range paraphrases {
		e, _ := s.nearest(&query{bucket: "b", an: analyze(p.b)}, defaultThreshold)
		if e != nil && matchAt(e.question, p.b, defaultThreshold) {
			found++
		}
		if e == nil && matchAt(p.a, p.b, defaultThreshold) {
			t.Errorf("the store missed %q for %q, which the matcher accepts", p.a, p.b)
		}
	}
	for _, p := range nearMisses {
		if e, _ := s.nearest(&query{bucket: "b", an: analyze(p.b)}, defaultThreshold); e != nil && e.question == p.a {
			t.Errorf("near-miss %q answered %q", p.b, p.a)
		}
	}
	t.Logf("paraphrases found through the store: %d/%d", found, len(paraphrases))
}
