package kbindex

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/llmgw/llmgw/modules/llmkb/docread"
)

// ChunkOptions sizes chunks in tokens. The zero value is OpenAI's "auto":
// 800 tokens a chunk, 400 of overlap; a MaxTokens with a zero
// OverlapTokens is a static strategy without overlap.
type ChunkOptions struct{ MaxTokens, OverlapTokens int }

// Piece is one chunk of a document.
type Piece struct {
	Text   string // the chunk's text; a chunk starts with its heading path ("Travel policy > Hotels") on its first line when the document has headings
	Tokens int    // CountTokens of Text, priced in the document's language
}

// unit is a paragraph, a list item, a heading inside a chunk, a table or
// part of one, or a sentence of a paragraph too long for one chunk.
type unit struct {
	text   string
	tokens float64
	table  bool
	cont   bool // continues the paragraph before it (a sentence of a long one)
	line   bool // continues the code before it (its lines end in newlines)
}

// chunker builds the chunks of one document.
type chunker struct {
	max, overlap float64
	german       bool
	stack        []heading // the headings above the current block
	title        string
	path         string  // the heading path of the current chunk
	pathTokens   float64 // with its newline
	cur          []unit
	curTokens    float64
	out          []Piece
}

type heading struct {
	level int
	text  string
}

// Chunk cuts a document into pieces of at most opt.MaxTokens tokens (by
// CountTokens), along its structure: a heading starts a new chunk when
// the current one is more than half full, a paragraph is cut only when
// it alone is too long (at sentence ends, then between words), a table's
// rows stay together where they fit and each part of a cut table starts
// with its header row. A chunk after one cut for size starts with the
// whole trailing paragraphs (or sentences) of the one before, up to
// opt.OverlapTokens; one after a heading or a table starts afresh.
func Chunk(doc *docread.Document, opt ChunkOptions) []Piece {
	maxT, overlap := opt.MaxTokens, opt.OverlapTokens
	if maxT <= 0 {
		maxT = DefaultChunkTokens
		if overlap == 0 {
			overlap = DefaultOverlap
		}
	}
	overlap = min(max(overlap, 0), maxT/2)
	c := &chunker{max: float64(maxT), overlap: float64(overlap), title: doc.Title, german: docGerman(doc)}
	c.setPath()
	blocks := doc.Blocks
	for i := 0; i < len(blocks); i++ {
		b := blocks[i]
		switch b.Kind {
		case docread.Heading:
			c.heading(b)
		case docread.TableRow:
			j := i
			var rows []string
			for ; j < len(blocks) && blocks[j].Kind == docread.TableRow; j++ {
				rows = append(rows, blocks[j].Text)
			}
			c.table(rows)
			i = j - 1
		default:
			text := b.Text
			if b.Kind == docread.ListItem {
				text = "- " + text
			}
			if strings.TrimSpace(b.Text) != "" {
				c.add(unit{text: text, tokens: c.count(text)}, b.Kind == docread.Code)
			}
		}
	}
	c.emit()
	return c.out
}

// docGerman tells whether a document is German, from its first blocks.
func docGerman(doc *docread.Document) bool {
	var b strings.Builder
	for _, bl := range doc.Blocks {
		if b.Len() > 2000 {
			break
		}
		b.WriteString(bl.Text)
		b.WriteByte(' ')
	}
	return detectTokens(b.String()) == langDE
}

func (c *chunker) count(s string) float64 { return tokenCost(s, c.german) }

// budget is what a chunk's body may hold.
func (c *chunker) budget() float64 { return c.max - c.pathTokens }

func (c *chunker) setPath() {
	parts := make([]string, 0, len(c.stack))
	for _, h := range c.stack {
		parts = append(parts, h.text)
	}
	if len(parts) == 0 && c.title != "" {
		parts = []string{c.title}
	}
	// A path takes at most a quarter of a chunk: the nearest headings.
	for {
		c.path = strings.Join(parts, " > ")
		c.pathTokens = 0
		if c.path != "" {
			c.pathTokens = c.count(c.path) + 1
		}
		if c.pathTokens <= c.max/4 {
			return
		}
		if len(parts) > 1 {
			parts = parts[1:]
			continue
		}
		c.path = c.cutWords(c.path, c.max/4-1)[0]
		c.pathTokens = c.count(c.path) + 1
		return
	}
}

