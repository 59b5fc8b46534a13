package docread

import (
	"regexp"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
)

// readMarkdown reads Markdown (CommonMark and GitHub's tables) through
// its syntax tree: headings, paragraphs, list items, code blocks, table
// rows. A YAML or TOML front matter's title is the document's title.
func readMarkdown(src string) *Document {
	title, body := frontMatter(src)
	source := []byte(body)
	md := goldmark.New(goldmark.WithExtensions(extension.Table, extension.Strikethrough))
	root := md.Parser().Parse(text.NewReader(source))
	var b builder
	b.doc.Format = "markdown"
	mdBlocks(&b, root, source)
	b.doc.Title = title
	if title == "" {
		b.doc.Title = firstHeading(b.doc.Blocks)
	}
	return &b.doc
}

// mdBlocks adds the blocks below n, in order.
func mdBlocks(b *builder, n ast.Node, src []byte) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		mdBlock(b, c, src)
	}
}

// mdBlock adds the blocks of one block node.
func mdBlock(b *builder, n ast.Node, src []byte) {
	switch n := n.(type) {
	case *ast.Heading:
		b.add(Heading, n.Level, mdInline(n, src))
	case *ast.Paragraph, *ast.TextBlock:
		b.add(Paragraph, 0, mdInline(n, src))
	case *ast.ListItem:
		mdListItem(b, n, src)
	case *ast.FencedCodeBlock, *ast.CodeBlock:
		b.add(Code, 0, mdLines(n, src))
	case *ast.HTMLBlock:
		b.add(Paragraph, 0, htmlText(mdLines(n, src)))
	case *east.Table:
		mdTable(b, n, src)
	default:
		mdBlocks(b, n, src)
	}
}

// mdListItem adds an item's own text as one ListItem, then its nested
// lists' items.
func mdListItem(b *builder, item *ast.ListItem, src []byte) {
	var own []string
	for c := item.FirstChild(); c != nil; c = c.NextSibling() {
		switch c.(type) {
		case *ast.Paragraph, *ast.TextBlock:
			own = append(own, mdInline(c, src))
		}
	}
	b.add(ListItem, 0, strings.Join(own, " "))
	for c := item.FirstChild(); c != nil; c = c.NextSibling() {
		switch c.(type) {
		case *ast.Paragraph, *ast.TextBlock:
		default:
			mdBlock(b, c, src)
		}
	}
}

func mdTable(b *builder, t *east.Table, src []byte) {
	for row := t.FirstChild(); row != nil; row = row.NextSibling() {
		var cells []string
		for cell := row.FirstChild(); cell != nil; cell = cell.NextSibling() {
			cells = append(cells, mdInline(cell, src))
		}
		b.add(TableRow, 0, tableRow(cells))
	}
}

// mdInline is the text of a node's inline content.
func mdInline(n ast.Node, src []byte) string {
	var sb strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.Text:
			sb.Write(c.Value(src))
			if c.SoftLineBreak() || c.HardLineBreak() {
				sb.WriteByte(' ')
			}
		case *ast.String:
			sb.Write(c.Value)
		case *ast.AutoLink:
			sb.Write(c.URL(src))
		case *ast.RawHTML:
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return sb.String()
}

// mdLines is the raw text of a block's lines (code, HTML).
func mdLines(n ast.Node, src []byte) string {
	var sb strings.Builder
	lines := n.Lines()
	for i := 0; i < lines.Len(); i++ {
		seg := lines.At(i)
		sb.Write(seg.Value(src))
	}
	return sb.String()
}

// frontMatterTitle is a title line of YAML (title: x) or TOML (title = "x").
var frontMatterTitle = regexp.MustCompile(`(?m)^title\s*[:=]\s*(.+?)\s*$`)

// frontMatter splits a YAML (---) or TOML (+++) front matter off src and
// returns its title, if any, and the rest.
func frontMatter(src string) (title, body string) {
	src = strings.TrimPrefix(src, "\ufeff")
	for _, fence := range []string{"---", "+++"} {
		if !strings.HasPrefix(src, fence+"\n") {
			continue
		}
		end := strings.Index(src[len(fence)+1:], "\n"+fence)
		if end < 0 {
			return "", src
		}
		meta := src[len(fence)+1 : len(fence)+1+end]
		rest := src[len(fence)+1+end+1+len(fence):]
		if m := frontMatterTitle.FindStringSubmatch(meta); m != nil {
			title = strings.Trim(m[1], `"'`)
		}
		return title, rest
	}
	return "", src
}
