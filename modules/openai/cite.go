package openai

import (
	"slices"
	"strconv"
	"unicode/utf8"
)

// The citation rule. When a knowledge base gave the model passages
// (Retrieval), the answer's text gets file_citation annotations:
//
//   - for every marker "[n]", "[n, m]" or "【n】" in the text whose numbers
//     are passages given to the model (1 is Retrieval.Results[0]), one
//     annotation per distinct number, its index the offset just after
//     the marker;
//   - when the text has no such marker, one per distinct file of the
//     results (the first 3 files, in result order) at the text's end.
//
// The markers stay in the text. OpenAI's reference names no unit ("the
// index in the output text at which to insert the file citation"); the
// offsets count characters, Unicode code points of the decoded text, as
// a Python str is indexed. For text in the Basic Multilingual Plane that
// equals JavaScript's UTF-16 string index; an emoji before a marker
// counts one (two in UTF-16), and never the bytes of UTF-8.

// maxCitedFiles bounds the annotations of a text without markers.
const maxCitedFiles = 3

// maxCiteNumber bounds a marker's number: beyond it, it is no marker.
const maxCiteNumber = 1 << 20

// Citation is one annotation of an answer: the passage it cites and
// where.
type Citation struct {
	Result int   // the passage: an index in Retrieval.Results
	Index  int64 // code points of the text before the annotation's place
}

// Citer applies the citation rule to one answer's text as it arrives, in
// pieces cut anywhere between characters (Feed, FeedJSON), and keeps its
// annotations in the order they are found; Finish ends the text. A Citer
// is used by one goroutine.
type Citer struct {
	results []RetrievalResult
	chars   int64 // code points of the text so far
	state   uint8 // citeIdle, citeDigit (a number must follow), citeNumber
	close   rune  // the open marker's closing bracket
	cur     int   // the number being read
	nums    []int // the open marker's numbers so far
	cites   []Citation
	heads   [][]byte // `{"type":"file_citation","file_id":…,"filename":…,"index":`, made when first written
}

const (
	citeIdle = iota
	citeDigit
	citeNumber
)

// NewCiter returns a Citer for an answer to the passages rv found, or
// nil when it found none: such an answer has no citations.
func NewCiter(rv *Retrieval) *Citer {
	if rv == nil || len(rv.Results) == 0 {
		return nil
	}
	return &Citer{results: rv.Results}
}

// Feed reads more of the text, decoded.
func (c *Citer) Feed(s string) {
	for _, r := range s {
		c.chars++
		c.step(r)
	}
}

// FeedJSON reads more of the text: the inside of a JSON string as the
// engine escaped it. Escapes are whole within a piece, except that the
// two halves of a surrogate pair may come apart (the low one counts
// nothing).
func (c *Citer) FeedJSON(s []byte) {
	for i := 0; i < len(s); {
		r := rune(s[i])
		switch {
		case r == '\\' && i+5 < len(s) && s[i+1] == 'u':
			n, _ := strconv.ParseUint(string(s[i+2:i+6]), 16, 32)
			r, i = rune(n), i+6
			if r >= 0xdc00 && r <= 0xdfff {
				continue // the second half of a character counted at its first
			}
		case r == '\\' && i+1 < len(s):
			r, i = rune(s[i+1]), i+2 // \n, \" …: neither digits nor brackets
		case r < utf8.RuneSelf:
			i++
		default:
			var size int
			r, size = utf8.DecodeRune(s[i:])
			i += size
		}
		c.chars++
		c.step(r)
	}
}

// step reads one character of the text.
func (c *Citer) step(r rune) {
	switch {
	case c.state != citeIdle && r >= '0' && r <= '9':
		if c.cur = c.cur*10 + int(r-'0'); c.cur > maxCiteNumber {
			c.state = citeIdle
			return
		}
		c.state = citeNumber
	case c.state == citeDigit && r == ' ' && len(c.nums) > 0:
	case c.state == citeNumber && r == ',':
		c.nums, c.cur, c.state = append(c.nums, c.cur), 0, citeDigit
	case c.state == citeNumber && r == c.close:
		c.nums, c.state = append(c.nums, c.cur), citeIdle
		c.cite()
	case r == '[' || r == '【':
		c.close, c.cur, c.nums, c.state = ']', 0, c.nums[:0], citeDigit
		if r == '【' {
			c.close = '】'
		}
	default:
		c.state = citeIdle
	}
}

// cite adds the annotations of the marker just read, once per number
// that is a passage.
func (c *Citer) cite() {
	for k, n := range c.nums {
		if n < 1 || n > len(c.results) || slices.Index(c.nums[:k], n) >= 0 {
			continue
		}
		c.add(n - 1)
	}
	c.nums = c.nums[:0]
}

func (c *Citer) add(result int) {
	if c.cites == nil {
		c.cites = make([]Citation, 0, 8)
	}
	c.cites = append(c.cites, Citation{Result: result, Index: c.chars})
}

// Finish ends the text: without any marker, it cites the files the
// answer was given, at its end.
func (c *Citer) Finish() {
	if len(c.cites) > 0 || c.chars == 0 {
		return
	}
	var files []string
	for i := range c.results {
		id := c.results[i].FileID
		if slices.Index(files, id) >= 0 {
			continue
		}
		if files = append(files, id); len(files) > maxCitedFiles {
			break
		}
		c.add(i)
	}
}

// Len returns the number of annotations found so far.
func (c *Citer) Len() int { return len(c.cites) }

// Citations returns the annotations found so far; the caller must not
// change them.
func (c *Citer) Citations() []Citation { return c.cites }

// Result returns the passage of the k-th annotation.
func (c *Citer) Result(k int) *RetrievalResult { return &c.results[c.cites[k].Result] }

// AppendAnnotation appends the k-th annotation as the Responses API
// writes it: {"type":"file_citation","file_id":…,"filename":…,"index":…}.
func (c *Citer) AppendAnnotation(b []byte, k int) []byte {
	ct := c.cites[k]
	if c.heads == nil {
		c.heads = make([][]byte, len(c.results))
	}
	h := c.heads[ct.Result]
	if h == nil {
		r := &c.results[ct.Result]
		h = append(make([]byte, 0, 64+len(r.FileID)+len(r.Filename)), `{"type":"file_citation","file_id":`...)
		h = AppendJSONString(h, r.FileID)
		h = AppendJSONString(append(h, `,"filename":`...), r.Filename)
		h = append(h, `,"index":`...)
		c.heads[ct.Result] = h
	}
	return append(strconv.AppendInt(append(b, h...), ct.Index, 10), '}')
}

// AppendAnnotations appends every annotation so far, separated by
// commas, as AppendAnnotation writes each.
func (c *Citer) AppendAnnotations(b []byte) []byte {
	for k := range c.cites {
		if k > 0 {
			b = append(b, ',')
		}
		b = c.AppendAnnotation(b, k)
	}
	return b
}
