package llmcache

import (
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// analysis is what the built-in matcher and the verifier know of a
// question. It is made once per question (when a request is looked up and
// kept with the entry), never once per candidate.
type analysis struct {
	words   []string    // canonical content words in order: numbers, units, names and markers included
	set     []string    // words, sorted, each once; nil in a kept entry (see entry.freeze)
	nset    int         // len(set)
	numbers []string    // the numbers, in order ("15%" and "fifteen percent" both give 15)
	names   []string    // entities, in order, each once (aliases merged: JS is JavaScript)
	neg     int         // negations: not, never, no, without, n't …
	qtype   string      // the first question word: how, what (also which), who, when, where, why; "" for none
	orders  [][2]string // (a, b): a stands before b, around an order marker (to, from, than, vs …)
	sig     uint64      // a bit per word of set (hashed): a cheap bound on how many words two questions share
	wh      []uint64    // each word of set, hashed
	sum     uint64      // the sum of wh: the same for the same set of words
}

// cutContraction splits "peru's", "they're", "it'll" into the word and
// what was contracted; "what's" and the like are stopwords as they are.
func cutContraction(w string) (string, string, bool) {
	if stopwords[w] {
		return "", "", false
	}
	i := strings.LastIndexByte(w, '\'')
	if i <= 0 {
		return "", "", false
	}
	switch suffix := w[i+1:]; suffix {
	case "s", "re", "ve", "ll", "d", "":
		return w[:i], suffix, true
	}
	return "", "", false
}

// token is a word as written.
type token struct {
	low    string
	upper  bool // starts with an upper-case letter
	caps   bool // all letters upper case, two or more (API, US)
	start  bool // a sentence's first word
	entity bool // an alias already made canonical
}

// analyze turns a question into its analysis.
func analyze(text string) *analysis {
	lexicon.Do(loadLexicon)
	toks := rewritePhrases(scan(text))
	a := &analysis{words: make([]string, 0, len(toks)+2)}
	prevNumber := false
	pendingMarker := "" // a marker waiting for the content word after it
	markerLeft := ""
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		w := t.low
		add := func(word string) {
			if pendingMarker != "" {
				if markerLeft != "" && markerLeft != word {
					a.orders = append(a.orders, [2]string{markerLeft, word})
				}
				pendingMarker = ""
			}
			a.words = append(a.words, word)
		}
		if t.entity {
			add(w)
			a.addName(w)
			prevNumber = false
			continue
		}
		if base, ok := negContractions[w]; ok {
			a.neg++
			w = base
		} else if base, suffix, ok := cutContraction(w); ok {
			// "Peru's", "who's", "they're", "it'll": the word, and a
			// "will" kept as tense.
			w = base
			if suffix == "ll" {
				add("future~")
			}
		}
		if q, ok := questionWords[w]; ok {
			if a.qtype == "" {
				a.qtype = q
			}
			if q != "what" && q != "how" {
				add(q)
			}
			continue
		}
		if w == "or" { // "X or Y" asks to choose; "X and Y" does not
			add("or~")
			continue
		}
		if p, ok := pronouns[w]; ok {
			add(p)
			continue
		}
		if negators[w] {
			a.neg++
			continue
		}
		if n, used, ok := numberAt(toks, i); ok {
			add(n)
			a.numbers = append(a.numbers, n)
			if u := unitSuffix(toks[i].low); u != "" {
				add(u)
			}
			i += used - 1
			prevNumber = true
			continue
		}
		if u, ok := unitOf(w, prevNumber); ok {
			add(u)
			prevNumber = false
			continue
		}
		prevNumber = false
		if m, ok := tense[w]; ok {
			add(m)
			continue
		}
		if orderMarkers[w] {
			markerLeft = a.leftOf(w)
			pendingMarker = w
			if stopwords[w] || w == "than" || w == "vs" || w == "versus" || w == "per" || w == "then" || w == "minus" || w == "divided" {
				continue // a marker only
			}
			a.words = append(a.words, w) // a word of its own too: "before" is not "after"
			continue
		}
		if (w == "this" || w == "coming" || w == "current") && i+1 < len(toks) && timeWords[lemma(toks[i+1].low)] {
			add("this")
			continue
		}
		if t.caps && (w == "us" || w == "go") {
			add(map[string]string{"us": "usa", "go": "golang"}[w])
			a.addName(a.words[len(a.words)-1])
			continue
		}
		if stopwords[w] {
			continue
		}
		if t.upper && !t.start && w != "i" || t.caps {
			name := w
			if w == "go" {
				name = "golang"
			}
			add(name)
			a.addName(name)
			continue
		}
		add(canonical(w))
	}
	a.set = slices.Clone(a.words)
	slices.Sort(a.set)
	a.set = slices.Compact(a.set)
	a.nset = len(a.set)
	a.wh = make([]uint64, len(a.set))
	for i, w := range a.set {
		h := maphash.String(sigSeed, w)
		a.wh[i] = h
		a.sum += h
		a.sig |= 1 << (h & 63)
	}
	return a
}

