package messagesapi

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/llmgw/llmgw/modules/openai"
)

// A Messages request (Anthropic's POST /v1/messages) enters as a chat
// completions request: parseMessages checks it as Anthropic documents it
// and writes the chat body the handlers and the engine see.
//
// What maps, and how:
//   - system (a string or text blocks) becomes one system message, text
//     blocks joined by "\n"; cache_control is ignored, chat engines have
//     no prompt caching to steer.
//   - text blocks become text parts (a lone text block, a string); image
//     blocks become image_url parts (base64 sources as data: URLs);
//     plain-text document blocks (source type "text") become text parts,
//     other documents (PDF, URL, file) are refused with a 400.
//   - tool_use blocks become the assistant's tool_calls, with the input
//     JSON as the arguments string byte for byte (not re-encoded) and the
//     block's id as the call id; tool_result blocks become one tool
//     message each, ahead of the rest of the user's turn; an error result
//     is sent as "Error: " followed by its text.
//   - thinking and redacted_thinking blocks of earlier turns are dropped:
//     chat engines take no reasoning back.
//   - tools become function tools, tool_choice auto, any, tool and none
//     become auto, required, the named function and none, and
//     disable_parallel_tool_use sets parallel_tool_calls false.
//   - output_config.format (and the older output_format), a JSON schema
//     the answer must fit, becomes response_format json_schema (named
//     "output"): the answer's text is then JSON of that schema. It is not
//     marked strict: engines that constrain decoding (vLLM, llama.cpp)
//     do so either way, and OpenAI's strict mode refuses schemas that
//     Anthropic accepts (optional properties).
//   - stop_sequences become stop (at most MaxStop), metadata.user_id
//     becomes user, top_k passes as top_k, and thinking with a budget
//     becomes reasoning_effort (below 4096 tokens low, below 16384
//     medium, else high).
//
// Members the chat form has no place for (service_tier, container,
// mcp_servers, context_management and others) are ignored.

// Image types Anthropic accepts in a base64 source.
var messagesImageTypes = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}

// messagesReq holds the members of a Messages request, as slices of its
// body.
type messagesReq struct {
	model, messages, system, stop, temperature, topP, topK []byte
	user, tools, toolChoice, thinking                      []byte
	format                                                 []byte // response_format, from output_config.format or output_format
	maxTokens                                              int64
	stream                                                 bool
}

func parseMessages(_ *http.Request, body []byte, countOnly bool) (*openai.Request, error) {
	if err := openai.CheckJSON(body); err != nil {
		return nil, err
	}
	if b := body[openai.SkipSpace(body, 0)]; b != '{' {
		return nil, openai.BadRequest("invalid_json", "the request body must be a JSON object")
	}
	var m messagesReq
	if err := openai.EachMember(body, m.read); err != nil {
		return nil, err
	}
	if err := m.check(countOnly); err != nil {
		return nil, err
	}
	chat, err := m.chatBody(countOnly)
	if err != nil {
		return nil, err
	}
	req, err := openai.ParseValid(openai.ChatCompletions, chat)
	if err != nil {
		return nil, err
	}
	req.API, req.Original, req.CountOnly = openai.APIMessages, body, countOnly
	req.Translation = &messagesTurn{model: req.Model, stream: m.stream && !countOnly, countOnly: countOnly, stops: stopList(m.stop)}
	return req, nil
}

func (m *messagesReq) read(key, v []byte) error {
	name := string(key)
	if openai.KindOf(v) == openai.KindNull {
		return nil
	}
	switch name {
	case "model":
		if openai.KindOf(v) != openai.KindString {
			return openai.TypeError(name, "a string (a model's name, as GET /v1/models lists them)")
		}
		m.model = v
	case "max_tokens":
		n, err := openai.ReadInt(name, v, 1, math.MaxInt64)
		m.maxTokens = n
		return err
	case "messages":
		if openai.KindOf(v) != openai.KindArray {
			return openai.TypeError(name, "an array of messages")
		}
		m.messages = v
	case "system":
		if k := openai.KindOf(v); k != openai.KindString && k != openai.KindArray {
			return openai.TypeError(name, "a string or an array of text blocks")
		}
		m.system = v
	case "stop_sequences":
		m.stop = v
		return checkStops(name, v)
	case "stream":
		if openai.KindOf(v) != openai.KindBool {
			return openai.TypeError(name, "a boolean")
		}
		m.stream = v[0] == 't'
	case "temperature", "top_p":
		if f, err := strconv.ParseFloat(string(v), 64); openai.KindOf(v) != openai.KindNumber || err != nil || f < 0 || f > 1 {
			return openai.RangeError(name, "a number from 0 to 1")
		}
		if name == "temperature" {
			m.temperature = v
		} else {
			m.topP = v
		}
	case "top_k":
		_, err := openai.ReadInt(name, v, 0, math.MaxInt32)
		m.topK = v
		return err
	case "metadata":
		return m.metadata(name, v)
	case "tools":
		if openai.KindOf(v) != openai.KindArray {
			return openai.TypeError(name, "an array of tools")
		}
		m.tools = v
	case "tool_choice":
		if openai.KindOf(v) != openai.KindObject {
			return openai.TypeError(name, `an object such as {"type":"auto"}`)
		}
		m.toolChoice = v
	case "thinking":
		if openai.KindOf(v) != openai.KindObject {
			return openai.TypeError(name, `an object such as {"type":"enabled","budget_tokens":2048}`)
		}
		m.thinking = v
	case "output_config":
		return m.outputConfig(name, v)
	case "output_format":
		if len(m.format) > 0 { // output_config.format came first, and wins
			return nil
		}
		f, err := responseFormat(name, v)
		m.format = f
		return err
	}
	return nil
}

