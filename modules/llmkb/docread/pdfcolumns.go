package docread

import (
	"math"
	"sort"
	"strings"
)

// gutter is an empty vertical strip between two columns of text.
type gutter struct{ lo, hi float64 }

func (g gutter) mid() float64 { return (g.lo + g.hi) / 2 }

// findGutters finds the gutters between columns of text: vertical strips
// at least 8pt wide that hardly any line of prose (four words and more)
// crosses, with columns of prose on both sides as wide as an eighth of
// the text. Headings and table cells are left out of the count: a
// table's columns are not columns of prose, and are read as rows.
func findGutters(all []frag) []gutter {
	var frags []frag
	for _, f := range all {
		if len(strings.Fields(f.text)) >= 4 {
			frags = append(frags, f)
		}
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, f := range frags {
		lo, hi = math.Min(lo, f.x0), math.Max(hi, f.x1)
	}
	width := hi - lo
	if width < 50 || width > 5000 || len(frags) < 6 {
		return nil
	}
	cover := make([]int, int(width)+2)
	for _, f := range frags {
		cover[int(f.x0-lo)]++
		cover[int(f.x1-lo)+1]--
	}
	allowed := max(2, len(frags)/12)
	var gutters []gutter
	run := -1
	for x := range cover {
		if x > 0 {
			cover[x] += cover[x-1]
		}
		switch {
		case cover[x] <= allowed && x > 0 && x < len(cover)-2 && run < 0:
			run = x
		case cover[x] > allowed && run >= 0: // text on both sides
			if x-run >= 8 {
				gutters = append(gutters, gutter{lo + float64(run), lo + float64(x)})
			}
			run = -1
		}
	}
	if !proseColumns(frags, gutters, lo, hi) {
		return nil
	}
	return gutters
}

// proseColumns tells whether each column between the gutters is one of
// prose.
func proseColumns(frags []frag, gutters []gutter, lo, hi float64) bool {
	if len(gutters) == 0 {
		return false
	}
	edges := []float64{lo}
	for _, g := range gutters {
		edges = append(edges, g.lo, g.hi)
	}
	edges = append(edges, hi)
	for c := 0; c+1 < len(edges); c += 2 {
		left, right := edges[c], edges[c+1]
		var words []int
		for _, f := range frags {
			if f.x0 >= left-1 && f.x1 <= right+1 {
				words = append(words, len(strings.Fields(f.text)))
			}
		}
		if right-left < (hi-lo)/8 || len(words) < 3 {
			return false
		}
		sort.Ints(words)
		if words[len(words)/2] < 4 {
			return false
		}
	}
	return true
}

// column is the index of the column a fragment's middle is in.
func column(f frag, gutters []gutter) int {
	m := (f.x0 + f.x1) / 2
	i := 0
	for i < len(gutters) && m > gutters[i].mid() {
		i++
	}
	return i
}

// spans tells whether a fragment crosses a gutter (a title over the
// columns).
func spans(f frag, gutters []gutter) bool {
	for _, g := range gutters {
		if f.x0 < g.mid() && f.x1 > g.mid() {
			return true
		}
	}
	return false
}

// zone is the stretch of a page, top to bottom, one column runs over.
type zone struct{ top, bottom float64 }

func (z zone) holds(f frag) bool { return f.y <= z.top+0.1 && f.y >= z.bottom-0.1 }

// columnZones finds how far down and up each column runs: over its lines
// of prose, on down through the lines that follow each other closely (a
// paragraph's short last line), and up through the headings just above.
// What lies outside every column's zone (a table under the columns) is
// read across the page.
func columnZones(frags []frag, gutters []gutter) []zone {
	zones := make([]zone, len(gutters)+1)
	for c := range zones {
		var members []frag
		z := zone{top: math.Inf(-1), bottom: math.Inf(1)}
		for _, f := range frags {
			if spans(f, gutters) || column(f, gutters) != c {
				continue
			}
			members = append(members, f)
			if len(strings.Fields(f.text)) >= 4 {
				z.top, z.bottom = math.Max(z.top, f.y), math.Min(z.bottom, f.y)
			}
		}
		sort.SliceStable(members, func(i, j int) bool { return members[i].y > members[j].y })
		for _, f := range members { // down
			if f.y < z.bottom && f.y >= z.bottom-1.6*f.size {
				z.bottom = f.y
			}
		}
		for i := len(members) - 1; i >= 0; i-- { // up
			if f := members[i]; f.y > z.top && f.y <= z.top+3*f.size {
				z.top = f.y
			}
		}
		zones[c] = z
	}
	return zones
}

// readingOrder orders the fragments as a person reads them, in lines: text
// that spans the columns on its own, the text between two such read
// column after column, each column's lines top to bottom.
func readingOrder(frags []frag, gutters []gutter) []line {
	fs := append([]frag(nil), frags...)
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].top() > fs[j].top() })
	var lines []line
	columns := make([][]frag, len(gutters)+1)
	var spanning []frag
	zones := columnZones(frags, gutters)
	emit := func(group []frag) {
		right := math.Inf(-1)
		for _, f := range group {
			right = math.Max(right, f.x1)
		}
		for i, b := range bandsOf(group) {
			lines = append(lines, line{frags: b, newColumn: i == 0 && len(gutters) > 0, right: right})
		}
	}
	flushColumns := func() {
		for c, col := range columns {
			emit(col)
			columns[c] = nil
		}
	}
	for _, f := range fs {
		if spans(f, gutters) || !zones[column(f, gutters)].holds(f) {
			flushColumns()
			spanning = append(spanning, f)
			continue
		}
		emit(spanning)
		spanning = nil
		c := column(f, gutters)
		columns[c] = append(columns[c], f)
	}
	emit(spanning)
	flushColumns()
	return lines
}
