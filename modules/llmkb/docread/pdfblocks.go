package docread

import (
	"math"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// pdfBullet starts a list item in a PDF's text: a bullet glyph or a number.
var pdfBullet = regexp.MustCompile(`^\s*([•◦▪▫●○■□‣⁃–-]|\d{1,2}[.)])\s+`)

// para is the paragraph being built from a PDF's lines.
type para struct {
	kind  Kind
	level int
	size  float64
	x0, y float64
	x1    float64 // where its last line ends
	text  string
}

// linesToBlocks joins lines into blocks: lines of one size close below
// each other are one paragraph (a paragraph goes on in the next column
// when it ended mid-sentence), a line larger than the body text or bold
// is a heading, a line of several cells a table row.
func linesToBlocks(lines []line, body float64, inMargin func(frag) bool) []pageBlock {
	var blocks []pageBlock
	var cur *para
	flush := func() {
		if cur != nil {
			blocks = appendBlock(blocks, cur.kind, cur.level, cur.text, false)
		}
		cur = nil
	}
	for _, l := range lines {
		margin := inMargin(l.frags[0])
		if len(l.frags) > 1 || margin {
			flush()
			kind, cells := TableRow, make([]string, len(l.frags))
			for i, f := range l.frags {
				cells[i] = f.text
			}
			if len(cells) == 1 {
				kind = Paragraph
			}
			blocks = appendBlock(blocks, kind, 0, tableRow(cells), margin)
			continue
		}
		f := l.frags[0]
		kind, level := classifyLine(f, body)
		if cur != nil && continues(cur, f, kind, level, l) {
			cur.text = joinLines(cur.text, f.text)
			cur.y, cur.x1 = f.y, f.x1
			continue
		}
		flush()
		text := f.text
		if kind == ListItem {
			text = pdfBullet.ReplaceAllString(text, "")
		}
		cur = &para{kind: kind, level: level, size: f.size, x0: f.x0, x1: f.x1, y: f.y, text: text}
	}
	flush()
	return blocks
}

func appendBlock(blocks []pageBlock, kind Kind, level int, text string, margin bool) []pageBlock {
	text = collapse(text)
	if text == "" {
		return blocks
	}
	return append(blocks, pageBlock{Block{Kind: kind, Level: level, Text: text}, margin})
}

// classifyLine tells a line's kind from its size against the body text's,
// its weight and its start.
func classifyLine(f frag, body float64) (Kind, int) {
	words := len(strings.Fields(f.text))
	switch r := f.size / math.Max(body, 1); {
	case r >= 1.6:
		return Heading, 1
	case r >= 1.3:
		return Heading, 2
	case r >= 1.12:
		return Heading, 3
	case f.bold && words <= 12 && r > 0.95:
		return Heading, 4
	case pdfBullet.MatchString(f.text):
		return ListItem, 0
	}
	return Paragraph, 0
}

// continues tells whether a line goes on the paragraph being built: a
// line of the same kind and size close below, or at the top of the next
// column when the paragraph stopped mid-sentence. A paragraph whose last
// line ended a sentence short of the column's edge, where the next
// line's first word would have fitted, is over (so are the items of a list
// whose bullets are drawn, not written).
func continues(cur *para, f frag, kind Kind, level int, l line) bool {
	if math.Abs(cur.size-f.size) > 0.1*f.size {
		return false
	}
	if kind == ListItem || kind != cur.kind && !(cur.kind == ListItem && kind == Paragraph && f.x0 > cur.x0+1) {
		return false
	}
	if level != cur.level {
		return false
	}
	last, _ := utf8.DecodeLastRuneInString(strings.TrimSpace(cur.text))
	ended := strings.ContainsRune(".!?:", last)
	if l.newColumn {
		return cur.kind == Paragraph && !ended
	}
	if ended && cur.x1+firstWordWidth(f) < l.right-0.5*f.size {
		return false // the next line's first word would have fitted
	}
	dy := cur.y - f.y
	return dy > 0 && dy <= 1.6*f.size
}

// firstWordWidth is about how wide a line's first word and a space are.
func firstWordWidth(f frag) float64 {
	words := strings.Fields(f.text)
	n := utf8.RuneCountInString(f.text)
	if len(words) == 0 || n == 0 {
		return 0
	}
	return (f.x1 - f.x0) / float64(n) * float64(utf8.RuneCountInString(words[0])+1)
}

// joinLines joins a paragraph's next line on, mending a word hyphenated
// at the line's end.
func joinLines(text, next string) string {
	text = strings.TrimRight(text, " ")
	next = strings.TrimLeft(next, " ")
	if t, ok := strings.CutSuffix(text, "\u00ad"); ok {
		return t + next
	}
	first, _ := utf8.DecodeRuneInString(next)
	if t, ok := strings.CutSuffix(text, "-"); ok && unicode.IsLower(first) {
		if prev, _ := utf8.DecodeLastRuneInString(t); unicode.IsLetter(prev) {
			return t + next
		}
	}
	return text + " " + next
}
