package messagesapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/llmgw/llmgw/modules/openai"
)

// chatToMessages translates a chat completions stream into a Messages
// stream as its bytes arrive. Only the first choice is read (Messages
// has one). Content blocks follow the chat deltas: reasoning_content
// opens a thinking block, content a text block, each tool call a tool_use
// block, each closed when a block of another kind or call opens. A delta
// for an earlier tool call (engines that interleave parallel calls) goes
// to that call's block, which keeps its bytes though its stop was sent.
type chatToMessages struct {
	turn    *messagesTurn
	line    []byte // a line not yet complete
	data    []byte // the data of the event being read
	started bool
	done    bool
	next    int  // index of the next block
	cur     int  // the open block, -1 for none
	curKind byte // its kind
	tools   []toolSlot
	lastKey int // chat index of the last tool call
	sawTool bool
	finish  string
	stopSeq []byte
	usage   msgUsage
	hasUse  bool
}

type toolSlot struct{ key, index int }

// errFound stops a walk once it has found what it looks for.
var errFound = errors.New("found")

func newChatToMessages(t *messagesTurn) *chatToMessages {
	return &chatToMessages{turn: t, cur: -1}
}

// feed reads b and appends the events it completes.
func (s *chatToMessages) feed(out, b []byte) []byte {
	for len(b) > 0 && !s.done {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			s.line = append(s.line, b...)
			return out
		}
		line := b[:i]
		if len(s.line) > 0 {
			s.line = append(s.line, line...)
			line = s.line
		}
		b = b[i+1:]
		out = s.readLine(out, bytes.TrimSuffix(line, []byte{'\r'}))
		s.line = s.line[:0]
	}
	return out
}

func (s *chatToMessages) readLine(out, line []byte) []byte {
	switch {
	case len(line) == 0:
		if len(s.data) > 0 {
			out = s.chunk(out, s.data)
			s.data = s.data[:0]
		}
	case bytes.HasPrefix(line, []byte("data:")):
		v := line[5:]
		if len(v) > 0 && v[0] == ' ' {
			v = v[1:]
		}
		if len(s.data) > 0 {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, v...)
	}
	return out
}

// chunk translates one chat chunk.
func (s *chatToMessages) chunk(out, data []byte) []byte {
	if string(data) == "[DONE]" {
		return s.end(out)
	}
	if openai.KindOf(data) != openai.KindObject {
		return out
	}
	var id, choices, usage, errv []byte
	_ = openai.EachMember(data, func(k, v []byte) error {
		switch string(k) {
		case "id":
			id = v
		case "choices":
			choices = v
		case "usage":
			usage = v
		case "error":
			errv = v
		}
		return nil
	})
	if openai.KindOf(errv) == openai.KindObject && choices == nil {
		return s.fail(out, errv)
	}
	if !s.started {
		out = s.start(out, id)
	}
	if openai.KindOf(choices) == openai.KindArray {
		_ = openai.EachElement(choices, func(_ int, c []byte) error {
			var ok bool
			if out, ok = s.choice(out, c); ok {
				return errFound
			}
			return nil
		})
	}
	if openai.KindOf(usage) == openai.KindObject {
		s.usage, s.hasUse = chatUsage(usage)
	}
	if s.hasUse && s.finish != "" {
		return s.end(out)
	}
	return out
}

func (s *chatToMessages) start(out, id []byte) []byte {
	s.started = true
	return evMessageStart(out, messageID(id), modelJSON(s.turn.model))
}

// choice translates a choice's delta; ok is false for a choice other
// than the first (index 0), which is skipped.
func (s *chatToMessages) choice(out, c []byte) (_ []byte, ok bool) {
	var delta, finish, stop []byte
	if openai.EachMember(c, func(k, v []byte) error {
		switch string(k) {
		case "index":
			if string(v) != "0" {
				return errFound
			}
		case "delta":
			delta = v
		case "finish_reason":
			finish = v
		case "stop_reason":
			stop = v
		}
		return nil
	}) == errFound {
		return out, false
	}
	if openai.KindOf(delta) == openai.KindObject {
		var reasoning, content, calls []byte
		_ = openai.EachMember(delta, func(k, v []byte) error {
			switch string(k) {
			case "reasoning_content", "reasoning":
				if isText(v) {
					reasoning = v
				}
			case "content":
				content = v
			case "tool_calls":
				calls = v
			}
			return nil
		})
		if reasoning != nil {
			out = s.text(out, blockThinking, reasoning)
		}
		if isText(content) {
			out = s.text(out, blockText, content)
		}
		if openai.KindOf(calls) == openai.KindArray {
			_ = openai.EachElement(calls, func(_ int, tc []byte) error {
				out = s.toolCall(out, tc)
				return nil
			})
		}
	}
	if openai.KindOf(finish) == openai.KindString {
		s.finish = string(openai.Unquote(finish))
		// A copy: stop is a slice of this event, and the buffer it is
		// in is reused before message_delta is written.
		s.stopSeq = bytes.Clone(matchedStop(s.turn, stop))
	}
	return out, true
}

