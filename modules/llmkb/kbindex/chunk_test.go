package kbindex

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmgw/llmgw/modules/llmkb/docread"
)

var enSentences = []string{
	"Employees travelling on company business must book flights through the approved travel portal at least fourteen days before departure.",
	"Economy class is the default for flights shorter than six hours.",
	"Business class may be approved by a director for longer journeys or when an employee travels overnight and is expected to work the next morning.",
	"Hotel costs are reimbursed up to the nightly limit for the destination city, which is published in the appendix and reviewed every January.",
	"Receipts must be itemised: a credit card statement alone is not sufficient.",
	"Minibar charges, in-room movies and laundry for stays shorter than five nights are personal expenses.",
	"Rail travel is preferred over flying for journeys under four hours door to door.",
	"Employees may use a private car only when no public transport is reasonably available, and mileage is paid at the rate set by the finance team.",
	"Taxis are reimbursed for trips between the airport and the hotel, and after 10 p.m. in any city.",
	"Meals are covered by a daily allowance that depends on the country and is reduced when breakfast is included in the room rate.",
	"Claims must be submitted within thirty days of returning; claims older than ninety days are rejected without review.",
	"Managers approve claims in the expense tool, and finance audits a random sample of five percent each month.",
	"Travel to countries with an official travel warning requires the written approval of the security office.",
	"Employees who fall ill while travelling should contact the travel assistance line, which is open around the clock.",
	"Frequent flyer miles earned on business trips may be kept, but must not influence the choice of airline or fare.",
	"Conference fees are paid by the company when the event is relevant to the employee's role and approved in advance.",
}

var deSentences = []string{
	"Mitarbeiterinnen und Mitarbeiter, die dienstlich reisen, buchen Flüge über das freigegebene Reiseportal spätestens vierzehn Tage vor Abflug.",
	"Für Flüge unter sechs Stunden gilt die Economy-Klasse.",
	"Übernachtungskosten werden bis zur Höchstgrenze des jeweiligen Reiseziels erstattet.",
	"Die Reisekostenabrechnung ist innerhalb von vier Wochen nach Rückkehr einzureichen.",
	"Verspätet eingereichte Belege können nicht mehr berücksichtigt werden.",
	"Verpflegungsmehraufwendungen richten sich nach den steuerlichen Pauschalen des Bundesministeriums der Finanzen.",
	"Bahnreisen haben bei Strecken unter vier Stunden Vorrang vor Flügen.",
	"Ein privates Fahrzeug darf nur genutzt werden, wenn kein öffentliches Verkehrsmittel zumutbar erreichbar ist.",
	"Taxikosten werden für Fahrten zwischen Flughafen und Hotel sowie nach 22 Uhr erstattet.",
	"Reisen in Länder mit einer Reisewarnung des Auswärtigen Amtes bedürfen der schriftlichen Zustimmung der Sicherheitsabteilung.",
}

// para joins n sentences of list starting at the i-th.
func para(list []string, i, n int) string {
	var b []string
	for k := 0; k < n; k++ {
		b = append(b, list[(i+k)%len(list)])
	}
	return strings.Join(b, " ")
}

func policyDoc() *docread.Document {
	d := &docread.Document{Format: "markdown", Title: "Travel policy"}
	add := func(k docread.Kind, level int, text string) {
		d.Blocks = append(d.Blocks, docread.Block{Kind: k, Level: level, Text: text})
	}
	add(docread.Heading, 1, "Travel policy")
	add(docread.Paragraph, 0, para(enSentences, 0, 2))
	for s, name := range []string{"Flights", "Hotels", "Ground transport", "Meals", "Claims", "Safety"} {
		add(docread.Heading, 2, name)
		for p := 0; p < 2+s%3; p++ {
			add(docread.Paragraph, 0, para(enSentences, s*3+p, 2+p))
		}
		if s == 2 {
			add(docread.Heading, 3, "Private cars")
			add(docread.ListItem, 0, enSentences[7])
			add(docread.ListItem, 0, enSentences[8])
		}
	}
	return d
}

// checkSizes holds chunks to the maximum, and their Tokens to
// CountTokens of their text (which may read a chunk's language otherwise
// than the chunker read the document's: exact is false then).
func checkSizes(t *testing.T, ps []Piece, maxT int, exact ...bool) {
	t.Helper()
	if len(ps) == 0 {
		t.Fatal("no chunks")
	}
	for i, p := range ps {
		if p.Tokens > maxT || len(exact) == 0 && abs(p.Tokens-CountTokens(p.Text)) > 2 {
			t.Errorf("chunk %d has %d tokens (CountTokens %d), max %d", i, p.Tokens, CountTokens(p.Text), maxT)
		}
	}
}

