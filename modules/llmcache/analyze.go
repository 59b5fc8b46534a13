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
	nset    int         // how many different words: len(wh)
	numbers []string    // the numbers, in order ("15%" and "fifteen percent" both give 15)
	names   []string    // entities, in order, each once (aliases merged: JS is JavaScript)
	neg     int         // negations: not, never, no, without, n't …
	qtype   string      // the first question word: how, what (also which), who, when, where, why; "" for none
	orders  [][2]string // (a, b): a stands before b, around an order marker (to, from, than, vs …)
	sig     uint64      // a bit per word of set (hashed): a cheap bound on how many words two questions share
	wh      []uint64    // each different word, hashed, in the hashes' order
	sum     uint64      // the sum of wh: the same for the same set of words

	whInline [16]uint64 // wh's memory for most questions: one allocation less
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
	upper  bool   // starts with an upper-case letter
	caps   bool   // all letters upper case, two or more (API, US)
	start  bool   // a sentence's first word
	entity bool   // an alias already made canonical
	f      *facts // the word's facts, once looked up
}

// analyze turns a question into its analysis.
func analyze(text string) *analysis {
	lexicon.Do(loadLexicon)
	var tb [24]token // a question's tokens, most often: no allocation
	toks := rewritePhrases(scan(text, tb[:0]))
	c := cursor{toks: toks}
	z := analyzer{a: &analysis{words: make([]string, 0, len(toks)+2)}}
	for c.i = 0; c.i < len(toks); c.i++ {
		z.token(&c, toks[c.i])
	}
	z.a.setHashes(&c.hs)
	return z.a
}

// analyzer is what analyze knows while it reads a question's tokens,
// besides where it is (cursor).
type analyzer struct {
	a             *analysis
	prevNumber    bool
	pendingMarker string // a marker waiting for the content word after it
	markerLeft    string
	scratch       facts // the facts of a word not in the lexicon
}

// cursor is a question's tokens, the one being read, and the hashes of
// the words added so far. It is kept apart from analyzer, whose strings
// go into the analysis, so that the tokens' array stays on the stack.
type cursor struct {
	toks []token
	i    int
	// hs holds the hashes of the first words, each at its word's index
	// (0 until it is hashed): the words of the lexicon come with theirs,
	// so that their bytes are not read again.
	hs [32]uint64
}

// add adds a word, closing an order marker that waits for it.
func (z *analyzer) add(word string) {
	if z.pendingMarker != "" {
		if z.markerLeft != "" && z.markerLeft != word {
			z.a.orders = append(z.a.orders, [2]string{z.markerLeft, word})
		}
		z.pendingMarker = ""
	}
	z.a.words = append(z.a.words, word)
}

// readNumber adds the number at the token being read, if there is one,
// and moves past its tokens.
func (z *analyzer) readNumber(c *cursor) bool {
	n, used, ok := numberAt(c.toks, c.i)
	if !ok {
		return false
	}
	z.add(n)
	z.a.numbers = append(z.a.numbers, n)
	if u := unitSuffix(c.toks[c.i].low); u != "" {
		z.add(u)
	}
	c.i += used - 1
	z.prevNumber = true
	return true
}

// lookup returns a word's facts: kept ones, or made in scratch.
func (z *analyzer) lookup(w string) *facts {
	if f := factsOf(w); f != nil {
		return f
	}
	z.scratch = factsFor(w)
	return &z.scratch
}

// token reads one token: an entity, a number, a contraction's parts, a
// word of the grammar or a content word.
func (z *analyzer) token(c *cursor, t token) {
	w := t.low
	if t.entity {
		z.add(w)
		z.a.addName(w)
		z.prevNumber = false
		return
	}
	f := t.f
	if f == nil && w != "" && w[0] >= '0' && w[0] <= '9' && !strings.ContainsRune(w, '\'') && z.readNumber(c) {
		// No word of the tables before numbers starts with a digit.
		return
	}
	if f == nil {
		f = z.lookup(w)
	}
	if f.flags&(negContraction|contraction) != 0 {
		if f.flags&negContraction != 0 {
			z.a.neg++
		} else if f.rare.suffix == "ll" {
			// "Peru's", "who's", "they're", "it'll": the word, and a
			// "will" kept as tense.
			z.add("future~")
		}
		w = f.rare.base
		f = z.lookup(w)
	}
	if z.grammarWord(c, w, f) {
		return
	}
	z.prevNumber = false
	z.contentWord(c, t, w, f)
}

