//go:build ignore

// Writes ../handbook.docx: a Word document as Word lays one out, with a
// title, headings whose style ids are German (Word names built-in styles
// "heading 1" whatever the language of its interface), a numbered list, a
// table, a hyperlink, a tab, and a tracked deletion that must not be read.
// Run from this directory: go run docx.go
package main

import (
	"archive/zip"
	"log"
	"os"
	"strings"
)

const ns = `xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"`

func para(style, text string) string {
	ppr := ""
	if style != "" {
		ppr = `<w:pPr><w:pStyle w:val="` + style + `"/></w:pPr>`
	}
	return `<w:p>` + ppr + `<w:r><w:t xml:space="preserve">` + text + `</w:t></w:r></w:p>`
}

func item(text string) string {
	return `<w:p><w:pPr><w:pStyle w:val="Listenabsatz"/><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr></w:pPr><w:r><w:t>` + text + `</w:t></w:r></w:p>`
}

func row(cells ...string) string {
	var sb strings.Builder
	sb.WriteString(`<w:tr>`)
	for _, c := range cells {
		sb.WriteString(`<w:tc><w:tcPr><w:tcW w:w="3000" w:type="dxa"/></w:tcPr>` + para("", c) + `</w:tc>`)
	}
	sb.WriteString(`</w:tr>`)
	return sb.String()
}

func document() string {
	body := para("Titel", "Employee Handbook") +
		para("berschrift1", "Working hours") +
		`<w:p><w:r><w:t xml:space="preserve">Core hours are 10:00 to 15:00. Outside them you plan your day </w:t></w:r>` +
		`<w:del w:id="1" w:author="HR"><w:r><w:delText>as your manager says</w:delText></w:r></w:del>` +
		`<w:ins w:id="2" w:author="HR"><w:r><w:t>with your team</w:t></w:r></w:ins><w:r><w:t>.</w:t></w:r></w:p>` +
		para("berschrift2", "Time off") +
		item("Annual leave: 28 days a year.") +
		item("Sick leave: tell your manager before 09:00.") +
		item("Parental leave: see the intranet page.") +
		para("berschrift1", "Equipment") +
		`<w:tbl><w:tblPr><w:tblStyle w:val="Tabellenraster"/></w:tblPr>` +
		row("Item", "Standard", "On request") +
		row("Laptop", "14-inch, 16 GB", "32 GB for developers") +
		row("Monitor", "one 27-inch", "a second one") +
		`</w:tbl>` +
		`<w:p><w:r><w:t>Order equipment in the</w:t></w:r><w:r><w:tab/><w:t>service portal:</w:t></w:r>` +
		`<w:hyperlink r:id="rId9"><w:r><w:t xml:space="preserve"> https://portal.example.com</w:t></w:r></w:hyperlink></w:p>` +
		`<w:sectPr/>`
	return `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document ` + ns + `><w:body>` + body + `</w:body></w:document>`
}

const styles = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:styles ` + ns + `>` +
	`<w:style w:type="paragraph" w:default="1" w:styleId="Standard"><w:name w:val="Normal"/></w:style>` +
	`<w:style w:type="paragraph" w:styleId="Titel"><w:name w:val="Title"/><w:basedOn w:val="Standard"/></w:style>` +
	`<w:style w:type="paragraph" w:styleId="berschrift1"><w:name w:val="heading 1"/><w:basedOn w:val="Standard"/><w:pPr><w:outlineLvl w:val="0"/></w:pPr></w:style>` +
	`<w:style w:type="paragraph" w:styleId="berschrift2"><w:name w:val="heading 2"/><w:basedOn w:val="Standard"/><w:pPr><w:outlineLvl w:val="1"/></w:pPr></w:style>` +
	`<w:style w:type="paragraph" w:styleId="Listenabsatz"><w:name w:val="List Paragraph"/><w:basedOn w:val="Standard"/></w:style>` +
	`</w:styles>`

const contentTypes = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">` +
	`<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>` +
	`<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>` +
	`<Override PartName="/word/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.styles+xml"/>` +
	`<Override PartName="/docProps/core.xml" ContentType="application/vnd.openxmlformats-package.core-properties+xml"/></Types>`

const rels = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
	`<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>` +
	`<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties" Target="docProps/core.xml"/></Relationships>`

const docRels = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
	`<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles" Target="styles.xml"/>` +
	`<Relationship Id="rId9" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/hyperlink" Target="https://portal.example.com" TargetMode="External"/></Relationships>`

const core = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Employee Handbook 2025</dc:title></cp:coreProperties>`

// write makes a DOCX at path from the body and the styles.
func write(path, doc, sty, coreXML string) {
	f, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for _, p := range []struct{ name, body string }{
		{"[Content_Types].xml", contentTypes}, {"_rels/.rels", rels}, {"word/_rels/document.xml.rels", docRels},
		{"word/document.xml", doc}, {"word/styles.xml", sty}, {"docProps/core.xml", coreXML},
	} {
		w, err := zw.Create(p.name)
		if err != nil {
			log.Fatal(err)
		}
		w.Write([]byte(p.body))
	}
	if err := zw.Close(); err != nil {
		log.Fatal(err)
	}
	f.Close()
}

func main() {
	out := "../handbook.docx"
	if len(os.Args) > 1 {
		out = os.Args[1]
	}
	write(out, document(), styles, core)
}
