package docread

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Bounds on what a DOCX may make the reader do.
const (
	maxDOCXPart  = 64 << 20 // bytes of one XML part, unpacked
	maxXMLDepth  = 256
	maxXMLTokens = 4_000_000
)

// readDOCX reads a Word document's body (word/document.xml): paragraphs,
// headings by their style, list paragraphs, tables row by row. Headers,
// footers, footnotes and comments are left out.
func readDOCX(data []byte) (*Document, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, invalid("DOCX", "its ZIP container cannot be opened")
	}
	body, err := zipXML(zr, "word/document.xml")
	if err != nil || body == nil {
		return nil, invalid("DOCX", fmt.Sprint("word/document.xml: ", err))
	}
	styles, _ := zipXML(zr, "word/styles.xml")
	r := &docxReader{styles: docxStyles(styles)}
	r.b.doc.Format = "docx"
	if b := body.child("document").child("body"); b != nil {
		r.blocks(b, 0)
	}
	if len(r.b.doc.Blocks) == 0 {
		return nil, errNoText()
	}
	if core, _ := zipXML(zr, "docProps/core.xml"); core != nil {
		r.b.doc.Title = collapse(core.child("coreProperties").child("title").text())
	}
	if r.b.doc.Title == "" {
		r.b.doc.Title = firstHeading(r.b.doc.Blocks)
	}
	return &r.b.doc, nil
}

// xnode is an element of an XML part, by its local name.
type xnode struct {
	name  string
	space string
	attrs []xml.Attr
	kids  []*xnode
	chars []byte // the character data of a leaf (w:t)
}

func (n *xnode) child(name string) *xnode {
	if n == nil {
		return nil
	}
	for _, k := range n.kids {
		if k.name == name {
			return k
		}
	}
	return nil
}

// val is the w:val attribute of n's child name, or "".
func (n *xnode) val(name string) string {
	c := n.child(name)
	if c == nil {
		return ""
	}
	for _, a := range c.attrs {
		if a.Name.Local == "val" {
			return a.Value
		}
	}
	return ""
}

func (n *xnode) text() string {
	if n == nil {
		return ""
	}
	var sb strings.Builder
	sb.Write(n.chars)
	for _, k := range n.kids {
		sb.WriteString(k.text())
	}
	return sb.String()
}

// zipXML reads one XML part of the archive into a tree; nil without
// error when the part is missing.
func zipXML(zr *zip.Reader, name string) (*xnode, error) {
	for _, f := range zr.File {
		if f.Name != name {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return parseXML(io.LimitReader(rc, maxDOCXPart))
	}
	return nil, nil
}

// parseXML builds the tree of an XML document, bounded in depth and size.
func parseXML(r io.Reader) (*xnode, error) {
	d := xml.NewDecoder(r)
	root := &xnode{}
	stack := []*xnode{root}
	for tokens := 0; ; tokens++ {
		if tokens > maxXMLTokens {
			return nil, errors.New("too many XML elements")
		}
		tok, err := d.Token()
		if err == io.EOF {
			return root, nil
		} else if err != nil {
			return nil, err
		}
		top := stack[len(stack)-1]
		switch t := tok.(type) {
		case xml.StartElement:
			if len(stack) > maxXMLDepth {
				return nil, errors.New("XML nested too deep")
			}
			n := &xnode{name: t.Name.Local, space: t.Name.Space, attrs: t.Attr}
			top.kids = append(top.kids, n)
			stack = append(stack, n)
		case xml.EndElement:
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
		case xml.CharData:
			if top.name == "t" || top.name == "title" || top.name == "instrText" || top.name == "delText" {
				top.chars = append(top.chars, t...)
			}
		}
	}
}
