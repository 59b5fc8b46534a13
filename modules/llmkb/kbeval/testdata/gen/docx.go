//go:build ignore

// Builds a DOCX from a small markup: "title: …" on the first line (the
// document's properties), "# " the Title style, "## " Heading 1, "### "
// Heading 2, "- " a bulleted list paragraph, "| a | b |" table rows,
// other lines paragraphs (a blank line ends one).
// Usage: go run docx.go src/name.docx.txt ../corpus/name.docx
package main

import (
	"archive/zip"
	"bufio"
	"html"
	"log"
	"os"
	"strings"
)

const ns = `xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"`

func para(style, text string) string {
	ppr := ""
	switch {
	case style == "list":
		ppr = `<w:pPr><w:pStyle w:val="ListParagraph"/><w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr></w:pPr>`
	case style != "":
		ppr = `<w:pPr><w:pStyle w:val="` + style + `"/></w:pPr>`
	}
	return `<w:p>` + ppr + `<w:r><w:t xml:space="preserve">` + html.EscapeString(text) + `</w:t></w:r></w:p>`
}

func table(rows [][]string) string {
	var sb strings.Builder
	sb.WriteString(`<w:tbl><w:tblPr><w:tblStyle w:val="TableGrid"/></w:tblPr>`)
	for _, r := range rows {
		sb.WriteString(`<w:tr>`)
		for _, c := range r {
			sb.WriteString(`<w:tc>` + para("", strings.TrimSpace(c)) + `</w:tc>`)
		}
		sb.WriteString(`</w:tr>`)
	}
	sb.WriteString(`</w:tbl>`)
	return sb.String()
}

// body turns the markup into the body's XML and returns the title.
func body(src string) (string, string) {
	var sb strings.Builder
	var title string
	var prose []string
	var rows [][]string
	flush := func() {
		if len(prose) > 0 {
			sb.WriteString(para("", strings.Join(prose, " ")))
		}
		if len(rows) > 0 {
			sb.WriteString(table(rows))
		}
		prose, rows = nil, nil
	}
	sc := bufio.NewScanner(strings.NewReader(src))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "title: "):
			title = strings.TrimPrefix(line, "title: ")
		case strings.HasPrefix(line, "### "):
			flush()
			sb.WriteString(para("Heading2", line[4:]))
		case strings.HasPrefix(line, "## "):
			flush()
			sb.WriteString(para("Heading1", line[3:]))
		case strings.HasPrefix(line, "# "):
			flush()
			sb.WriteString(para("Title", line[2:]))
		case strings.HasPrefix(line, "- "):
			flush()
			sb.WriteString(para("list", line[2:]))
		case strings.HasPrefix(line, "|"):
			if len(prose) > 0 {
				flush()
			}
			rows = append(rows, strings.Split(strings.Trim(line, "| "), "|"))
		case strings.TrimSpace(line) == "":
			flush()
		default:
			if len(rows) > 0 {
				flush()
			}
			prose = append(prose, strings.TrimSpace(line))
		}
	}
	flush()
	return sb.String(), title
}

var styles = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:styles ` + ns + `>` +
	`<w:style w:type="paragraph" w:default="1" w:styleId="Normal"><w:name w:val="Normal"/></w:style>` +
	`<w:style w:type="paragraph" w:styleId="Title"><w:name w:val="Title"/></w:style>` +
	`<w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/><w:pPr><w:outlineLvl w:val="0"/></w:pPr></w:style>` +
	`<w:style w:type="paragraph" w:styleId="Heading2"><w:name w:val="heading 2"/><w:pPr><w:outlineLvl w:val="1"/></w:pPr></w:style>` +
	`<w:style w:type="paragraph" w:styleId="ListParagraph"><w:name w:val="List Paragraph"/></w:style></w:styles>`

const contentTypes = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">` +
	`<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>` +
	`<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>` +
	`<Override PartName="/word/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.styles+xml"/>` +
	`<Override PartName="/docProps/core.xml" ContentType="application/vnd.openxmlformats-package.core-properties+xml"/></Types>`

const rels = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
	`<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>` +
	`<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties" Target="docProps/core.xml"/></Relationships>`

const docRels = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
	`<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles" Target="styles.xml"/></Relationships>`

func main() {
	src, err := os.ReadFile(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	b, title := body(string(src))
	doc := `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document ` + ns + `><w:body>` + b + `<w:sectPr/></w:body></w:document>`
	core := `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>` + html.EscapeString(title) + `</dc:title></cp:coreProperties>`
	f, err := os.Create(os.Args[2])
	if err != nil {
		log.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for _, p := range [][2]string{{"[Content_Types].xml", contentTypes}, {"_rels/.rels", rels},
		{"word/_rels/document.xml.rels", docRels}, {"word/document.xml", doc}, {"word/styles.xml", styles}, {"docProps/core.xml", core}} {
		w, err := zw.Create(p[0])
		if err != nil {
			log.Fatal(err)
		}
		w.Write([]byte(p[1]))
	}
	if err := zw.Close(); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}
