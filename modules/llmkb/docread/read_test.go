package docread

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readFixture(t *testing.T, name string) *Document {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := Read(name, data)
	if err != nil {
		t.Fatalf("Read(%s): %v", name, err)
	}
	return doc
}

// h, p, li, row and code make the blocks a test expects.
func h(level int, text string) Block { return Block{Kind: Heading, Level: level, Text: text} }
func p(text string) Block            { return Block{Kind: Paragraph, Text: text} }
func li(text string) Block           { return Block{Kind: ListItem, Text: text} }
func row(text string) Block          { return Block{Kind: TableRow, Text: text} }
func code(text string) Block         { return Block{Kind: Code, Text: text} }

// hasInOrder checks that want's blocks are among got's, in this order
// (pages are not compared).
func hasInOrder(t *testing.T, got []Block, want []Block) {
	t.Helper()
	i := 0
	for _, b := range got {
		if i < len(want) && b.Kind == want[i].Kind && b.Level == want[i].Level && b.Text == want[i].Text {
			i++
		}
	}
	if i < len(want) {
		t.Errorf("block %d not found in order: got %s, want %+v", i, dump(got), want[i])
	}
}

func dump(blocks []Block) string {
	var sb strings.Builder
	for _, b := range blocks {
		sb.WriteString("\n  ")
		sb.WriteString([]string{"p", "h", "li", "row", "code"}[b.Kind])
		if b.Kind == Heading {
			sb.WriteByte(byte('0' + b.Level))
		}
		sb.WriteString(": " + b.Text)
	}
	return sb.String()
}

func allText(doc *Document) string {
	var sb strings.Builder
	for _, b := range doc.Blocks {
		sb.WriteString(b.Text + "\n")
	}
	return sb.String()
}

func TestReadFixtures(t *testing.T) {
	tests := []struct {
		file, format, title string
		want                []Block
		absent              []string
	}{
		{"handbook.docx", "docx", "Employee Handbook 2025", []Block{
			h(1, "Employee Handbook"), h(1, "Working hours"),
			p("Core hours are 10:00 to 15:00. Outside them you plan your day with your team."),
			h(2, "Time off"), li("Annual leave: 28 days a year."), li("Sick leave: tell your manager before 09:00."),
			h(1, "Equipment"), row("Item | Standard | On request"), row("Laptop | 14-inch, 16 GB | 32 GB for developers"),
			p("Order equipment in the service portal: https://portal.example.com"),
		}, []string{"as your manager says"}},
		{"remote-work.html", "html", "Remote work policy", []Block{
			h(1, "Remote work policy"),
			p("Employees may work from home up to three days a week after their probation period, in agreement with their team lead."),
			h(2, "Eligibility"), li("Permanent employees after six months"), li("Working students, with the approval of HR"),
			li("only for tasks that need no lab access"),
			row("Item | Amount | Frequency"), row("Home office allowance | 30 EUR | monthly"),
			code("vpn connect --profile acme-remote\nvpn status"),
		}, []string{"Canteen menu", "cookies", "Accept all", "Related pages", "Imprint", "Search the intranet", "Skip to content", "track(", "Hidden tracking"}},
		{"kantine-latin1.html", "html", "Speiseplan der Kantine", []Block{
			p("Montag: Kürbissuppe mit Brötchen, 3,50 € für Mitarbeiter."),
			p("Grüße aus der Küche in Köln – à bientôt, café crème!"),
		}, nil},
		{"expenses-1252.txt", "text", "", []Block{
			p("The hotel in München cost €129 per night — the “business rate” wasn’t available. Taxi to the airport: € 42,50. Naïve estimate for April: €900."),
		}, nil},
		{"zdalna-1250.txt", "text", "", []Block{
			p("Pracownik może pracować zdalnie dwa dni w tygodniu. Zażółć gęślą jaźń – łódź płynie po rzece."),
		}, nil},
		{"notes-utf16.txt", "text", "", []Block{p("Attendees: Jürgen, Ana, Søren. Decision: the release moves to 3 June.")}, nil},
		{"notes-utf16be.txt", "text", "", []Block{p("Attendees: Jürgen, Ana, Søren. Decision: the release moves to 3 June.")}, nil},
		{"onboarding.txt", "text", "Onboarding checklist", []Block{
			h(1, "Onboarding checklist"), h(2, "Before day one"),
			li("Sign the contract and send it back to HR."), li("Send a photo for your badge to facilities@example.com."),
			h(2, "First day"),
		}, []string{"===", "---"}},
		{"reisekosten.md", "markdown", "Reisekostenrichtlinie 2025", []Block{
			h(1, "Reisekostenrichtlinie"), h(2, "Übernachtung"),
			row("Stadt | Höchstbetrag | Frühstück"), row("München | 160 € | inklusive"), row("Übrige Städte | 110 € | zusätzlich 15 €"),
			li("Abwesenheit von 24 Stunden: 28 € pro Tag"),
		}, []string{"owner: Finanzen"}},
		{"README.md", "markdown", "acme-cli", []Block{
			h(1, "acme-cli"), code("go install example.com/acme/cli@latest\nacme login --token \"$ACME_TOKEN\""),
			li("Run acme deploy <project> to deploy the current directory."), li("Add --dry-run to see what would change."),
			row("--timeout | 5m | how long to wait for health checks"),
			p("Note: deployments to prod need an approval in the web console."),
		}, []string{"<img", "```"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			doc := readFixture(t, tt.file)
			if doc.Format != tt.format || doc.Title != tt.title {
				t.Errorf("format, title = %q, %q; want %q, %q", doc.Format, doc.Title, tt.format, tt.title)
			}
			hasInOrder(t, doc.Blocks, tt.want)
			for _, s := range tt.absent {
				if strings.Contains(allText(doc), s) {
					t.Errorf("text has %q, which is no part of the content:%s", s, dump(doc.Blocks))
				}
			}
		})
	}
}

