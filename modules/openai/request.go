package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// Endpoint kinds the gateway serves.
const (
	ChatCompletions = "chat/completions"
	Completions     = "completions"
	Embeddings      = "embeddings"
)

// MaxBodyBytes bounds a request body: a larger one is answered 413
// (body_too_large) without being read when its Content-Length says so.
// Default 32 MiB. Caddy's request_body directive (max_size) sets a lower
// bound for a site or route, answered the same way.
var MaxBodyBytes int64 = 32 << 20

const varKey = "llm.request"

// Request is one API request, parsed once and shared by every llm_*
// handler through the request's context. Handlers that change it call
// Set, which splices the new value into the body; the router forwards
// that body, or Raw when nothing changed.
//
// Messages, Prompt, Input and StreamOptions are slices of Raw, not
// copies: read them, never write to them.
type Request struct {
	Endpoint string // ChatCompletions, Completions or Embeddings (translated APIs: ChatCompletions)
	Raw      []byte // the body as the client sent it

	Model        string
	Stream       bool
	N            int64 // 0 when absent (one choice)
	Temperature  *float64
	IncludeUsage bool  // stream_options.include_usage as the client asked
	MaxTokens    int64 // max_completion_tokens, else max_tokens; 0 when absent
	// MaxTokensParam names the member MaxTokens came from.
	MaxTokensParam string
	Messages       json.RawMessage
	Prompt         json.RawMessage
	Input          json.RawMessage
	StreamOptions  json.RawMessage
	Tools          json.RawMessage // chat: the tools array, as sent
	// CacheKey is prompt_cache_key, else user, as sent (a JSON string):
	// what keeps a conversation on one replica.
	CacheKey     json.RawMessage
	MessageCount int // items of messages
	ToolCount    int // items of tools
	InputCount   int // prompts of prompt, or inputs of input

	// API is the API the client speaks (APIChat, APIResponses,
	// APIMessages). For another than chat, Raw is the request translated to
	// chat completions, Original the client's body (with the gateway's
	// output cap when CapOutput added one), and Translation writes the
	// answer back in the client's API (see Enter).
	API         string
	Original    []byte
	Translation Translation
	// CountOnly is set for a Messages count_tokens request: the router
	// answers with the prompt's token count, generating nothing.
	CountOnly bool
	// Watched is set by a handler that reads the answer on its way out
	// (output guardrails, a cache storing it): the answer must then be in
	// chat completions' form, never the engine's own in another API.
	Watched bool
	// Native is set by the router when it forwards a replica's answer in
	// the client's API unchanged (the engine speaks it, nothing watches).
	Native bool

	// FileSearch is a Responses request's file_search tool, nil when it
	// has none; Retrieval what the knowledge base found for it (or for a
	// chat request's knowledge bases), set before the model is asked.
	FileSearch *FileSearch
	Retrieval  *Retrieval
	// CacheScope is what an answer depends on beside the client's body,
	// set by a handler that adds to the prompt (the knowledge bases
	// searched and their versions): a cache keys on it too.
	CacheScope string

	body   []byte // the body as Set or CapOutput changed it; nil while unchanged
	edited bool   // Set changed the body
}

// Parse reads and checks body for an endpoint: one pass checks that it is
// JSON with UTF-8 strings (CheckJSON, as fast as json.Valid), and one over
// its members checks that the members it knows have their types and
// bounds (see fields.go); others pass through unchecked. Errors name the member's path in param,
// such as messages[0].content.
func Parse(endpoint string, body []byte) (*Request, error) {
	if err := CheckJSON(body); err != nil {
		return nil, err
	}
	if b := body[SkipSpace(body, 0)]; b != '{' {
		return nil, BadRequest("invalid_json", "the request body must be a JSON object")
	}
	return ParseValid(endpoint, body)
}

