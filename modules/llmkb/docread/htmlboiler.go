package docread

import (
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// boilerplate tells whether an element is no part of a page's content:
// scripts and styles, navigation, the site's header and footer (an
// article's own header stays), sidebars, small forms, hidden elements,
// cookie and consent banners.
func boilerplate(n *html.Node) bool {
	switch n.DataAtom {
	case atom.Script, atom.Style, atom.Noscript, atom.Template, atom.Nav, atom.Aside,
		atom.Button, atom.Select, atom.Textarea, atom.Iframe, atom.Svg, atom.Canvas,
		atom.Object, atom.Embed, atom.Head, atom.Dialog, atom.Menu:
		return true
	case atom.Header, atom.Footer:
		return !inside(n, atom.Article, atom.Main)
	case atom.Form:
		return len(collapse(formText(n))) < 400
	}
	if _, hidden := attrOK(n, "hidden"); hidden || attr(n, "aria-hidden") == "true" {
		return true
	}
	if style := strings.ReplaceAll(attr(n, "style"), " ", ""); strings.Contains(style, "display:none") || strings.Contains(style, "visibility:hidden") {
		return true
	}
	switch attr(n, "role") {
	case "navigation", "banner", "contentinfo", "complementary", "search", "dialog", "alertdialog", "menu", "menubar":
		return true
	}
	return boilerplateName(attr(n, "id")) || boilerplateName(attr(n, "class"))
}

// boilerplateName tells a class or id of a banner, menu or sidebar.
func boilerplateName(s string) bool {
	if strings.Contains(s, "cookie") || strings.Contains(s, "consent") || strings.Contains(s, "gdpr") {
		return true
	}
	for _, tok := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' }) {
		switch tok {
		case "nav", "navbar", "navigation", "menu", "breadcrumb", "breadcrumbs", "sidebar",
			"skip-link", "skiplink", "share", "social", "site-header", "site-footer", "ad", "ads", "advert":
			return true
		}
	}
	return false
}

func formText(n *html.Node) string {
	var sb strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		sb.WriteString(textOf(c, false))
	}
	return sb.String()
}

func attrOK(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

// inside tells whether one of n's ancestors is one of the elements.
func inside(n *html.Node, as ...atom.Atom) bool {
	for p := n.Parent; p != nil; p = p.Parent {
		for _, a := range as {
			if p.DataAtom == a {
				return true
			}
		}
	}
	return false
}