// outputConfig reads output_config: its format becomes the chat form's
// response_format, and wins over output_format. Its effort has no chat
// form and is ignored.
func (m *messagesReq) outputConfig(name string, v []byte) error {
	if openai.KindOf(v) != openai.KindObject {
		return openai.TypeError(name, `an object such as {"format":{"type":"json_schema","schema":{…}}}`)
	}
	f := openai.MemberOf(v, "format")
	if openai.KindOf(f) == openai.KindNull {
		return nil
	}
	rf, err := responseFormat(name+".format", f)
	m.format = rf
	return err
}

// responseFormat translates a Messages output format,
// {"type":"json_schema","schema":{…}}, to chat's response_format.
func responseFormat(at string, v []byte) ([]byte, error) {
	const want = `an object such as {"type":"json_schema","schema":{…}}`
	if openai.KindOf(v) != openai.KindObject {
		return nil, openai.TypeError(at, want)
	}
	typ, schema := openai.MemberOf(v, "type"), openai.MemberOf(v, "schema")
	switch {
	case openai.KindOf(typ) != openai.KindString || string(typ) != `"json_schema"`:
		return nil, openai.RangeError(at+".type", `"json_schema" (the only output format Messages has)`)
	case openai.KindOf(schema) == openai.KindNull:
		return nil, missing(at+".schema", at+".schema is missing; give the JSON schema the answer must fit")
	case openai.KindOf(schema) != openai.KindObject:
		return nil, openai.TypeError(at+".schema", "a JSON schema object")
	}
	out := make([]byte, 0, len(schema)+80)
	out = append(out, `{"type":"json_schema","json_schema":{"name":"output","schema":`...)
	out = append(out, schema...)
	return append(out, "}}"...), nil
}

func (m *messagesReq) metadata(name string, v []byte) error {
	if openai.KindOf(v) != openai.KindObject {
		return openai.TypeError(name, "an object")
	}
	return openai.EachMember(v, func(k, u []byte) error {
		if string(k) != "user_id" || openai.KindOf(u) == openai.KindNull {
			return nil
		}
		if openai.KindOf(u) != openai.KindString {
			return openai.TypeError(name+".user_id", "a string")
		}
		m.user = u
		return nil
	})
}

// checkStops checks stop_sequences: an array of at most MaxStop strings,
// the chat engines' limit.
func checkStops(name string, v []byte) error {
	if openai.KindOf(v) != openai.KindArray {
		return openai.TypeError(name, "an array of strings")
	}
	n := 0
	err := openai.EachElement(v, func(i int, s []byte) error {
		n++
		if openai.KindOf(s) != openai.KindString {
			return openai.TypeError(fmt.Sprintf("%s[%d]", name, i), "a string")
		}
		return nil
	})
	if err == nil && n > openai.MaxStop {
		return openai.RangeError(name, fmt.Sprintf("an array of at most %d strings (it has %d): this model is served through chat completions, which stop on at most %d sequences", openai.MaxStop, n, openai.MaxStop))
	}
	return err
}

func stopList(v []byte) []string {
	var out []string
	if len(v) > 0 {
		_ = json.Unmarshal(v, &out)
	}
	return out
}

func (m *messagesReq) check(countOnly bool) error {
	switch {
	case len(m.model) == 0 || string(m.model) == `""`:
		return missing("model", "model is missing; name a model as GET /v1/models lists it")
	case m.maxTokens == 0 && !countOnly:
		return missing("max_tokens", "max_tokens is missing; set the most tokens the answer may have")
	case len(m.messages) == 0:
		return missing("messages", "messages is missing; send at least one message")
	case openai.CountElements(m.messages) == 0:
		return openai.RangeError("messages", "a non-empty array of messages")
	}
	return nil
}