// wordSet is set, made again from words when compact dropped it.
func (a *analysis) wordSet() []string {
	if a.set != nil || a.nset == 0 {
		return a.set
	}
	set := slices.Clone(a.words)
	slices.Sort(set)
	return slices.Compact(set)
}

// appendSetKeys appends the keys the built-in matcher finds a question under: its
// set of words, and its set less each one word, so that questions one
// misspelt word apart share a key.
// Keys carry a hash of the bucket, not the bucket: a candidate's bucket
// is compared before it is used. A key is one word (the bucket's hash,
// the set's and which kind, mixed), so that the index's million keys take
// half the memory, and the cache lines, of a structure.
func (a *analysis) appendSetKeys(dst []setKey, bucket string) []setKey {
	return appendSetKeysOf(dst, bucket, a.sum, len(a.wh), func(i int) uint64 { return a.wh[i] })
}

// appendSetKeysOf appends the set keys of a set of n words whose hashes
// (wh(i)) add up to sum.
func appendSetKeysOf(dst []setKey, bucket string, sum uint64, n int, wh func(int) uint64) []setKey {
	b := maphash.String(sigSeed, bucket)
	dst = append(dst, setKey(b^sum))
	if n > 1 {
		for i := range n {
			dst = append(dst, setKey((b^(sum-wh(i)))*lessOne))
		}
	}
	return dst
}

// setKey is a key of the built-in matcher's index.
type setKey uint64

// lessOne sets the keys of a set less one word apart from those of whole
// sets (an odd constant: multiplying by it is a bijection).
const lessOne = 0x9e3779b97f4a7c15

var sigSeed = maphash.MakeSeed()

func (a *analysis) addName(n string) {
	if !slices.Contains(a.names, n) {
		a.names = append(a.names, n)
	}
}

// leftOf is the content word an order marker relates: the last one, or
// for "than" the one before a comparative ("Rust is faster than Go"
// relates Rust and Go).
func (a *analysis) leftOf(marker string) string {
	n := len(a.words)
	if n == 0 {
		return ""
	}
	if marker == "than" && n >= 2 {
		last := a.words[n-1]
		if strings.HasSuffix(last, "er") || last == "more" || last == "less" || last == "better" || last == "worse" {
			return a.words[n-2]
		}
	}
	return a.words[n-1]
}

// canonical maps a lower-case word to the form questions are compared
// by: American spelling, lemma, synonym group.
func canonical(w string) string {
	if w == "" {
		return w
	}
	sh := &canonicalMemo[(len(w)*31+int(w[0])+int(w[len(w)-1])*7)%len(canonicalMemo)]
	sh.mu.RLock()
	c, ok := sh.m[w]
	sh.mu.RUnlock()
	if ok {
		return c
	}
	lexicon.Do(loadLexicon)
	c = canonicalOf(w)
	if canonicalMemoSize.Add(1) <= maxCanonicalMemo {
		sh.mu.Lock()
		if sh.m == nil {
			sh.m = map[string]string{}
		}
		sh.m[strings.Clone(w)] = c
		sh.mu.Unlock()
	}
	return c
}

// canonicalMemo remembers the canonical form of the first words seen, up
// to maxCanonicalMemo of them: people's words repeat, and a word's
// lemma and spelling take a dozen lookups to find. It is split in shards,
// so that requests on different cores seldom share a lock's cache line.
var (
	canonicalMemo [32]struct {
		mu sync.RWMutex
		m  map[string]string
		_  [64]byte
	}
	canonicalMemoSize atomic.Int64
)

const maxCanonicalMemo = 1 << 16

func canonicalOf(w string) string {
	w = americanize(w)
	w = lemma(w)
	if s, ok := synonyms[w]; ok {
		return s
	}
	return w
}

// americanize maps British spellings to American ones.
func americanize(w string) string {
	if v, ok := variants[w]; ok {
		return v
	}
	for _, r := range [][2]string{{"isation", "ization"}, {"isations", "izations"}, {"ised", "ized"}, {"ises", "izes"},
		{"ising", "izing"}, {"ise", "ize"}, {"iser", "izer"}, {"our", "or"}, {"ours", "ors"}, {"tre", "ter"},
		{"tres", "ters"}, {"lled", "led"}, {"lling", "ling"}, {"ogue", "og"}} {
		if strings.HasSuffix(w, r[0]) && len(w) >= 5 {
			c := w[:len(w)-len(r[0])] + r[1]
			if isWord(c) || isWord(lemma(c)) {
				return c
			}
		}
	}
	return w
}

