package catalog

import (
	"strings"
	"testing"
)

func TestCheckID(t *testing.T) {
	for _, tc := range []struct {
		name, id string
		want     string // "" for valid
	}{
		{"plain", "ci-bot_2.prod", ""},
		{"other scripts", "équipe-北京", ""},
		{"punctuation", "a+b@c#d", ""},
		{"128 bytes", strings.Repeat("k", 128), ""},
		{"empty", "", "is empty"},
		{"129 bytes", strings.Repeat("k", 129), "is 129 bytes long"},
		{"900 KB", strings.Repeat("k", 900<<10), "is 921600 bytes long"},
		{"NUL", "a\x00b", "U+0000"},
		{"ESC", "a\x1b[31mb", "U+001B"},
		{"CR", "a\rb", "character U+000D"},
		{"tab", "a\tb", "character U+0009"},
		{"no-break space", "a\u00a0b", "has a space (U+00A0)"},
		{"space", "a b", "has a space (U+0020)"},
		{"right-to-left override", "a\u202eb", "U+202E"},
		{"slash", "a/b", "has '/'"},
		{"colon", "k:b", "has ':'"},
		{"dot", ".", "path segment"},
		{"dot dot", "..", "path segment"},
		{"not UTF-8", "a\xffb", "not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckID("key id", tc.id)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), IDRule)):
				t.Errorf("got %v, want an error with %q and the rule", err, tc.want)
			case err != nil && len(err.Error()) > 400:
				t.Errorf("the error is %d bytes long; it must quote a bounded piece of the id", len(err.Error()))
			}
		})
	}
}
