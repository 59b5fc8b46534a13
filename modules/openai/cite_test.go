package openai

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// citeRetrieval is what a knowledge base found: five passages of four
// files, the first file twice.
func citeRetrieval() *Retrieval {
	return &Retrieval{Results: []RetrievalResult{
		{FileID: "file-a", Filename: "a.md"},
		{FileID: "file-b", Filename: "b \"quoted\".pdf"},
		{FileID: "file-a", Filename: "a.md"},
		{FileID: "file-c", Filename: "c.txt"},
		{FileID: "file-d", Filename: "d.txt"},
	}}
}

var citeMarkerRE = regexp.MustCompile(`\[(\d+(?:, *\d+)*)\]|【(\d+(?:, *\d+)*)】`)

// wantCites is the citation rule written out plainly: each distinct
// passage number of each marker, at the code point offset after the
// marker; with no marker, the first three files at the end.
func wantCites(text string, n int) []Citation {
	var out []Citation
	for _, m := range citeMarkerRE.FindAllStringSubmatchIndex(text, -1) {
		var list string
		if m[2] >= 0 {
			list = text[m[2]:m[3]]
		} else {
			list = text[m[4]:m[5]]
		}
		var seen []int
		for _, s := range strings.Split(list, ",") {
			k, _ := strconv.Atoi(strings.TrimSpace(s))
			if k < 1 || k > n || slices.Contains(seen, k) {
				continue
			}
			seen = append(seen, k)
			out = append(out, Citation{Result: k - 1, Index: int64(utf8.RuneCountInString(text[:m[1]]))})
		}
	}
	if len(out) > 0 || text == "" {
		return out
	}
	var files []string
	for i, r := range citeRetrieval().Results {
		if !slices.Contains(files, r.FileID) && len(files) < 3 {
			files = append(files, r.FileID)
			out = append(out, Citation{Result: i, Index: int64(utf8.RuneCountInString(text))})
		}
	}
	return out
}

var citeTexts = []string{
	"Grüße 👋 [1] and [2, 3]. Also 【1】, [9], [0], [] and [x]. Done[4][[5]",
	"Nothing cited here, 世界 👋 — \"quoted\"\n",
	"line\n\"q\" [5,4 ,3] 😀😀[2] [1,1] 【2, 4】 [99999999999] [1 ,2]",
	"",
}

// asciiJSON is the inside of s as a JSON string with every non-ASCII
// character escaped (\u00fc, astral ones as surrogate pairs), as some
// engines write.
func asciiJSON(s string) string {
	q, _ := json.Marshal(s)
	var b strings.Builder
	for _, r := range string(q[1 : len(q)-1]) {
		switch {
		case r < utf8.RuneSelf:
			b.WriteRune(r)
		case r > 0xffff:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// cut splits s at random places that cut no escape (but may cut a
// surrogate pair) and no UTF-8 sequence.
func cut(rng *rand.Rand, s string) []string {
	var out []string
	for len(s) > 0 {
		n := min(len(s), 1+rng.IntN(6))
		for n < len(s) && (!utf8.RuneStart(s[n]) || strings.LastIndexByte(s[max(0, n-5):n], '\\') >= 0) {
			n++
		}
		out, s = append(out, s[:n]), s[n:]
	}
	return out
}

// TestCiter feeds each text whole and in random pieces, decoded, as
// UTF-8 JSON and with every character escaped, and checks the
// annotations against the rule.
func TestCiter(t *testing.T) {
	for n, text := range citeTexts {
		want := wantCites(text, len(citeRetrieval().Results))
		q, _ := json.Marshal(text)
		forms := map[string]func(*Citer, string){
			"decoded": (*Citer).Feed,
			"json":    func(c *Citer, s string) { c.FeedJSON([]byte(s)) },
			"escaped": func(c *Citer, s string) { c.FeedJSON([]byte(s)) },
		}
		inputs := map[string]string{"decoded": text, "json": string(q[1 : len(q)-1]), "escaped": asciiJSON(text)}
		for form, feed := range forms {
			for seed := range uint64(30) {
				rng := rand.New(rand.NewPCG(uint64(n), seed))
				c := NewCiter(citeRetrieval())
				for _, piece := range cut(rng, inputs[form]) {
					feed(c, piece)
				}
				c.Finish()
				if diff := cmp.Diff(want, c.Citations()); diff != "" {
					t.Fatalf("text %d, %s, seed %d: citations (-want +got):\n%s", n, form, seed, diff)
				}
			}
		}
	}
}

// TestCiterAnnotations checks the Responses API's JSON of the
// annotations, and that nothing is cited without passages.
func TestCiterAnnotations(t *testing.T) {
	if NewCiter(nil) != nil || NewCiter(&Retrieval{}) != nil {
		t.Fatal("got a citer without passages, want nil")
	}
	c := NewCiter(citeRetrieval())
	c.Feed("é [2] and [1]")
	c.Finish()
	got := string(c.AppendAnnotations(nil))
	want := `{"type":"file_citation","file_id":"file-b","filename":"b \"quoted\".pdf","index":5},` +
		`{"type":"file_citation","file_id":"file-a","filename":"a.md","index":13}`
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if r := c.Result(0); r.FileID != "file-b" {
		t.Fatalf("got result %v, want file-b", r)
	}
}
