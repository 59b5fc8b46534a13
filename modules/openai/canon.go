package openai

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// The functions below read JSON that json.Valid has accepted (a request's
// body after Enter) by its bytes, for handlers that key on a request: a
// cache hashes a body's canonical form instead of decoding and encoding
// it.

// Member is a member of a JSON object: its key unquoted, its key as
// written (quoted) and its value's bytes.
type Member struct {
	Key, Quoted, Value []byte
}

// AppendMembers appends the members of the JSON object obj, in the order
// written.
func AppendMembers(dst []Member, obj []byte) []Member {
	dst, _ = Members(dst, obj)
	return dst
}

// Members is AppendMembers that also says whether obj was an object read
// to its closing brace (its values are not checked).
func Members(dst []Member, obj []byte) ([]Member, bool) {
	i := SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return dst, false
	}
	i = SkipSpace(obj, i+1)
	for i < len(obj) && obj[i] != '}' {
		if obj[i] != '"' {
			return dst, false
		}
		kend := SkipValue(obj, i)
		if kend < 0 {
			return dst, false
		}
		q := obj[i:kend]
		i = SkipSpace(obj, kend)
		if i >= len(obj) || obj[i] != ':' {
			return dst, false
		}
		i = SkipSpace(obj, i+1)
		vend := SkipValue(obj, i)
		if vend < 0 || vend == i {
			return dst, false
		}
		dst = append(dst, Member{Key: UnquoteKey(q), Quoted: q, Value: obj[i:vend]})
		i = SkipSpace(obj, vend)
		if i < len(obj) && obj[i] == ',' {
			i = SkipSpace(obj, i+1)
		}
	}
	return dst, i < len(obj) && SkipSpace(obj, i+1) == len(obj)
}

// AppendElements appends the elements of the JSON array arr.
func AppendElements(dst [][]byte, arr []byte) [][]byte {
	_ = EachElement(arr, func(_ int, v []byte) error {
		dst = append(dst, v)
		return nil
	})
	return dst
}

// SortMembers sorts members by key (bytes), keeping only the last of a
// repeated key, as decoding the object would, and returns the shortened
// slice.
func SortMembers(ms []Member) []Member {
	for i := 1; i < len(ms); i++ { // insertion sort: stable, and objects are small
		for j := i; j > 0 && bytes.Compare(ms[j-1].Key, ms[j].Key) > 0; j-- {
			ms[j-1], ms[j] = ms[j], ms[j-1]
		}
	}
	out := ms[:0]
	for i, m := range ms {
		if i+1 < len(ms) && bytes.Equal(ms[i+1].Key, m.Key) {
			continue
		}
		out = append(out, m)
	}
	return out
}

// AppendCanonical appends the canonical form of the JSON value v: no
// insignificant whitespace, every object's members sorted by key with a
// repeated key's last value kept, strings with only the escapes JSON
// requires (quote, backslash, control characters; \n \r \t in their short
// forms) and numbers as written. Values that decode to the same data
// (numbers compared as written) have the same canonical form.
func AppendCanonical(dst, v []byte) []byte {
	dst, _ = appendCanon(dst, v, SkipSpace(v, 0))
	return dst
}

// appendCanon appends the canonical form of the value at v[i] and
// returns where it ends.
func appendCanon(dst, v []byte, i int) ([]byte, int) {
	if i >= len(v) {
		return dst, i
	}
	switch v[i] {
	case '"':
		end := SkipValue(v, i)
		if end < 0 {
			return dst, len(v)
		}
		return AppendCanonicalString(dst, v[i:end]), end
	case '[':
		dst = append(dst, '[')
		i = SkipSpace(v, i+1)
		for n := 0; i < len(v) && v[i] != ']'; n++ {
			if n > 0 {
				dst = append(dst, ',')
			}
			dst, i = appendCanon(dst, v, i)
			i = SkipSpace(v, i)
			if i < len(v) && v[i] == ',' {
				i = SkipSpace(v, i+1)
			}
		}
		return append(dst, ']'), i + 1
	case '{':
		end := SkipValue(v, i)
		if end < 0 {
			return dst, len(v)
		}
		var stack [16]Member
		ms := SortMembers(AppendMembers(stack[:0], v[i:end]))
		dst = append(dst, '{')
		for n, m := range ms {
			if n > 0 {
				dst = append(dst, ',')
			}
			dst = AppendCanonicalString(dst, m.Quoted)
			dst = append(dst, ':')
			dst = AppendCanonical(dst, m.Value)
		}
		return append(dst, '}'), end
	}
	j := i
	for j < len(v) && v[j] != ',' && v[j] != '}' && v[j] != ']' && v[j] != ' ' && v[j] != '\n' && v[j] != '\r' && v[j] != '\t' {
		j++
	}
	return append(dst, v[i:j]...), j
}

