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
			b.input = appendJSONString([]byte(`{"_raw_arguments":`), b.input)
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

func modelJSON(model string) []byte { return appendJSONString(nil, []byte(model)) }

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
			out = evDelta(out, i, blockTool, appendJSONString(nil, b.input))
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
	if kindOf(data) != kObject || !json.Valid(data) {
		return out
	}
	var id, choices, usage, errv []byte
	_ = eachMember(data, func(k, v []byte) error {
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
	if kindOf(errv) == kObject && choices == nil {
		return s.fail(out, errv)
	}
	if !s.started {
		out = s.start(out, id)
	}
	if kindOf(choices) == kArray {
		_ = eachElement(choices, func(_ int, c []byte) error {
			if idx := memberOf(c, "index"); len(idx) > 0 && string(idx) != "0" {
				return nil
			}
			out = s.choice(out, c)
			return errFound
		})
	}
	if kindOf(usage) == kObject {
		var u chatUsage
		if json.Unmarshal(usage, &u) == nil {
			s.usage, s.hasUse = u.messages(), true
		}
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

func (s *chatToMessages) choice(out, c []byte) []byte {
	var delta, finish, stop []byte
	_ = eachMember(c, func(k, v []byte) error {
		switch string(k) {
		case "delta":
			delta = v
		case "finish_reason":
			finish = v
		case "stop_reason":
			stop = v
		}
		return nil
	})
	if kindOf(delta) == kObject {
		var reasoning, content, calls []byte
		_ = eachMember(delta, func(k, v []byte) error {
			switch string(k) {
			case "reasoning_content", "reasoning":
				if kindOf(v) == kString && len(v) > 2 {
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
		if kindOf(content) == kString && len(content) > 2 {
			out = s.text(out, blockText, content)
		}
		if kindOf(calls) == kArray {
			_ = eachElement(calls, func(_ int, tc []byte) error {
				out = s.toolCall(out, tc)
				return nil
			})
		}
	}
	if kindOf(finish) == kString {
		s.finish = string(unquote(finish))
		s.stopSeq = matchedStop(s.turn, stop)
	}
	return out
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
	_ = eachMember(tc, func(k, v []byte) error {
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
	if kindOf(fn) == kObject {
		name, args = memberOf(fn, "name"), memberOf(fn, "arguments")
	}
	key, err := strconv.Atoi(string(idx))
	switch {
	case err == nil:
	case kindOf(id) == kString: // no index: a call with an id is a new one
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
		if kindOf(b.id) != kString {
			b.id = toolID()
		}
		if kindOf(b.name) != kString {
			b.name = []byte(`""`)
		}
		out = s.open(out, b)
		target = s.cur
		s.tools = append(s.tools, toolSlot{key, target})
		s.sawTool = true
	}
	if kindOf(args) == kString && len(args) > 2 {
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
