package messagesapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/llmgw/llmgw/modules/openai"
)

// Kinds of content blocks.
const (
	blockText     = 't'
	blockThinking = 'r'
	blockTool     = 'u'
)

// block is a content block of a Messages answer. Strings are kept as the
// raw JSON strings the engine sent, so that text and arguments reach the
// client byte for byte.
type block struct {
	kind     byte
	text     []byte // text or thinking, a JSON string
	id, name []byte // tool_use, JSON strings
	input    []byte // tool_use, a JSON object
}

// msgUsage is a Messages answer's usage: input excludes the cached part.
type msgUsage struct{ input, output, cacheRead int64 }

// chatUsage reads the usage member of a chat answer as a Messages
// usage, whose input excludes the cached part. ok is false when it is
// not an object.
func chatUsage(v []byte) (m msgUsage, ok bool) {
	var cached int64
	err := openai.EachMember(v, func(k, val []byte) error {
		switch string(k) {
		case "prompt_tokens":
			m.input, _ = strconv.ParseInt(string(val), 10, 64)
		case "completion_tokens":
			m.output, _ = strconv.ParseInt(string(val), 10, 64)
		case "prompt_tokens_details":
			_ = openai.EachMember(val, func(dk, dv []byte) error {
				if string(dk) == "cached_tokens" {
					cached, _ = strconv.ParseInt(string(dv), 10, 64)
				}
				return nil
			})
		}
		return nil
	})
	if cached > 0 && cached <= m.input {
		m.input, m.cacheRead = m.input-cached, cached
	}
	return m, err == nil
}

// message is a whole Messages answer.
type message struct {
	id, model  []byte // id bare, model a JSON string
	blocks     []block
	stopReason string
	stopSeq    []byte // a JSON string, or nil
	usage      msgUsage
}

// messageFromChat reads a whole chat completion, walking its bytes (see
// walk.go): the strings stay slices of the answer. A tool call whose
// arguments are not a JSON object gets the input {"_raw_arguments": the
// arguments as a string}, so that nothing the engine produced is lost.
func messageFromChat(t *messagesTurn, body []byte) (*message, error) {
	var id, choice, usage []byte
	err := openai.EachMember(body, func(k, v []byte) error {
		switch string(k) {
		case "id":
			id = v
		case "choices":
			if openai.KindOf(v) == openai.KindNull {
				return nil
			}
			return openai.EachElement(v, func(i int, c []byte) error {
				if i == 0 {
					choice = c
				}
				return nil
			})
		case "usage":
			usage = v
		}
		return nil
	})
	if err != nil {
		return nil, errors.New("the model's answer could not be read: it is not a chat completion object")
	}
	m := &message{id: messageID(id), model: modelJSON(t.model)}
	if openai.KindOf(usage) == openai.KindObject {
		m.usage, _ = chatUsage(usage)
	}
	if choice == nil {
		m.stopReason = "end_turn"
		return m, nil
	}
	var msg, finish, stop []byte
	_ = openai.EachMember(choice, func(k, v []byte) error {
		switch string(k) {
		case "message":
			msg = v
		case "finish_reason":
			finish = v
		case "stop_reason":
			stop = v
		}
		return nil
	})
	var content, refusal, reasoning, reasoning2, calls []byte
	_ = openai.EachMember(msg, func(k, v []byte) error {
		switch string(k) {
		case "content":
			content = v
		case "refusal":
			refusal = v
		case "reasoning_content":
			reasoning = v
		case "reasoning":
			reasoning2 = v
		case "tool_calls":
			calls = v
		}
		return nil
	})
	if r := firstString(reasoning, reasoning2); r != nil {
		m.blocks = append(m.blocks, block{kind: blockThinking, text: r})
	}
	if s := firstString(content, refusal); s != nil {
		m.blocks = append(m.blocks, block{kind: blockText, text: s})
	}
	ncalls := 0
	_ = openai.EachElement(calls, func(_ int, c []byte) error {
		ncalls++
		_, id, name, args := openai.ToolCallFields(c)
		b := block{kind: blockTool, id: id, name: name}
		switch openai.KindOf(args) {
		case openai.KindString:
			b.input = openai.UnquoteKey(args)
		case openai.KindObject: // some engines send the arguments as an object
			b.input = openai.Compact(args)
		}
		if openai.KindOf(b.id) != openai.KindString {
			b.id = toolID()
		}
		if openai.KindOf(b.name) != openai.KindString {
			b.name = []byte(`""`)
		}
		switch in := bytes.TrimSpace(b.input); {
		case len(in) == 0:
			b.input = []byte("{}")
		case !json.Valid(in) || in[0] != '{':
			b.input = openai.AppendJSONString([]byte(`{"_raw_arguments":`), b.input)
			b.input = append(b.input, '}')
		}
		m.blocks = append(m.blocks, b)
		return nil
	})
	m.stopSeq = matchedStop(t, stop)
	m.stopReason = stopReason(openai.StringValue(finish), ncalls > 0, m.stopSeq)
	return m, nil
}

// firstString returns the first of vs that is a non-empty JSON string.
func firstString(vs ...[]byte) []byte {
	for _, v := range vs {
		if openai.KindOf(v) == openai.KindString && len(v) > 2 {
			return v
		}
	}
	return nil
}

func modelJSON(model string) []byte { return openai.AppendJSONString(nil, []byte(model)) }

