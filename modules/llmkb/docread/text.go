package docread

import (
	"regexp"
	"strings"
)

// underline is a line of = or - under a heading in plain text.
var underline = regexp.MustCompile(`^\s*(={3,}|-{3,})\s*$`)

// bullet starts an item of a list in plain text.
var bullet = regexp.MustCompile(`^\s*([-*•·–]|\d{1,3}[.)])\s+`)

// readText reads plain text: paragraphs split on blank lines, a line
// underlined with === (level 1) or --- (level 2) a heading, lines that
// start with a bullet or a number list items.
func readText(text string) *Document {
	var b builder
	b.doc.Format = "text"
	for _, para := range splitParagraphs(text) {
		textParagraph(&b, para)
	}
	b.doc.Title = firstHeading(b.doc.Blocks)
	return &b.doc
}

func splitParagraphs(text string) [][]string {
	var paras [][]string
	var cur []string
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" {
			if len(cur) > 0 {
				paras = append(paras, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, line)
	}
	if len(cur) > 0 {
		paras = append(paras, cur)
	}
	return paras
}

// textParagraph adds the blocks of one paragraph of plain text.
func textParagraph(b *builder, lines []string) {
	var prose []string
	kind := Paragraph
	flush := func() {
		b.add(kind, 0, strings.Join(prose, " "))
		prose, kind = nil, Paragraph
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		switch {
		case i+1 < len(lines) && underline.MatchString(lines[i+1]) && !underline.MatchString(line):
			flush()
			level := 1
			if strings.Contains(lines[i+1], "-") {
				level = 2
			}
			b.add(Heading, level, line)
			i++
		case bullet.MatchString(line) && strings.TrimSpace(bullet.ReplaceAllString(line, "")) != "":
			flush()
			kind = ListItem
			prose = []string{bullet.ReplaceAllString(line, "")}
		case underline.MatchString(line):
			// a rule between paragraphs
		default:
			prose = append(prose, line)
		}
	}
	flush()
}