// ParseValid is Parse of a body known to be a valid JSON object: a
// translation's chat request, built from pieces of a checked body.
func ParseValid(endpoint string, body []byte) (*Request, error) {
	p := &parser{r: &Request{Endpoint: endpoint, Raw: body}}
	known := fields[endpoint]
	err := EachMember(body, func(key, v []byte) error {
		f, ok := known[string(key)]
		switch {
		case !ok:
			return nil
		case KindOf(v) == KindNull:
			if f.unset != nil {
				f.unset(p)
			}
			return nil
		}
		return f.read(p, string(key), v)
	})
	if err != nil {
		return nil, err
	}
	r := p.r
	if r.Model == "" {
		return nil, &Error{Status: 400, Type: "invalid_request_error", Code: "missing_model", Param: "model",
			Message: "you must provide a model parameter"}
	}
	if p.hasMaxComplete {
		r.MaxTokens, r.MaxTokensParam = p.maxCompletion, "max_completion_tokens"
	} else if p.hasMaxTok {
		r.MaxTokens, r.MaxTokensParam = p.maxTokens, "max_tokens"
	}
	return r, r.validate()
}

func (r *Request) validate() error {
	switch r.Endpoint {
	case ChatCompletions:
		if len(r.Messages) == 0 {
			return &Error{Status: 400, Type: "invalid_request_error", Code: "missing_messages", Param: "messages",
				Message: "you must provide a messages parameter (a non-empty array)"}
		}
		if r.MessageCount == 0 {
			return &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_messages", Param: "messages",
				Message: "messages must be a non-empty array of message objects"}
		}
	case Completions:
		if len(r.Prompt) == 0 {
			return &Error{Status: 400, Type: "invalid_request_error", Code: "missing_prompt", Param: "prompt",
				Message: "you must provide a prompt parameter"}
		}
		if r.InputCount == 0 {
			return &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_value", Param: "prompt",
				Message: "prompt must not be an empty array"}
		}
	case Embeddings:
		if len(r.Input) == 0 {
			return &Error{Status: 400, Type: "invalid_request_error", Code: "missing_input", Param: "input",
				Message: "you must provide an input parameter (a string or an array)"}
		}
		if r.InputCount == 0 {
			return &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_value", Param: "input",
				Message: "input must not be an empty array"}
		}
		if r.Stream {
			return &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_value", Param: "stream",
				Message: "embeddings cannot be streamed; remove stream"}
		}
	}
	return nil
}

func isNull(b json.RawMessage) bool { return string(b) == "null" }

// loaded is the outcome of the one parse, kept so that every handler sees
// the same request, or the same error.
type loaded struct {
	req *Request
	err error
}

// Changed reports whether a handler changed the request with Set. An
// output cap (CapOutput) is no change: the client's own bytes carry it
// too.
func (r *Request) Changed() bool { return r.edited }

// Set replaces one top-level field with a JSON value (or adds it),
// splicing the bytes: the rest of the body is not re-encoded.
func (r *Request) Set(field string, value json.RawMessage) error {
	b, err := SetMember(r.base(), field, value)
	if err != nil {
		return err
	}
	r.body, r.edited = b, true
	return nil
}

// CapOutput gives a request that asks for no answer length (MaxTokens
// 0) the length n: max_tokens n is added to the body and, for a Responses
// request, max_output_tokens n to the client's own bytes (Original), so
// that an engine speaking that API gets it too.
func (r *Request) CapOutput(n int64) error {
	var buf [20]byte
	v := strconv.AppendInt(buf[:0], n, 10)
	b, err := SetMember(r.base(), "max_tokens", v)
	if err != nil {
		return err
	}
	if r.API == APIResponses && r.Original != nil {
		o, err := SetMember(r.Original, "max_output_tokens", v)
		if err != nil {
			return err
		}
		r.Original = o
	}
	r.body, r.MaxTokens, r.MaxTokensParam = b, n, "max_tokens"
	return nil
}

// SetMember returns the JSON object obj with its top-level member key set
// to the JSON value value (added when absent), splicing the bytes: the
// rest of obj is not re-encoded. obj itself is not changed.
func SetMember(obj []byte, key string, value []byte) ([]byte, error) {
	start, end, err := memberSpan(obj, key)
	if err != nil {
		return nil, err
	}
	if start < 0 { // absent: add it after '{'
		i := bytes.IndexByte(obj, '{')
		k, _ := json.Marshal(key)
		out := make([]byte, 0, len(obj)+len(k)+len(value)+2)
		out = append(out, obj[:i+1]...)
		out = append(out, k...)
		out = append(out, ':')
		out = append(out, value...)
		if rest := bytes.TrimSpace(obj[i+1:]); len(rest) > 0 && rest[0] != '}' {
			out = append(out, ',')
		}
		return append(out, obj[i+1:]...), nil
	}
	out := make([]byte, 0, len(obj)-(end-start)+len(value))
	out = append(out, obj[:start]...)
	out = append(out, value...)
	return append(out, obj[end:]...), nil
}