// grammarWord reads a question word, "or", a pronoun, a negator, a number
// word or a unit, and reports whether w was one.
func (z *analyzer) grammarWord(c *cursor, w string, f *facts) bool {
	switch {
	case f.flags&questionWord != 0:
		q := f.rare.word
		if z.a.qtype == "" {
			z.a.qtype = q
		}
		if q != "what" && q != "how" {
			z.add(q)
		}
	case w == "or": // "X or Y" asks to choose; "X and Y" does not
		z.add("or~")
	case f.flags&pronoun != 0:
		z.add(f.rare.word)
	case f.flags&negator != 0:
		z.a.neg++
	case f.flags&numeric != 0 && z.readNumber(c):
	case f.flags&unit != 0 && (z.prevNumber || f.flags&unitAlone != 0):
		z.add(f.rare.word)
		z.prevNumber = false
	default:
		return false
	}
	return true
}

// contentWord reads a word that is not of the grammar: a tense, an order
// marker, "this" before a time word, a name, or a word of the question's
// content (stopwords are dropped).
func (z *analyzer) contentWord(c *cursor, t token, w string, f *facts) {
	toks, i := c.toks, c.i
	switch {
	case f.flags&tenseWord != 0:
		z.add(f.rare.word)
	case f.flags&orderMarker != 0:
		z.markerLeft = z.a.leftOf(w)
		z.pendingMarker = w
		if f.flags&markerOnly == 0 {
			z.a.words = append(z.a.words, w) // a word of its own too: "before" is not "after"
		}
	case (w == "this" || w == "coming" || w == "current") && i+1 < len(toks) && timeWords[lemma(toks[i+1].low)]:
		z.add("this")
	case t.caps && (w == "us" || w == "go"):
		z.add(map[string]string{"us": "usa", "go": "golang"}[w])
		z.a.addName(z.a.words[len(z.a.words)-1])
	case f.flags&stopword != 0:
	case t.upper && !t.start && w != "i" || t.caps:
		name := w
		if w == "go" {
			name = "golang"
		}
		z.add(name)
		z.a.addName(name)
	default:
		z.add(f.canon)
		if i := len(z.a.words) - 1; i < len(c.hs) {
			c.hs[i] = f.hash
		}
	}
}

// setHashes sets the analysis' set of words from known, the hashes of
// its first words (0 for those not hashed yet). The set of words is
// known by their hashes, sorted: the strings are sorted only when the
// verifier compares two questions' words (see wordSet).
func (a *analysis) setHashes(known *[32]uint64) {
	hs := known[:min(len(a.words), len(known))]
	if len(a.words) > len(known) {
		hs = make([]uint64, len(a.words))
		copy(hs, known[:])
	}
	for i, h := range hs {
		if h == 0 {
			hs[i] = wordHash(a.words[i])
		}
	}
	slices.Sort(hs)
	hs = slices.Compact(hs)
	a.nset = len(hs)
	if len(hs) <= len(a.whInline) {
		a.wh = a.whInline[:len(hs)]
	} else {
		a.wh = make([]uint64, len(hs))
	}
	copy(a.wh, hs)
	for _, h := range a.wh {
		a.sum += h
		a.sig |= 1 << (h >> 1 & 63)
	}
}

// wordHash is a word's hash in analysis.wh. Its lowest bit says whether
// the word may be one of a typo's pair (see misspelt): five letters or
// more, all of them a to z. A set has a key less one word only for
// those (appendSetKeysOf): a key for each word a typo could have
// changed, not for each word.
func wordHash(w string) uint64 {
	h := maphash.String(sigSeed, w) &^ typoBit
	if len(w) >= 5 && letters(w) {
		h |= typoBit
	}
	return h
}

