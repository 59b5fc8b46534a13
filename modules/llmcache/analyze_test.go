package llmcache

import (
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestScanASCII checks that the ASCII tokenizer splits every ASCII text
// as the general one does: the project's questions, and random texts
// of the characters the rules are about.
func TestScanASCII(t *testing.T) {
	texts := projectQuestions(t)
	const alphabet = "aAbBiIzZ0159 .,:-'+#%$?!;\n\"()/"
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, 1+rng.IntN(24))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		texts = append(texts, string(b))
	}
	texts = append(texts, "", "I'm OK", "C++ vs C# in 2024", "$100 or $ 5 or $3.50,", "WHAT IS THE USD RATE?", "Node.js e-mail 17:00 1,000 5km 21st")
	n := 0
	for _, text := range texts {
		if !utf8.ValidString(text) || strings.ContainsFunc(text, func(r rune) bool { return r >= utf8.RuneSelf }) {
			continue
		}
		n++
		got, want := scanASCII(text, nil), scanRunes(text, nil)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: the ASCII tokenizer gives %+v, the general one %+v", text, got, want)
		}
	}
	if n < 20000 {
		t.Fatalf("only %d ASCII texts", n)
	}
}

// projectQuestions are the questions of the project's paraphrase and
// near-miss sets, each pair's both sides.
func projectQuestions(tb testing.TB) []string {
	var qs []string
	for _, f := range []string{"testdata/paraphrases.tsv", "testdata/near-misses.tsv"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		for line := range strings.Lines(string(raw)) {
			for q := range strings.SplitSeq(strings.TrimRight(line, "\r\n"), "\t") {
				qs = append(qs, q)
			}
		}
	}
	return qs
}
