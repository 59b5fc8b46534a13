package responsesapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/llmgw/llmgw/modules/openai"
)

// The OpenAI Responses API (POST /v1/responses), translated to chat
// completions when it enters and back when the answer leaves.
//
// What translates: input as a string or items (messages of the roles
// user, assistant, system and developer with input_text, input_image and
// output_text parts; function_call and function_call_output items),
// instructions, function tools, tool_choice, parallel_tool_calls,
// text.format (text, json_object, json_schema), max_output_tokens,
// temperature, top_p, user, reasoning.effort, stream, store and
// previous_response_id. metadata and truncation are echoed in the answer.
// The file_search tool is the gateway's own (filesearch.go): it sets
// Request.FileSearch and never reaches the model. Reasoning and
// file_search_call items of the input are dropped: chat engines take no
// reasoning back (some refuse it), and an earlier search's passages
// belonged to that turn. Other tool types (web_search, custom, …),
// input_file parts, images by file_id, item_reference items, background
// mode, conversation and prompt templates are refused with a 400 that
// names them. Other members (service_tier, prompt_cache_key, include
// values other than file_search_call.results, …) are accepted and go
// nowhere.

// respTurn is one Responses request translated to chat completions: what
// its answer needs to be written back in the Responses API and stored. It
// is the request's Translation.
type respTurn struct {
	ctx     context.Context // the request's, for the store
	scope   string
	id      string // resp_…
	created int64  // unix seconds
	stream  bool
	store   bool
	// fileSearch: tools has a file_search tool. truncateAuto: the
	// client sent truncation "auto" (echoed; "disabled" otherwise).
	fileSearch, truncateAuto bool

	// Members echoed in the response object: compact JSON as the client
	// sent them, nil when absent.
	model, instructions, tools, toolChoice, text, metadata []byte
	temperature, topP, maxOutput, previousID, user         []byte
	parallel, effort                                       []byte

	// convo is the conversation in chat form without the instructions:
	// the previous response's, then this turn's input (elements of a
	// JSON array, without brackets). input is the client's input member.
	convo, input []byte

	// req is the request the turn translates: the answer reads the
	// knowledge base's Retrieval there.
	req *openai.Request
}

// respParams is what parseResponses reads before it builds the chat body.
type respParams struct {
	input                     []byte
	chatTools, chatToolChoice []byte
	responseFormat            []byte
	hasStream                 bool

	// The file_search tool (nil when tool_choice is "none"), whether
	// tools has one, include's file_search_call.results, and
	// tool_choice's kind.
	hasFileSearch, includeResults bool
	choice                        choiceKind
	fileSearch                    *openai.FileSearch
}

// choiceKind is what tool_choice asks for.
type choiceKind uint8

const (
	choiceAuto choiceKind = iota // also when absent
	choiceNone
	choiceRequired
	choiceFunction
	choiceFileSearch
)

// parseResponses checks a Responses request and translates it to a chat
// completions request, which the handlers see as usual; the client's body
// stays in Original and the turn in Translation.
func parseResponses(r *http.Request, body []byte) (*openai.Request, error) {
	if err := openai.CheckJSON(body); err != nil {
		return nil, err
	}
	if b := body[openai.SkipSpace(body, 0)]; b != '{' {
		return nil, openai.BadRequest("invalid_json", "the request body must be a JSON object")
	}
	t := &respTurn{ctx: r.Context(), scope: openai.Scope(r), id: newID("resp_"), created: respNow().Unix(), store: true}
	var p respParams
	if err := openai.EachMember(body, func(key, v []byte) error {
		if openai.KindOf(v) == openai.KindNull {
			return nil
		}
		return t.member(&p, string(key), v)
	}); err != nil {
		return nil, err
	}
	if len(t.model) == 0 || string(t.model) == `""` {
		return nil, &openai.Error{Status: 400, Type: "invalid_request_error", Code: "missing_model", Param: "model",
			Message: "you must provide a model parameter"}
	}
	if len(p.input) == 0 && len(t.previousID) == 0 {
		return nil, &openai.Error{Status: 400, Type: "invalid_request_error", Code: "missing_required_parameter", Param: "input",
			Message: "you must provide an input parameter (a string or an array of input items)"}
	}
	if err := p.settleFileSearch(); err != nil {
		return nil, err
	}
	if err := t.conversation(r.Context(), p.input); err != nil {
		return nil, err
	}
	req, err := openai.ParseValid(openai.ChatCompletions, t.chatBody(&p))
	if err != nil {
		return nil, err
	}
	req.API, req.Original, req.Translation = openai.APIResponses, body, t
	if req.MaxTokens > 0 {
		req.MaxTokensParam = "max_output_tokens" // the client's name for it
	}
	req.FileSearch, t.req, t.fileSearch = p.fileSearch, req, p.hasFileSearch
	return req, nil
}