// AppendCanonicalString appends the JSON string literal q (quotes
// included) in canonical form (see AppendCanonical).
func AppendCanonicalString(dst, q []byte) []byte {
	if bytes.IndexByte(q, '\\') < 0 {
		return append(dst, q...) // nothing escaped: already canonical
	}
	dst = append(dst, '"')
	dst = appendUnescaped(dst, q[1:len(q)-1], true)
	return append(dst, '"')
}

// AppendUnquoted appends the text of the JSON string literal q (quotes
// included), its escapes decoded.
func AppendUnquoted(dst, q []byte) []byte {
	if len(q) < 2 {
		return dst
	}
	return appendUnescaped(dst, q[1:len(q)-1], false)
}

// appendUnescaped decodes the escapes of a JSON string's inside s; with
// canon, it writes the characters JSON requires escaped in their
// canonical escapes.
func appendUnescaped(dst, s []byte, canon bool) []byte {
	for i := 0; i < len(s); {
		k := bytes.IndexByte(s[i:], '\\')
		if k < 0 {
			return append(dst, s[i:]...)
		}
		dst = append(dst, s[i:i+k]...)
		i += k
		if i+1 >= len(s) {
			return dst
		}
		var r rune
		switch c := s[i+1]; c {
		case 'b':
			r = '\b'
		case 'f':
			r = '\f'
		case 'n':
			r = '\n'
		case 'r':
			r = '\r'
		case 't':
			r = '\t'
		case 'u':
			r = hex4(s, i+2)
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+7 < len(s) && s[i+2] == '\\' && s[i+3] == 'u' {
					r2 = hex4(s, i+4)
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
		default: // " \ /
			r = rune(c)
		}
		i += 2
		if canon {
			dst = appendCanonRune(dst, r)
		} else {
			dst = utf8.AppendRune(dst, r)
		}
	}
	return dst
}

// hex4 reads the four hex digits at s[i:], or -1.
func hex4(s []byte, i int) rune {
	if i+4 > len(s) {
		return -1
	}
	var r rune
	for _, c := range s[i : i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return -1
		}
	}
	return r
}

// appendCanonRune appends r as a canonical string writes it.
func appendCanonRune(dst []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	switch {
	case r == '"' || r == '\\':
		return append(dst, '\\', byte(r))
	case r == '\n':
		return append(dst, '\\', 'n')
	case r == '\r':
		return append(dst, '\\', 'r')
	case r == '\t':
		return append(dst, '\\', 't')
	case r >= 0 && r < 0x20:
		return append(dst, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
	case r < 0:
		r = utf8.RuneError
	}
	return utf8.AppendRune(dst, r)
}

// FirstUserEnd returns the length of the JSON messages array msgs up to
// the end of its first message whose role is "user", or 0 when it has
// none. Every turn of a conversation starts with the same bytes up to
// there, while a system prompt before it may be shared by many
// conversations.
func FirstUserEnd(msgs []byte) int {
	end := 0
	var ms []Member
	WalkArray(msgs, SkipSpace(msgs, 0), func(v int) int {
		e := SkipFast(msgs, v)
		if e < 0 || end > 0 {
			return e
		}
		ms, _ = Members(ms[:0], msgs[v:e])
		for _, m := range ms {
			if string(m.Key) == "role" && string(m.Value) == `"user"` {
				end = e
				return -1 // found: stop walking
			}
		}
		return e
	})
	return end
}
