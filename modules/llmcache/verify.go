package llmcache

import (
	"math"
	"slices"
	"strings"
)

// The verifier: a semantic hit must be justified by more than a
// similarity number. Whatever found a candidate (the built-in matcher or
// an embedding model), it is refused when the two questions differ in
//   - negation: as many not/never/no/without/n't in both;
//   - numbers: the same numbers in the same order ("15%" is "fifteen
//     percent"; "2FA" is no number);
//   - order: words around an order marker (to, into, from, than, vs,
//     over, before, after, north of …) stand in the same order, so "USD to
//     EUR" is not "EUR to USD" and "Rust faster than Go" is not "Go
//     faster than Rust"; names shared by both come in the same order;
//   - tense (was/did/will), and anything guarded: names, units, languages,
//     formats, times, quantities and polar words (high/low, much/little,
//     allowed/forbidden …);
//   - with the built-in matcher, any content word: the two questions must
//     say the same words once spelling, inflection, synonyms, aliases,
//     framing ("can you tell me") and typos are set aside; "by train" is
//     not "by taxi", "this weekend" not "next weekend".
//
// With an embedding model, content words outside the guarded ones may
// differ (that is what the model is for), but never by exactly one word
// swapped for another ("formal tone" / "casual tone").

// agree applies the checks every candidate must pass.
func agree(q, c *analysis) bool {
	if q.neg != c.neg || !slices.Equal(q.numbers, c.numbers) {
		return false
	}
	if q.qtype != c.qtype && q.qtype != "" && c.qtype != "" {
		return false
	}
	return ordered(q, c) && ordered(c, q) && sameNameOrder(q.names, c.names)
}

// ordered reports whether b keeps each order a's markers set.
func ordered(a, b *analysis) bool {
	for _, o := range a.orders {
		first, last := -1, -1
		for i, w := range b.words {
			if w == o[0] && first < 0 {
				first = i
			}
			if w == o[1] {
				last = i
			}
		}
		if first >= 0 && last >= 0 && first > last {
			return false
		}
	}
	return true
}

// sameNameOrder: the names both questions have come in the same order.
func sameNameOrder(a, b []string) bool {
	var sa, sb []string
	for _, n := range a {
		if slices.Contains(b, n) {
			sa = append(sa, n)
		}
	}
	for _, n := range b {
		if slices.Contains(a, n) {
			sb = append(sb, n)
		}
	}
	return slices.Equal(sa, sb)
}

// lexicalMatch is the built-in matcher: the two questions pass agree and
// have the same content words, a typo aside. It returns their similarity:
// the cosine of their words and word pairs, so a reordered question
// scores below the same words in the same order.
func lexicalMatch(q, c *analysis) (float64, bool) {
	if q.nset != c.nset || q.nset == 0 || !agree(q, c) {
		return 0, false
	}
	var typo map[string]string // q's word → c's, when one is a misspelling of the other
	if qs, cs := q.wordSet(), c.wordSet(); !slices.Equal(qs, cs) {
		onlyQ, onlyC := setMinus(qs, cs), setMinus(cs, qs)
		if len(onlyQ) != 1 || len(onlyC) != 1 || !misspelt(onlyQ[0], onlyC[0]) ||
			slices.Contains(q.names, onlyQ[0]) || slices.Contains(c.names, onlyC[0]) {
			return 0, false
		}
		typo = map[string]string{onlyQ[0]: onlyC[0]}
	}
	return similarity(q.words, c.words, typo), true
}

// misspelt reports whether one of two words is a typo of the other: one
// edit apart (a letter changed, added, dropped or two swapped), five
// letters or more, and one of them no word people use, so "county" is
// never "country".
func misspelt(a, b string) bool {
	if len(a) < 5 || len(b) < 5 || known[a] == known[b] || !letters(a) || !letters(b) {
		return false
	}
	return editDistance1(a, b)
}

func letters(w string) bool {
	for _, r := range w {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return true
}

func editDistance1(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	switch len(b) - len(a) {
	case 0:
		diff := -1
		for i := range len(a) {
			if a[i] != b[i] {
				if diff >= 0 {
					// two differences: only a swap of neighbours
					return diff == i-1 && a[diff] == b[i] && a[i] == b[diff] && a[i+1:] == b[i+1:]
				}
				diff = i
			}
		}
		return diff >= 0
	case 1:
		i := 0
		for i < len(a) && a[i] == b[i] {
			i++
		}
		return a[i:] == b[i+1:]
	}
	return false
}

// similarity is the cosine of two word sequences as bags of words
// (weight 1) and neighbouring pairs (weight 1/2).
func similarity(a, b []string, typo map[string]string) float64 {
	fa, fb := features(a, typo), features(b, nil)
	var dot, na, nb float64
	for f, x := range fa {
		na += x * x
		dot += x * fb[f]
	}
	for _, y := range fb {
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return min(1, max(0, dot/math.Sqrt(na*nb)))
}

func features(words []string, typo map[string]string) map[string]float64 {
	m := make(map[string]float64, 2*len(words))
	prev := ""
	for _, w := range words {
		if t, ok := typo[w]; ok {
			w = t
		}
		m[w]++
		if prev != "" {
			m[prev+" "+w] += 0.5
		}
		prev = w
	}
	return m
}

// verified is the verifier for a candidate an embedding model found:
// agree, the same guarded words, and not one content word swapped for
// another.
func verified(q, c *analysis) bool {
	if !agree(q, c) {
		return false
	}
	qs, cs := q.wordSet(), c.wordSet()
	onlyQ, onlyC := setMinus(qs, cs), setMinus(cs, qs)
	if len(onlyQ) == 1 && len(onlyC) == 1 && !misspelt(onlyQ[0], onlyC[0]) {
		return false
	}
	for _, w := range append(onlyQ, onlyC...) {
		if isGuarded(w, q, c) {
			return false
		}
	}
	return true
}

// isGuarded reports whether a word carries an answer on its own: a name,
// a number or unit, a marker of tense or order, a word no dictionary
// knows (product names, formats, code), or a word of a guarded class.
func isGuarded(w string, q, c *analysis) bool {
	if slices.Contains(q.names, w) || slices.Contains(c.names, w) || guardedWords[w] || orderMarkers[w] {
		return true
	}
	if _, isUnit := unitWords[w]; isUnit {
		return true
	}
	return !known[w] || strings.HasSuffix(w, "~") || w != "" && (w[0] >= '0' && w[0] <= '9' || w[0] == '#')
}

// setMinus returns the words of a (sorted) that are not in b (sorted).
func setMinus(a, b []string) []string {
	var out []string
	for _, w := range a {
		if _, found := slices.BinarySearch(b, w); !found {
			out = append(out, w)
		}
	}
	return out
}