// member reads one top-level member of a Responses request (never null).
func (t *respTurn) member(p *respParams, key string, v []byte) error {
	if f, ok := respFields[key]; ok {
		return f(t, p, key, v)
	}
	return nil // unknown members go nowhere
}

type respField func(t *respTurn, p *respParams, key string, v []byte) error

// respFields are the members of a Responses request that translate.
var respFields = map[string]respField{
	"model":                into(openai.KindString, func(t *respTurn) *[]byte { return &t.model }, "a string (a model's name, as GET /v1/models lists them)"),
	"instructions":         into(openai.KindString, func(t *respTurn) *[]byte { return &t.instructions }, "a string"),
	"user":                 into(openai.KindString, func(t *respTurn) *[]byte { return &t.user }, "a string"),
	"previous_response_id": into(openai.KindString, func(t *respTurn) *[]byte { return &t.previousID }, "a string"),
	"metadata":             into(openai.KindObject, func(t *respTurn) *[]byte { return &t.metadata }, "an object of string values"),
	"input": func(t *respTurn, p *respParams, key string, v []byte) error {
		if k := openai.KindOf(v); k != openai.KindString && k != openai.KindArray {
			return openai.TypeError(key, "a string or an array of input items")
		}
		p.input, t.input = v, openai.Compact(v)
		return nil
	},
	"tools": func(t *respTurn, p *respParams, _ string, v []byte) error {
		out, err := chatTools(p, v)
		p.chatTools, t.tools = out, openai.Compact(v)
		return err
	},
	"tool_choice": func(t *respTurn, p *respParams, _ string, v []byte) error {
		out, kind, err := chatToolChoice(v)
		p.chatToolChoice, p.choice, t.toolChoice = out, kind, openai.Compact(v)
		return err
	},
	"include": func(_ *respTurn, p *respParams, _ string, v []byte) error { return readInclude(p, v) },
	"text": translated(chatResponseFormat, func(t *respTurn, p *respParams) (*[]byte, *[]byte) {
		return &p.responseFormat, &t.text
	}),
	"max_output_tokens": func(t *respTurn, _ *respParams, key string, v []byte) error {
		_, err := openai.ReadInt(key, v, 1, math.MaxInt64)
		t.maxOutput = v
		return err
	},
	"temperature": func(t *respTurn, _ *respParams, key string, v []byte) error {
		t.temperature = v
		return checkFloat(key, v, 0, 2)
	},
	"top_p": func(t *respTurn, _ *respParams, key string, v []byte) error {
		t.topP = v
		return checkFloat(key, v, 0, 1)
	},
	"truncation": func(t *respTurn, _ *respParams, key string, v []byte) error {
		t.truncateAuto = string(v) == `"auto"`
		return openai.CheckEnum(key, v, "auto", "disabled")
	},
	"reasoning":           func(t *respTurn, _ *respParams, _ string, v []byte) error { return t.reasoning(v) },
	"stream":              (*respTurn).flag,
	"store":               (*respTurn).flag,
	"parallel_tool_calls": (*respTurn).flag,
	"background":          (*respTurn).flag,
	"conversation":        refused("conversations are not supported by this gateway; chain responses with previous_response_id instead"),
	"prompt":              refused("prompt templates are not supported by this gateway; send instructions and input instead"),
}

