package docread

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/ledongthuc/pdf"
)

// Bounds on what a page may make the reader do.
const (
	maxFormDepth = 8        // forms drawn inside forms
	maxGlyphs    = 200_000  // glyphs read from one page
	maxContent   = 32 << 20 // bytes of a page's content streams, unpacked
)

// matrix is a PDF transformation matrix [a b c d e f].
type matrix [6]float64

var identity = matrix{1, 0, 0, 1, 0, 0}

// mul is m×n: first m's transformation, then n's.
func (m matrix) mul(n matrix) matrix {
	return matrix{
		m[0]*n[0] + m[1]*n[2], m[0]*n[1] + m[1]*n[3],
		m[2]*n[0] + m[3]*n[2], m[2]*n[1] + m[3]*n[3],
		m[4]*n[0] + m[5]*n[2] + n[4], m[4]*n[1] + m[5]*n[3] + n[5],
	}
}

// gstate is the part of the graphics state the text needs.
type gstate struct {
	ctm                                  matrix
	font                                 *pdfFont
	size, charSp, wordSp, scale, leading float64
	rise                                 float64
}

// textRun interprets a page's content streams for the text they show.
// The library's own Page.Content gives glyphs of composite fonts (the
// fonts Chromium, Word and most producers embed) no width, so every glyph
// of a string lands on one spot; this keeps the widths.
type textRun struct {
	g        gstate
	stack    []gstate
	tm, tlm  matrix
	fonts    map[string]*pdfFont
	glyphs   []pdf.Text
	hasImage bool
	err      error
}

// pageText is the glyphs a page shows, and whether it draws an image.
func pageText(page pdf.Value) ([]pdf.Text, bool, error) {
	t := &textRun{g: gstate{ctm: identity, scale: 1}}
	t.content(page.Key("Contents"), inherited(page, "Resources"), 0)
	return t.glyphs, t.hasImage, t.err
}

// content interprets one content stream (or an array of them) drawn with
// the given resources.
func (t *textRun) content(strm, res pdf.Value, depth int) {
	if unpackedSize(strm) > maxContent {
		t.err = fmt.Errorf("a page's content unpacks to more than %d MB", maxContent>>20)
		return
	}
	saved := t.fonts
	t.fonts = map[string]*pdfFont{}
	defer func() { t.fonts = saved }()
	pdf.Interpret(strm, func(stk *pdf.Stack, op string) {
		args := make([]pdf.Value, stk.Len())
		for i := len(args) - 1; i >= 0; i-- {
			args[i] = stk.Pop()
		}
		if !t.textOp(op, args, res) {
			t.graphicsOp(op, args, res, depth)
		}
	})
}

// graphicsOp applies the operators of the graphics state and drawing
// that matter to text: q, Q, cm, Do, inline images.
func (t *textRun) graphicsOp(op string, args []pdf.Value, res pdf.Value, depth int) {
	switch op {
	case "q":
		if len(t.stack) < 256 {
			t.stack = append(t.stack, t.g)
		}
	case "Q":
		if n := len(t.stack); n > 0 {
			t.g, t.stack = t.stack[n-1], t.stack[:n-1]
		}
	case "cm":
		if m, ok := matrixOf(args); ok {
			t.g.ctm = m.mul(t.g.ctm)
		}
	case "BI", "ID", "EI":
		t.hasImage = true
	case "Do":
		if len(args) == 1 {
			t.draw(res.Key("XObject").Key(args[0].Name()), res, depth)
		}
	}
}

// draw draws an XObject: an image is noted, a form's content is read.
func (t *textRun) draw(x, res pdf.Value, depth int) {
	switch x.Key("Subtype").Name() {
	case "Image":
		t.hasImage = true
	case "Form":
		if depth >= maxFormDepth {
			return
		}
		saved, tm, tlm := t.g, t.tm, t.tlm
		if m, ok := matrixOf(arrayValues(x.Key("Matrix"), 7)); ok {
			t.g.ctm = m.mul(t.g.ctm)
		}
		if r := x.Key("Resources"); r.Kind() == pdf.Dict {
			res = r
		}
		t.content(x, res, depth+1)
		t.g, t.tm, t.tlm = saved, tm, tlm
	}
}

// unpackedSize is how many bytes a content stream (or an array of them)
// unpacks to, counted up to just past maxContent.
func unpackedSize(strm pdf.Value) int64 {
	streams := []pdf.Value{strm}
	if strm.Kind() == pdf.Array {
		streams = arrayValues(strm, 4096)
	}
	var n int64
	for _, s := range streams {
		rc := s.Reader()
		m, _ := io.Copy(io.Discard, io.LimitReader(rc, maxContent+1-n))
		rc.Close()
		n += m
		if n > maxContent {
			break
		}
	}
	return n
}

// arrayValues is an array's first elements, up to limit.
func arrayValues(v pdf.Value, limit int) []pdf.Value {
	out := make([]pdf.Value, 0, min(v.Len(), limit))
	for i := 0; i < v.Len() && i < limit; i++ {
		out = append(out, v.Index(i))
	}
	return out
}

// matrixOf reads six numbers as a matrix.
func matrixOf(args []pdf.Value) (matrix, bool) {
	if len(args) != 6 {
		return identity, false
	}
	var m matrix
	for i, a := range args {
		m[i] = a.Float64()
		if math.IsNaN(m[i]) || math.IsInf(m[i], 0) {
			return identity, false
		}
	}
	return m, true
}

// nums reads n numbers, or reports they are not there.
func nums(args []pdf.Value, n int) ([]float64, bool) {
	if len(args) != n {
		return nil, false
	}
	out := make([]float64, n)
	for i, a := range args {
		out[i] = a.Float64()
	}
	return out, true
}

// baseName is a font's name without its subset prefix (ABCDEF+).
func baseName(f pdf.Value) string {
	name := f.Key("BaseFont").Name()
	if i := strings.IndexByte(name, '+'); i >= 0 {
		name = name[i+1:]
	}
	return name
}
