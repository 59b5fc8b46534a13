package docread

import (
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// textOf is the text below n, boilerplate left out; without nested lists
// when lists is set (a list item's own text).
func textOf(n *html.Node, lists bool) string {
	var sb strings.Builder
	var walk func(n *html.Node, depth int)
	walk = func(n *html.Node, depth int) {
		if depth > maxHTMLDepth {
			return
		}
		switch {
		case n.Type == html.TextNode:
			sb.WriteString(n.Data)
		case n.Type == html.ElementNode && boilerplate(n):
		case lists && (n.DataAtom == atom.Ul || n.DataAtom == atom.Ol):
		case n.DataAtom == atom.Br:
			sb.WriteByte('\n')
		default:
			if n.Type == html.ElementNode && isBlockElement(n.DataAtom) {
				sb.WriteByte(' ')
			}
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				walk(c, depth+1)
			}
		}
	}
	walk(n, 0)
	return sb.String()
}

// preText is a <pre>'s text as it is, line breaks kept.
func preText(n *html.Node) string {
	var sb strings.Builder
	var walk func(n *html.Node, depth int)
	walk = func(n *html.Node, depth int) {
		for c := n.FirstChild; c != nil && depth < maxHTMLDepth; c = c.NextSibling {
			switch {
			case c.Type == html.TextNode:
				sb.WriteString(c.Data)
			case c.DataAtom == atom.Br:
				sb.WriteByte('\n')
			default:
				walk(c, depth+1)
			}
		}
	}
	walk(n, 0)
	return sb.String()
}

// htmlText is the text of a fragment of HTML (an HTML block in Markdown).
func htmlText(s string) string {
	nodes, err := html.ParseFragment(strings.NewReader(s), &html.Node{Type: html.ElementNode, Data: "body", DataAtom: atom.Body})
	if err != nil {
		return ""
	}
	var sb strings.Builder
	for _, n := range nodes {
		sb.WriteString(textOf(n, false))
		sb.WriteByte(' ')
	}
	return sb.String()
}

// find is the first element of kind a below n, depth first.
func find(n *html.Node, a atom.Atom) *html.Node {
	var found *html.Node
	var walk func(n *html.Node, depth int)
	walk = func(n *html.Node, depth int) {
		for c := n.FirstChild; c != nil && found == nil && depth < maxHTMLDepth; c = c.NextSibling {
			if c.Type == html.ElementNode && (c.DataAtom == a || a == atom.Main && attr(c, "role") == "main") {
				found = c
				return
			}
			walk(c, depth+1)
		}
	}
	walk(n, 0)
	return found
}

// mainContent is the page's <main>, else its only <article>, else the
// whole page.
func mainContent(root *html.Node) *html.Node {
	if m := find(root, atom.Main); m != nil {
		return m
	}
	var articles []*html.Node
	var walk func(n *html.Node, depth int)
	walk = func(n *html.Node, depth int) {
		for c := n.FirstChild; c != nil && depth < maxHTMLDepth; c = c.NextSibling {
			if c.DataAtom == atom.Article {
				articles = append(articles, c)
				continue
			}
			walk(c, depth+1)
		}
	}
	walk(root, 0)
	if len(articles) == 1 {
		return articles[0]
	}
	return root
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return strings.ToLower(strings.TrimSpace(a.Val))
		}
	}
	return ""
}

func isBlockElement(a atom.Atom) bool {
	switch a {
	case atom.P, atom.Div, atom.Section, atom.Article, atom.Main, atom.Blockquote,
		atom.Dl, atom.Dt, atom.Dd, atom.Figure, atom.Figcaption, atom.Address,
		atom.Ul, atom.Ol, atom.Li, atom.Table, atom.Tr, atom.Td, atom.Th, atom.Pre,
		atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6, atom.Hr, atom.Details,
		atom.Summary, atom.Body, atom.Center:
		return true
	}
	return false
}
