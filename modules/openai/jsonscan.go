package openai

import (
	"fmt"
	"unicode/utf8"
)

// CheckJSON checks that body is one JSON value whose strings are UTF-8, in
// one pass over its bytes: what json.Valid checks, and the encoding it
// lets through (encoding/json accepts invalid UTF-8 in strings and turns
// it into U+FFFD when it decodes, so an engine would read other text than
// a guardrail checked). Its error says what is wrong and at which byte.
func CheckJSON(body []byte) error {
	off, problem := scanJSON(body)
	switch {
	case problem == "":
		return nil
	case problem == errUTF8:
		return &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_utf8",
			Message: fmt.Sprintf("the request body is not valid UTF-8 (a string has a byte sequence that is not UTF-8 at byte %d); send text encoded as UTF-8", off)}
	}
	return BadRequest("invalid_json", "the request body is not valid JSON: %s (at byte %d)", problem, off)
}

const errUTF8 = "invalid UTF-8"

// maxDepth bounds the nesting of arrays and objects, as encoding/json's.
const maxDepth = 10000

// scanJSON returns "" for valid JSON, else the offset and a description
// of the first problem.
func scanJSON(b []byte) (int, string) {
	var buf [64]byte
	stack := buf[:0] // the open containers: '{' or '['
	i := SkipSpace(b, 0)
	for {
		// A value starts at i.
		if i >= len(b) {
			return i, "unexpected end of input, looking for a value"
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(stack) == maxDepth {
				return i, "nested too deeply"
			}
			j := SkipSpace(b, i+1)
			if j < len(b) && (c == '{' && b[j] == '}' || c == '[' && b[j] == ']') {
				i = j + 1
				break // an empty container is a whole value
			}
			stack = append(stack, c)
			i = j
			if c == '{' {
				var problem string
				if i, problem = scanKey(b, i); problem != "" {
					return i, problem
				}
			}
			continue
		default:
			var problem string
			if i, problem = scanScalar(b, i); problem != "" {
				return i, problem
			}
		}
		// A value ended at i: close containers, or go on to the next.
		var problem string
		var more bool
		if i, stack, more, problem = afterValue(b, i, stack); problem != "" || !more {
			return i, problem
		}
	}
}

// scanScalar reads the string, number or literal at b[i].
func scanScalar(b []byte, i int) (int, string) {
	switch c := b[i]; {
	case c == '"':
		return scanString(b, i)
	case c == '-' || c >= '0' && c <= '9':
		return scanNumber(b, i)
	case c == 't' || c == 'f' || c == 'n':
		return scanLiteral(b, i)
	default:
		return i, fmt.Sprintf("invalid character %s looking for the beginning of a value", quoteByte(c))
	}
}

// afterValue reads what follows a value: closings of containers, then a
// comma (and, in an object, the next key) before the next value (more),
// or the end of the input.
func afterValue(b []byte, i int, stack []byte) (int, []byte, bool, string) {
	for {
		i = SkipSpace(b, i)
		if len(stack) == 0 {
			if i < len(b) {
				return i, stack, false, fmt.Sprintf("invalid character %s after the top-level value", quoteByte(b[i]))
			}
			return i, stack, false, ""
		}
		if i >= len(b) {
			return i, stack, false, "unexpected end of input"
		}
		top := stack[len(stack)-1]
		switch c := b[i]; {
		case c == ',':
			i = SkipSpace(b, i+1)
			if top == '{' {
				var problem string
				i, problem = scanKey(b, i)
				return i, stack, problem == "", problem
			}
			return i, stack, true, ""
		case top == '{' && c == '}', top == '[' && c == ']':
			stack = stack[:len(stack)-1]
			i++
		case top == '{':
			return i, stack, false, fmt.Sprintf("invalid character %s after an object member, looking for ',' or '}'", quoteByte(c))
		default:
			return i, stack, false, fmt.Sprintf("invalid character %s after an array element, looking for ',' or ']'", quoteByte(c))
		}
	}
}