func (c *chunker) heading(b docread.Block) {
	text := strings.TrimSpace(b.Text)
	if text == "" {
		return
	}
	if c.curTokens > c.budget()/2 {
		c.emit()
	}
	for len(c.stack) > 0 && c.stack[len(c.stack)-1].level >= b.Level {
		c.stack = c.stack[:len(c.stack)-1]
	}
	c.stack = append(c.stack, heading{level: b.Level, text: text})
	if len(c.cur) == 0 {
		c.setPath()
		return
	}
	c.add(unit{text: text, tokens: c.count(text)}, false)
}

// add puts a unit in the current chunk, or in a new one (after the
// overlap) when it does not fit; a unit too long for any chunk is cut.
func (c *chunker) add(u unit, code bool) {
	if u.tokens <= c.budget() {
		c.place(u)
		return
	}
	for i, p := range c.cut(u.text, code, c.budget()) {
		c.place(unit{text: p, tokens: c.count(p), cont: i > 0 && !code, line: i > 0 && code})
	}
}

// place puts a unit that fits an empty chunk in the current chunk, or
// in a new one after the overlap.
func (c *chunker) place(u unit) {
	if c.curTokens+1+u.tokens <= c.budget() || len(c.cur) == 0 {
		c.push(u)
		return
	}
	last := c.emit()
	c.push(c.overlapOf(last, c.budget()-1-u.tokens)...)
	c.push(u)
}

func (c *chunker) push(us ...unit) {
	for _, u := range us {
		if len(c.cur) > 0 {
			c.curTokens++
		}
		c.cur = append(c.cur, u)
		c.curTokens += u.tokens
	}
}

// emit ends the current chunk and returns its units.
func (c *chunker) emit() []unit {
	us := c.cur
	if len(us) > 0 {
		var b strings.Builder
		if c.path != "" {
			b.WriteString(c.path)
			b.WriteByte('\n')
		}
		for i, u := range us {
			switch {
			case i == 0, u.line:
			case u.cont:
				b.WriteByte(' ')
			default:
				b.WriteString("\n\n")
			}
			b.WriteString(u.text)
		}
		text := b.String()
		c.out = append(c.out, Piece{Text: text, Tokens: int(c.count(text) + 0.5)})
	}
	c.cur, c.curTokens = nil, 0
	c.setPath()
	return us
}

// overlapOf is the whole trailing units of a chunk, then trailing
// sentences of the unit before them, within the overlap and room.
func (c *chunker) overlapOf(us []unit, room float64) []unit {
	limit := min(c.overlap, room)
	var taken []unit
	total := 0.0
	for i := len(us) - 1; i >= 0; i-- {
		u := us[i]
		if u.table {
			break
		}
		if u.line {
			break // no overlap inside code
		}
		if total+u.tokens+1 <= limit {
			taken = append(taken, u)
			total += u.tokens + 1
			continue
		}
		ss := sentences(u.text)
		for j := len(ss) - 1; j > 0; j-- {
			t := c.count(ss[j])
			if total+t+1 > limit {
				break
			}
			taken = append(taken, unit{text: ss[j], tokens: t, cont: len(taken) > 0 && taken[len(taken)-1].cont})
			total += t + 1
		}
		break
	}
	for i, j := 0, len(taken)-1; i < j; i, j = i+1, j-1 {
		taken[i], taken[j] = taken[j], taken[i]
	}
	if len(taken) > 0 {
		taken[0].cont = false
	}
	return taken
}

