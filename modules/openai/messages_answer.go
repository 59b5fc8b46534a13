package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
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

// chatUsage is the usage member of a chat answer.
type chatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (u *chatUsage) messages() msgUsage {
	m := msgUsage{input: u.PromptTokens, output: u.CompletionTokens}
	if d := u.PromptTokensDetails; d != nil && d.CachedTokens > 0 && d.CachedTokens <= m.input {
		m.input, m.cacheRead = m.input-d.CachedTokens, d.CachedTokens
	}
	return m
}

// message is a whole Messages answer.
type message struct {
	id, model  []byte // id bare, model a JSON string
	blocks     []block
	stopReason string
	stopSeq    []byte // a JSON string, or nil
	usage      msgUsage
}

// chatCompletion is what a whole chat answer holds for a Messages answer.
type chatCompletion struct {
	ID      json.RawMessage `json:"id"`
	Choices []struct {
		Message struct {
			Content          json.RawMessage `json:"content"`
			ReasoningContent json.RawMessage `json:"reasoning_content"`
			Reasoning        json.RawMessage `json:"reasoning"`
			Refusal          json.RawMessage `json:"refusal"`
			ToolCalls        []struct {
				ID       json.RawMessage `json:"id"`
				Function struct {
					Name      json.RawMessage `json:"name"`
					Arguments string          `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string          `json:"finish_reason"`
		StopReason   json.RawMessage `json:"stop_reason"`
	} `json:"choices"`
	Usage *chatUsage `json:"usage"`
}

// messageFromChat reads a whole chat completion. A tool call whose
// arguments are not a JSON object gets the input {"_raw_arguments": the
// arguments as a string}, so that nothing the engine produced is lost.
func messageFromChat(t *messagesTurn, body []byte) (*message, error) {
	var c chatCompletion
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, errors.New("the model's answer could not be read: " + err.Error())
	}
	m := &message{id: messageID(c.ID), model: modelJSON(t.model)}
	if c.Usage != nil {
		m.usage = c.Usage.messages()
	}
	if len(c.Choices) == 0 {
		m.stopReason = "end_turn"
		return m, nil
	}
	ch := &c.Choices[0]
	msg := &ch.Message
	if r := firstString(msg.ReasoningContent, msg.Reasoning); r != nil {
		m.blocks = append(m.blocks, block{kind: blockThinking, text: r})
	}
	if s := firstString(msg.Content, msg.Refusal); s != nil {
		m.blocks = append(m.blocks, block{kind: blockText, text: s})
	}
	for _, tc := range msg.ToolCalls {
		b := block{kind: blockTool, id: tc.ID, name: tc.Function.Name, input: []byte(tc.Function.Arguments)}
		if kindOf(b.id) != kString {
			b.id = toolID()
		}
		if kindOf(b.name) != kString {
			b.name = []byte(`""`)
		}
		switch in := bytes.TrimSpace(b.input); {
		case len(in) == 0:
			b.input = []byte("{}")
		case !json.Valid(in) || in[0] != '{':
			b.input = AppendJSONString([]byte(`{"_raw_arguments":`), b.input)
			b.input = append(b.input, '}')
		}
		m.blocks = append(m.blocks, b)
	}
	m.stopSeq = matchedStop(t, ch.StopReason)
	m.stopReason = stopReason(ch.FinishReason, len(msg.ToolCalls) > 0, m.stopSeq)
	return m, nil
}

// firstString returns the first of vs that is a non-empty JSON string.
func firstString(vs ...json.RawMessage) []byte {
	for _, v := range vs {
		if kindOf(v) == kString && len(v) > 2 {
			return v
		}
	}
	return nil
}

func modelJSON(model string) []byte { return AppendJSONString(nil, []byte(model)) }

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
			out = evDelta(out, i, blockTool, AppendJSONString(nil, b.input))
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
