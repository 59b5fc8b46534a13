package kbindex

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/snowballstem"
	"github.com/blevesearch/snowballstem/english"
	"github.com/blevesearch/snowballstem/german"
	"golang.org/x/text/unicode/norm"
)

// lang is the language a text is analysed in.
type lang uint8

const (
	langEN   lang = iota
	langDE        // German
	langBoth      // a query with no telling words: stemmed both ways
)

// maxWordBytes bounds a term: longer runs (hashes, base64) are dropped.
const maxWordBytes = 48

// words splits s into lowercase runs of letters and digits, in order.
func words(s string, out []string) []string {
	start := -1
	lower := true
	for i, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) {
			if start < 0 {
				start, lower = i, true
			}
			if r >= utf8.RuneSelf || ('A' <= r && r <= 'Z') {
				lower = false
			}
			continue
		}
		if start >= 0 {
			out = appendWord(out, s[start:i], lower)
			start = -1
		}
	}
	if start >= 0 {
		out = appendWord(out, s[start:], lower)
	}
	return out
}

func appendWord(out []string, w string, lower bool) []string {
	if len(w) > maxWordBytes {
		return out
	}
	if !lower {
		w = strings.ToLower(w)
	}
	return append(out, w)
}

// detect tells English from German by counting the stop words of each:
// cheap and right for any passage of a sentence or more. Texts without a
// telling word are English for chunks and both for queries.
func detect(ws []string, query bool) lang {
	en, de := 0, 0
	for _, w := range ws {
		if _, ok := stopEN[w]; ok {
			en++
		}
		if _, ok := stopDE[w]; ok {
			de++
		}
	}
	switch {
	case de > en && (query || de >= 2): // one "bin" in code is no German text
		return langDE
	case en > de:
		return langEN
	case query:
		return langBoth
	}
	return langEN
}

// isStop reports whether w is a stop word of l.
func isStop(w string, l lang) bool {
	switch l {
	case langEN:
		_, ok := stopEN[w]
		return ok
	case langDE:
		_, ok := stopDE[w]
		return ok
	}
	_, en := stopEN[w]
	_, de := stopDE[w]
	return en || de
}

// stemmer stems words of one language, remembering what it stemmed: one
// per goroutine (the snowball environment is not safe for concurrent use).
type stemmer struct {
	env  *snowballstem.Env
	seen map[string]string
}

func newStemmer() *stemmer {
	return &stemmer{env: snowballstem.NewEnv(""), seen: map[string]string{}}
}

// stem returns the folded stem of a lowercase word in l (langEN or langDE).
func (s *stemmer) stem(w string, l lang) string {
	key := w
	if l == langDE {
		key = "\x00" + w
	}
	if t, ok := s.seen[key]; ok {
		return t
	}
	t := w
	if !isNumber(w) {
		s.env.SetCurrent(w)
		if l == langDE {
			german.Stem(s.env)
		} else {
			english.Stem(s.env)
		}
		t = fold(s.env.Current())
	}
	if len(s.seen) > 1<<16 {
		clear(s.seen)
	}
	s.seen[key] = t
	return t
}

func isNumber(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] < '0' || w[i] > '9' {
			return false
		}
	}
	return true
}

// fold removes accents (é → e, ä → a) after stemming, so that a word
// typed without them still matches.
func fold(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return s
	}
	var b strings.Builder
	for _, r := range norm.NFD.String(s) {
		switch {
		case unicode.Is(unicode.Mn, r):
		case r == 'ß':
			b.WriteString("ss")
		case r == 'ø':
			b.WriteByte('o')
		case r == 'æ':
			b.WriteString("ae")
		case r == 'œ':
			b.WriteString("oe")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// terms analyses a chunk's text into its terms (stemmed, folded, stop
// words dropped), in order, and the language it was read in.
func (s *stemmer) terms(text string, buf []string) ([]string, lang) {
	ws := words(text, buf[:0])
	l := detect(ws, false)
	out := ws[:0]
	for _, w := range ws {
		if isStop(w, l) {
			continue
		}
		out = append(out, s.stem(w, l))
	}
	return out, l
}

// queryWord is one word of a query with the terms it matches.
type queryWord struct {
	word   string   // lowercase, as typed
	terms  []string // its stems: one per language it may be in
	german bool     // it may be German: its last term is the German stem
}

// queryWords analyses a query: each word is stemmed in the query's
// language, or both ways when the query has no telling word.
func (s *stemmer) queryWords(text string) []queryWord {
	ws := words(text, nil)
	l := detect(ws, true)
	var out []queryWord
	seen := map[string]bool{}
	for _, w := range ws {
		if isStop(w, l) || seen[w] {
			continue
		}
		seen[w] = true
		q := queryWord{word: w, german: l != langEN}
		if l != langDE {
			q.terms = append(q.terms, s.stem(w, langEN))
		}
		if l != langEN {
			if t := s.stem(w, langDE); len(q.terms) == 0 || t != q.terms[0] {
				q.terms = append(q.terms, t)
			}
		}
		out = append(out, q)
	}
	return out
}

// splitCompound splits a German compound ("reisekostenabrechnung") into
// parts whose stems are known words (has tells), allowing the linking
// letters of German ("-s-", "-es-", "-n-", "-en-", "-e-") between them.
// It returns nil when the word is not such a compound. The fewest parts
// win; each part has 3 letters or more.
func (s *stemmer) splitCompound(w string, has func(string) bool) []string {
	if utf8.RuneCountInString(w) < 8 {
		return nil
	}
	best := s.split(w, has, 0)
	if len(best) < 2 {
		return nil
	}
	return best
}

func (s *stemmer) split(w string, has func(string) bool, depth int) []string {
	if depth > 0 && len(w) >= 3 {
		if t := s.stem(w, langDE); has(t) {
			return []string{t}
		}
	}
	if depth >= 3 {
		return nil
	}
	var best []string
	for i := 3; i <= len(w)-3; i++ {
		if !utf8.RuneStart(w[i]) {
			continue
		}
		head := s.headStem(w[:i], has)
		if head == "" {
			continue
		}
		rest := s.split(w[i:], has, depth+1)
		if rest != nil && (best == nil || len(rest)+1 < len(best)) {
			best = append([]string{head}, rest...)
		}
	}
	return best
}

// headStem is the known stem of a compound's non-final part, with or
// without a linking element.
func (s *stemmer) headStem(p string, has func(string) bool) string {
	if t := s.stem(p, langDE); has(t) {
		return t
	}
	for _, link := range []string{"es", "en", "s", "n", "e"} {
		if base, ok := strings.CutSuffix(p, link); ok && len(base) >= 3 {
			if t := s.stem(base, langDE); has(t) {
				return t
			}
		}
	}
	return ""
}
