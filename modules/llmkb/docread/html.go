package docread

import (
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// maxHTMLDepth bounds how deep the reader follows nested elements.
const maxHTMLDepth = 256

// readHTML reads an HTML page's main content: the <main> or the one
// <article> when there is one, else the body less its navigation,
// headers, footers, sidebars, forms, scripts and cookie banners.
func readHTML(text string) *Document {
	root, err := html.Parse(strings.NewReader(text))
	if err != nil {
		return readText(text)
	}
	w := &htmlWalker{}
	w.b.doc.Format = "html"
	content := mainContent(root)
	w.walk(content, 0)
	w.flush()
	if len(w.b.doc.Blocks) == 0 && content != root {
		w.walk(root, 0)
		w.flush()
	}
	w.b.doc.Title = firstHeading(w.b.doc.Blocks)
	if w.b.doc.Title == "" {
		if t := find(root, atom.Title); t != nil {
			w.b.doc.Title = collapse(textOf(t, false))
		}
	}
	return &w.b.doc
}

// htmlWalker gathers blocks; inline collects the text of the paragraph
// being read.
type htmlWalker struct {
	b      builder
	inline strings.Builder
}

func (w *htmlWalker) flush() {
	w.b.add(Paragraph, 0, w.inline.String())
	w.inline.Reset()
}

func (w *htmlWalker) walk(n *html.Node, depth int) {
	if depth > maxHTMLDepth {
		return
	}
	switch n.Type {
	case html.TextNode:
		w.inline.WriteString(n.Data)
		return
	case html.ElementNode, html.DocumentNode:
	default:
		return
	}
	if n.Type == html.ElementNode && boilerplate(n) {
		return
	}
	if w.element(n, depth) {
		return
	}
	block := n.Type == html.ElementNode && isBlockElement(n.DataAtom)
	if block {
		w.flush()
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.walk(c, depth+1)
	}
	if block {
		w.flush()
	}
}

// element reads the elements that make blocks of their own kind, and
// tells whether it did.
func (w *htmlWalker) element(n *html.Node, depth int) bool {
	switch n.DataAtom {
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		w.flush()
		w.b.add(Heading, int(n.Data[1]-'0'), textOf(n, false))
	case atom.Li:
		w.flush()
		w.b.add(ListItem, 0, textOf(n, true))
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.DataAtom == atom.Ul || c.DataAtom == atom.Ol {
				w.walk(c, depth+1)
			}
		}
	case atom.Pre:
		w.flush()
		w.b.add(Code, 0, preText(n))
	case atom.Table:
		if layoutTable(n) {
			return false
		}
		w.flush()
		w.table(n)
	case atom.Br:
		w.inline.WriteByte('\n')
	default:
		return false
	}
	return true
}

// table adds one TableRow per row of a data table (rows of nested tables
// are part of their cell's text).
func (w *htmlWalker) table(t *html.Node) {
	var rows func(n *html.Node, depth int)
	rows = func(n *html.Node, depth int) {
		for c := n.FirstChild; c != nil && depth < 8; c = c.NextSibling {
			switch c.DataAtom {
			case atom.Tr:
				var cells []string
				for td := c.FirstChild; td != nil; td = td.NextSibling {
					if td.DataAtom == atom.Td || td.DataAtom == atom.Th {
						cells = append(cells, textOf(td, false))
					}
				}
				w.b.add(TableRow, 0, tableRow(cells))
			case atom.Thead, atom.Tbody, atom.Tfoot:
				rows(c, depth+1)
			case atom.Caption:
				w.b.add(Paragraph, 0, textOf(c, false))
			}
		}
	}
	rows(t, 0)
}

// layoutTable tells a table used to lay out a page (cells holding
// paragraphs, headings or tables) from a table of data.
func layoutTable(t *html.Node) bool {
	var found bool
	var look func(n *html.Node, depth int)
	look = func(n *html.Node, depth int) {
		for c := n.FirstChild; c != nil && !found && depth < maxHTMLDepth; c = c.NextSibling {
			switch c.DataAtom {
			case atom.P, atom.Div, atom.H1, atom.H2, atom.H3, atom.Table, atom.Ul, atom.Article:
				if depth > 0 {
					found = true
				}
			}
			look(c, depth+1)
		}
	}
	look(t, 0)
	return found
}