func abs(x int) int { return max(x, -x) }

func TestChunkPolicyFollowsHeadings(t *testing.T) {
	ps := Chunk(policyDoc(), ChunkOptions{MaxTokens: 200, OverlapTokens: 50})
	checkSizes(t, ps, 200)
	for i, p := range ps {
		first, _, _ := strings.Cut(p.Text, "\n")
		if !strings.HasPrefix(first, "Travel policy") {
			t.Errorf("chunk %d starts with %q, want its heading path", i, first)
		}
	}
	// The first chunk was less than half full at "Flights": the heading
	// goes on inside it; "Hotels" found it more than half full.
	if !strings.Contains(ps[0].Text, "\n\nFlights\n\n") {
		t.Errorf("chunk 0 does not go on into Flights:\n%s", ps[0].Text)
	}
	if first, _, _ := strings.Cut(ps[1].Text, "\n"); first != "Travel policy > Hotels" {
		t.Errorf("chunk 1's path is %q, want %q", first, "Travel policy > Hotels")
	}
	// Every paragraph is whole in some chunk.
	for _, b := range policyDoc().Blocks {
		found := false
		for _, p := range ps {
			found = found || strings.Contains(p.Text, b.Text)
		}
		if !found {
			t.Errorf("paragraph %.60q… was split", b.Text)
		}
	}
	var paths []string
	for _, p := range ps {
		first, _, _ := strings.Cut(p.Text, "\n")
		paths = append(paths, first)
	}
	if !strings.Contains(strings.Join(paths, "|"), "Travel policy > Ground transport > Private cars") &&
		!strings.Contains(strings.Join(paths, "|"), "Travel policy > Ground transport") {
		t.Errorf("no chunk in Ground transport: %q", paths)
	}
	t.Logf("%d chunks: %q", len(ps), paths)
}

func TestChunkAutoKeepsSmallDocumentWhole(t *testing.T) {
	ps := Chunk(policyDoc(), ChunkOptions{})
	checkSizes(t, ps, 800)
	if len(ps) > 3 {
		t.Errorf("%d chunks for a %d-token policy at 800 tokens, want at most 3", len(ps), CountTokens(ps[0].Text))
	}
}

func TestChunkLongTableKeepsHeader(t *testing.T) {
	d := &docread.Document{Format: "html", Title: "Per diem rates"}
	d.Blocks = append(d.Blocks, docread.Block{Kind: docread.Heading, Level: 1, Text: "Per diem rates 2025"})
	d.Blocks = append(d.Blocks, docread.Block{Kind: docread.Paragraph, Text: "The rates below apply to trips starting on or after 1 January 2025."})
	header := "Country | City | Nightly limit (EUR) | Per diem (EUR) | Notes"
	d.Blocks = append(d.Blocks, docread.Block{Kind: docread.TableRow, Text: header})
	for i := 0; i < 150; i++ {
		row := fmt.Sprintf("Country %d | City %d | %d | %d | %s", i/5, i, 120+i%9*15, 24+i%7*4, []string{"", "breakfast included", "city tax extra", "", "airport hotels only"}[i%5])
		d.Blocks = append(d.Blocks, docread.Block{Kind: docread.TableRow, Text: row})
	}
	d.Blocks = append(d.Blocks, docread.Block{Kind: docread.Paragraph, Text: enSentences[10]})
	ps := Chunk(d, ChunkOptions{MaxTokens: 300, OverlapTokens: 100})
	checkSizes(t, ps, 300)
	rows := 0
	for i, p := range ps {
		_, body, _ := strings.Cut(p.Text, "\n")
		if strings.Contains(body, "| City ") && !strings.Contains(body, header) {
			t.Errorf("chunk %d has rows without the header row:\n%s", i, p.Text)
		}
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "Country ") && line != header {
				rows++
			}
		}
	}
	if rows != 150 {
		t.Errorf("%d rows in the chunks, want each of the 150 once", rows)
	}
	if len(ps) < 4 {
		t.Errorf("%d chunks, want the table cut in parts", len(ps))
	}
}

