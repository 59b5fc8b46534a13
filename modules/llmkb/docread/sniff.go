package docread

import (
	"archive/zip"
	"bytes"
	"strings"
)

// fileType is what sniff found a file to be.
type fileType uint8

const (
	typeBinary fileType = iota
	typeText
	typePDF
	typeDOCX
	typeZip // a ZIP archive that is not a DOCX document
)

// sniff tells what data is from its first bytes; ext only breaks ties.
func sniff(data []byte, ext string) fileType {
	head := data
	if len(head) > 1024 {
		head = head[:1024]
	}
	switch {
	case bytes.HasPrefix(data, []byte("%PDF-")) || ext == ".pdf" && bytes.Contains(head, []byte("%PDF-")):
		return typePDF
	case bytes.HasPrefix(data, []byte("PK\x03\x04")) || bytes.HasPrefix(data, []byte("PK\x05\x06")):
		if zipHas(data, "word/document.xml") {
			return typeDOCX
		}
		return typeZip
	case magicName(data) != "":
		return typeBinary
	}
	return typeText
}

// magics are the signatures of the binary types people upload by mistake,
// in the words the reasons use.
var magics = []struct{ prefix, name string }{
	{"\x89PNG\r\n\x1a\n", "a PNG image"},
	{"\xff\xd8\xff", "a JPEG image"},
	{"GIF87a", "a GIF image"},
	{"GIF89a", "a GIF image"},
	{"II*\x00", "a TIFF image"},
	{"MM\x00*", "a TIFF image"},
	{"\x00\x00\x01\x00", "an icon image"},
	{"8BPS", "a Photoshop image"},
	{"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old-style Microsoft Office file (DOC, XLS or PPT): save it as DOCX or PDF first"},
	{"{\\rtf", "an RTF document: save it as DOCX or PDF first"},
	{"MZ", "a Windows program"},
	{"\x7fELF", "a Linux program"},
	{"\xcf\xfa\xed\xfe", "a macOS program"},
	{"\x1f\x8b", "a gzip archive"},
	{"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"},
	{"Rar!\x1a\x07", "a RAR archive"},
	{"BZh", "a bzip2 archive"},
	{"\xfd7zXZ\x00", "an XZ archive"},
	{"\x28\xb5\x2f\xfd", "a Zstandard archive"},
	{"SQLite format 3\x00", "an SQLite database"},
	{"ID3", "an MP3 audio file"},
	{"OggS", "an Ogg audio or video file"},
	{"fLaC", "a FLAC audio file"},
	{"\x1a\x45\xdf\xa3", "a Matroska or WebM video"},
	{"\x00asm", "a WebAssembly module"},
	{"wOFF", "a web font"},
	{"wOF2", "a web font"},
}

// magicName names data's binary type from its signature, or "".
func magicName(data []byte) string {
	for _, m := range magics {
		if bytes.HasPrefix(data, []byte(m.prefix)) {
			return m.name
		}
	}
	if len(data) >= 12 && string(data[:4]) == "RIFF" {
		switch string(data[8:12]) {
		case "WEBP":
			return "a WebP image"
		case "WAVE":
			return "a WAV audio file"
		case "AVI ":
			return "an AVI video"
		}
	}
	if isSVG(data) {
		return "an SVG image"
	}
	if len(data) >= 12 && string(data[4:8]) == "ftyp" {
		if b := string(data[8:12]); b == "heic" || b == "heix" || b == "avif" || b == "mif1" {
			return "a HEIC or AVIF image"
		}
		return "an MP4 or QuickTime video"
	}
	return ""
}

// isSVG tells an SVG image (XML text) by its root element.
func isSVG(data []byte) bool {
	head := data[:min(len(data), 1024)]
	head = bytes.TrimSpace(bytes.TrimPrefix(head, []byte("\xef\xbb\xbf")))
	if bytes.HasPrefix(head, []byte("<?xml")) || bytes.HasPrefix(head, []byte("<!DOCTYPE svg")) || bytes.HasPrefix(head, []byte("<!--")) {
		return bytes.Contains(head, []byte("<svg"))
	}
	return bytes.HasPrefix(head, []byte("<svg"))
}

// describeBinary names a file that is not text.
func describeBinary(data []byte) string {
	if n := magicName(data); n != "" {
		return n
	}
	return "a binary file of a type it does not know"
}

// zipHas tells whether data is a readable ZIP archive holding name.
func zipHas(data []byte, name string) bool {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return false
	}
	for _, f := range zr.File {
		if f.Name == name {
			return true
		}
	}
	return false
}

// describeZip names a ZIP archive that is not a DOCX document.
func describeZip(data []byte, ext string) string {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		if ext == ".docx" {
			return "a damaged DOCX document (its ZIP container cannot be opened): save it again"
		}
		return "a damaged ZIP archive"
	}
	for _, f := range zr.File {
		switch {
		case strings.HasPrefix(f.Name, "xl/"):
			return "an Excel spreadsheet (XLSX): save the sheet as PDF, or copy its text into a document"
		case strings.HasPrefix(f.Name, "ppt/"):
			return "a PowerPoint presentation (PPTX): save it as PDF first"
		case f.Name == "mimetype" || f.Name == "content.xml":
			return "an OpenDocument file: save it as DOCX or PDF first"
		case f.Name == "META-INF/MANIFEST.MF":
			return "a Java archive"
		}
	}
	return "a ZIP archive: unpack it and upload the documents in it one by one"
}
