package docread

import (
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ledongthuc/pdf"
)

// textOp applies a text operator and tells whether op was one.
func (t *textRun) textOp(op string, args []pdf.Value, res pdf.Value) bool {
	switch op {
	case "BT":
		t.tm, t.tlm = identity, identity
	case "ET":
	case "Tf":
		if len(args) == 2 {
			t.g.font = t.font(res, args[0].Name())
			t.g.size = args[1].Float64()
		}
	case "Tc", "Tw", "Tz", "TL", "Ts":
		t.textParam(op, args)
	case "Td", "TD":
		if v, ok := nums(args, 2); ok {
			if op == "TD" {
				t.g.leading = -v[1]
			}
			t.tlm = matrix{1, 0, 0, 1, v[0], v[1]}.mul(t.tlm)
			t.tm = t.tlm
		}
	case "Tm":
		if m, ok := matrixOf(args); ok {
			t.tm, t.tlm = m, m
		}
	case "T*":
		t.nextLine()
	case "Tj", "'", "\"":
		t.showOp(op, args)
	case "TJ":
		if len(args) == 1 {
			t.showArray(args[0])
		}
	default:
		return false
	}
	return true
}

func (t *textRun) textParam(op string, args []pdf.Value) {
	v, ok := nums(args, 1)
	if !ok {
		return
	}
	switch op {
	case "Tc":
		t.g.charSp = v[0]
	case "Tw":
		t.g.wordSp = v[0]
	case "Tz":
		t.g.scale = v[0] / 100
	case "TL":
		t.g.leading = v[0]
	case "Ts":
		t.g.rise = v[0]
	}
}

func (t *textRun) nextLine() {
	t.tlm = matrix{1, 0, 0, 1, 0, -t.g.leading}.mul(t.tlm)
	t.tm = t.tlm
}

// showOp shows a string: Tj, ' (next line first), " (spacing first).
func (t *textRun) showOp(op string, args []pdf.Value) {
	if op == "\"" && len(args) == 3 {
		t.g.wordSp, t.g.charSp = args[0].Float64(), args[1].Float64()
		args = args[2:]
	}
	if len(args) != 1 {
		return
	}
	if op != "Tj" {
		t.nextLine()
	}
	t.show(args[0].RawString())
}

// showArray shows TJ's strings, moving by its numbers (kerning, and the
// gaps some producers put between words instead of spaces).
func (t *textRun) showArray(a pdf.Value) {
	for i := 0; i < a.Len() && i < 1<<20; i++ {
		v := a.Index(i)
		if v.Kind() == pdf.String {
			t.show(v.RawString())
			continue
		}
		tx := -v.Float64() / 1000 * t.g.size * t.g.scale
		t.tm = matrix{1, 0, 0, 1, tx, 0}.mul(t.tm)
	}
}

// show adds a string's glyphs at their places and moves the text
// position past them.
func (t *textRun) show(raw string) {
	f := t.g.font
	if f == nil || len(t.glyphs) >= maxGlyphs {
		return
	}
	step := 1
	if f.twoByte {
		step = 2
	}
	for i := 0; i+step <= len(raw); i += step {
		code := raw[i : i+step]
		w := f.width(code) / 1000
		trm := matrix{t.g.size * t.g.scale, 0, 0, t.g.size, 0, t.g.rise}.mul(t.tm.mul(t.g.ctm))
		if s := glyphText(f.enc.Decode(code)); s != "" {
			t.glyphs = append(t.glyphs, pdf.Text{
				Font: f.name, FontSize: math.Hypot(trm[2], trm[3]),
				X: trm[4], Y: trm[5], W: w * math.Hypot(trm[0], trm[1]), S: s,
			})
		}
		tx := w*t.g.size + t.g.charSp
		if step == 1 && code == " " {
			tx += t.g.wordSp
		}
		t.tm = matrix{1, 0, 0, 1, tx * t.g.scale, 0}.mul(t.tm)
	}
}

// glyphText is a decoded glyph's text as valid UTF-8 without control
// characters.
func glyphText(s string) string {
	return strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) && r != '\t' {
			return -1
		}
		return r
	}, s)
}