// lemma is WordNet's morphy for nouns and verbs: an irregular form's
// lemma, or a word less a regular ending when what remains is a word
// people use. A word it does not know stays as it is, so "https" never
// becomes "http". Comparatives are left alone: "cheaper" is not "cheap".
func lemma(w string) string {
	if l, ok := lemmas[w]; ok {
		return l
	}
	if len(w) <= 3 || isWord(w) || !strings.ContainsAny(w, "aeiouy") {
		return w // a word of its own, or an abbreviation ("https", "rpms")
	}
	for _, r := range [][2]string{{"ies", "y"}, {"ches", "ch"}, {"shes", "sh"}, {"xes", "x"}, {"ses", "s"},
		{"zes", "z"}, {"men", "man"}, {"s", ""}, {"es", "e"}, {"es", ""}, {"ied", "y"}, {"ed", "e"}, {"ed", ""},
		{"ing", "e"}, {"ing", ""}} {
		if strings.HasSuffix(w, r[0]) && !(r[0] == "s" && strings.HasSuffix(w, "ss")) {
			c := w[:len(w)-len(r[0])] + r[1]
			if len(c) >= 2 && strings.ContainsAny(c, "aeiouy") && isWord(c) {
				return c
			}
		}
	}
	return w
}

// unitOf names a unit ("km" is kilometer); one- and two-letter units and
// am/pm count only after a number ("5 m", not "I am").
func unitOf(w string, afterNumber bool) (string, bool) {
	u, ok := units[w]
	if !ok {
		return "", false
	}
	if afterNumber || len(w) > 3 && w != "pound" && w != "pounds" || w == "usd" || w == "eur" || w == "gbp" || w == "jpy" || w == "inr" || w == "mph" || w == "kph" {
		return u, true
	}
	return "", false
}

// unitSuffix is the unit written onto a number ("5km", "10pm").
func unitSuffix(t string) string {
	i := strings.IndexFunc(t, func(r rune) bool { return !unicode.IsDigit(r) && r != '.' && r != ',' })
	if i <= 0 {
		return ""
	}
	u, _ := unitOf(t[i:], true)
	return u
}

// numberAt reads a number at toks[i]: digits ("1,000", "3.5", "17:00",
// "5km", "21st") or words ("twenty-five", "one hundred"). A token of
// letters and digits that is no number with a unit ("2FA", "mp3", "ipv6")
// is not a number.
func numberAt(toks []token, i int) (string, int, bool) {
	t := toks[i].low
	if t == "" {
		return "", 0, false
	}
	if r, _ := utf8.DecodeRuneInString(t); unicode.IsDigit(r) {
		j := strings.IndexFunc(t, func(r rune) bool { return !unicode.IsDigit(r) && r != '.' && r != ',' && r != ':' })
		digits, rest := t, ""
		if j >= 0 {
			digits, rest = t[:j], t[j:]
		}
		switch {
		case rest == "":
		case rest == "st" || rest == "nd" || rest == "rd" || rest == "th":
			return "#" + strings.ReplaceAll(digits, ",", ""), 1, true
		case unitSuffix(t) != "":
		default:
			return "", 0, false
		}
		digits = strings.ReplaceAll(digits, ",", "")
		if f, err := strconv.ParseFloat(digits, 64); err == nil {
			return strconv.FormatFloat(f, 'f', -1, 64), 1, true
		}
		return digits, 1, true
	}
	total, current, used := 0, 0, 0
	for j := i; j < len(toks); j++ {
		ok := true
		for p := range strings.SplitSeq(toks[j].low, "-") {
			if _, isNum := numberWords[p]; !isNum {
				ok = false
				break
			}
		}
		if !ok {
			if toks[j].low == "and" && used > 0 && j+1 < len(toks) {
				if _, next := numberWords[toks[j+1].low]; next {
					used++
					continue
				}
			}
			break
		}
		for p := range strings.SplitSeq(toks[j].low, "-") {
			switch v := numberWords[p]; {
			case v == 100:
				current = max(current, 1) * 100
			case v >= 1000:
				total += max(current, 1) * v
				current = 0
			default:
				current += v
			}
		}
		used++
	}
	if used == 0 {
		return "", 0, false
	}
	return strconv.Itoa(total + current), used, true
}

