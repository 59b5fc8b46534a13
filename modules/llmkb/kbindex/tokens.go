package kbindex

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// OpenAI's limits on a static chunking strategy.
const (
	MinChunkTokens     = 100
	MaxChunkTokens     = 4096
	DefaultChunkTokens = 800 // "auto"
	DefaultOverlap     = 400 // "auto"
)

// ValidateChunking checks a static chunking strategy against OpenAI's
// rules: max_chunk_size_tokens in 100..4096, chunk_overlap_tokens 0 or
// more and at most half of max_chunk_size_tokens.
func ValidateChunking(maxTokens, overlap int) error {
	if maxTokens < MinChunkTokens || maxTokens > MaxChunkTokens {
		return fmt.Errorf("chunking_strategy.static.max_chunk_size_tokens is %d: it must be between %d and %d", maxTokens, MinChunkTokens, MaxChunkTokens)
	}
	if overlap < 0 {
		return fmt.Errorf("chunking_strategy.static.chunk_overlap_tokens is %d: it must be 0 or more, and at most half of max_chunk_size_tokens (%d)", overlap, maxTokens/2)
	}
	if overlap > maxTokens/2 {
		return fmt.Errorf("chunking_strategy.static.chunk_overlap_tokens is %d: it must be at most half of max_chunk_size_tokens (%d), so between 0 and %d", overlap, maxTokens, maxTokens/2)
	}
	return nil
}

// CountTokens estimates the number of cl100k tokens in s without the
// tokenizer's files. It follows cl100k's pre-tokenizer (a word takes the
// space before it, digits go in threes, punctuation in runs) and prices
// each word by its length and letters: cl100k has most English words up
// to nine letters as one token, while German words and words with
// accented letters are cut every three or four letters. Which pricing a
// word gets depends on the language of the text (told by its stop
// words). Against cl100k on the twelve English, German and table samples
// in samples_test.go (which its constants were fitted on) the estimate is
// within 8% per paragraph and 2% over all of them.
func CountTokens(s string) int {
	if s == "" {
		return 0
	}
	return max(1, int(tokenCost(s, detectTokens(s) == langDE)+0.5))
}

// tokenCost is CountTokens' estimate before rounding, for a text whose
// language is known: the costs of the parts of a text add up to about
// the cost of the whole.
func tokenCost(s string, german bool) float64 {
	var total float64
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case isWordRune(r):
			t, j := wordAt(s, i, german)
			total += t
			i = j
		case '0' <= r && r <= '9':
			j := i
			for j < len(s) && '0' <= s[j] && s[j] <= '9' {
				j++
			}
			total += float64((j - i + 2) / 3)
			i = j
		case unicode.IsSpace(r):
			j := i
			for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
				j++
			}
			if j == i { // newlines and other spaces
				total += 0.5
				j = i + n
			} else if j-i > 1 || j < len(s) && '0' <= s[j] && s[j] <= '9' {
				total++ // a run of spaces, or a space before digits, is a token
			}
			i = j
		case r > 0x2E80: // CJK and the like: about one token a character
			total++
			i += n
		default: // punctuation: pairs like ". " or "),", about one each
			total += 0.9
			i += n
		}
	}
	return total
}

// wordAt prices the word of letters at s[i:] and returns where it ends.
func wordAt(s string, i int, german bool) (float64, int) {
	letters, accents, upper := 0, 0, 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !isWordRune(r) {
			break
		}
		letters++
		if r >= utf8.RuneSelf {
			accents++
		} else if 'A' <= r && r <= 'Z' {
			upper++
		}
		i += n
	}
	return wordTokens(letters, accents, upper, german), i
}

func isWordRune(r rune) bool {
	return r <= 0x2E80 && (unicode.IsLetter(r) || unicode.Is(unicode.Mn, r))
}

// wordTokens prices one word of letters.
func wordTokens(letters, accents, upper int, german bool) float64 {
	t := 1.0
	if german {
		if letters > 4 {
			t = 0.31*float64(letters) - 0.1
		}
	} else if letters > 9 {
		t = 1 + float64(letters-9)/4
	}
	if upper > 1 && upper < letters { // CamelCase and mixed case cut more
		t += 0.5 * float64(upper-1)
	}
	if upper == letters && letters > 3 { // ACRONYMS are cut every 2-3
		t = float64(letters) / 2.5
	}
	return t + 0.5*float64(accents)
}

// detectTokens tells the language of a text from the stop words of its
// first 200 words.
func detectTokens(s string) lang {
	var buf [200]string
	ws := words(s[:min(len(s), 2000)], buf[:0])
	if len(ws) > 200 {
		ws = ws[:200]
	}
	return detect(ws, false)
}
