package messagesapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"

	"github.com/llmgw/llmgw/modules/openai"
)

// MessagesToChatStream translates a Messages stream (Anthropic's SSE
// events) into a chat completions stream as it is read, one event at a
// time, never more: a role chunk at message_start; content,
// reasoning_content (from thinking_delta) and tool_calls deltas (each
// tool_use block a call, indexed in order, its partial_json the arguments
// byte for byte); a finish_reason chunk at message_delta; at
// message_stop a usage-only chunk ("choices":[]) and data: [DONE]. An
// error event becomes a chat error event ({"error":{…}}) and ends the
// stream, as does a stream that ends before message_stop. Ping, signature
// and server-tool events have no chat form and are skipped.
func MessagesToChatStream(rc io.ReadCloser) io.ReadCloser {
	return &messagesToChat{rc: rc, br: bufio.NewReaderSize(rc, 16<<10), tools: map[int]int{}}
}

type messagesToChat struct {
	rc     io.ReadCloser
	br     *bufio.Reader
	out    []byte // translated, not yet read
	off    int
	line   []byte // a line longer than the reader's buffer
	data   []byte // the data of the event being read
	done   bool
	err    error
	prefix []byte // the start of every chunk: id, object, created, model
	tools  map[int]int
	usage  msgsUsageJ
	finish string
}

func (s *messagesToChat) Read(p []byte) (int, error) {
	for s.off >= len(s.out) {
		if s.done {
			if s.err != nil {
				return 0, s.err
			}
			return 0, io.EOF
		}
		s.out, s.off = s.out[:0], 0
		s.step()
	}
	n := copy(p, s.out[s.off:])
	s.off += n
	return n, nil
}

func (s *messagesToChat) Close() error { return s.rc.Close() }