const typoBit = 1

// wordSet is words, sorted, each once.
func (a *analysis) wordSet() []string {
	if a.nset == 0 {
		return nil
	}
	set := slices.Clone(a.words)
	slices.Sort(set)
	return slices.Compact(set)
}

// appendSetKeys appends the keys the built-in matcher finds a question under: its
// set of words, and its set less each one word a typo could have changed
// (see wordHash), so that questions one misspelt word apart share a key.
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
			if h := wh(i); h&typoBit != 0 {
				dst = append(dst, setKey((b^(sum-h))*lessOne))
			}
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

// facts is what analyze needs of a lower-case word from the lexicon's
// tables, gathered once and kept (see factsOf): a question's word costs
// one lookup, not one in each of a dozen tables. Most words have only a
// canonical form and no flags; the rest of what a few words have is in
// rare.
type facts struct {
	canon string     // canonicalOf(w)
	hash  uint64     // canon's hash (analysis.wh)
	rare  *rareFacts // nil for most words
	flags factFlags
}

type rareFacts struct {
	phrases []phrase // phrases that start with the word
	base    string   // a contraction's word: "can't" is can, "peru's" peru
	suffix  string   // … and what was contracted (not for negations)
	word    string   // what a question word, pronoun, unit or tense word stands for
}

type factFlags uint16

const (
	negContraction factFlags = 1 << iota // negContractions: "can't"
	contraction                          // cutContraction: "peru's", "it'll"
	questionWord                         // questionWords
	pronoun                              // pronouns
	negator                              // negators
	numeric                              // numberAt may read a number here: digits first, or number words
	unit                                 // units
	unitAlone                            // … one that counts with no number before it (unitOf)
	tenseWord                            // tense
	orderMarker                          // orderMarkers
	markerOnly                           // … that is no content word of its own
	stopword                             // stopwords
)

// factsOf returns w's kept facts, keeping them if there is room; nil if
// w's are not kept (see factsFor). A word that starts with a digit is
// not kept: numbers and identifiers would fill the memory with words
// seldom seen twice.
func factsOf(w string) *facts {
	if w == "" || w[0] >= '0' && w[0] <= '9' || len(w) > maxFactWord {
		return nil
	}
	return factMemo.get(w)
}

// factMemo keeps the facts of the first words seen, up to maxFactMemo of
// them: people's words repeat, and a word's lemma and spelling take a
// dozen lookups to find.
var factMemo = newWordMemo()

// wordMemo is read from a map that never changes, without a lock (a
// lock's counter, written by every core, costs more than the lookup).
// Words not yet in it wait in recent, under mu, and are merged into a
// new map once an eighth as many lookups as it holds have waited for mu:
// a merge copies the map, and is paid for by the locks it saves.
type wordMemo struct {
	kept   atomic.Pointer[map[string]*facts]
	full   atomic.Bool // no more words are kept
	mu     sync.Mutex
	recent map[string]*facts
	locked int // lookups under mu since the last merge
	size   int // words in kept and recent
}

func newWordMemo() *wordMemo {
	m := &wordMemo{recent: map[string]*facts{}}
	m.kept.Store(&map[string]*facts{})
	return m
}

const (
	maxFactMemo = 1 << 16
	maxFactWord = 32
)

// get returns w's facts, kept or made now (nil when there is no room).
func (m *wordMemo) get(w string) *facts {
	if f, ok := (*m.kept.Load())[w]; ok {
		return f
	}
	return m.add(w)
}