// scanKey reads a member's key and its colon; i is then at the value.
func scanKey(b []byte, i int) (int, string) {
	if i >= len(b) {
		return i, "unexpected end of input, looking for a member name"
	}
	if b[i] != '"' {
		return i, fmt.Sprintf("invalid character %s looking for the beginning of a member name", quoteByte(b[i]))
	}
	i, problem := scanString(b, i)
	if problem != "" {
		return i, problem
	}
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		if i >= len(b) {
			return i, "unexpected end of input, looking for ':'"
		}
		return i, fmt.Sprintf("invalid character %s after a member name, looking for ':'", quoteByte(b[i]))
	}
	return SkipSpace(b, i+1), ""
}

// plain marks the bytes a string holds as they are: printable ASCII other
// than the quote and the backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// scanString reads the string at b[i] (a quote) and returns its end.
func scanString(b []byte, i int) (int, string) {
	j := i + 1
	for {
		for j < len(b) && plain[b[j]] {
			j++
		}
		if j >= len(b) {
			return j, "unexpected end of input in a string"
		}
		switch c := b[j]; {
		case c == '"':
			return j + 1, ""
		case c == '\\':
			n, problem := scanEscape(b, j)
			if problem != "" {
				return j, problem
			}
			j += n
		case c < 0x20:
			return j, fmt.Sprintf("invalid character %s in a string (control characters must be escaped)", quoteByte(c))
		default:
			r, size := utf8.DecodeRune(b[j:])
			if r == utf8.RuneError && size == 1 {
				return j, errUTF8
			}
			j += size
		}
	}
}

// scanEscape returns the length of the escape at b[j] (a backslash).
func scanEscape(b []byte, j int) (int, string) {
	if j+1 >= len(b) {
		return 0, "unexpected end of input in a string escape"
	}
	switch b[j+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, ""
	case 'u':
		if j+6 > len(b) {
			return 0, "unexpected end of input in a \\u escape"
		}
		for _, h := range b[j+2 : j+6] {
			if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
				return 0, fmt.Sprintf("invalid character %s in a \\u escape", quoteByte(h))
			}
		}
		return 6, ""
	}
	return 0, fmt.Sprintf("invalid character %s in a string escape", quoteByte(b[j+1]))
}

// scanNumber reads the number at b[i]: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) (int, string) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return i, "a number lacks digits"
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return j, "a number lacks digits after its decimal point"
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return j, "a number lacks digits in its exponent"
		}
		i = j
	}
	return i, ""
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// scanLiteral reads true, false or null at b[i].
func scanLiteral(b []byte, i int) (int, string) {
	var lit string
	switch b[i] {
	case 't':
		lit = "true"
	case 'f':
		lit = "false"
	default:
		lit = "null"
	}
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, fmt.Sprintf("invalid literal, want %s", lit)
	}
	return i + len(lit), ""
}

// quoteByte shows a byte in an error: a printable character quoted, else
// its value.
func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("%q", c)
	}
	return fmt.Sprintf("0x%02x", c)
}

// ObjectScan finds where the JSON object at the start of a body ends,
// across the pieces it arrives in.
type ObjectScan struct {
	started, inString, escaped bool
	depth                      int
}

const NotObject = -2

// Feed scans b[from:] and returns the end of the object (the index after
// its closing brace), -1 while it is open, or NotObject.
func (s *ObjectScan) Feed(b []byte, from int) int {
	for i := from; i < len(b); i++ {
		c := b[i]
		switch {
		case !s.started:
			switch c {
			case ' ', '\t', '\r', '\n':
				continue
			case '{':
				s.started, s.depth = true, 1
				continue
			}
			return NotObject
		case s.escaped:
			s.escaped = false
		case s.inString:
			switch c {
			case '\\':
				s.escaped = true
			case '"':
				s.inString = false
			}
		case c == '"':
			s.inString = true
		case c == '{' || c == '[':
			s.depth++
		case c == '}' || c == ']':
			if s.depth--; s.depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}