func missing(param, msg string) *openai.Error {
	return &openai.Error{Status: 400, Type: "invalid_request_error", Code: "missing_required_parameter", Param: param, Message: msg}
}

func unsupported(param, msg string) *openai.Error {
	return &openai.Error{Status: 400, Type: "invalid_request_error", Code: "unsupported_content", Param: param, Message: param + ": " + msg}
}

// chatBody writes the chat completions request.
func (m *messagesReq) chatBody(countOnly bool) ([]byte, error) {
	out := make([]byte, 0, len(m.messages)+len(m.system)+len(m.tools)+256)
	out = append(out, `{"model":`...)
	out = append(out, m.model...)
	out = append(out, `,"messages":[`...)
	n := len(out)
	out, err := m.systemMessage(out)
	if err != nil {
		return nil, err
	}
	if out, err = writeMessages(out, m.messages, len(out) == n); err != nil {
		return nil, err
	}
	out = append(out, ']')
	switch {
	case countOnly:
		out = append(out, `,"max_tokens":1,"stream":false`...)
	default:
		out = append(out, `,"max_tokens":`...)
		out = strconv.AppendInt(out, m.maxTokens, 10)
		if m.stream {
			out = append(out, `,"stream":true,"stream_options":{"include_usage":true}`...)
		}
	}
	out = member(out, "temperature", m.temperature)
	out = member(out, "top_p", m.topP)
	out = member(out, "top_k", m.topK)
	out = member(out, "stop", m.stop)
	out = member(out, "user", m.user)
	out = member(out, "response_format", m.format)
	if out, err = m.writeTools(out); err != nil {
		return nil, err
	}
	if out, err = m.writeThinking(out); err != nil {
		return nil, err
	}
	return append(out, '}'), nil
}

// member appends ,"name":v when v is set.
func member(out []byte, name string, v []byte) []byte {
	if len(v) == 0 {
		return out
	}
	out = append(out, ',', '"')
	out = append(out, name...)
	out = append(out, '"', ':')
	return append(out, v...)
}

func (m *messagesReq) systemMessage(out []byte) ([]byte, error) {
	if len(m.system) == 0 {
		return out, nil
	}
	out = append(out, `{"role":"system","content":`...)
	if openai.KindOf(m.system) == openai.KindString {
		out = append(out, m.system...)
		return append(out, '}'), nil
	}
	var text []byte
	n := 0
	err := openai.EachElement(m.system, func(i int, b []byte) error {
		t, err := textBlock(fmt.Sprintf("system[%d]", i), b)
		if n > 0 {
			text = append(text, '\n')
		}
		text, n = append(text, t...), n+1
		return err
	})
	if err != nil {
		return nil, err
	}
	out = openai.AppendJSONString(out, text)
	return append(out, '}'), nil
}

// textBlock returns the text of a {"type":"text","text":…} block.
func textBlock(at string, b []byte) ([]byte, error) {
	typ, err := blockType(at, b)
	if err != nil {
		return nil, err
	}
	if typ != "text" {
		return nil, openai.RangeError(at+".type", `"text"`)
	}
	raw, err := stringMember(at, b, "text")
	if err != nil {
		return nil, err
	}
	return openai.Unquote(raw), nil
}

// blockType checks that b is an object with a string type, and returns it.
func blockType(at string, b []byte) (string, error) {
	if openai.KindOf(b) != openai.KindObject {
		return "", openai.TypeError(at, `an object such as {"type":"text","text":"…"}`)
	}
	var typ []byte
	_ = openai.EachMember(b, func(k, v []byte) error {
		if string(k) == "type" {
			typ = v
		}
		return nil
	})
	if len(typ) == 0 {
		return "", missing(at+".type", at+".type is missing; every content block needs a type such as \"text\"")
	}
	if openai.KindOf(typ) != openai.KindString {
		return "", openai.TypeError(at+".type", "a string such as \"text\"")
	}
	return string(openai.Unquote(typ)), nil
}

// stringMember returns the raw JSON string of obj's member key, which
// must be present and a string.
func stringMember(at string, obj []byte, key string) ([]byte, error) {
	v := openai.MemberOf(obj, key)
	if len(v) == 0 || openai.KindOf(v) == openai.KindNull {
		return nil, missing(at+"."+key, at+"."+key+" is missing")
	}
	if openai.KindOf(v) != openai.KindString {
		return nil, openai.TypeError(at+"."+key, "a string")
	}
	return v, nil
}