// scan splits text into tokens. A token keeps inner dots, hyphens,
// apostrophes, commas and colons between digits ("3.5", "node.js",
// "e-mail", "don't", "1,000", "17:00"), a trailing "++" or "#" ("c++",
// "c#"); "%" and currency symbols are tokens of their own.
func scan(text string) []token {
	start := true
	// Most questions are ASCII: then a rune's index is its byte's, and a
	// word is a slice of text, not a copy.
	ascii := true
	for i := 0; i < len(text); i++ {
		if text[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	var rs []rune
	n := len(text)
	if !ascii {
		rs = []rune(text)
		n = len(rs)
	}
	at := func(i int) rune {
		if ascii {
			return rune(text[i])
		}
		return rs[i]
	}
	sub := func(i, j int) string {
		if ascii {
			return text[i:j]
		}
		return string(rs[i:j])
	}
	toks := make([]token, 0, 16)
	isWord := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
	for i := 0; i < n; {
		r := at(i)
		switch {
		case isWord(r):
			j := i + 1
			for j < n {
				c := at(j)
				next := j+1 < n && isWord(at(j+1))
				switch {
				case isWord(c):
				case (c == '\'' || c == '’') && next && unicode.IsLetter(at(j-1)):
				case (c == '.' || c == '-') && next:
				case (c == ',' || c == ':') && next && unicode.IsDigit(at(j-1)) && unicode.IsDigit(at(j+1)):
				case c == '+' && j+1 < n && at(j+1) == '+' && unicode.IsLetter(at(j-1)):
					j++
				case c == '#' && unicode.IsLetter(at(j-1)) && !next:
				default:
					goto done
				}
				j++
			}
		done:
			word := sub(i, j)
			if !ascii {
				word = strings.ReplaceAll(word, "’", "'")
			}
			toks = append(toks, newToken(word, start))
			start = false
			i = j
		case r == '%':
			toks = append(toks, token{low: "%"})
			i++
		case currencySymbols[r] != "":
			// "$100" is "100 usd": the symbol goes after the number.
			sym := token{low: currencySymbols[r]}
			j := i + 1
			if j < n && unicode.IsDigit(at(j)) {
				k := j
				for k < n && (unicode.IsDigit(at(k)) || (at(k) == '.' || at(k) == ',') && k+1 < n && unicode.IsDigit(at(k+1))) {
					k++
				}
				toks = append(toks, token{low: sub(j, k)}, sym)
				i = k
			} else {
				toks = append(toks, sym)
				i++
			}
			start = false
		default:
			if strings.ContainsRune(".?!;:\n", r) {
				start = true
			}
			i++
		}
	}
	// A question in capitals or in title case has no names to tell.
	caps, upper := 0, 0
	for _, t := range toks {
		if t.caps {
			caps++
		}
		if t.upper {
			upper++
		}
	}
	for i := range toks {
		if 2*caps > len(toks) {
			toks[i].caps = false
		}
		if 2*caps > len(toks) || len(toks) > 2 && 4*upper > 3*len(toks) {
			toks[i].upper = false
		}
	}
	return toks
}

func newToken(word string, start bool) token {
	t := token{low: strings.ToLower(word), start: start}
	first, _ := utf8.DecodeRuneInString(word)
	t.upper = unicode.IsUpper(first)
	letters, uppers := 0, 0
	for _, r := range word {
		if unicode.IsLetter(r) {
			letters++
			if unicode.IsUpper(r) {
				uppers++
			}
		}
	}
	t.caps = letters >= 2 && uppers == letters
	if t.low == "i" || strings.HasPrefix(t.low, "i'") || t.low == "ok" {
		t.upper, t.caps = false, false // "I", "I'm" are no names
	}
	return t
}

// rewritePhrases replaces aliases and framing phrases, longest first.
func rewritePhrases(toks []token) []token {
	out := make([]token, 0, len(toks))
	for i := 0; i < len(toks); {
		best := -1
		for k, p := range phrases[toks[i].low] {
			if len(p.from) <= len(toks)-i && (best < 0 || len(p.from) > len(phrases[toks[i].low][best].from)) && matches(toks[i:], p.from) {
				best = k
			}
		}
		if best < 0 {
			out = append(out, toks[i])
			i++
			continue
		}
		p := phrases[toks[i].low][best]
		for _, w := range p.to {
			out = append(out, token{low: strings.TrimSuffix(w, "_"), entity: strings.HasSuffix(w, "_"), start: toks[i].start})
		}
		i += len(p.from)
	}
	return out
}

func matches(toks []token, words []string) bool {
	for k, w := range words {
		if toks[k].low != w {
			return false
		}
	}
	return true
}

// cost estimates an analysis's memory in bytes, for max_memory.
func (a *analysis) cost() int {
	if a == nil {
		return 0
	}
	n := 160 + 16*(len(a.words)+len(a.numbers)+len(a.names)) + 32*len(a.orders) + 72*len(a.wh) + 64 // and its keys in the index
	for _, w := range a.words {
		n += len(w)
	}
	return n
}