// refused is a member the gateway cannot honour: ignoring it would
// answer something else than the client asked for.
func refused(msg string) respField {
	return func(_ *respTurn, _ *respParams, key string, _ []byte) error {
		return &openai.Error{Status: 400, Type: "invalid_request_error", Code: "unsupported_parameter", Param: key, Message: msg}
	}
}

// into is a member of one JSON type, kept (compact) in a field
// of the turn.
func into(k openai.Kind, field func(*respTurn) *[]byte, want string) respField {
	return func(t *respTurn, _ *respParams, key string, v []byte) error {
		if openai.KindOf(v) != k {
			return openai.TypeError(key, want)
		}
		*field(t) = openai.Compact(v)
		return nil
	}
}

// translated is a member that translates to a chat member: the turn keeps
// the client's value (compact), the chat request gets the translation.
func translated(translate func([]byte) ([]byte, error), fields func(*respTurn, *respParams) (chat, echo *[]byte)) respField {
	return func(t *respTurn, p *respParams, _ string, v []byte) error {
		out, err := translate(v)
		chat, echo := fields(t, p)
		*chat, *echo = out, openai.Compact(v)
		return err
	}
}

func (t *respTurn) flag(p *respParams, key string, v []byte) error {
	if openai.KindOf(v) != openai.KindBool {
		return openai.TypeError(key, "a boolean")
	}
	on := v[0] == 't'
	switch key {
	case "stream":
		t.stream, p.hasStream = on, true
	case "store":
		t.store = on
	case "parallel_tool_calls":
		t.parallel = v
	case "background":
		if on {
			return &openai.Error{Status: 400, Type: "invalid_request_error", Code: "unsupported_parameter", Param: key,
				Message: "background responses are not supported by this gateway; remove background, or stream the answer"}
		}
	}
	return nil
}

func (t *respTurn) reasoning(v []byte) error {
	if openai.KindOf(v) != openai.KindObject {
		return openai.TypeError("reasoning", "an object such as {\"effort\":\"low\"}")
	}
	return openai.EachMember(v, func(key, ev []byte) error {
		if string(key) != "effort" || openai.KindOf(ev) == openai.KindNull {
			return nil
		}
		if openai.KindOf(ev) != openai.KindString {
			return openai.TypeError("reasoning.effort", "a string such as \"low\", \"medium\" or \"high\"")
		}
		t.effort = ev
		return nil
	})
}

