//go:build ignore

// Writes ../bulletin-rows.pdf: a two-column staff bulletin whose content
// stream draws the page row by row across both columns (left line, right
// line, next row), as some typesetting and report tools do. A reader that
// follows the stream interleaves the two articles; one that reads by
// position does not. Helvetica with its widths, no embedded font.
// Run from this directory: go run rowspdf.go
package main

import (
	"bytes"
	"fmt"
	"log"
	"os"
	"strings"
)

// helvetica holds the widths of Helvetica's glyphs 32-126 (1/1000 em).
var helvetica = []int{278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278,
	556, 556, 556, 556, 556, 556, 556, 556, 556, 556, 278, 278, 584, 584, 584, 556, 1015,
	667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778, 667, 778, 722, 667, 611, 722, 667, 944, 667, 667, 611,
	278, 278, 278, 469, 556, 333,
	556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556, 556, 556, 333, 500, 278, 556, 500, 722, 500, 500, 500,
	334, 260, 334, 584}

func width(s string, size float64) float64 {
	w := 0
	for _, c := range []byte(s) {
		if c >= 32 && c <= 126 {
			w += helvetica[c-32]
		}
	}
	return float64(w) * size / 1000
}

// wrap breaks text into lines no wider than max points.
func wrap(text string, size, max float64) []string {
	var lines []string
	cur := ""
	for _, w := range strings.Fields(text) {
		if cur != "" && width(cur+" "+w, size) > max {
			lines = append(lines, cur)
			cur = w
			continue
		}
		cur = strings.TrimSpace(cur + " " + w)
	}
	return append(lines, cur)
}

type ln struct {
	text string
	bold bool
}

func column(head string, paras ...string) []ln {
	out := []ln{{head, true}, {"", false}}
	for _, p := range paras {
		for _, l := range wrap(p, 10, 230) {
			out = append(out, ln{l, false})
		}
		out = append(out, ln{"", false})
	}
	return out
}

func esc(s string) string {
	return strings.NewReplacer(`\`, `\\`, `(`, `\(`, `)`, `\)`).Replace(s)
}

func main() {
	left := column("Canteen prices change",
		"From the first of March a lunch menu in the canteen costs 5.40 euros for staff and 7.90 euros for guests. Soup alone stays at 2.10 euros.",
		"The price of coffee does not change. Refill cups bought at the counter give the tenth coffee free.")
	right := column("Parking garage closed",
		"The parking garage under building C closes for repairs from 12 to 23 May. Staff with a parking permit can use the visitor car park on Mill Road during those days.",
		"Bicycles can still be left in the racks at the entrance of building C, which stay open.")
	var c bytes.Buffer
	fmt.Fprintf(&c, "BT /F2 18 Tf 56 790 Td (%s) Tj ET\n", esc("Staff Bulletin, March"))
	y := 750.0
	for i := 0; i < len(left) || i < len(right); i++ {
		for col, lines := range [][]ln{left, right} {
			if i >= len(lines) || lines[i].text == "" {
				continue
			}
			font := "/F1"
			if lines[i].bold {
				font = "/F2"
			}
			fmt.Fprintf(&c, "BT %s 10 Tf %d %.1f Td (%s) Tj ET\n", font, 56+col*270, y, esc(lines[i].text))
		}
		y -= 13
	}
	widths := fmt.Sprint(helvetica)
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R /Resources << /Font << /F1 5 0 R /F2 6 0 R >> >> >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%sendstream", c.Len(), c.String()),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding /FirstChar 32 /LastChar 126 /Widths " + widths + " >>",
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding /FirstChar 32 /LastChar 126 /Widths " + widths + " >>",
		"<< /Title (Staff Bulletin) >>",
	}
	var out bytes.Buffer
	out.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = out.Len()
		fmt.Fprintf(&out, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := out.Len()
	fmt.Fprintf(&out, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&out, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&out, "trailer\n<< /Size %d /Root 1 0 R /Info 7 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	if err := os.WriteFile("../bulletin-rows.pdf", out.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
