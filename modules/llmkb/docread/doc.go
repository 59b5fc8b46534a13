// Package docread reads the documents people bring to a knowledge base
// (PDF, DOCX, HTML, Markdown, plain text in UTF-8 and the usual legacy
// encodings) into blocks of text in reading order: headings, paragraphs,
// list items, table rows. It knows nothing of Caddy or of the gateway;
// the knowledge base chunks what it returns.
//
// A document that cannot be read gives an *Error whose Reason a person
// understands (an encrypted PDF, a scanned PDF without a text layer, a
// type it does not read), never a panic and never an empty document
// presented as read.
package docread

// Kind is what a block of a document is.
type Kind uint8

const (
	Paragraph Kind = iota
	Heading        // Level 1 (title) to 6
	ListItem
	TableRow // the cells of one row joined by " | ", header rows included
	Code     // preformatted text, kept as it is
)

// Block is one unit of a document's text, in reading order.
type Block struct {
	Kind  Kind
	Level int    // a heading's level, 1-6; 0 for other kinds
	Text  string // UTF-8, whitespace collapsed except in Code
	Page  int    // 1-based page of a PDF; 0 where a format has no pages
}

// Document is what Read found in a file.
type Document struct {
	Format string // "pdf", "docx", "html", "markdown", "text"
	Title  string // the document's own title when it has one, else ""
	Blocks []Block
}

// Error is a document that cannot be read, with the reason in words a
// person understands and how to fix it where there is a way.
type Error struct {
	Code   string // "unsupported_file", "encrypted", "no_text", "invalid_file"
	Reason string
}

func (e *Error) Error() string { return e.Reason }
