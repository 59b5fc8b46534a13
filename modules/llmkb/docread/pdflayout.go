package docread

import (
	"math"
	"sort"
	"strings"

	"github.com/ledongthuc/pdf"
)

// frag is a run of glyphs on one baseline with no wide gap inside: a line
// of a column, or a cell of a table row.
type frag struct {
	x0, x1, y, size float64
	bold            bool
	text            string
}

func (f frag) top() float64    { return f.y + 0.7*f.size }
func (f frag) bottom() float64 { return f.y - 0.2*f.size }

// line is what the layout hands to the paragraph builder: the fragments
// of one band within one column, left to right.
type line struct {
	frags     []frag
	newColumn bool    // the first line of a column or of a section
	right     float64 // where the lines of its column end at the most
}

// layoutPage turns a page's glyphs into blocks in reading order: lines
// grouped in bands, columns found by their gutters and read one after
// the other, sections between text that spans the columns read top to
// bottom.
func layoutPage(c pageContent, page int, body float64) []pageBlock {
	frags := glyphFrags(c.glyphs)
	if len(frags) == 0 {
		return nil
	}
	lines := readingOrder(frags, findGutters(frags))
	blocks := linesToBlocks(lines, body, func(f frag) bool { return c.inMargin(f.y) })
	for i := range blocks {
		blocks[i].Page = page
	}
	return blocks
}

// glyphFrags groups glyphs into baselines (top to bottom) and splits each
// baseline into fragments at wide gaps.
func glyphFrags(glyphs []pdf.Text) []frag {
	gs := append([]pdf.Text(nil), glyphs...)
	sort.SliceStable(gs, func(i, j int) bool { return gs[i].Y > gs[j].Y })
	var frags []frag
	start := 0
	for i := 1; i <= len(gs); i++ {
		if i < len(gs) && math.Abs(gs[i].Y-gs[start].Y) < 0.5*math.Min(gs[i].FontSize, gs[start].FontSize) {
			continue
		}
		row := gs[start:i]
		sort.SliceStable(row, func(a, b int) bool { return row[a].X < row[b].X })
		frags = append(frags, splitRow(row)...)
		start = i
	}
	return frags
}

// advance is how far a glyph moves the pen: its width where the font
// gives one, else an average glyph's.
func advance(g pdf.Text) float64 {
	if g.W > 0 {
		return g.W
	}
	if g.S == " " {
		return 0.28 * g.FontSize
	}
	return 0.5 * g.FontSize
}

// splitRow cuts one baseline's glyphs into fragments where the gap is
// wider than a space can be, and puts spaces where a producer left gaps
// between words instead of space characters.
func splitRow(row []pdf.Text) []frag {
	spaced := false
	for _, g := range row {
		spaced = spaced || g.S == " "
	}
	var frags []frag
	var sb strings.Builder
	cur := frag{x0: row[0].X, y: row[0].Y, bold: true}
	for i, g := range row {
		sb.WriteString(g.S)
		cur.size = math.Max(cur.size, g.FontSize)
		cur.bold = cur.bold && isBoldFont(g.Font)
		cur.x1 = g.X + advance(g)
		if i+1 == len(row) {
			break
		}
		gap := row[i+1].X - cur.x1
		wide := 1.0
		if g.S == " " {
			wide = 2.0
		}
		switch {
		case gap > wide*g.FontSize:
			cur.text = sb.String()
			frags = append(frags, cur)
			sb.Reset()
			cur = frag{x0: row[i+1].X, y: row[i+1].Y, bold: true}
		case !spaced && (g.W > 0 && gap > 0.15*g.FontSize || g.W == 0 && gap > 0.45*g.FontSize):
			sb.WriteByte(' ')
		}
	}
	cur.text = sb.String()
	return append(frags, cur)
}

func isBoldFont(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "bold") || strings.Contains(n, "black") || strings.Contains(n, "heavy")
}

// bodySize is the font size most of the document's glyphs have, those in
// the pages' margins left out.
func bodySize(pages []pageContent) float64 {
	count := map[float64]int{}
	best, n := 0.0, 0
	for _, c := range pages {
		for _, g := range c.glyphs {
			if c.inMargin(g.Y) {
				continue
			}
			s := math.Round(g.FontSize*2) / 2
			count[s]++
			if count[s] > n || count[s] == n && s < best {
				best, n = s, count[s]
			}
		}
	}
	return best
}

// bandsOf groups fragments whose heights overlap, top to bottom; each
// band's fragments are left to right.
func bandsOf(frags []frag) [][]frag {
	fs := append([]frag(nil), frags...)
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].top() > fs[j].top() })
	var bands [][]frag
	bottom := math.Inf(1)
	for _, f := range fs {
		if len(bands) == 0 || f.top() <= bottom {
			bands = append(bands, nil)
			bottom = f.bottom()
		}
		bands[len(bands)-1] = append(bands[len(bands)-1], f)
		bottom = math.Min(bottom, f.bottom())
	}
	for _, b := range bands {
		sort.SliceStable(b, func(i, j int) bool { return b[i].x0 < b[j].x0 })
	}
	return bands
}
