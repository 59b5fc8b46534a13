package llmcache

import (
	"fmt"
	"strings"
	"testing"
)

// The paraphrase set: question templates of one intent, filled with the
// same values, should match; the same template with another value must
// not. The set is generated from these lists, so it is the project's own
// and makes no claim beyond them.
var intents = []struct {
	templates []string
	values    []string
}{
	{[]string{"What is the capital of %s?", "Tell me the capital of %s.", "what's the capital of %s", "Which city is the capital of %s?", "Name the capital city of %s."},
		[]string{"France", "Germany", "Italy", "Spain", "Japan", "Kenya", "Peru", "Canada", "Norway", "Egypt", "Chile", "India"}},
	{[]string{"Who wrote %s?", "Who is the author of %s?", "Tell me who wrote %s.", "who wrote %s"},
		[]string{"Hamlet", "Macbeth", "Dracula", "Frankenstein", "Ulysses", "Emma", "Beloved", "Middlemarch"}},
	{[]string{"What is %s?", "what is %s", "Calculate %s.", "Please compute %s"},
		[]string{"2 + 2", "2 + 3", "17 * 3", "17 * 4", "100 / 5", "100 / 4", "9 - 7", "9 - 6"}},
	{[]string{"How do I reverse a list in %s?", "How can I reverse a list in %s", "In %s, how do I reverse a list?", "Reverse a list in %s"},
		[]string{"Python", "Go", "Rust", "Java", "Ruby", "Haskell", "Kotlin", "Swift"}},
	{[]string{"Convert %s dollars to euros", "convert %s dollars into euros", "Please convert %s dollars to euros.", "What is %s dollars in euros?"},
		[]string{"100", "150", "20", "35", "999", "1000"}},
	{[]string{"How tall is %s?", "What is the height of %s?", "how tall is %s", "Tell me how tall %s is."},
		[]string{"Everest", "K2", "Kilimanjaro", "Denali", "Elbrus", "Aconcagua"}},
}

func TestParaphraseSet(t *testing.T) {
	const threshold = 0.8
	match := func(a, b string) bool {
		return float64(dot(quantize(embed(a)), quantize(embed(b)))) >= threshold && sameFacts(a, b)
	}
	var pos, posHit, neg, negHit int
	var misses []string
	for _, in := range intents {
		for vi, v := range in.values {
			for i, ta := range in.templates {
				a := fmt.Sprintf(ta, v)
				for _, tb := range in.templates[i+1:] {
					b := fmt.Sprintf(tb, v)
					pos++
					if match(a, b) {
						posHit++
					} else if len(misses) < 10 {
						misses = append(misses, a+" ~ "+b)
					}
				}
				for _, w := range in.values[vi+1:] {
					b := fmt.Sprintf(ta, w)
					neg++
					if match(a, b) {
						negHit++
						t.Errorf("false hit: %q ~ %q", a, b)
					}
				}
			}
		}
	}
	if pos < 200 || neg < 200 {
		t.Fatalf("the set is too small: %d pairs that should match, %d near-misses", pos, neg)
	}
	hitRate, falseRate := float64(posHit)/float64(pos), float64(negHit)/float64(neg)
	t.Logf("built-in embedder, threshold %.2f: hit rate %.1f%% (%d/%d pairs that should match), false-hit rate %.1f%% (%d/%d near-misses)",
		threshold, 100*hitRate, posHit, pos, 100*falseRate, negHit, neg)
	t.Logf("some missed paraphrases (lexical similarity cannot see them): %s", strings.Join(misses, "; "))
	if hitRate < 0.5 {
		t.Errorf("hit rate %.2f is below 0.5", hitRate)
	}
}
