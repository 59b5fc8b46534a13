package docread

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReadPDFTwoColumns: a newsletter set in two CSS columns under a
// title reads column after column, and a paragraph that runs on from the
// foot of the left column into the right one stays one paragraph.
func TestReadPDFTwoColumns(t *testing.T) {
	doc := readFixture(t, "newsletter.pdf")
	hasInOrder(t, doc.Blocks, []Block{
		h(1, "Harbour Newsletter, Spring Edition"),
		h(3, "New ferry timetable"),
		p("From the first of April the morning ferry leaves the north pier at 6:40 instead of 7:10. The change gives commuters a connection to the early train, which the town council asked for after last winter's survey. The evening ferry keeps its old times."),
		h(3, "Lighthouse open days"),
		p("The lighthouse on Gull Point opens to visitors on the last Sunday of every month from May to September. Volunteers guide groups of twelve up the spiral staircase of 143 steps. Children under eight must be carried or stay below with an adult."),
		h(3, "Fish market moves"),
		p("The repairs should be done by the end of June, when the market returns to the quay with two new covered stalls paid for by the regional grant."),
	})
	for _, b := range doc.Blocks {
		if b.Page != 1 || b.Kind == TableRow {
			t.Errorf("block %+v: want page 1 and no table rows", b)
		}
	}
}

// TestReadPDFColumnsDrawnRowByRow: a page whose content stream draws both
// columns row by row (left line, right line) still reads as two articles,
// which the stream order would interleave.
func TestReadPDFColumnsDrawnRowByRow(t *testing.T) {
	doc := readFixture(t, "bulletin-rows.pdf")
	hasInOrder(t, doc.Blocks, []Block{
		h(1, "Staff Bulletin, March"),
		h(4, "Canteen prices change"),
		p("From the first of March a lunch menu in the canteen costs 5.40 euros for staff and 7.90 euros for guests. Soup alone stays at 2.10 euros."),
		p("The price of coffee does not change. Refill cups bought at the counter give the tenth coffee free."),
		h(4, "Parking garage closed"),
		p("The parking garage under building C closes for repairs from 12 to 23 May. Staff with a parking permit can use the visitor car park on Mill Road during those days."),
		p("Bicycles can still be left in the racks at the entrance of building C, which stay open."),
	})
	if doc.Title != "Staff Bulletin" {
		t.Errorf("title %q, want the document information's", doc.Title)
	}
}

// TestReadPDFReport: one column, kerned serif text read as whole words,
// headings by size, the page each block is on.
func TestReadPDFReport(t *testing.T) {
	doc := readFixture(t, "report.pdf")
	hasInOrder(t, doc.Blocks, []Block{
		h(1, "Quarterly Service Report"),
		p("The gateway served 4.2 million requests in the third quarter, an increase of 18 percent over the second quarter. Median latency stayed below 240 milliseconds for every model in the catalog."),
		h(2, "Incidents"),
		p("Two incidents affected customers. On 14 August a certificate renewal failed on one edge node for 37 minutes; traffic moved to the other nodes automatically. On 2 September a model replica ran out of memory under a burst of long prompts."),
		h(2, "Appendix: Contacts"),
	})
	i := slices.IndexFunc(doc.Blocks, func(b Block) bool { return b.Text == "Appendix: Contacts" })
	if i < 0 || doc.Blocks[i].Page != 2 || doc.Blocks[0].Page != 1 {
		t.Errorf("pages: %+v", doc.Blocks)
	}
}

func TestReadPDFTable(t *testing.T) {
	doc := readFixture(t, "pricetable.pdf")
	hasInOrder(t, doc.Blocks, []Block{
		h(1, "Price List 2025"),
		p("All prices are per month and exclude VAT."),
		row("Plan | Seats | Price"),
		row("Starter | 5 | 49 EUR"),
		row("Team | 25 | 199 EUR"),
		row("Enterprise | unlimited | on request"),
		p("Annual billing saves two months."),
	})
}

// TestReadPDFDamaged: a truncated or garbled PDF is an invalid_file, not
// a panic and not an empty document.
func TestReadPDFDamaged(t *testing.T) {
	whole := readFixtureBytes(t, "report.pdf")
	for name, data := range map[string][]byte{
		"truncated.pdf": whole[:len(whole)/3],
		"garbled.pdf":   append([]byte("%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 2 0 R >>\n"), []byte(strings.Repeat("x", 300))...),
		"header.pdf":    []byte("%PDF-1.4"),
	} {
		_, err := Read(name, data)
		wantError(t, err, "invalid_file", "the PDF file is damaged")
	}
}

