package standin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"strings"

	"github.com/llmgw/llmgw/engines/internal/synth"
)

// msgRequest is the part of a Messages request the stand-in reads.
type msgRequest struct {
	Model         string          `json:"model"`
	MaxTokens     int             `json:"max_tokens"`
	System        json.RawMessage `json:"system"`
	Messages      []msgMessage    `json:"messages"`
	Tools         []msgTool       `json:"tools"`
	ToolChoice    *msgToolChoice  `json:"tool_choice"`
	StopSequences []string        `json:"stop_sequences"`
	Stream        bool            `json:"stream"`
	Thinking      *struct {
		Type string `json:"type"`
	} `json:"thinking"`
}

type msgMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type msgTool struct {
	Name         string          `json:"name"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl json.RawMessage `json:"cache_control"`
}

type msgToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

// msgBlock is a content block of a request: text, image, tool_use,
// tool_result, …
type msgBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	Input        json.RawMessage `json:"input"`
	Content      json.RawMessage `json:"content"`
	CacheControl json.RawMessage `json:"cache_control"`
}

// blocks reads content: a string or an array of blocks.
func blocks(raw json.RawMessage) []msgBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []msgBlock{{Type: "text", Text: s}}
	}
	var bs []msgBlock
	_ = json.Unmarshal(raw, &bs)
	return bs
}

// text is a block's text: its own, a tool_use's input, or a
// tool_result's content.
func (b msgBlock) text() string {
	switch b.Type {
	case "tool_use":
		return string(b.Input)
	case "tool_result":
		var parts []string
		for _, c := range blocks(b.Content) {
			parts = append(parts, c.text())
		}
		return strings.Join(parts, " ")
	}
	return b.Text
}

// segment is a piece of the prompt in order: its text and whether a
// cache_control breakpoint follows it.
type segment struct {
	text       string
	breakpoint bool
}

func (r *msgRequest) segments() []segment {
	var out []segment
	for _, t := range r.Tools {
		out = append(out, segment{t.Name + " " + string(t.InputSchema), len(t.CacheControl) > 0})
	}
	for _, b := range blocks(r.System) {
		out = append(out, segment{b.text(), len(b.CacheControl) > 0})
	}
	for _, m := range r.Messages {
		for _, b := range blocks(m.Content) {
			out = append(out, segment{b.text(), len(b.CacheControl) > 0})
		}
	}
	return out
}

// msgUsage is the input side of usage: tokens, and with cache_control
// breakpoints the tokens written to or read from the prompt cache (a
// prefix is written the first time it is seen, read after).
type msgUsage struct {
	input, cacheWrite, cacheRead int
	cached                       bool
}

func (s *Server) inputUsage(r *msgRequest, write bool) msgUsage {
	segs := r.segments()
	var u msgUsage
	last := -1
	for i, sg := range segs {
		u.input += countTokens(sg.text)
		if sg.breakpoint {
			last = i
		}
	}
	if last < 0 {
		return u
	}
	u.cached = true
	h := sha256.New()
	prefix := 0
	for _, sg := range segs[:last+1] {
		prefix += countTokens(sg.text)
		h.Write([]byte(sg.text))
		h.Write([]byte{0})
	}
	key := hex.EncodeToString(h.Sum(nil))
	s.mu.Lock()
	seen := s.cache[key]
	if write {
		s.cache[key] = true
	}
	s.mu.Unlock()
	u.input -= prefix
	if seen {
		u.cacheRead = prefix
	} else {
		u.cacheWrite = prefix
	}
	return u
}

func (u msgUsage) fields(output int) obj {
	o := obj{"input_tokens", u.input}
	if u.cached {
		o = append(o, "cache_creation_input_tokens", u.cacheWrite, "cache_read_input_tokens", u.cacheRead)
	}
	return append(o, "output_tokens", output)
}

// msgAnswer is what the stand-in answers a Messages request with.
type msgAnswer struct {
	blocks  []outBlock
	stop    string
	stopSeq any // the stop sequence met, or nil
	fail    bool
}

// outBlock is one content block of an answer: its pieces as streamed.
type outBlock struct {
	typ       string // text, thinking, tool_use
	pieces    []string
	signature string
	id, name  string
}

func (b outBlock) joined() string { return strings.Join(b.pieces, "") }

func (a msgAnswer) outputTokens() int {
	n := 0
	for _, b := range a.blocks {
		n += len(b.pieces)
	}
	return n
}

// plan decides the answer: thinking when enabled, then tool use or text.
func (s *Server) plan(r *msgRequest, body []byte) msgAnswer {
	rng := seeded(1, r.Messages, r.Tools) // the same answer streamed or not
	var a msgAnswer
	a.fail = strings.Contains(string(body), FailMidstream) && r.Stream
	if r.Thinking != nil && r.Thinking.Type != "disabled" {
		a.blocks = append(a.blocks, outBlock{typ: "thinking", signature: "EqQBCgIYAhIM" + s.id("")[12:],
			pieces: words("Let me think about what the user asked and answer it briefly.")})
	}
	var last msgMessage
	if len(r.Messages) > 0 {
		last = r.Messages[len(r.Messages)-1]
	}
	var user, result string
	isResult := false
	for _, b := range blocks(last.Content) {
		if b.Type == "tool_result" {
			result, isResult = result+b.text(), true
		} else if b.Type == "text" {
			user += b.Text
		}
	}
	if tools := r.calledTools(user); len(tools) > 0 && !isResult {
		a.blocks = append(a.blocks, outBlock{typ: "text", pieces: words("I will use " + strings.Join(tools, " and ") + ".")})
		for _, t := range tools {
			input := synth.Object(r.schema(t), rng)
			a.blocks = append(a.blocks, outBlock{typ: "tool_use", id: s.id("toolu_"), name: t, pieces: synth.Fragments(input, rng)})
		}
		a.stop = "tool_use"
		return a
	}
	text := reply(user)
	if isResult {
		text = toolReply(result)
	}
	a.stop, a.stopSeq = "end_turn", nil
	cut := len(text)
	for _, seq := range r.StopSequences {
		if i := strings.Index(text, seq); seq != "" && i >= 0 && i < cut {
			cut, a.stop, a.stopSeq = i, "stop_sequence", seq
		}
	}
	text = text[:cut]
	ws := words(text)
	if r.MaxTokens > 0 && len(ws) > r.MaxTokens {
		ws, a.stop, a.stopSeq = ws[:r.MaxTokens], "max_tokens", nil
	}
	a.blocks = append(a.blocks, outBlock{typ: "text", pieces: ws})
	return a
}

// calledTools are the tools the answer uses: the one tool_choice names,
// else those the user's text names, else with tool_choice "any" the
// first; tool_choice "none" uses none.
func (r *msgRequest) calledTools(user string) []string {
	var names []string
	for _, t := range r.Tools {
		names = append(names, t.Name)
	}
	if len(names) == 0 {
		return nil
	}
	c := r.ToolChoice
	if c == nil {
		c = &msgToolChoice{Type: "auto"}
	}
	switch c.Type {
	case "none":
		return nil
	case "tool":
		return []string{c.Name}
	}
	called := mentioned(user, names)
	if len(called) == 0 && c.Type == "any" {
		called = names[:1]
	}
	if len(called) > 1 && c.DisableParallelToolUse {
		called = called[:1]
	}
	return called
}

func (r *msgRequest) schema(name string) json.RawMessage {
	for _, t := range r.Tools {
		if t.Name == name {
			return t.InputSchema
		}
	}
	return nil
}

// seeded returns a random source seeded by the parts of a request that
// decide its answer (not whether it streams).
func seeded(stream uint64, parts ...any) *rand.Rand {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write(encode(p))
	}
	return rand.New(rand.NewPCG(h.Sum64(), stream))
}

// messages serves POST /v1/messages and /v1/messages/count_tokens.
func (s *Server) messages(w http.ResponseWriter, r *http.Request, body []byte) {
	if r.Method != http.MethodPost {
		anthropicError(w, http.StatusMethodNotAllowed, "invalid_request_error", "use POST")
		return
	}
	key := r.Header.Get("x-api-key")
	if key == "" { // the official clients send the key as a Bearer token
		key, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if status, ra, msg := s.key(key); status != 0 {
		typ := "authentication_error"
		if status == http.StatusTooManyRequests {
			typ = "rate_limit_error"
			retryAfterHeader(w, ra)
		}
		anthropicError(w, status, typ, msg)
		return
	}
	if r.Header.Get("anthropic-version") == "" {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
		return
	}
	var req msgRequest
	if err := json.Unmarshal(body, &req); err != nil {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "invalid JSON body: "+err.Error())
		return
	}
	switch {
	case req.Model == "":
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "model: Field required")
		return
	case len(req.Messages) == 0:
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "messages: Field required")
		return
	}
	if strings.HasSuffix(r.URL.Path, "/count_tokens") {
		u := s.inputUsage(&req, false)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(encode(obj{"input_tokens", u.input + u.cacheRead + u.cacheWrite}))
		return
	}
	if req.MaxTokens <= 0 {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "max_tokens: Field required")
		return
	}
	usage := s.inputUsage(&req, true)
	a := s.plan(&req, body)
	id := s.id("msg_")
	w.Header().Set("request-id", s.id("req_"))
	if req.Stream {
		s.streamMessage(w, &req, id, usage, a)
		return
	}
	content := make([]any, len(a.blocks))
	for i, b := range a.blocks {
		switch b.typ {
		case "thinking":
			content[i] = obj{"type", "thinking", "thinking", b.joined(), "signature", b.signature}
		case "tool_use":
			content[i] = obj{"type", "tool_use", "id", b.id, "name", b.name, "input", json.RawMessage(b.joined())}
		default:
			content[i] = obj{"type", "text", "text", b.joined()}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(encode(obj{"id", id, "type", "message", "role", "assistant", "model", req.Model,
		"content", content, "stop_reason", a.stop, "stop_sequence", a.stopSeq, "usage", usage.fields(a.outputTokens())}))
}

// streamMessage writes the answer as the Messages API streams it:
// message_start, a ping after the first block starts, each block's start,
// deltas and stop, message_delta with the stop reason and output tokens,
// message_stop.
func (s *Server) streamMessage(w http.ResponseWriter, req *msgRequest, id string, usage msgUsage, a msgAnswer) {
	ev := s.startSSE(w, "text/event-stream; charset=utf-8")
	ev.event("message_start", obj{"type", "message_start", "message", obj{"id", id, "type", "message", "role", "assistant",
		"model", req.Model, "content", []any{}, "stop_reason", nil, "stop_sequence", nil, "usage", usage.fields(1)}})
	for i, b := range a.blocks {
		var start obj
		var delta func(p string) obj
		switch b.typ {
		case "thinking":
			start = obj{"type", "thinking", "thinking", ""}
			delta = func(p string) obj { return obj{"type", "thinking_delta", "thinking", p} }
		case "tool_use":
			start = obj{"type", "tool_use", "id", b.id, "name", b.name, "input", obj{}}
			delta = func(p string) obj { return obj{"type", "input_json_delta", "partial_json", p} }
		default:
			start = obj{"type", "text", "text", ""}
			delta = func(p string) obj { return obj{"type", "text_delta", "text", p} }
		}
		ev.event("content_block_start", obj{"type", "content_block_start", "index", i, "content_block", start})
		if i == 0 {
			ev.event("ping", obj{"type", "ping"})
		}
		pieces := b.pieces
		if b.typ == "tool_use" {
			pieces = append([]string{""}, pieces...) // as the documentation's example starts
		}
		for j, p := range pieces {
			if a.fail && j == 2 {
				ev.event("error", obj{"type", "error", "error", obj{"type", "overloaded_error", "message", "Overloaded"}})
				return
			}
			ev.event("content_block_delta", obj{"type", "content_block_delta", "index", i, "delta", delta(p)})
		}
		if b.typ == "thinking" {
			ev.event("content_block_delta", obj{"type", "content_block_delta", "index", i, "delta", obj{"type", "signature_delta", "signature", b.signature}})
		}
		ev.event("content_block_stop", obj{"type", "content_block_stop", "index", i})
	}
	ev.event("message_delta", obj{"type", "message_delta", "delta", obj{"stop_reason", a.stop, "stop_sequence", a.stopSeq},
		"usage", obj{"output_tokens", a.outputTokens()}})
	ev.event("message_stop", obj{"type", "message_stop"})
}

// anthropicError writes an error in Anthropic's shape.
func anthropicError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(encode(obj{"type", "error", "error", obj{"type", typ, "message", msg}}))
}