// step reads one line and translates the event it completes.
func (s *messagesToChat) step() {
	line, err := s.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		s.line = append(s.line, line...)
		return
	}
	if len(s.line) > 0 {
		line = append(s.line, line...)
		s.line = s.line[:0]
	}
	line = bytes.TrimRight(line, "\r\n")
	switch {
	case len(line) == 0:
		if len(s.data) > 0 {
			s.event(s.data)
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
	if err != nil && !s.done {
		if len(s.data) > 0 {
			s.event(s.data)
		}
		if !s.done {
			s.done = true
			if errors.Is(err, io.EOF) {
				s.fail("api_error", "the model's stream ended before message_stop")
			} else {
				s.err = err
			}
		}
	}
}

func (s *messagesToChat) event(data []byte) {
	if openai.KindOf(data) != openai.KindObject {
		return
	}
	switch typ := string(openai.Unquote(openai.MemberOf(data, "type"))); typ {
	case "message_start":
		s.start(openai.MemberOf(data, "message"))
	case "content_block_start":
		s.blockStart(data)
	case "content_block_delta":
		s.delta(data)
	case "message_delta":
		s.messageDelta(data)
	case "message_stop":
		s.stop()
	case "error":
		var e struct {
			Error struct{ Type, Message string } `json:"error"`
		}
		_ = json.Unmarshal(data, &e)
		s.fail(e.Error.Type, e.Error.Message)
	}
}

func (s *messagesToChat) start(msg []byte) {
	id, model := openai.MemberOf(msg, "id"), openai.MemberOf(msg, "model")
	if !validString(id) {
		id = []byte(`"msg"`)
	}
	if !validString(model) {
		model = []byte(`""`)
	}
	s.prefix = append(s.prefix[:0], `data: {"id":`...)
	s.prefix = append(s.prefix, id...)
	s.prefix = append(s.prefix, `,"object":"chat.completion.chunk","created":`...)
	s.prefix = strconv.AppendInt(s.prefix, now().Unix(), 10)
	s.prefix = append(s.prefix, `,"model":`...)
	s.prefix = append(s.prefix, model...)
	s.prefix = append(s.prefix, `,"choices":`...)
	if u := openai.MemberOf(msg, "usage"); openai.KindOf(u) == openai.KindObject {
		_ = json.Unmarshal(u, &s.usage)
	}
	s.chunk(`{"role":"assistant","content":""}`, nil)
}

// chunk appends a chunk of one choice: delta is its opening, raw (a JSON
// value) and the closing braces follow.
func (s *messagesToChat) chunk(delta string, raw []byte, closing ...string) {
	if s.prefix == nil {
		s.start(nil)
	}
	s.out = append(s.out, s.prefix...)
	s.out = append(s.out, `[{"index":0,"delta":`...)
	s.out = append(s.out, delta...)
	s.out = append(s.out, raw...)
	for _, c := range closing {
		s.out = append(s.out, c...)
	}
	s.out = append(s.out, `,"finish_reason":null}]}`+"\n\n"...)
}

func (s *messagesToChat) blockStart(data []byte) {
	idx, _ := strconv.Atoi(string(openai.MemberOf(data, "index")))
	b := openai.MemberOf(data, "content_block")
	switch string(openai.Unquote(openai.MemberOf(b, "type"))) {
	case "tool_use":
		k := len(s.tools)
		s.tools[idx] = k
		id, name := openai.MemberOf(b, "id"), openai.MemberOf(b, "name")
		if !validString(id) {
			id = []byte(`""`)
		}
		if !validString(name) {
			name = []byte(`""`)
		}
		d := `{"tool_calls":[{"index":` + strconv.Itoa(k) + `,"id":` + string(id) + `,"type":"function","function":{"name":` + string(name) + `,"arguments":""}}]}`
		s.chunk(d, nil)
	case "text":
		if t := openai.MemberOf(b, "text"); isText(t) {
			s.chunk(`{"content":`, t, "}")
		}
	}
}

func (s *messagesToChat) delta(data []byte) {
	d := openai.MemberOf(data, "delta")
	switch string(openai.Unquote(openai.MemberOf(d, "type"))) {
	case "text_delta":
		if t := openai.MemberOf(d, "text"); isText(t) {
			s.chunk(`{"content":`, t, "}")
		}
	case "thinking_delta":
		if t := openai.MemberOf(d, "thinking"); isText(t) {
			s.chunk(`{"reasoning_content":`, t, "}")
		}
	case "input_json_delta":
		idx, _ := strconv.Atoi(string(openai.MemberOf(data, "index")))
		k, ok := s.tools[idx]
		if t := openai.MemberOf(d, "partial_json"); ok && isText(t) {
			s.chunk(`{"tool_calls":[{"index":`+strconv.Itoa(k)+`,"function":{"arguments":`, t, "}}]}")
		}
	}
}

func (s *messagesToChat) messageDelta(data []byte) {
	if d := openai.MemberOf(data, "delta"); openai.KindOf(d) == openai.KindObject {
		if r := openai.MemberOf(d, "stop_reason"); openai.KindOf(r) == openai.KindString {
			s.finish = finishReason(string(openai.Unquote(r)))
		}
	}
	if u := openai.MemberOf(data, "usage"); openai.KindOf(u) == openai.KindObject {
		var n msgsUsageJ
		if json.Unmarshal(u, &n) == nil {
			if n.InputTokens != nil {
				s.usage.InputTokens = n.InputTokens
			}
			if n.OutputTokens != nil {
				s.usage.OutputTokens = n.OutputTokens
			}
			if n.CacheReadInputTokens > 0 {
				s.usage.CacheReadInputTokens = n.CacheReadInputTokens
			}
			if n.CacheCreationInputTokens > 0 {
				s.usage.CacheCreationInputTokens = n.CacheCreationInputTokens
			}
		}
	}
	if s.finish == "" {
		return
	}
	if s.prefix == nil {
		s.start(nil)
	}
	s.out = append(s.out, s.prefix...)
	s.out = append(s.out, `[{"index":0,"delta":{},"finish_reason":"`...)
	s.out = append(s.out, s.finish...)
	s.out = append(s.out, `"}]}`+"\n\n"...)
}

func (s *messagesToChat) stop() {
	if s.prefix == nil {
		s.start(nil)
	}
	p, o := s.usage.prompt(), s.usage.output()
	s.out = append(s.out, s.prefix...)
	s.out = append(s.out, `[],"usage":{"prompt_tokens":`...)
	s.out = strconv.AppendInt(s.out, p, 10)
	s.out = append(s.out, `,"completion_tokens":`...)
	s.out = strconv.AppendInt(s.out, o, 10)
	s.out = append(s.out, `,"total_tokens":`...)
	s.out = strconv.AppendInt(s.out, p+o, 10)
	s.out = append(s.out, `,"prompt_tokens_details":{"cached_tokens":`...)
	s.out = strconv.AppendInt(s.out, s.usage.CacheReadInputTokens, 10)
	s.out = append(s.out, "}}}\n\ndata: [DONE]\n\n"...)
	s.done = true
}

// fail ends the stream with a chat error event.
func (s *messagesToChat) fail(typ, message string) {
	if message == "" {
		message = "the model's stream failed"
	}
	s.out = append(s.out, "data: "...)
	s.out = append(s.out, openAIError(typ, message)...)
	s.out = append(s.out, "\n\n"...)
	s.done = true
}
