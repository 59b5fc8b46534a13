package openai

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// CheckJSON accepts what json.Valid accepts, less strings that are not
// UTF-8.
func TestCheckJSON(t *testing.T) {
	for _, s := range jsonSamples {
		want := json.Valid([]byte(s)) && utf8.ValidString(s)
		if got := CheckJSON([]byte(s)) == nil; got != want {
			t.Errorf("%q: got valid %v, want %v", s, got, want)
		}
	}
}

var jsonSamples = []string{
	`{}`, `[]`, ` { } `, `{"a":1}`, `{"a":[1,2,{"b":null}],"c":true,"d":false}`, `"x"`, `0`, `-0.5e+10`, `1E3`,
	`{"a":"\u00e9\n\t\"\\\/"}`, `{"a":"é東京"}`, `[1,]`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{a:1}`, `[01]`, `[1.]`, `[.5]`,
	`[1e]`, `[-]`, `[tru]`, `[nul]`, `[true false]`, `{"a":1}{}`, `{"a":1} x`, `"\x"`, `"\u12g4"`, `"a` + "\x01" + `"`,
	`{"a":"` + "\xff" + `"}`, `{"a":"` + "\xc3" + `"}`, `{"a":"` + "\xed\xa0\x80" + `"}`, `{"` + "\xfe" + `":1}`,
	`[` + strings.Repeat(`[`, 50) + strings.Repeat(`]`, 50) + `]`, `[[]`, `]`, ``, ` `, `{"a":1 "b":2}`, `["a" "b"]`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000), strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	`{"a":[}`, `{"a":{]}`, `"\ud800"`, `[1,2,3]   `, "\t{\n\"a\"\r:\n1}", `{"a":-}`, `{"a":"b"` + "\x00" + `}`,
}

func FuzzCheckJSON(f *testing.F) {
	for _, s := range jsonSamples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := json.Valid([]byte(s)) && utf8.ValidString(s)
		if got := CheckJSON([]byte(s)) == nil; got != want {
			t.Errorf("%q: got valid %v, want %v", s, got, want)
		}
	})
}

// Invalid UTF-8 in a string is refused with a 400 that says so and where,
// at every endpoint.
func TestParseInvalidUTF8(t *testing.T) {
	for _, tc := range []struct{ endpoint, body string }{
		{ChatCompletions, `{"model":"m","messages":[{"role":"user","content":"caf` + "\xe9" + `"}]}`},
		{Completions, `{"model":"m","prompt":"` + "\xc0\xaf" + `"}`},
		{Embeddings, `{"model":"m","input":["ok","` + "\xff\xfe" + `"]}`},
	} {
		_, err := Parse(tc.endpoint, []byte(tc.body))
		e, ok := err.(*Error)
		if !ok || e.Status != 400 || e.Code != "invalid_utf8" || !strings.Contains(e.Message, "UTF-8") || !strings.Contains(e.Message, "at byte") {
			t.Errorf("%s: got %v", tc.endpoint, err)
		}
	}
}

// The check against json.Valid with a UTF-8 pass after it, on a 10 MB
// chat request with some non-ASCII text.
func BenchmarkCheckJSON(b *testing.B) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum café ", 10<<20/18) + `"}]}`)
	b.Run("checkJSON", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if CheckJSON(body) != nil {
				b.Fatal("refused")
			}
		}
	})
	b.Run("json.Valid+utf8.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if !json.Valid(body) || !utf8.Valid(body) {
				b.Fatal("refused")
			}
		}
	})
}
