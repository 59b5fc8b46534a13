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
		if cur != nil && continues(cur, f, kind, level, l.newColumn) {
			cur.text = joinLines(cur.text, f.text)
			cur.y = f.y
			continue
		}
		flush()
		text := f.text
		if kind == ListItem {
			text = pdfBullet.ReplaceAllString(text, "")
		}
		cur = &para{kind: kind, level: level, size: f.size, x0: f.x0, y: f.y, text: text}
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

// continues tells whether a line goes on the paragraph being built.
func continues(cur *para, f frag, kind Kind, level int, newColumn bool) bool {
	if math.Abs(cur.size-f.size) > 0.1*f.size {
		return false
	}
	if kind == ListItem || kind != cur.kind && !(cur.kind == ListItem && kind == Paragraph && f.x0 > cur.x0+1) {
		return false
	}
	if level != cur.level {
		return false
	}
	if newColumn {
		last, _ := utf8.DecodeLastRuneInString(strings.TrimSpace(cur.text))
		return cur.kind == Paragraph && !strings.ContainsRune(".!?:", last)
	}
	dy := cur.y - f.y
	return dy > 0 && dy <= 1.6*f.size
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
