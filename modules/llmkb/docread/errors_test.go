package docread

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readFixtureBytes(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func wantError(t *testing.T, err error, code, reason string) {
	t.Helper()
	e, ok := err.(*Error)
	if !ok {
		t.Fatalf("err = %v (%T), want *Error %s", err, err, code)
	}
	if e.Code != code || !strings.Contains(e.Reason, reason) {
		t.Errorf("error %s %q; want %s containing %q", e.Code, e.Reason, code, reason)
	}
}

// zipOf makes a ZIP archive holding the named parts.
func zipOf(t *testing.T, names ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range names {
		w, _ := zw.Create(n)
		w.Write([]byte("<x/>"))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadErrors(t *testing.T) {
	png := readFixtureBytes(t, "gen/pdf/scan.png")
	tests := []struct {
		name       string
		data       []byte
		code, text string
	}{
		{"annual-report.pdf", readFixtureBytes(t, "encrypted.pdf"), "encrypted", "the PDF is encrypted: it needs a password to open or its owner restricted copying its text; save it without a password and upload it again"},
		{"scan.pdf", readFixtureBytes(t, "scan.pdf"), "no_text", "the PDF has pictures of its pages but no text (a scan?): run OCR on it first"},
		{"empty.txt", nil, "no_text", "the file has no text"},
		{"blank.md", []byte(" \n\t\r\n  \n"), "no_text", "the file has no text"},
		{"bom-only.txt", []byte("\xef\xbb\xbf\n"), "no_text", "the file has no text"},
		{"empty.html", []byte("<html><head><title>x</title><script>a()</script></head><body><nav>Home</nav></body></html>"), "no_text", "the file has no text"},
		{"logo.png", png, "unsupported_file", "the file is a PNG image; knowledge bases read PDF, DOCX, HTML, Markdown and plain text"},
		{"photo.txt", png, "unsupported_file", "is a PNG image"},
		{"logo.svg", []byte(`<?xml version="1.0"?>` + "\n" + `<svg xmlns="http://www.w3.org/2000/svg"><text>Acme</text></svg>`), "unsupported_file", "the file is an SVG image; knowledge bases read"},
		{"budget.xlsx", zipOf(t, "[Content_Types].xml", "xl/workbook.xml"), "unsupported_file", "the file is an Excel spreadsheet (XLSX)"},
		{"deck.pptx", zipOf(t, "[Content_Types].xml", "ppt/presentation.xml"), "unsupported_file", "a PowerPoint presentation (PPTX): save it as PDF first"},
		{"docs.zip", zipOf(t, "a.txt", "b.pdf"), "unsupported_file", "a ZIP archive: unpack it and upload the documents in it one by one"},
		{"setup.exe", append([]byte("MZ\x90\x00\x03\x00\x00\x00"), make([]byte, 64)...), "unsupported_file", "the file is a Windows program"},
		{"old.doc", []byte("\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1\x00\x00\x00\x00"), "unsupported_file", "an old-style Microsoft Office file (DOC, XLS or PPT): save it as DOCX or PDF first"},
		{"data.bin", []byte("\x01\x02\x03\x00\xff\xfe\x10\x11\x00\x00\x9f\x8e"), "unsupported_file", "a binary file of a type it does not know; knowledge bases read"},
		{"notes.txt", bytes.Repeat([]byte("ab\x01\x02\x03\x04\x05\x06\x07\x08"), 20), "unsupported_file", "a binary file"},
		{"broken.docx", []byte("PK\x03\x04 not really a zip"), "unsupported_file", "a damaged DOCX document"},
		{"report.docx", []byte("\x01\x02\x03\x00\x00\x00\x07"), "invalid_file", "the DOCX file is damaged"},
		{"report.pdf", []byte("\x01\x02\x03\x00\x00\x00\x07"), "invalid_file", "the PDF file is damaged"},
		{"nobody.docx", zipOf(t, "[Content_Types].xml", "word/document.xml"), "no_text", "the file has no text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := Read(tt.name, tt.data)
			if doc != nil {
				t.Errorf("got a document %+v with the error", doc)
			}
			wantError(t, err, tt.code, tt.text)
		})
	}
}

// TestReadUnknownEncoding: Russian in Windows-1251 is not passed on as the
// accented Latin letters Windows-1252 would make of it; declared in an
// HTML page it is read.
func TestReadUnknownEncoding(t *testing.T) {
	cp1251 := []byte("\xcf\xf0\xe8\xe2\xe5\xf2, \xec\xe8\xf0! \xdd\xf2\xee \xf2\xe5\xf1\xf2.") // Привет, мир! Это тест.
	_, err := Read("privet.txt", cp1251)
	wantError(t, err, "unsupported_file", "save it as UTF-8 and upload it again")
	page := append([]byte(`<html><head><meta charset="windows-1251"></head><body><p>`), cp1251...)
	doc, err := Read("privet.html", page)
	if err != nil || doc.Blocks[0].Text != "Привет, мир! Это тест." {
		t.Errorf("declared windows-1251: %v %v", doc, err)
	}
}