func (r *Request) base() []byte {
	if r.body != nil {
		return r.body
	}
	return r.Raw
}

// UpstreamBody returns the body for one upstream: the model name replaced
// when the upstream names it differently, and include_usage asked for on
// streams so that usage can be counted. It never changes r.
func (r *Request) UpstreamBody(model string) ([]byte, error) {
	base := r.base()
	needUsage := r.Stream && !r.IncludeUsage
	if model == "" && !needUsage {
		return base, nil
	}
	if model == "" && needUsage && len(r.StreamOptions) == 0 {
		// Common case, no re-encode: splice the option in after '{'.
		i := bytes.IndexByte(base, '{')
		if i < 0 {
			return nil, errors.New("request body is not an object")
		}
		out := make([]byte, 0, len(base)+48)
		out = append(out, base[:i+1]...)
		out = append(out, `"stream_options":{"include_usage":true}`...)
		if rest := bytes.TrimSpace(base[i+1:]); len(rest) > 0 && rest[0] != '}' {
			out = append(out, ',')
		}
		return append(out, base[i+1:]...), nil
	}
	fields := make(map[string]json.RawMessage)
	if err := json.Unmarshal(base, &fields); err != nil {
		return nil, err
	}
	if model != "" {
		b, _ := json.Marshal(model)
		fields["model"] = b
	}
	if needUsage {
		so := map[string]json.RawMessage{}
		if v, ok := fields["stream_options"]; ok && !isNull(v) {
			_ = json.Unmarshal(v, &so)
		}
		so["include_usage"] = json.RawMessage("true")
		fields["stream_options"], _ = json.Marshal(so)
	}
	return json.Marshal(fields)
}

var errNotObject = errors.New("request body is not a JSON object")

// memberSpan finds a top-level member's value in a JSON object: its
// bytes [start, end), or start -1 when the object has no such member.
func memberSpan(b []byte, key string) (int, int, error) {
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return 0, 0, errNotObject
	}
	i = SkipSpace(b, i+1)
	for i < len(b) && b[i] != '}' {
		if b[i] != '"' {
			return 0, 0, errNotObject
		}
		kend := SkipValue(b, i)
		if kend < 0 {
			return 0, 0, errNotObject
		}
		var k string
		if err := json.Unmarshal(b[i:kend], &k); err != nil {
			return 0, 0, errNotObject
		}
		i = SkipSpace(b, kend)
		if i >= len(b) || b[i] != ':' {
			return 0, 0, errNotObject
		}
		i = SkipSpace(b, i+1)
		vend := SkipValue(b, i)
		if vend < 0 {
			return 0, 0, errNotObject
		}
		if k == key {
			return i, vend, nil
		}
		i = SkipSpace(b, vend)
		if i < len(b) && b[i] == ',' {
			i = SkipSpace(b, i+1)
		}
	}
	return -1, -1, nil
}

func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// SkipValue returns the end of the JSON value at b[i], or -1.
func SkipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		// The closing quote is the first one not escaped: preceded by an
		// even number of backslashes. IndexByte finds candidates fast.
		for j := i + 1; ; j++ {
			k := bytes.IndexByte(b[j:], '"')
			if k < 0 {
				return -1
			}
			j += k
			n := 0
			for p := j - 1; p > i && b[p] == '\\'; p-- {
				n++
			}
			if n%2 == 0 {
				return j + 1
			}
		}
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			case '"':
				e := SkipValue(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			}
		}
		return -1
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\r' && b[j] != '\t' {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// PromptTokensEstimate guesses the prompt's size in tokens from its bytes
// (about four per token), for reservations before the real count is known.
func (r *Request) PromptTokensEstimate() int64 {
	n := len(r.Messages) + len(r.Prompt) + len(r.Input)
	return int64(n/4 + 1)
}