// TestReadPDFColumnsAboveTable: two columns of prose over a table that
// spans the page: the columns read one after the other, the table's rows
// whole, though some of its cells sit in the gutter's line and some not.
func TestReadPDFColumnsAboveTable(t *testing.T) {
	doc := readFixture(t, "datasheet.pdf")
	hasInOrder(t, doc.Blocks, []Block{
		h(1, "WidgetPro X300 Datasheet"),
		h(2, "Overview"),
		p("The X300 launches in May 2025 and can be used with all X200 accessories except the old docking station D1."),
		h(2, "Highlights"),
		p("The housing is waterproof to IP67: the device survives 30 minutes in one metre of water. The battery lasts up to 14 hours of continuous measurement and can be swapped in the field without tools. A drop from 1.5 metres onto concrete does not damage the device."),
		h(2, "Specifications"),
		row("Property | X300 | X200 for comparison"),
		row("Weight | 1.5 kg | 1.2 kg"),
		row("Display | 6-inch, 1000 nits | 5-inch, 500 nits"),
		row("Price | 749 EUR | 499 EUR"),
	})
}

// TestReadPDFOwnerRestricted: a PDF encrypted with only an owner password
// (AES-128, opens without a password, copying restricted) is read.
func TestReadPDFOwnerRestricted(t *testing.T) {
	doc := readFixture(t, "restricted.pdf")
	hasInOrder(t, doc.Blocks, []Block{h(1, "Quarterly Service Report"), h(2, "Incidents")})
}

// minimalPDF writes objects 1… as a PDF with a correct cross-reference
// table, object 1 the catalog.
func minimalPDF(objs ...string) []byte {
	var b strings.Builder
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return []byte(b.String())
}

// TestReadPDFParentCycle: a page that is its own parent (a crafted file)
// is read instead of its resources looked up forever (a font it does not
// name in resources is read as the standard encoding).
func TestReadPDFParentCycle(t *testing.T) {
	stream := "BT /F1 12 Tf 72 700 Td (Hello) Tj ET"
	data := minimalPDF(
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 3 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(stream), stream),
	)
	done := make(chan *Document, 1)
	go func() {
		doc, err := Read("cycle.pdf", data)
		if err != nil {
			t.Error(err)
		}
		done <- doc
	}()
	select {
	case doc := <-done:
		hasInOrder(t, doc.Blocks, []Block{p("Hello")})
	case <-time.After(10 * time.Second):
		t.Fatal("Read did not return")
	}
}

// TestReadPDFRunningHeaders: a page printed from a browser has the date,
// the title, the address and "1/2" in its margins on every page; none of
// it is text of the document.
func TestReadPDFRunningHeaders(t *testing.T) {
	doc := readFixture(t, "report-printed.pdf")
	hasInOrder(t, doc.Blocks, []Block{
		h(1, "Quarterly Service Report"),
		h(2, "Incidents"),
		h(2, "Appendix: Contacts"),
		p("Operations on call: ops@example.com. Security reports: security@example.com."),
	})
	for _, s := range []string{"file://", "1/2", "2/2", "AM", "PM"} {
		if strings.Contains(allText(doc), s) {
			t.Errorf("text has %q of a running header or footer:%s", s, dump(doc.Blocks))
		}
	}
}

// TestReadPDFXrefCycle: a file whose cross-reference table names itself as
// the previous one is refused as damaged instead of read forever.
func TestReadPDFXrefCycle(t *testing.T) {
	stream := "BT /F1 12 Tf 72 700 Td (Hello) Tj ET"
	data := string(minimalPDF(
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(stream), stream),
	))
	xref := strings.Index(data, "xref\n")
	data = strings.Replace(data, "/Root 1 0 R >>", fmt.Sprintf("/Root 1 0 R /Prev %d >>", xref), 1)
	done := make(chan error, 1)
	go func() { _, err := Read("loop.pdf", []byte(data)); done <- err }()
	select {
	case err := <-done:
		wantError(t, err, "invalid_file", "the PDF file is damaged")
	case <-time.After(20 * time.Second):
		t.Fatal("Read did not return")
	}
}

// TestReadPDFContentBomb: a page whose content stream unpacks to more
// than 32 MB (a few kilobytes packed) is refused, not unpacked and
// interpreted to the end.
func TestReadPDFContentBomb(t *testing.T) {
	var packed bytes.Buffer
	zw := zlib.NewWriter(&packed)
	zw.Write([]byte("BT /F1 12 Tf 72 700 Td (Hello) Tj ET\n"))
	zw.Write(bytes.Repeat([]byte(" "), 40<<20))
	zw.Close()
	data := minimalPDF(
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
		fmt.Sprintf("<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream", packed.Len(), packed.String()),
	)
	_, err := Read("bomb.pdf", data)
	wantError(t, err, "invalid_file", "page 1: a page's content unpacks to more than 32 MB")
}

// TestReadPDFLists: a list whose bullets Chromium draws as shapes has no
// marker in the text; its items are still apart, because each ends a
// sentence where the next item's first word would have fitted. A numbered
// list's items are list items.
func TestReadPDFLists(t *testing.T) {
	doc := readFixture(t, "lists.pdf")
	hasInOrder(t, doc.Blocks, []Block{
		h(2, "Checklist"),
		p("Before you leave the office:"),
		p("Lock your screen and take your badge with you."),
		p("Switch off the monitor. This long item wraps onto a second line because it goes on and on about what to switch off and why it matters."),
		p("Close the windows."),
		li("First numbered step."),
		li("Second numbered step."),
		p("Thank you."),
	})
}