// json appends the answer as a Message object.
func (m *message) json(out []byte) []byte {
	out = append(out, `{"id":"`...)
	out = append(out, m.id...)
	out = append(out, `","type":"message","role":"assistant","model":`...)
	out = append(out, m.model...)
	out = append(out, `,"content":[`...)
	for i := range m.blocks {
		if i > 0 {
			out = append(out, ',')
		}
		b := &m.blocks[i]
		switch b.kind {
		case blockText:
			out = append(out, `{"type":"text","text":`...)
			out = append(out, b.text...)
		case blockThinking:
			out = append(out, `{"type":"thinking","thinking":`...)
			out = append(out, b.text...)
			out = append(out, `,"signature":""`...)
		case blockTool:
			out = append(out, `{"type":"tool_use","id":`...)
			out = append(out, b.id...)
			out = append(out, `,"name":`...)
			out = append(out, b.name...)
			out = append(out, `,"input":`...)
			out = append(out, b.input...)
		}
		out = append(out, '}')
	}
	out = append(out, `],"stop_reason":"`...)
	out = append(out, m.stopReason...)
	out = append(out, `","stop_sequence":`...)
	out = appendStopSeq(out, m.stopSeq)
	out = append(out, `,"usage":`...)
	out = m.usage.json(out, true)
	return append(out, '}')
}

// events appends the answer as the events of a stream, for a client that
// asked for one and got a whole answer.
func (m *message) events(out []byte) []byte {
	out = evMessageStart(out, m.id, m.model)
	for i := range m.blocks {
		b := &m.blocks[i]
		out = evBlockStart(out, i, b)
		switch b.kind {
		case blockTool:
			out = evDelta(out, i, blockTool, openai.AppendJSONString(nil, b.input))
		default:
			out = evDelta(out, i, b.kind, b.text)
		}
		out = evBlockStop(out, i)
	}
	out = evMessageDelta(out, m.stopReason, m.stopSeq, m.usage)
	return evMessageStop(out)
}

func appendStopSeq(out, s []byte) []byte {
	if s == nil {
		return append(out, "null"...)
	}
	return append(out, s...)
}

func (u msgUsage) json(out []byte, cache bool) []byte {
	out = append(out, `{"input_tokens":`...)
	out = strconv.AppendInt(out, u.input, 10)
	out = append(out, `,"output_tokens":`...)
	out = strconv.AppendInt(out, u.output, 10)
	if cache {
		out = append(out, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":`...)
		out = strconv.AppendInt(out, u.cacheRead, 10)
	}
	return append(out, '}')
}

// The events of a Messages stream.

func event(out []byte, name string) []byte {
	out = append(out, "event: "...)
	out = append(out, name...)
	return append(out, "\ndata: "...)
}

func evMessageStart(out, id, model []byte) []byte {
	out = event(out, "message_start")
	out = append(out, `{"type":"message_start","message":{"id":"`...)
	out = append(out, id...)
	out = append(out, `","type":"message","role":"assistant","model":`...)
	out = append(out, model...)
	out = append(out, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}`+"\n\n"...)
	return append(out, "event: ping\ndata: {\"type\":\"ping\"}\n\n"...)
}

func evBlockStart(out []byte, i int, b *block) []byte {
	out = event(out, "content_block_start")
	out = append(out, `{"type":"content_block_start","index":`...)
	out = strconv.AppendInt(out, int64(i), 10)
	switch b.kind {
	case blockText:
		out = append(out, `,"content_block":{"type":"text","text":""}}`...)
	case blockThinking:
		out = append(out, `,"content_block":{"type":"thinking","thinking":"","signature":""}}`...)
	case blockTool:
		out = append(out, `,"content_block":{"type":"tool_use","id":`...)
		out = append(out, b.id...)
		out = append(out, `,"name":`...)
		out = append(out, b.name...)
		out = append(out, `,"input":{}}}`...)
	}
	return append(out, "\n\n"...)
}

// evDelta appends a content_block_delta; s is a JSON string.
func evDelta(out []byte, i int, kind byte, s []byte) []byte {
	out = event(out, "content_block_delta")
	out = append(out, `{"type":"content_block_delta","index":`...)
	out = strconv.AppendInt(out, int64(i), 10)
	switch kind {
	case blockText:
		out = append(out, `,"delta":{"type":"text_delta","text":`...)
	case blockThinking:
		out = append(out, `,"delta":{"type":"thinking_delta","thinking":`...)
	case blockTool:
		out = append(out, `,"delta":{"type":"input_json_delta","partial_json":`...)
	}
	out = append(out, s...)
	return append(out, "}}\n\n"...)
}

func evBlockStop(out []byte, i int) []byte {
	out = event(out, "content_block_stop")
	out = append(out, `{"type":"content_block_stop","index":`...)
	out = strconv.AppendInt(out, int64(i), 10)
	return append(out, "}\n\n"...)
}

func evMessageDelta(out []byte, reason string, stopSeq []byte, u msgUsage) []byte {
	out = event(out, "message_delta")
	out = append(out, `{"type":"message_delta","delta":{"stop_reason":"`...)
	out = append(out, reason...)
	out = append(out, `","stop_sequence":`...)
	out = appendStopSeq(out, stopSeq)
	out = append(out, `},"usage":`...)
	out = u.json(out, true)
	return append(out, "}\n\n"...)
}

func evMessageStop(out []byte) []byte {
	return append(out, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
}
