package docread

import (
	"strconv"
	"strings"
)

// docxStyle is what the reader needs of a paragraph style.
type docxStyle struct {
	name    string // lower case: "heading 1", "title", "list paragraph"
	outline int    // 1-9 from w:outlineLvl, 0 if none
	basedOn string
}

func docxStyles(root *xnode) map[string]docxStyle {
	styles := map[string]docxStyle{}
	doc := root.child("styles")
	if doc == nil {
		return styles
	}
	for _, s := range doc.kids {
		if s.name != "style" {
			continue
		}
		var id string
		for _, a := range s.attrs {
			if a.Name.Local == "styleId" {
				id = a.Value
			}
		}
		st := docxStyle{name: strings.ToLower(s.val("name")), basedOn: s.val("basedOn")}
		if lvl, err := strconv.Atoi(s.child("pPr").val("outlineLvl")); err == nil && lvl >= 0 && lvl < 9 {
			st.outline = lvl + 1
		}
		styles[id] = st
	}
	return styles
}

// docxReader reads a document's body into blocks.
type docxReader struct {
	b      builder
	styles map[string]docxStyle
}

func (r *docxReader) blocks(n *xnode, depth int) {
	if depth > maxXMLDepth {
		return
	}
	for _, c := range n.kids {
		switch c.name {
		case "p":
			r.paragraph(c)
		case "tbl":
			r.table(c)
		case "sdt", "sdtContent", "customXml", "ins", "moveTo":
			r.blocks(c, depth+1)
		}
	}
}

func (r *docxReader) paragraph(p *xnode) {
	ppr := p.child("pPr")
	text := runText(p, 0)
	if lvl := r.headingLevel(ppr); lvl > 0 {
		r.b.add(Heading, min(lvl, 6), text)
		return
	}
	if ppr.child("numPr") != nil && ppr.child("numPr").val("numId") != "0" || r.isList(ppr.val("pStyle")) {
		r.b.add(ListItem, 0, text)
		return
	}
	r.b.add(Paragraph, 0, text)
}

// headingLevel is a paragraph's heading level: from its outline level,
// else its style's (a style named "heading N" or "Title", or based on
// one), else 0.
func (r *docxReader) headingLevel(ppr *xnode) int {
	if lvl, err := strconv.Atoi(ppr.val("outlineLvl")); err == nil && lvl >= 0 && lvl < 6 {
		return lvl + 1
	}
	id := ppr.val("pStyle")
	for range 10 {
		st, ok := r.styles[id]
		if !ok {
			st = docxStyle{name: strings.ToLower(id)}
		}
		name := strings.ReplaceAll(st.name, " ", "")
		switch {
		case name == "title":
			return 1
		case strings.HasPrefix(name, "heading") && len(name) == len("heading1") && name[7] >= '1' && name[7] <= '9':
			return int(name[7] - '0')
		case st.outline > 0:
			return st.outline
		case !ok || st.basedOn == "":
			return 0
		}
		id = st.basedOn
	}
	return 0
}

func (r *docxReader) isList(id string) bool {
	name := strings.ToLower(id)
	if st, ok := r.styles[id]; ok {
		name = st.name
	}
	return strings.HasPrefix(strings.ReplaceAll(name, " ", ""), "list")
}

// table adds one TableRow per row, the text of each cell's paragraphs
// joined (a nested table's text is part of its cell's).
func (r *docxReader) table(t *xnode) {
	for _, tr := range t.kids {
		if tr.name != "tr" {
			continue
		}
		var cells []string
		for _, tc := range tr.kids {
			if tc.name == "tc" {
				cells = append(cells, runText(tc, 0))
			}
		}
		r.b.add(TableRow, 0, tableRow(cells))
	}
}

// runText is the text of a paragraph's runs: tabs and breaks as spaces,
// deleted text and field codes left out, text boxes in.
func runText(n *xnode, depth int) string {
	if depth > maxXMLDepth {
		return ""
	}
	var sb strings.Builder
	for _, c := range n.kids {
		switch c.name {
		case "t":
			sb.Write(c.chars)
		case "tab", "br", "cr":
			sb.WriteByte(' ')
		case "noBreakHyphen":
			sb.WriteByte('-')
		case "p", "tc":
			sb.WriteByte(' ')
			sb.WriteString(runText(c, depth+1))
		case "del", "moveFrom", "instrText", "delText", "Fallback", "rPr", "pPr", "tcPr", "trPr", "tblPr":
		default:
			sb.WriteString(runText(c, depth+1))
		}
	}
	return sb.String()
}