func checkFloat(name string, v []byte, lo, hi float64) error {
	if openai.KindOf(v) != openai.KindNumber {
		return openai.TypeError(name, "a number")
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f < lo || f > hi {
		return openai.RangeError(name, fmt.Sprintf("a number from %g to %g", lo, hi))
	}
	return nil
}

// chatTools translates Responses function tools
// ({"type":"function","name",…}) to chat's ({"type":"function",
// "function":{"name",…}}) and reads the file_search tool, which stays
// with the gateway. With a file_search tool and no function tools the
// chat request has no tools (nil).
func chatTools(p *respParams, v []byte) ([]byte, error) {
	if openai.KindOf(v) != openai.KindArray {
		return nil, openai.TypeError("tools", "an array of tool objects")
	}
	out := append(make([]byte, 0, len(v)+64), '[')
	n := 0
	err := openai.EachElement(v, func(i int, tool []byte) error {
		at := fmt.Sprintf("tools[%d]", i)
		if openai.KindOf(tool) != openai.KindObject {
			return openai.TypeError(at, "an object such as {\"type\":\"function\",\"name\":\"…\",\"parameters\":{…}}")
		}
		switch typ := openai.StringValue(openai.MemberOf(tool, "type")); typ {
		case "function":
		case "file_search":
			if p.hasFileSearch {
				return &openai.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_value", Param: at,
					Message: at + " is a second file_search tool; send one, with all its vector_store_ids"}
			}
			fs, err := readFileSearch(at, tool)
			p.fileSearch, p.hasFileSearch = fs, true
			return err
		default:
			return &openai.Error{Status: 400, Type: "invalid_request_error", Code: "unsupported_tool", Param: at + ".type",
				Message: fmt.Sprintf("%s.type %q is not supported by this gateway: only function and file_search tools are; remove the tool or serve it as a function", at, typ)}
		}
		fn, err := functionTool(at, tool)
		if err != nil {
			return err
		}
		if n++; n > 1 {
			out = append(out, ',')
		}
		out = append(out, `{"type":"function","function":`...)
		out = append(append(out, fn...), "}}"...)
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case n > openai.MaxTools:
		return nil, openai.RangeError("tools", fmt.Sprintf("an array of at most %d tools (it has %d)", openai.MaxTools, n))
	case n == 0 && p.hasFileSearch:
		return nil, nil
	}
	return append(out, ']'), nil
}

// functionTool returns a function tool's chat function object, without
// its closing brace.
func functionTool(at string, tool []byte) ([]byte, error) {
	fn := append(make([]byte, 0, len(tool)), '{')
	err := openai.EachMember(tool, func(key, mv []byte) error {
		switch k := string(key); k {
		case "name", "description", "parameters", "strict":
			if k == "name" && openai.KindOf(mv) != openai.KindString {
				return openai.TypeError(at+".name", "a string")
			}
			if openai.KindOf(mv) == openai.KindNull {
				return nil
			}
			fn = appendMember(fn, k, mv)
		}
		return nil
	})
	return fn, err
}

// chatToolChoice translates tool_choice: "auto", "none" and "required"
// as they are, {"type":"function","name":…} to chat's form;
// {"type":"file_search"} is the gateway's (settleFileSearch). It returns
// the choice's kind.
func chatToolChoice(v []byte) (out []byte, kind choiceKind, err error) {
	const want = `"auto", "none", "required", {"type":"function","name":"…"} or {"type":"file_search"}`
	switch openai.KindOf(v) {
	case openai.KindString:
		if err := openai.CheckEnum("tool_choice", v, "auto", "none", "required"); err != nil {
			return nil, 0, err
		}
		switch openai.StringValue(v) {
		case "none":
			kind = choiceNone
		case "required":
			kind = choiceRequired
		}
		return v, kind, nil
	case openai.KindObject:
	default:
		return nil, 0, openai.TypeError("tool_choice", want)
	}
	typ := openai.StringValue(openai.MemberOf(v, "type"))
	if typ == "file_search" {
		return nil, choiceFileSearch, nil
	}
	name := openai.MemberOf(v, "name")
	if typ != "function" || openai.KindOf(name) != openai.KindString {
		return nil, 0, &openai.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_value", Param: "tool_choice",
			Message: "tool_choice must be " + want + "; other tool types are not supported by this gateway"}
	}
	out = append(make([]byte, 0, len(name)+40), `{"type":"function","function":{"name":`...)
	return append(append(out, name...), "}}"...), choiceFunction, nil
}

// chatResponseFormat translates text.format to chat's response_format
// (nil for plain text).
func chatResponseFormat(v []byte) ([]byte, error) {
	if openai.KindOf(v) != openai.KindObject {
		return nil, openai.TypeError("text", "an object such as {\"format\":{\"type\":\"text\"}}")
	}
	var format []byte
	_ = openai.EachMember(v, func(key, mv []byte) error {
		if string(key) == "format" {
			format = mv
		}
		return nil
	})
	if openai.KindOf(format) == openai.KindNull {
		return nil, nil
	}
	if openai.KindOf(format) != openai.KindObject {
		return nil, openai.TypeError("text.format", "an object such as {\"type\":\"json_schema\",\"name\":\"…\",\"schema\":{…}}")
	}
	var typ string
	js := append(make([]byte, 0, len(format)), '{')
	err := openai.EachMember(format, func(key, mv []byte) error {
		switch k := string(key); k {
		case "type":
			typ = openai.StringValue(mv)
		case "name", "schema", "strict", "description":
			if openai.KindOf(mv) != openai.KindNull {
				js = appendMember(js, k, mv)
			}
		}
		return nil
	})
	switch typ {
	case "text":
		return nil, err
	case "json_object":
		return []byte(`{"type":"json_object"}`), err
	case "json_schema":
		out := append(make([]byte, 0, len(js)+40), `{"type":"json_schema","json_schema":`...)
		return append(append(out, js...), "}}"...), err
	}
	return nil, &openai.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_value", Param: "text.format.type",
		Message: "text.format.type must be one of \"text\", \"json_object\" or \"json_schema\""}
}

