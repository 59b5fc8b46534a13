package docread

import (
	"regexp"
	"strings"
)

// marginOf is the share of a page's height at its top and at its bottom
// where running headers and footers are looked for.
const marginOf = 0.06

// pageBlock is a block of a PDF page, and whether it lies in the page's
// top or bottom margin.
type pageBlock struct {
	Block
	margin bool
}

// pageNumber is a line that is only a page number: "3", "- 3 -", "3/12",
// "Page 3 of 12", "Seite 3 von 12".
var pageNumber = regexp.MustCompile(`(?i)^(page|seite|p\.|s\.)?\s*[-–]?\s*\d{1,4}\s*((/|of|von)\s*\d{1,4})?\s*[-–]?$`)

// digits are replaced to compare running lines whose numbers change.
var digits = regexp.MustCompile(`\d+`)

// dropRunning flattens the pages' blocks, leaving out running headers and
// footers: a line in a page's margin that recurs (numbers aside) on at
// least half of the pages, or that is only a page number.
func dropRunning(pages [][]pageBlock) []Block {
	key := func(b pageBlock) string { return digits.ReplaceAllString(strings.ToLower(b.Text), "#") }
	seen := map[string]int{}
	for _, page := range pages {
		once := map[string]bool{}
		for _, b := range page {
			if b.margin && !once[key(b)] {
				once[key(b)] = true
				seen[key(b)]++
			}
		}
	}
	var out []Block
	for _, page := range pages {
		for _, b := range page {
			running := len(pages) > 1 && seen[key(b)] >= 2 && 2*seen[key(b)] >= len(pages)
			if b.margin && (running || pageNumber.MatchString(b.Text)) {
				continue
			}
			out = append(out, b.Block)
		}
	}
	return out
}