// add returns the facts of a word not found in kept: those in recent, or
// new ones, kept if there is room (nil if not).
func (m *wordMemo) add(w string) *facts {
	if m.full.Load() {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	kept := *m.kept.Load()
	if f, ok := kept[w]; ok { // merged since the caller looked
		return f
	}
	m.locked++
	f, ok := m.recent[w]
	if !ok && m.size < maxFactMemo {
		lexicon.Do(loadLexicon)
		made := factsFor(w)
		f = &made
		m.recent[strings.Clone(w)] = f
		m.size++
	}
	if m.locked >= max(16, len(kept)/8) || m.size == maxFactMemo {
		merged := make(map[string]*facts, len(kept)+len(m.recent))
		for k, v := range kept {
			merged[k] = v
		}
		for k, v := range m.recent {
			merged[k] = v
		}
		m.kept.Store(&merged)
		m.recent, m.locked = map[string]*facts{}, 0
		m.full.Store(m.size == maxFactMemo)
	}
	return f
}

// factsFor looks w up in the lexicon's tables.
func factsFor(w string) facts {
	var f facts
	if w == "" {
		return f
	}
	var r rareFacts
	if ps, ok := phrases[w]; ok {
		r.phrases = ps
	}
	if base, ok := negContractions[w]; ok {
		f.flags |= negContraction
		r.base = base
	} else if base, suffix, ok := cutContraction(w); ok {
		f.flags |= contraction
		r.base, r.suffix = base, suffix
	}
	if q, ok := questionWords[w]; ok {
		f.flags |= questionWord
		r.word = q
	}
	if p, ok := pronouns[w]; ok {
		f.flags |= pronoun
		r.word = p
	}
	if negators[w] {
		f.flags |= negator
	}
	if first, _ := utf8.DecodeRuneInString(w); unicode.IsDigit(first) {
		f.flags |= numeric
	} else {
		f.flags |= numeric
		for p := range strings.SplitSeq(w, "-") {
			if _, ok := numberWords[p]; !ok {
				f.flags &^= numeric
				break
			}
		}
	}
	if u, ok := units[w]; ok {
		f.flags |= unit
		r.word = u
		if _, alone := unitOf(w, false); alone {
			f.flags |= unitAlone
		}
	}
	if m, ok := tense[w]; ok {
		f.flags |= tenseWord
		r.word = m
	}
	if orderMarkers[w] {
		f.flags |= orderMarker
		if stopwords[w] || w == "than" || w == "vs" || w == "versus" || w == "per" || w == "then" || w == "minus" || w == "divided" {
			f.flags |= markerOnly
		}
	}
	if stopwords[w] {
		f.flags |= stopword
	}
	f.canon = canonicalOf(w)
	f.hash = wordHash(f.canon)
	if r.phrases != nil || r.base != "" || r.suffix != "" || r.word != "" {
		f.rare = &r
	}
	return f
}

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
		if plainInteger(digits) {
			return digits, 1, true // as formatting it would give it: no copy
		}
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

// plainInteger says whether s is digits that a float64 holds exactly,
// without leading zeros: its own canonical form.
func plainInteger(s string) bool {
	if s == "" || len(s) > 15 || len(s) > 1 && s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// scan splits text into tokens. A token keeps inner dots, hyphens,
// apostrophes, commas and colons between digits ("3.5", "node.js",
// "e-mail", "don't", "1,000", "17:00"), a trailing "++" or "#" ("c++",
// "c#"); "%" and currency symbols are tokens of their own.
func scan(text string, toks []token) []token {
	for i := 0; i < len(text); i++ {
		if text[i] >= utf8.RuneSelf {
			return namesInContext(scanRunes(text, toks))
		}
	}
	return namesInContext(scanASCII(text, toks))
}

// Classes of ASCII bytes, for scanASCII.
const (
	classLetter = 1 << iota
	classDigit
	classUpper
	classWord = classLetter | classDigit
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = classLetter
		t[c-'a'+'A'] = classLetter | classUpper
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = classDigit
	}
	return t
}()

// scanASCII is scanRunes for a text of ASCII bytes only, most
// questions: a byte is a character, and a word a slice of the text.
func scanASCII(text string, toks []token) []token {
	lower := text // made once: the words are slices of it
	for i := 0; i < len(text); i++ {
		if asciiClass[text[i]]&classUpper != 0 {
			lower = strings.ToLower(text)
			break
		}
	}
	is := func(i int, class uint8) bool { return asciiClass[text[i]]&class != 0 }
	start := true
	n := len(text)
	for i := 0; i < n; {
		c := text[i]
		switch {
		case is(i, classWord):
			j := i + 1
		word:
			for j < n {
				next := j+1 < n && is(j+1, classWord)
				switch c := text[j]; {
				case is(j, classWord):
				case c == '\'' && next && is(j-1, classLetter):
				case (c == '.' || c == '-') && next:
				case (c == ',' || c == ':') && next && is(j-1, classDigit) && is(j+1, classDigit):
				case c == '+' && j+1 < n && text[j+1] == '+' && is(j-1, classLetter):
					j++
				case c == '#' && is(j-1, classLetter) && !next:
				default:
					break word
				}
				j++
			}
			toks = append(toks, asciiToken(text[i:j], lower[i:j], start))
			start = false
			i = j
		case c == '%':
			toks = append(toks, token{low: "%"})
			i++
		case c == '$':
			// "$100" is "100 usd": the symbol goes after the number.
			sym := token{low: "usd"}
			j := i + 1
			if j < n && is(j, classDigit) {
				k := j
				for k < n && (is(k, classDigit) || (text[k] == '.' || text[k] == ',') && k+1 < n && is(k+1, classDigit)) {
					k++
				}
				toks = append(toks, token{low: text[j:k]}, sym)
				i = k
			} else {
				toks = append(toks, sym)
				i++
			}
			start = false
		default:
			switch c {
			case '.', '?', '!', ';', ':', '\n':
				start = true
			}
			i++
		}
	}
	return toks
}

// asciiToken is newToken for an ASCII word.
func asciiToken(word, low string, start bool) token {
	t := token{low: low, start: start, upper: asciiClass[word[0]]&classUpper != 0}
	letters, uppers := 0, 0
	for i := 0; i < len(word); i++ {
		if c := asciiClass[word[i]]; c&classLetter != 0 {
			letters++
			if c&classUpper != 0 {
				uppers++
			}
		}
	}
	t.caps = letters >= 2 && uppers == letters
	if low == "i" || strings.HasPrefix(low, "i'") || low == "ok" {
		t.upper, t.caps = false, false // "I", "I'm" are no names
	}
	return t
}

// scanRunes is scan for any text.
func scanRunes(text string, toks []token) []token {
	start := true
	rs := []rune(text)
	n := len(rs)
	at := func(i int) rune { return rs[i] }
	sub := func(i, j int) string { return string(rs[i:j]) }
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
			word := strings.ReplaceAll(sub(i, j), "’", "'")
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
	return toks
}

// namesInContext drops what capitals say of names in a question in
// capitals or in title case: it has no names to tell.
func namesInContext(toks []token) []token {
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
// The tokens it keeps carry their facts. A question with none of the
// phrases, most, is returned as it is.
func rewritePhrases(toks []token) []token {
	var out []token // the tokens before i once a phrase was replaced; nil before
	for i := 0; i < len(toks); {
		f := factsOf(toks[i].low)
		toks[i].f = f
		var ps []phrase
		switch {
		case f == nil:
			ps = phrases[toks[i].low]
		case f.rare != nil:
			ps = f.rare.phrases
		}
		best := -1
		for k, p := range ps {
			if len(p.from) <= len(toks)-i && (best < 0 || len(p.from) > len(ps[best].from)) && matches(toks[i:], p.from) {
				best = k
			}
		}
		if best < 0 {
			if out != nil {
				out = append(out, toks[i])
			}
			i++
			continue
		}
		if out == nil {
			out = append(make([]token, 0, len(toks)+4), toks[:i]...)
		}
		p := ps[best]
		for _, w := range p.to {
			out = append(out, token{low: strings.TrimSuffix(w, "_"), entity: strings.HasSuffix(w, "_"), start: toks[i].start})
		}
		i += len(p.from)
	}
	if out == nil {
		return toks
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