// table adds a table's rows: whole where they fit, else in parts that
// each start with the header row.
func (c *chunker) table(rows []string) {
	text := strings.Join(rows, "\n")
	t := c.count(text)
	if c.curTokens+1+t <= c.budget() {
		c.push(unit{text: text, tokens: t, table: true})
		return
	}
	c.emit()
	if t <= c.budget() {
		c.push(unit{text: text, tokens: t, table: true})
		return
	}
	header, ht := rows[0], c.count(rows[0])
	room := max(c.budget()-ht-1, c.budget()/2)
	part, pt := []string{header}, ht
	for _, r := range rows[1:] {
		pieces := []string{r}
		if c.count(r) > room {
			pieces = c.cutWords(r, room)
		}
		for _, piece := range pieces {
			rt := c.count(piece)
			if pt+1+rt > c.budget() && len(part) > 1 {
				c.push(unit{text: strings.Join(part, "\n"), tokens: pt, table: true})
				c.emit()
				part, pt = []string{header}, ht
			}
			part = append(part, piece)
			pt += 1 + rt
		}
	}
	c.push(unit{text: strings.Join(part, "\n"), tokens: pt, table: true})
}

// cut splits text too long for a chunk into sentences (lines for code),
// and a sentence still too long between words; place packs them again.
func (c *chunker) cut(text string, code bool, room float64) []string {
	var ss []string
	if code {
		ss = strings.SplitAfter(text, "\n")
	} else {
		ss = sentences(text)
	}
	var out []string
	for _, s := range ss {
		if c.count(s) > room {
			out = append(out, c.cutWords(s, room)...)
		} else if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// cutWords splits a sentence with no end in sight between words.
func (c *chunker) cutWords(s string, room float64) []string {
	var out []string
	start, t := 0, 0.0
	ws := strings.Fields(s)
	for i := 0; i < len(ws); i++ {
		w := ws[i]
		wt := c.count(" " + w)
		if wt > room { // one "word" longer than a chunk: cut it in bytes
			n := max(int(room*2), 8)
			for n < len(w) && !utf8.RuneStart(w[n]) {
				n++
			}
			if n < len(w) {
				ws = append(ws[:i+1], ws[i:]...)
				ws[i], ws[i+1] = w[:n], w[n:]
				w = ws[i]
				wt = c.count(" " + w)
			}
		}
		if t+wt > room && i > start {
			out = append(out, strings.Join(ws[start:i], " "))
			start, t = i, 0
		}
		t += wt
	}
	return append(out, strings.Join(ws[start:], " "))
}

// sentences splits a paragraph after ".", "!", "?" (and "…", ":" before a
// line break) followed by a space and a capital letter, a digit or a
// quote, keeping abbreviations like "e.g." and "z. B." whole.
func sentences(text string) []string {
	var out []string
	start := 0
	for i := 0; i < len(text); i++ {
		ch := text[i]
		if ch != '.' && ch != '!' && ch != '?' && ch != '\n' {
			continue
		}
		j := i + 1
		for j < len(text) && (text[j] == '"' || text[j] == ')' || text[j] == '\'') {
			j++
		}
		if ch != '\n' && (j >= len(text) || text[j] != ' ') {
			continue
		}
		k := j
		for k < len(text) && (text[k] == ' ' || text[k] == '\n') {
			k++
		}
		if k >= len(text) {
			break
		}
		r, _ := utf8.DecodeRuneInString(text[k:])
		if ch == '.' && (abbreviation(text[start:i]) || !(unicode.IsUpper(r) || unicode.IsDigit(r) || r == '"' || r == '„' || r == '(')) {
			continue
		}
		out = append(out, strings.TrimSpace(text[start:j]))
		start = k
		i = k - 1
	}
	if s := strings.TrimSpace(text[start:]); s != "" {
		out = append(out, s)
	}
	return out
}

// abbreviation tells whether the word before a full stop is a short
// abbreviation ("Dr", "e.g", "z", "Nr") rather than the end of a sentence.
func abbreviation(before string) bool {
	i := strings.LastIndexAny(before, " \n(")
	w := before[i+1:]
	if strings.Contains(w, ".") {
		return true // e.g, i.e, u.a
	}
	switch strings.ToLower(w) {
	case "dr", "mr", "mrs", "ms", "prof", "st", "no", "nr", "vs", "etc", "inc", "ltd", "co", "fig", "abs", "bzw", "ca", "vgl", "ggf", "usw", "evtl", "z", "u", "s", "d", "h":
		return true
	}
	return false
}
