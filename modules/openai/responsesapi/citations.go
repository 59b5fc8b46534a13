package responsesapi

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/llmgw/llmgw/modules/openai"
)

// When the knowledge base searched for a request (Request.Retrieval), the
// response's output starts with a file_search_call item and the answer's
// text gets file_citation annotations:
//
//   - for every marker "[n]", "[n, m]" or "【n】" in the text whose numbers
//     are passages given to the model (1 is Retrieval.Results[0]), one
//     annotation per number, its index the offset just after the marker;
//   - when the text has no such marker, one per distinct file of the
//     results (the first 3 files, in result order) at the text's end.
//
// The markers stay in the text. The API's reference names no unit ("the
// index in the output text at which to insert the file citation"); the
// offsets count characters, Unicode code points of the decoded text, as
// a Python str is indexed. For text in the Basic Multilingual Plane that
// equals JavaScript's UTF-16 string index; an emoji before a marker
// counts one (two in UTF-16), and never the bytes of UTF-8.

// maxCitedFiles bounds the annotations of a text without markers.
const maxCitedFiles = 3

// citeSet is what a response's citations are written from: the passages,
// and each one's annotation up to its index.
type citeSet struct {
	results []openai.RetrievalResult
	heads   [][]byte // `{"type":"file_citation","file_id":…,"filename":…,"index":`, made when first cited
}

func newCiteSet(rv *openai.Retrieval) *citeSet {
	if rv == nil || len(rv.Results) == 0 {
		return nil
	}
	return &citeSet{results: rv.Results, heads: make([][]byte, len(rv.Results))}
}

func (cs *citeSet) head(i int) []byte {
	if cs.heads[i] == nil {
		r := &cs.results[i]
		h := append(make([]byte, 0, 64+len(r.FileID)+len(r.Filename)), `{"type":"file_citation","file_id":`...)
		h = openai.AppendJSONString(h, r.FileID)
		h = openai.AppendJSONString(append(h, `,"filename":`...), r.Filename)
		cs.heads[i] = append(h, `,"index":`...)
	}
	return cs.heads[i]
}

// citer finds the markers of one message's text as it arrives, in
// pieces cut anywhere between characters, and keeps its annotations.
type citer struct {
	set    *citeSet
	chars  int64 // code points of the text so far
	state  uint8 // citeIdle, citeDigit (a number must follow), citeNumber
	close  rune  // the open marker's closing bracket
	cur    int   // the number being read
	nums   []int // the open marker's numbers so far
	annots []byte
	starts []int // where each annotation starts in annots
}

const (
	citeIdle = iota
	citeDigit
	citeNumber
)

// maxCiteNumber bounds a marker's number: beyond it, it is no marker.
const maxCiteNumber = 1 << 20

// feed reads more of the text: the inside of a JSON string as the engine
// escaped it. Escapes are whole within a piece, except that the two
// halves of a surrogate pair may come apart (the low one counts nothing).
func (c *citer) feed(s []byte) {
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
func (c *citer) step(r rune) {
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

// cite writes the annotations of the marker just read, once per number
// that is a passage.
func (c *citer) cite() {
	for k, n := range c.nums {
		if n < 1 || n > len(c.set.results) || slices.Index(c.nums[:k], n) >= 0 {
			continue
		}
		c.add(n - 1)
	}
	c.nums = c.nums[:0]
}

func (c *citer) add(result int) {
	if c.annots == nil {
		c.annots, c.starts = make([]byte, 0, 1024), make([]int, 0, 16)
	}
	c.starts = append(c.starts, len(c.annots))
	if len(c.annots) > 0 {
		c.annots = append(c.annots, ',')
	}
	c.annots = strconv.AppendInt(append(c.annots, c.set.head(result)...), c.chars, 10)
	c.annots = append(c.annots, '}')
}

// finish ends the text: without any marker, it cites the files the
// answer was given, at its end.
func (c *citer) finish() {
	if len(c.starts) > 0 || c.chars == 0 {
		return
	}
	var files []string
	for i := range c.set.results {
		id := c.set.results[i].FileID
		if slices.Index(files, id) >= 0 {
			continue
		}
		if files = append(files, id); len(files) > maxCitedFiles {
			break
		}
		c.add(i)
	}
}

// annotation returns the k-th annotation.
func (c *citer) annotation(k int) []byte {
	a := c.annots[c.starts[k]:]
	if k+1 < len(c.starts) {
		a = c.annots[c.starts[k]:c.starts[k+1]]
	}
	if len(a) > 0 && a[0] == ',' {
		a = a[1:]
	}
	return a
}

// search adds the file_search_call item, first in the output, and
// prepares the citations of the message items that follow.
func (t *respTurn) search(o *respOut, rv *openai.Retrieval) *respItem {
	id := rv.CallID
	if id == "" {
		id = newID("fs_")
	}
	it := &respItem{kind: 's', id: jsonEscape(id), index: len(o.items), status: rv.Status}
	o.items = append(o.items, it)
	if it.status == "" {
		it.status = "completed"
	}
	b := append(make([]byte, 0, 256), `{"id":"`...)
	b = append(append(append(b, it.id...), `","type":"file_search_call","status":"`...), it.status...)
	b = append(b, `","queries":`...)
	if len(rv.Queries) == 0 {
		b = append(b, "[]"...)
	} else {
		q, _ := json.Marshal(rv.Queries)
		b = append(b, q...)
	}
	b = append(b, `,"results":`...)
	if t.withResults() {
		b = appendResults(b, rv.Results)
	} else {
		b = append(b, "null"...)
	}
	it.text = append(b, '}')
	t.cites = newCiteSet(rv)
	return it
}

func appendResults(b []byte, results []openai.RetrievalResult) []byte {
	b = append(b, '[')
	for i := range results {
		if i > 0 {
			b = append(b, ',')
		}
		r, err := json.Marshal(&results[i])
		if err != nil { // an attribute JSON cannot hold: the result without them
			c := results[i]
			c.Attributes = nil
			r, _ = json.Marshal(&c)
		}
		b = append(b, r...)
	}
	return append(b, ']')
}

// appendSearchItem writes the file_search_call item: whole, or as it
// starts.
func (it *respItem) appendSearchItem(b []byte, full bool) []byte {
	if full {
		return append(b, it.text...)
	}
	b = append(append(append(b, `{"id":"`...), it.id...), `","type":"file_search_call","status":"in_progress","queries":[],"results":null}`...)
	return b
}

// retrieval returns what the knowledge base found for the turn, nil
// when it did not search.
func (t *respTurn) retrieval() *openai.Retrieval {
	if t.req == nil {
		return nil
	}
	return t.req.Retrieval
}

// withResults reports whether the client asked for the search results
// (include: ["file_search_call.results"]).
func (t *respTurn) withResults() bool {
	return t.req != nil && t.req.FileSearch != nil && t.req.FileSearch.IncludeResults
}