// TestReadSniffsContent: the extension is a hint, the bytes decide.
func TestReadSniffsContent(t *testing.T) {
	html, _ := os.ReadFile("testdata/remote-work.html")
	pdf, _ := os.ReadFile("testdata/report.pdf")
	tests := []struct{ name, format string }{
		{"remote-work-as-text.txt", "text"}, // a .txt holding HTML is read as text
		{"page", "html"},                    // no extension: HTML is HTML
		{"scan0001", "pdf"},                 // a PDF without an extension
		{"report.txt", "pdf"},               // a PDF misnamed
	}
	for _, tt := range tests {
		data := html
		if tt.format == "pdf" {
			data = pdf
		}
		doc, err := Read(tt.name, data)
		if err != nil || doc.Format != tt.format {
			t.Errorf("Read(%q): %v, %v; want format %s", tt.name, doc, err, tt.format)
		}
	}
	doc, _ := Read("page.txt", html)
	if !strings.Contains(allText(doc), "<title>Remote work policy") {
		t.Errorf("a .txt holding HTML lost its markup: %s", dump(doc.Blocks))
	}
}

// TestReadRepairsDoubleEncodedUTF8: UTF-8 that went through Windows-1252
// once too often is mended, not passed on as mojibake.
func TestReadRepairsDoubleEncodedUTF8(t *testing.T) {
	doc, err := Read("notes.txt", []byte("Treffen in MÃ¼nchen, Kosten 20 â‚¬."))
	if err != nil {
		t.Fatal(err)
	}
	if got := doc.Blocks[0].Text; got != "Treffen in München, Kosten 20 €." {
		t.Errorf("got %q", got)
	}
	doc, _ = Read("city.txt", []byte("SÃO PAULO is not mojibake"))
	if got := doc.Blocks[0].Text; got != "SÃO PAULO is not mojibake" {
		t.Errorf("valid text changed: %q", got)
	}
}