func TestChunkWallOfTextCutsAtSentences(t *testing.T) {
	wall := para(enSentences, 0, 60) // one paragraph of 60 sentences
	d := &docread.Document{Format: "text", Blocks: []docread.Block{{Kind: docread.Paragraph, Text: wall}}}
	ps := Chunk(d, ChunkOptions{MaxTokens: 250, OverlapTokens: 80})
	checkSizes(t, ps, 250)
	if len(ps) < 6 {
		t.Fatalf("%d chunks for %d tokens at 250", len(ps), CountTokens(wall))
	}
	for i, p := range ps {
		if !strings.HasSuffix(p.Text, ".") {
			t.Errorf("chunk %d does not end at a sentence end: …%q", i, p.Text[max(0, len(p.Text)-40):])
		}
		if i == 0 {
			continue
		}
		// The overlap: the chunk starts with whole trailing sentences of
		// the previous one.
		prev := ps[i-1].Text
		n := overlapLen(prev, p.Text)
		if n == 0 || !strings.HasSuffix(prev[:len(prev)-n], ". ") {
			t.Errorf("chunk %d does not start with whole trailing sentences of chunk %d (%d bytes in common)", i, i-1, n)
		}
		if ov := CountTokens(p.Text[:n]); ov > 80+2 || ov < 20 {
			t.Errorf("chunk %d overlaps by %d tokens, want 20 to 80", i, ov)
		}
	}
}

// overlapLen is the length of the longest prefix of b that ends a.
func overlapLen(a, b string) int {
	for n := min(len(a), len(b)); n > 0; n-- {
		if strings.HasSuffix(a, b[:n]) {
			return n
		}
	}
	return 0
}

func TestChunkGerman(t *testing.T) {
	d := &docread.Document{Format: "docx", Title: "Reiserichtlinie"}
	d.Blocks = append(d.Blocks, docread.Block{Kind: docread.Heading, Level: 1, Text: "Reiserichtlinie"})
	for s, name := range []string{"Flüge", "Übernachtung", "Abrechnung"} {
		d.Blocks = append(d.Blocks, docread.Block{Kind: docread.Heading, Level: 2, Text: name})
		for p := 0; p < 4; p++ {
			d.Blocks = append(d.Blocks, docread.Block{Kind: docread.Paragraph, Text: para(deSentences, s*3+p, 3)})
		}
	}
	ps := Chunk(d, ChunkOptions{MaxTokens: 150, OverlapTokens: 0})
	checkSizes(t, ps, 150)
	for i, p := range ps {
		if !strings.HasPrefix(p.Text, "Reiserichtlinie > ") {
			t.Errorf("chunk %d: %.40q, want the heading path first", i, p.Text)
		}
		if i > 0 && overlapLen(ps[i-1].Text, p.Text) > 20 {
			t.Errorf("chunk %d overlaps chunk %d with OverlapTokens 0", i, i-1)
		}
	}
}

func TestChunkHugeWordAndEmpty(t *testing.T) {
	d := &docread.Document{Blocks: []docread.Block{{Kind: docread.Paragraph, Text: strings.Repeat("abcdefghij", 2000)}, {Kind: docread.Paragraph, Text: "  "}}}
	ps := Chunk(d, ChunkOptions{MaxTokens: 100})
	checkSizes(t, ps, 100)
	if got := Chunk(&docread.Document{}, ChunkOptions{}); len(got) != 0 {
		t.Errorf("an empty document gave %d chunks", len(got))
	}
}

func TestChunkLongPathAndCode(t *testing.T) {
	d := &docread.Document{Blocks: []docread.Block{
		{Kind: docread.Heading, Level: 1, Text: strings.Repeat("Very long heading words ", 30)},
		{Kind: docread.Heading, Level: 2, Text: "Installation"},
		{Kind: docread.Code, Text: strings.Repeat("go build -o bin/llmgw ./cmd/llmgw && ./bin/llmgw run --config Caddyfile\n", 40)},
	}}
	ps := Chunk(d, ChunkOptions{MaxTokens: 120})
	checkSizes(t, ps, 120, false) // "very" makes the document English, "bin" the code German
	for i, p := range ps {
		first, body, _ := strings.Cut(p.Text, "\n")
		if first != "Installation" {
			t.Errorf("chunk %d's path is %.40q, want the nearest heading when the whole path is too long", i, first)
		}
		for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
			if line != "go build -o bin/llmgw ./cmd/llmgw && ./bin/llmgw run --config Caddyfile" {
				t.Errorf("chunk %d has the code line %q, want code cut between whole lines", i, line)
			}
		}
	}
}
