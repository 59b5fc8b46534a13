package docread

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/htmlindex"
	xunicode "golang.org/x/text/encoding/unicode"
)

// errEncoding is text in a single-byte encoding other than the two
// western ones guessed at.
func errEncoding() error {
	return &Error{Code: "unsupported_file", Reason: "the file is text in an encoding that cannot be told from its bytes (UTF-8, UTF-16 with a byte order mark, Windows-1252 and Windows-1250 can, and the charset an HTML page declares): save it as UTF-8 and upload it again"}
}

// decodeText turns the bytes of a text file into UTF-8: a BOM wins, then
// valid UTF-8, then (for HTML) the charset its <meta> declares, then
// Windows-1252 or Windows-1250, whichever reads as words. A file that is
// not text gives an unsupported_file error.
func decodeText(data []byte, isHTML bool) (string, error) {
	var text string
	switch {
	case bytes.HasPrefix(data, []byte("\xef\xbb\xbf")):
		text = string(data[3:])
	case bytes.HasPrefix(data, []byte("\xff\xfe")), bytes.HasPrefix(data, []byte("\xfe\xff")):
		text = decodeWith(xunicode.UTF16(xunicode.LittleEndian, xunicode.ExpectBOM), data)
	case looksUTF16(data) != nil:
		text = decodeWith(looksUTF16(data), data)
	case utf8.Valid(data):
		text = unmojibake(string(data))
	default:
		declared := isHTML && metaCharset(data) != ""
		text = decodeLegacy(data, isHTML)
		if !declared && isText(text) && !westernLooking(text) {
			return "", errEncoding()
		}
	}
	if !isText(text) {
		return "", unsupported(describeBinary(data))
	}
	return strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n"), nil
}

func decodeWith(e encoding.Encoding, data []byte) string {
	out, err := e.NewDecoder().Bytes(data)
	if err != nil {
		return ""
	}
	return string(out)
}

// looksUTF16 recognises UTF-16 without a BOM by its NULs: mostly in the
// odd bytes for little-endian text in Latin script, the even ones for
// big-endian.
func looksUTF16(data []byte) encoding.Encoding {
	if len(data) < 8 || len(data)%2 != 0 {
		return nil
	}
	var even, odd int
	for i, b := range data {
		if b == 0 && i%2 == 0 {
			even++
		} else if b == 0 {
			odd++
		}
	}
	half := len(data) / 2
	switch {
	case odd > half*7/10 && even == 0:
		return xunicode.UTF16(xunicode.LittleEndian, xunicode.IgnoreBOM)
	case even > half*7/10 && odd == 0:
		return xunicode.UTF16(xunicode.BigEndian, xunicode.IgnoreBOM)
	}
	return nil
}

// decodeLegacy decodes bytes that are not UTF-8: with the charset an HTML
// page declares when it names one, else as Windows-1252 or -1250.
func decodeLegacy(data []byte, isHTML bool) string {
	if isHTML {
		if name := metaCharset(data); name != "" {
			if e, err := htmlindex.Get(name); err == nil && e != encoding.Nop && !strings.EqualFold(name, "utf-8") {
				return decodeWith(e, data)
			}
		}
	}
	western := decodeWith(charmap.Windows1252, data)
	central := decodeWith(charmap.Windows1250, data)
	if wordScore(central) > wordScore(western) {
		return central
	}
	return western
}

// wordScore rates how much a decoding reads as words: letters inside words
// count for it, symbols between two letters (the ³ of a Polish ł read as
// Windows-1252) and undefined bytes count against it.
func wordScore(s string) int {
	score := 0
	rs := []rune(s)
	for i, r := range rs {
		if r < 0x80 {
			continue
		}
		between := i > 0 && i+1 < len(rs) && unicode.IsLetter(rs[i-1]) && unicode.IsLetter(rs[i+1])
		switch {
		case unicode.IsLetter(r):
			score++
		case r == utf8.RuneError || unicode.IsControl(r):
			score -= 3
		case between:
			score -= 3
		}
	}
	return score
}

// westernLooking tells whether a text decoded as Windows-1252 or -1250
// reads as a language those are for: its letters are mostly ASCII. Greek
// or Russian in their own single-byte encodings decode to a run of
// accented Latin letters instead, which would be mojibake.
func westernLooking(s string) bool {
	letters, high := 0, 0
	for _, r := range s {
		if unicode.IsLetter(r) {
			letters++
			if r >= 0x80 {
				high++
			}
		}
	}
	return high*100 <= letters*30
}

// unmojibake repairs UTF-8 that was decoded as Windows-1252 and saved as
// UTF-8 again ("MÃ¼nchen"), which is valid UTF-8 and reads as nonsense.
func unmojibake(s string) string {
	if !strings.Contains(s, "Ã") && !strings.Contains(s, "â€") && !strings.Contains(s, "Â") {
		return s
	}
	raw, err := charmap.Windows1252.NewEncoder().String(s)
	if err != nil || !utf8.ValidString(raw) || raw == s {
		return s
	}
	return raw
}

// isText tells whether s is text: no NULs and hardly any other control
// characters.
func isText(s string) bool {
	bad, n := 0, 0
	for _, r := range s {
		n++
		switch {
		case r == 0:
			return false
		case r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == '\v' || r == 0x1b:
		case unicode.IsControl(r), r == utf8.RuneError:
			bad++
		}
	}
	return bad*100 <= n
}

// metaCharset finds the charset an HTML page declares in its first
// kilobytes: <meta charset> or <meta http-equiv="Content-Type" content>.
func metaCharset(data []byte) string {
	if len(data) > 4096 {
		data = data[:4096]
	}
	z := html.NewTokenizer(bytes.NewReader(data))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ""
		case html.StartTagToken, html.SelfClosingTagToken:
			if name, _ := z.TagName(); string(name) == "meta" {
				if cs := charsetOfMeta(z); cs != "" {
					return cs
				}
			}
		}
	}
}

func charsetOfMeta(z *html.Tokenizer) string {
	var content string
	for {
		k, v, more := z.TagAttr()
		switch strings.ToLower(string(k)) {
		case "charset":
			return strings.TrimSpace(string(v))
		case "content":
			content = string(v)
		}
		if !more {
			break
		}
	}
	_, cs, ok := strings.Cut(strings.ToLower(content), "charset=")
	if !ok {
		return ""
	}
	return strings.Trim(strings.TrimSpace(cs), `"';`)
}
