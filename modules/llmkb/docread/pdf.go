package docread

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ledongthuc/pdf"
)

// Bounds on what a PDF may make the reader do.
const (
	maxPDFPages = 5000
	maxPDFDepth = 32 // of the page tree
)

// readPDF reads a PDF's text layer, page by page, each page's text in
// reading order (columns left to right, see layoutPage).
func readPDF(data []byte) (*Document, error) {
	r, err := openPDF(data)
	if err != nil {
		if bytes.Contains(data, []byte("/Encrypt")) {
			return nil, &Error{Code: "encrypted", Reason: "the PDF is encrypted: it needs a password to open or its owner restricted copying its text; save it without a password and upload it again"}
		}
		return nil, invalid("PDF", err.Error())
	}
	pages, err := pdfPages(r)
	if err != nil {
		return nil, invalid("PDF", err.Error())
	}
	contents, images, broken := readPages(pages)
	body := bodySize(contents)
	laid := make([][]pageBlock, len(pages))
	for i, c := range contents {
		laid[i] = layoutPage(c, i+1, body)
	}
	doc := &Document{Format: "pdf", Title: pdfTitle(r), Blocks: dropRunning(laid)}
	switch {
	case len(doc.Blocks) > 0:
		return doc, nil
	case broken != nil:
		return nil, invalid("PDF", broken.Error())
	case images:
		return nil, &Error{Code: "no_text", Reason: "the PDF has pictures of its pages but no text (a scan?): run OCR on it first (most scanner programs and PDF editors can) and upload the result"}
	}
	return nil, errNoText()
}

// readPages reads each page's content; a page that cannot be read is
// left empty and the first such error returned.
func readPages(pages []pdf.Value) (contents []pageContent, images bool, broken error) {
	contents = make([]pageContent, len(pages))
	for i, p := range pages {
		c, err := pageGlyphs(p)
		if err != nil {
			if broken == nil {
				broken = fmt.Errorf("page %d: %w", i+1, err)
			}
			continue
		}
		images = images || c.image
		contents[i] = c
	}
	return contents, images, broken
}

// openPDF opens the PDF; the library reports malformed input by panicking,
// which is its way of returning an error, so it is turned into one here.
func openPDF(data []byte) (r *pdf.Reader, err error) {
	defer func() {
		if v := recover(); v != nil {
			r, err = nil, fmt.Errorf("%v", v)
		}
	}()
	return pdf.NewReader(&budgetReader{data: data, left: readBudget(len(data))}, int64(len(data)))
}

// readBudget is how many bytes the parser may read from a PDF of size n
// in all: a well-formed file takes a few times its size; a crafted one
// whose cross-reference sections point back at each other would read on
// forever.
func readBudget(n int) int64 { return 32*int64(n) + 8<<20 }

// budgetReader is the PDF's bytes, readable up to a budget.
type budgetReader struct {
	data []byte
	left int64
}

func (b *budgetReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= int64(len(b.data)) {
		return 0, io.EOF
	}
	if b.left <= 0 {
		return 0, errors.New("the parser read it over and over: it is built to make readers loop")
	}
	n := copy(p, b.data[off:])
	b.left -= int64(n)
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// pdfPages walks the page tree, bounded in depth and count so that a
// cycle or a huge tree ends.
func pdfPages(r *pdf.Reader) (pages []pdf.Value, err error) {
	defer func() {
		if v := recover(); v != nil {
			pages, err = nil, fmt.Errorf("%v", v)
		}
	}()
	var walk func(n pdf.Value, depth int) error
	walk = func(n pdf.Value, depth int) error {
		if depth > maxPDFDepth || len(pages) >= maxPDFPages {
			return errors.New("its page tree is too deep or too large")
		}
		if n.Key("Type").Name() == "Page" || n.Key("Kids").Kind() != pdf.Array {
			pages = append(pages, n)
			return nil
		}
		kids := n.Key("Kids")
		for i := 0; i < kids.Len(); i++ {
			if err := walk(kids.Index(i), depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	err = walk(r.Trailer().Key("Root").Key("Pages"), 0)
	return pages, err
}

// inMargin tells whether a baseline lies in the page's top or bottom
// margin, where running headers and footers are.
func (c pageContent) inMargin(y float64) bool {
	edge := marginOf * (c.top - c.bottom)
	return y > c.top-edge || y < c.bottom+edge
}

// pageContent is what a page shows: its glyphs with positions, whether
// it draws an image (a scan has one per page), and its height.
type pageContent struct {
	glyphs      []pdf.Text
	image       bool
	bottom, top float64 // of the page's media box
}

// pageGlyphs reads a page's content. The library reports malformed
// content by panicking; that is its error here.
func pageGlyphs(p pdf.Value) (c pageContent, err error) {
	defer func() {
		if v := recover(); v != nil {
			c, err = pageContent{}, fmt.Errorf("%v", v)
		}
	}()
	all, image, err := pageText(p)
	if err != nil {
		return pageContent{}, err
	}
	c = pageContent{image: image, bottom: 0, top: 792}
	if box := inherited(p, "MediaBox"); box.Len() == 4 && box.Index(3).Float64()-box.Index(1).Float64() > 50 {
		c.bottom, c.top = box.Index(1).Float64(), box.Index(3).Float64()
	}
	for _, t := range all {
		if strings.TrimSpace(t.S) == "" && t.S != " " || t.FontSize <= 0 || t.FontSize > 2000 {
			continue
		}
		c.glyphs = append(c.glyphs, t)
	}
	return c, nil
}

// inherited is a page's attribute, its own or the nearest ancestor's in
// the page tree, which a cycle of parents cannot make endless.
func inherited(page pdf.Value, key string) pdf.Value {
	v := page
	for range maxPDFDepth {
		if v.IsNull() {
			break
		}
		if r := v.Key(key); !r.IsNull() {
			return r
		}
		v = v.Key("Parent")
	}
	return pdf.Value{}
}

// pdfTitle is the title in the PDF's document information, if any.
func pdfTitle(r *pdf.Reader) (title string) {
	defer func() {
		if recover() != nil {
			title = ""
		}
	}()
	return collapse(r.Trailer().Key("Info").Key("Title").Text())
}
