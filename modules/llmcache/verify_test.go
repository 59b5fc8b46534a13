package llmcache

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestNormalisationKeepsWordsApart(t *testing.T) {
	for _, c := range []struct{ word, want string }{
		{"https", "https"}, {"http", "http"}, {"bus", "bus"}, {"news", "news"}, {"glasses", "glasses"},
		{"cheaper", "cheaper"}, {"left", "left"}, {"saw", "saw"},
		{"geese", "goose"}, {"taxes", "tax"}, {"pianos", "piano"}, {"colour", "color"}, {"organise", "organize"},
		{"centre", "center"}, {"travelled", "traveled"}, {"automobile", "car"},
	} {
		if got := canonical(c.word); got != c.want {
			t.Errorf("canonical(%q) = %q, want %q", c.word, got, c.want)
		}
	}
	if a := analyze("Python with type hints"); !slices.Contains(a.words, "python") || a.neg != 0 {
		t.Errorf("with: %+v", a)
	}
	if a := analyze("Python without type hints"); a.neg != 1 {
		t.Errorf("without is a negation: %+v", a)
	}
}

func TestNamesAndNumbers(t *testing.T) {
	for _, c := range []struct {
		text        string
		names, nums []string
		neg         int
	}{
		{"I'm moving to Spain. What do I need?", []string{"spain"}, nil, 0},
		{"What is the capital of France.", []string{"france"}, nil, 0},
		{"Is the US bigger than the United States of America?", []string{"usa"}, nil, 0},
		{"Go or Golang?", []string{"golang"}, nil, 0},
		{"Compare JS and JavaScript", []string{"javascript"}, nil, 0},
		{"When did World War II end? And the Second World War?", []string{"ww2"}, nil, 0},
		{"What is 15% of 200?", nil, []string{"15", "200"}, 0},
		{"what's fifteen percent of two hundred", nil, []string{"15", "200"}, 0},
		{"How do I set up 2FA?", []string{"2fa"}, nil, 0},
		{"Is $1,000 in 3.5 years at 17:00 on the 21st twenty-five?", nil, []string{"1000", "3.5", "17:00", "#21", "25"}, 0},
		{"I don't know why it isn't working", nil, nil, 2},
	} {
		a := analyze(c.text)
		if !slices.Equal(a.names, c.names) || !slices.Equal(a.numbers, c.nums) || a.neg != c.neg {
			t.Errorf("%q: names %q numbers %q negations %d, want %q %q %d", c.text, a.names, a.numbers, a.neg, c.names, c.nums, c.neg)
		}
	}
}

// TestNumbersAsWritten checks that a number written in plain digits,
// kept as written, is what formatting its value gives: the same number
// written two ways is one number ("007" is 7, "1,000" is 1000).
func TestNumbersAsWritten(t *testing.T) {
	ns := []string{"0", "7", "10", "007", "0.5", "3.50", "1,000", "100000", "123456789012345",
		"1234567890123456", "12345678901234567", "99999999999999999999"}
	for i := range 2000 {
		ns = append(ns, strconv.Itoa(i*7919), strconv.FormatUint(uint64(i)*0x9e3779b97f4a7c15>>uint(i%60), 10))
	}
	for _, s := range ns {
		got, _, ok := numberAt([]token{{low: s}}, 0)
		f, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
		if !ok || err != nil {
			t.Fatalf("%q: no number (%v)", s, err)
		}
		if want := strconv.FormatFloat(f, 'f', -1, 64); got != want {
			t.Errorf("%q is the number %s, want %s", s, got, want)
		}
	}
}

func TestVerifierWithAnEmbeddingModel(t *testing.T) {
	// An embedding model may find candidates whose words differ; the
	// verifier still refuses the ones that ask something else.
	for _, c := range []struct {
		a, b string
		ok   bool
	}{
		{"How do I update my billing information?", "How can I change the payment details on my account?", true},
		{"What's the population of Tokyo?", "Tokyo population size?", true},
		{"How do I get to the airport by train?", "How do I get to the airport by taxi?", false},
		{"Write an email in a formal tone", "Write an email in a casual tone", false},
		{"Convert 100 USD to EUR", "Convert 100 EUR to USD", false},
		{"Is it allowed to park here?", "Is it not allowed to park here?", false},
		{"What's on this weekend?", "What's on next weekend?", false},
		{"Translate hello into French", "Translate hello into Spanish", false},
		{"Who is the CEO of Apple?", "Who was the CEO of Apple?", false},
		{"What is 15% of 200?", "What is 15% of 300?", false},
		{"I'm eating too much", "I'm eating too little", false},
	} {
		if got := verified(analyze(c.a), analyze(c.b)); got != c.ok {
			t.Errorf("%q ~ %q: verified %v, want %v", c.a, c.b, got, c.ok)
		}
	}
}

func TestCosineIsClamped(t *testing.T) {
	v := quantize(normalize([]float32{0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3}))
	if got := cosine(v, v); got > 1 || got < 0.999 {
		t.Errorf("cosine of a vector with itself: %v, want 1", got)
	}
}

// TestWordMemo keeps words from several goroutines at once: each word's
// facts are the same record every time and right, words are read
// without the lock once merged, and past the bound no more are kept.
func TestWordMemo(t *testing.T) {
	m := newWordMemo()
	words := make([]string, maxFactMemo+500)
	for i := range words {
		words[i] = fmt.Sprintf("w%dx", i)
	}
	words[0], words[1], words[2] = "colour", "https", "couldn't"
	first := make([]*facts, len(words))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < 20000; i += 4 {
				if f := m.get(words[i]); f == nil {
					t.Errorf("%q not kept with room left", words[i])
				}
			}
		}()
	}
	wg.Wait()
	for i := range 20000 {
		first[i] = m.get(words[i])
		if again := m.get(words[i]); again != first[i] {
			t.Fatalf("%q: two records", words[i])
		}
	}
	if want := factsFor("colour"); first[0].canon != want.canon || first[0].canon != "color" {
		t.Errorf("colour: canonical %q, want color", first[0].canon)
	}
	if first[2].flags&negContraction == 0 || first[2].rare.base != "could" {
		t.Errorf("couldn't: %+v", first[2])
	}
	if n := len(*m.kept.Load()); n < 20000-20000/8-16 {
		t.Errorf("%d of 20000 words merged into the map read without a lock", n)
	}
	for i := 20000; i < len(words); i++ {
		m.get(words[i])
	}
	if !m.full.Load() || m.get("never-seen-before") != nil {
		t.Error("the memo keeps words past its bound")
	}
	if m.get(words[100]) != first[100] {
		t.Error("a kept word was lost when the memo filled")
	}
}

// canonical is the form analyze gives a content word: American spelling,
// lemma, synonym group.
func canonical(w string) string {
	lexicon.Do(loadLexicon)
	return factsFor(w).canon
}
