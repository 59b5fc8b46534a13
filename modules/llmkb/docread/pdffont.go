package docread

import (
	"github.com/ledongthuc/pdf"
)

// maxCIDWidths bounds the widths read from a composite font's W array.
const maxCIDWidths = 1 << 16

// pdfFont is what the text needs of a font: how to decode its codes, how
// wide its glyphs are, its name.
type pdfFont struct {
	name    string
	enc     pdf.TextEncoding
	twoByte bool // a composite (Type0) font with two-byte codes
	simple  pdf.Font
	cid     map[int]float64
	dw      float64 // a composite font's default width
}

// font loads the font a Tf names from the resources, once per stream.
func (t *textRun) font(res pdf.Value, name string) *pdfFont {
	if f, ok := t.fonts[name]; ok {
		return f
	}
	v := res.Key("Font").Key(name)
	pf := pdf.Font{V: v}
	f := &pdfFont{name: baseName(v), simple: pf, enc: pf.Encoder()}
	if f.enc == nil {
		f.enc = rawEncoding{}
	}
	if v.Key("Subtype").Name() == "Type0" {
		f.twoByte = true
		f.cid, f.dw = cidWidths(v.Key("DescendantFonts").Index(0))
	}
	t.fonts[name] = f
	return f
}

// width is a glyph's width in thousandths of the font size: from the
// font's widths where it has them, else an average glyph's.
func (f *pdfFont) width(code string) float64 {
	if f.twoByte {
		if w, ok := f.cid[int(code[0])<<8|int(code[1])]; ok {
			return w
		}
		return f.dw
	}
	if w := f.simple.Width(int(code[0])); w > 0 {
		return w
	}
	if code == " " {
		return 278
	}
	return 500
}

// cidWidths reads a CID font's W array: "c [w1 w2 …]" gives widths from
// c on, "c1 c2 w" one width for a range.
func cidWidths(desc pdf.Value) (map[int]float64, float64) {
	dw := 1000.0
	if d := desc.Key("DW"); d.Kind() == pdf.Integer || d.Kind() == pdf.Real {
		dw = d.Float64()
	}
	out := map[int]float64{}
	w := desc.Key("W")
	for i := 0; i < w.Len() && len(out) < maxCIDWidths; {
		first := int(w.Index(i).Int64())
		if next := w.Index(i + 1); next.Kind() == pdf.Array {
			for j := 0; j < next.Len() && len(out) < maxCIDWidths; j++ {
				out[first+j] = next.Index(j).Float64()
			}
			i += 2
			continue
		}
		last, width := int(w.Index(i+1).Int64()), w.Index(i+2).Float64()
		for c := first; c <= last && c-first < maxCIDWidths && len(out) < maxCIDWidths; c++ {
			out[c] = width
		}
		i += 3
	}
	return out, dw
}

// rawEncoding decodes a font without a known encoding byte for byte.
type rawEncoding struct{}

func (rawEncoding) Decode(raw string) string {
	rs := make([]rune, len(raw))
	for i := 0; i < len(raw); i++ {
		rs[i] = rune(raw[i])
	}
	return string(rs)
}
