package docread

import "strings"

// collapse joins s's words with single spaces.
func collapse(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// builder gathers a document's blocks, dropping empty ones.
type builder struct {
	doc Document
}

func (b *builder) add(kind Kind, level int, text string) {
	if kind != Code {
		text = collapse(text)
	} else {
		text = strings.Trim(text, "\n")
	}
	if strings.TrimSpace(text) == "" {
		return
	}
	if kind != Heading {
		level = 0
	}
	b.doc.Blocks = append(b.doc.Blocks, Block{Kind: kind, Level: level, Text: text})
}

// firstHeading is the text of the document's first level-1 heading.
func firstHeading(blocks []Block) string {
	for _, b := range blocks {
		if b.Kind == Heading && b.Level == 1 {
			return b.Text
		}
	}
	return ""
}

// tableRow joins a row's cells as the TableRow kind says.
func tableRow(cells []string) string {
	for i, c := range cells {
		cells[i] = collapse(c)
	}
	for len(cells) > 0 && cells[len(cells)-1] == "" {
		cells = cells[:len(cells)-1]
	}
	return strings.Join(cells, " | ")
}