// text appends a text or thinking delta, opening its block if need be.
func (s *chatToMessages) text(out []byte, kind byte, raw []byte) []byte {
	if s.cur < 0 || s.curKind != kind {
		out = s.open(out, &block{kind: kind})
	}
	return evDelta(out, s.cur, kind, raw)
}

func (s *chatToMessages) open(out []byte, b *block) []byte {
	if s.cur >= 0 {
		out = evBlockStop(out, s.cur)
	}
	s.cur, s.curKind = s.next, b.kind
	s.next++
	return evBlockStart(out, s.cur, b)
}

func (s *chatToMessages) toolCall(out, tc []byte) []byte {
	var idx, id, fn []byte
	_ = openai.EachMember(tc, func(k, v []byte) error {
		switch string(k) {
		case "index":
			idx = v
		case "id":
			id = v
		case "function":
			fn = v
		}
		return nil
	})
	var name, args []byte
	if openai.KindOf(fn) == openai.KindObject {
		name, args = openai.MemberOf(fn, "name"), openai.MemberOf(fn, "arguments")
	}
	key, err := strconv.Atoi(string(idx))
	switch {
	case err == nil:
	case openai.KindOf(id) == openai.KindString: // no index: a call with an id is a new one
		key = -1 - len(s.tools)
	default:
		key = s.lastKey
	}
	s.lastKey = key
	target := -1
	for _, t := range s.tools {
		if t.key == key {
			target = t.index
		}
	}
	if target < 0 {
		b := &block{kind: blockTool, id: id, name: name}
		if !validString(b.id) {
			b.id = toolID()
		}
		if !validString(b.name) {
			b.name = []byte(`""`)
		}
		out = s.open(out, b)
		target = s.cur
		s.tools = append(s.tools, toolSlot{key, target})
		s.sawTool = true
	}
	if isText(args) {
		out = evDelta(out, target, blockTool, args)
	}
	return out
}

// end closes the open block and the message.
func (s *chatToMessages) end(out []byte) []byte {
	if !s.started {
		out = s.start(out, nil)
	}
	if s.cur >= 0 {
		out = evBlockStop(out, s.cur)
		s.cur = -1
	}
	out = evMessageDelta(out, stopReason(s.finish, s.sawTool, s.stopSeq), s.stopSeq, s.usage)
	s.done = true
	return evMessageStop(out)
}

// fail ends the stream with an error event.
func (s *chatToMessages) fail(out, errv []byte) []byte {
	var e openAIErr
	_ = json.Unmarshal(errv, &e)
	if e.Message == "" {
		e.Message = "the model's stream failed"
	}
	s.done = true
	out = event(out, "error")
	out = append(out, anthropicError(anthropicTypeOf(e), e.Message)...)
	return append(out, "\n\n"...)
}

// The chunks are not validated as a whole (that took half the
// translation's time): the walkers stop at malformed JSON, and the
// strings copied into the Messages events are checked one by one.

// isText reports whether v is a non-empty, well-formed JSON string.
func isText(v []byte) bool { return len(v) > 2 && validString(v) }

// validString reports whether v, a value the walkers delimited, is a
// well-formed JSON string: no raw control characters, only JSON's
// escapes.
func validString(v []byte) bool {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return false
	}
	for i := 1; i < len(v)-1; i++ {
		switch c := v[i]; {
		case c < 0x20:
			return false
		case c == '\\':
			i++
			switch v[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(v)-1 || !isHex(v[i+1]) || !isHex(v[i+2]) || !isHex(v[i+3]) || !isHex(v[i+4]) {
					return false
				}
				i += 4
			default:
				return false
			}
		}
	}
	return true
}

func isHex(c byte) bool { return c-'0' < 10 || (c|0x20)-'a' < 6 }
