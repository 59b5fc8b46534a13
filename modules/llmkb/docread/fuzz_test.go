package docread

import (
	"os"
	"path/filepath"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzRead feeds Read the fixtures and their mutations under their names:
// it must return a document with blocks of valid UTF-8, or an *Error with
// one of the documented codes, and never panic or hang.
func FuzzRead(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.*")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(filepath.Base(name), data)
	}
	f.Add("x", []byte("\xff\xfe<\x00h\x00"))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		type res struct {
			doc *Document
			err error
		}
		ch := make(chan res, 1)
		go func() { d, e := Read(name, data); ch <- res{d, e} }()
		var r res
		select {
		case r = <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("hang")
		}
		doc, err := r.doc, r.err
		if err != nil {
			e, ok := err.(*Error)
			if !ok || doc != nil {
				t.Fatalf("Read returned %v, %T %v", doc, err, err)
			}
			switch e.Code {
			case "unsupported_file", "encrypted", "no_text", "invalid_file":
			default:
				t.Fatalf("unknown code %q", e.Code)
			}
			return
		}
		if doc == nil || len(doc.Blocks) == 0 {
			t.Fatalf("a document without blocks and without an error")
		}
		for _, b := range doc.Blocks {
			if !utf8.ValidString(b.Text) || b.Text == "" {
				t.Fatalf("block %+v: empty or not UTF-8", b)
			}
		}
	})
}
