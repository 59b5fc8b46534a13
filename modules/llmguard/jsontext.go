package llmguard

import (
	"encoding/json"
	"errors"

	"github.com/llmgw/llmgw/modules/openai"
)

// Fields whose string values are text a check looks at: message content
// and content parts, tool-call arguments, completion text and prompts,
// embedding inputs. A string directly in an array takes the array's key.
const (
	fieldNone uint8 = iota
	fieldContent
	fieldText
	fieldArguments
	fieldPrompt
	fieldInput
)

func fieldOf(key []byte) uint8 {
	switch string(key) {
	case "content":
		return fieldContent
	case "text":
		return fieldText
	case "arguments":
		return fieldArguments
	case "prompt":
		return fieldPrompt
	case "input":
		return fieldInput
	}
	return fieldNone
}

// Keys whose objects matter for placing a text in a stream.
const (
	underOther uint8 = iota
	underChoices
	underToolCalls
)

// span is one text string in a JSON document: the literal with its
// quotes at [start, end).
type span struct {
	start, end int
	frame      int32
	field      uint8
	escaped    bool
}

// frame is one object in the document.
type frame struct {
	parent   int32
	under    uint8 // the key the object (or its array) is under
	index    int32 // its "index" member, -1 if none
	finished bool  // it has a non-null "finish_reason"
}

// doc is the texts of one JSON document, found without decoding the rest.
type doc struct {
	b      []byte
	spans  []span
	frames []frame
}

var errJSON = errors.New("malformed JSON")

// parse walks b. root is the field a top-level string (or array of
// strings) counts as.
func (d *doc) parse(b []byte, root uint8) error {
	d.b, d.spans, d.frames = b, d.spans[:0], d.frames[:0]
	i, err := d.value(skipWS(b, 0), root, underOther, -1, 0)
	if err != nil {
		return err
	}
	if skipWS(b, i) != len(b) {
		return errJSON
	}
	return nil
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// value parses the value at b[i]: field is the text field a string here
// counts as, under the key for objects here, parent the enclosing object.
func (d *doc) value(i int, field, under uint8, parent int32, depth int) (int, error) {
	b := d.b
	if i >= len(b) || depth > 64 {
		return 0, errJSON
	}
	switch c := b[i]; {
	case c == '"':
		end, esc, err := stringEnd(b, i)
		if err != nil {
			return 0, err
		}
		if field != fieldNone {
			d.spans = append(d.spans, span{start: i, end: end, frame: parent, field: field, escaped: esc})
		}
		return end, nil
	case c == '{':
		fi := int32(len(d.frames))
		d.frames = append(d.frames, frame{parent: parent, under: under, index: -1})
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return 0, errJSON
			}
			kend, _, err := stringEnd(b, i)
			if err != nil {
				return 0, err
			}
			key := b[i+1 : kend-1]
			i = skipWS(b, kend)
			if i >= len(b) || b[i] != ':' {
				return 0, errJSON
			}
			i = skipWS(b, i+1)
			vstart := i
			sub := underOther
			switch string(key) {
			case "choices":
				sub = underChoices
			case "tool_calls":
				sub = underToolCalls
			}
			if i, err = d.value(i, fieldOf(key), sub, fi, depth+1); err != nil {
				return 0, err
			}
			switch string(key) {
			case "index":
				n, ok := smallInt(b[vstart:i])
				if ok {
					d.frames[fi].index = n
				}
			case "finish_reason":
				if string(b[vstart:i]) != "null" {
					d.frames[fi].finished = true
				}
			}
			i = skipWS(b, i)
			if i < len(b) && b[i] == ',' {
				i = skipWS(b, i+1)
				continue
			}
			if i < len(b) && b[i] == '}' {
				return i + 1, nil
			}
			return 0, errJSON
		}
	case c == '[':
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		for {
			var err error
			if i, err = d.value(i, field, under, parent, depth+1); err != nil {
				return 0, err
			}
			i = skipWS(b, i)
			if i < len(b) && b[i] == ',' {
				i = skipWS(b, i+1)
				continue
			}
			if i < len(b) && b[i] == ']' {
				return i + 1, nil
			}
			return 0, errJSON
		}
	default:
		j := i
		for j < len(b) && (isAlnum(b[j]) || b[j] == '-' || b[j] == '+' || b[j] == '.') {
			j++
		}
		if j == i {
			return 0, errJSON
		}
		return j, nil
	}
}

func smallInt(b []byte) (int32, bool) {
	if len(b) == 0 || len(b) > 9 {
		return 0, false
	}
	n := int32(0)
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int32(c-'0')
	}
	return n, true
}

// stringEnd returns the end of the string literal at b[i] (after its
// closing quote) and whether it has escapes.
func stringEnd(b []byte, i int) (int, bool, error) {
	esc := false
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			esc = true
			j++
		case '"':
			return j + 1, esc, nil
		}
	}
	return 0, false, errJSON
}

// text returns a span's string value.
func (d *doc) text(s span) string {
	lit := d.b[s.start:s.end]
	if !s.escaped {
		return string(lit[1 : len(lit)-1])
	}
	var out string
	if json.Unmarshal(lit, &out) != nil {
		return ""
	}
	return out
}

// streamKey places a span in a stream: its choice, tool call and field.
func (d *doc) streamKey(s span) uint64 {
	choice, tool := int32(0), int32(-1)
	for f := s.frame; f >= 0; f = d.frames[f].parent {
		fr := d.frames[f]
		switch fr.under {
		case underToolCalls:
			if tool < 0 {
				tool = max(fr.index, 0)
			}
		case underChoices:
			choice = max(fr.index, 0)
			return uint64(choice)<<32 | uint64(tool+1)<<8 | uint64(s.field)
		}
	}
	return uint64(choice)<<32 | uint64(tool+1)<<8 | uint64(s.field)
}

// choiceOf returns the choice a span belongs to.
func (d *doc) choiceOf(s span) int32 {
	for f := s.frame; f >= 0; f = d.frames[f].parent {
		if d.frames[f].under == underChoices {
			return max(d.frames[f].index, 0)
		}
	}
	return 0
}

// finishedChoices returns the choices that finish in this document.
func (d *doc) finishedChoices(out []int32) []int32 {
	for _, fr := range d.frames {
		if fr.finished && fr.under == underChoices {
			out = append(out, max(fr.index, 0))
		}
	}
	return out
}

// edit is one span's new text.
type edit struct {
	span int
	text string
}

// splice returns the document with the edited spans replaced, appended to
// dst. Edits are in span order.
func (d *doc) splice(dst []byte, edits []edit) []byte {
	at := 0
	for _, e := range edits {
		s := d.spans[e.span]
		dst = append(dst, d.b[at:s.start]...)
		dst = openai.AppendJSONString(dst, e.text)
		at = s.end
	}
	return append(dst, d.b[at:]...)
}