// conversation builds the chat messages of the turn: the previous
// response's conversation, then the input.
func (t *respTurn) conversation(ctx context.Context, input []byte) error {
	var cb chatMessages
	if len(t.previousID) > 0 {
		prev, err := loadPrevious(ctx, t.scope, openai.StringValue(t.previousID))
		if err != nil {
			return err
		}
		cb.b = append(cb.b, prev...)
	}
	if err := cb.input(input); err != nil {
		return err
	}
	t.convo = cb.done()
	if len(t.convo) == 0 {
		return &openai.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_value", Param: "input",
			Message: "input must not be empty: send a string or at least one message item"}
	}
	return nil
}

// loadPrevious returns the stored conversation of a previous response
// (elements of its messages array).
func loadPrevious(ctx context.Context, scope, id string) ([]byte, error) {
	rec, err := currentStore().Get(ctx, scope, id)
	if errors.Is(err, ErrNotStored) {
		return nil, &openai.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "previous_response_not_found",
			Param: "previous_response_id", Message: fmt.Sprintf("Previous response with id '%s' not found.", id)}
	}
	if err != nil {
		return nil, &openai.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "store_unavailable",
			Param: "previous_response_id", Message: fmt.Sprintf("loading previous response %s: %v; try again", id, err)}
	}
	msgs := recordMember(rec, "messages")
	if openai.KindOf(msgs) != openai.KindArray {
		return nil, &openai.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "previous_response_not_found",
			Param: "previous_response_id", Message: fmt.Sprintf("Previous response with id '%s' not found.", id)}
	}
	return arrayInner(msgs), nil
}

// chatBody writes the chat completions request, in one pass.
func (t *respTurn) chatBody(p *respParams) []byte {
	b := make([]byte, 0, len(t.convo)+len(t.instructions)+len(p.chatTools)+len(p.responseFormat)+256)
	b = append(append(b, `{"model":`...), t.model...)
	b = append(b, `,"messages":[`...)
	if len(t.instructions) > 0 {
		b = append(append(append(b, `{"role":"system","content":`...), t.instructions...), "},"...)
	}
	b = append(append(b, t.convo...), ']')
	for _, m := range [...]struct {
		k string
		v []byte
	}{
		{"tools", p.chatTools}, {"tool_choice", p.chatToolChoice}, {"parallel_tool_calls", t.parallel},
		{"response_format", p.responseFormat}, {"max_tokens", t.maxOutput},
		{"temperature", t.temperature}, {"top_p", t.topP}, {"user", t.user}, {"reasoning_effort", t.effort},
	} {
		if len(m.v) > 0 {
			b = appendMember(b, m.k, m.v)
		}
	}
	if p.hasStream {
		if t.stream {
			b = append(b, `,"stream":true,"stream_options":{"include_usage":true}`...)
		} else {
			b = append(b, `,"stream":false`...)
		}
	}
	return append(b, '}')
}

// PassThrough reports whether the client's own body may go to an engine
// that speaks Responses: not when it continues a response this gateway
// stored (only the translated request carries the conversation), nor
// when it is to be stored (only a translated answer is), so that every
// previous_response_id a client may send is in this gateway's store; nor
// with a file_search tool, which the gateway serves from its own
// knowledge bases.
func (t *respTurn) PassThrough() bool { return !t.store && len(t.previousID) == 0 && !t.fileSearch }

// appendMember appends "key":value to an object being written, with a
// comma unless it is the first member.
func appendMember(b []byte, key string, v []byte) []byte {
	if len(b) > 0 && b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(append(append(b, '"'), key...), `":`...)
	return append(b, v...)
}

// arrayInner returns a JSON array's elements without its brackets.
func arrayInner(arr []byte) []byte {
	arr = bytes.TrimSpace(arr)
	if len(arr) < 2 {
		return nil
	}
	return bytes.TrimSpace(arr[1 : len(arr)-1])
}

// respNow is the clock; tests set it.
var respNow = time.Now
