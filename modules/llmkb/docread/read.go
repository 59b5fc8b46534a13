package docread

import (
	"path"
	"strings"
)

// readTypes is what the reasons name as the types that are read.
const readTypes = "knowledge bases read PDF, DOCX, HTML, Markdown and plain text"

// Read reads a file's bytes into a Document. name is the file's name as
// uploaded: its extension is a hint, and the content is sniffed too (a .txt
// holding HTML is read as text, a PDF without an extension is a PDF). A file
// that cannot be read gives an *Error.
func Read(name string, data []byte) (*Document, error) {
	ext := strings.ToLower(path.Ext(name))
	switch sniff(data, ext) {
	case typePDF:
		return readPDF(data)
	case typeDOCX:
		return readDOCX(data)
	case typeZip:
		return nil, unsupported(describeZip(data, ext))
	case typeText:
		doc, err := readTextual(ext, data)
		return doc, damagedAs(ext, data, err)
	default:
		return nil, damagedAs(ext, data, unsupported(describeBinary(data)))
	}
}

// damagedAs turns "a binary file of some type" into "a damaged PDF" or
// "a damaged DOCX" when the file's extension promised one and its bytes
// have no signature of another type.
func damagedAs(ext string, data []byte, err error) error {
	e, ok := err.(*Error)
	if !ok || e.Code != "unsupported_file" || magicName(data) != "" {
		return err
	}
	switch ext {
	case ".pdf":
		return invalid("PDF", "it does not start as a PDF does")
	case ".docx":
		return invalid("DOCX", "it is not the ZIP container a DOCX document is")
	}
	return err
}

// readTextual decodes a text file and reads it as the format its
// extension names, or as HTML when it plainly is HTML and has no text
// extension.
func readTextual(ext string, data []byte) (*Document, error) {
	text, err := decodeText(data, ext == ".html" || ext == ".htm" || ext == ".xhtml")
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(strings.TrimPrefix(text, "\ufeff")) == "" {
		return nil, errNoText()
	}
	var doc *Document
	switch {
	case ext == ".html" || ext == ".htm" || ext == ".xhtml":
		doc = readHTML(text)
	case isMarkdownExt(ext):
		doc = readMarkdown(text)
	case ext == "" && looksLikeHTML(text):
		doc = readHTML(text)
	default:
		doc = readText(text)
	}
	if len(doc.Blocks) == 0 {
		return nil, errNoText()
	}
	return doc, nil
}

func isMarkdownExt(ext string) bool {
	switch ext {
	case ".md", ".markdown", ".mdown", ".mkd", ".mdx":
		return true
	}
	return false
}

// looksLikeHTML tells whether text starts as an HTML page does.
func looksLikeHTML(text string) bool {
	head := strings.ToLower(strings.TrimSpace(strings.TrimPrefix(text, "\ufeff")))
	if len(head) > 512 {
		head = head[:512]
	}
	for _, p := range []string{"<!doctype html", "<html", "<head", "<body"} {
		if strings.HasPrefix(head, p) {
			return true
		}
	}
	return strings.HasPrefix(head, "<!--") && strings.Contains(head, "<html")
}

func unsupported(what string) error {
	return &Error{Code: "unsupported_file", Reason: "the file is " + what + "; " + readTypes}
}

func errNoText() error {
	return &Error{Code: "no_text", Reason: "the file has no text"}
}

func invalid(format, why string) error {
	return &Error{Code: "invalid_file", Reason: "the " + format + " file is damaged and cannot be read (" + why + "): save or export it again and upload the new file"}
}
