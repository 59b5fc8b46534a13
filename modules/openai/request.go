// Package openai holds the OpenAI wire shapes the llm_* handlers share: the
// request parsed once per HTTP request, OpenAI-shaped errors, usage, and
// the SSE framing of streamed answers. It is not a Caddy module.
package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Endpoint kinds the gateway serves.
const (
	ChatCompletions = "chat/completions"
	Completions     = "completions"
	Embeddings      = "embeddings"
)

// MaxBodyBytes bounds a request body. Default 32 MiB.
var MaxBodyBytes int64 = 32 << 20

const varKey = "llm.request"

// Request is one API request, parsed once and shared by every llm_*
// handler through the request's context. Handlers that change it call
// the setters, which mark it changed; the router then re-encodes the
// body, and otherwise forwards Raw unchanged.
type Request struct {
	Endpoint string // ChatCompletions, Completions or Embeddings
	Raw      []byte // the body as the client sent it

	Model         string
	Stream        bool
	N             int64
	Temperature   *float64
	IncludeUsage  bool // stream_options.include_usage as the client asked
	MaxTokens     int64
	Messages      json.RawMessage
	Prompt        json.RawMessage
	Input         json.RawMessage
	StreamOptions json.RawMessage

	fields  map[string]json.RawMessage // lazily, when a setter needs it
	changed bool
}

// wire is what Parse decodes; everything else stays in Raw.
type wire struct {
	Model               *string         `json:"model"`
	N                   *int64          `json:"n"`
	Temperature         *float64        `json:"temperature"`
	Stream              *bool           `json:"stream"`
	StreamOptions       json.RawMessage `json:"stream_options"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	Messages            json.RawMessage `json:"messages"`
	Prompt              json.RawMessage `json:"prompt"`
	Input               json.RawMessage `json:"input"`
}

// Parse decodes and validates body for an endpoint.
func Parse(endpoint string, body []byte) (*Request, error) {
	var w wire
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, BadRequest("invalid_json", "the request body is not valid JSON: %v", err)
	}
	r := &Request{Endpoint: endpoint, Raw: body, Messages: w.Messages, Prompt: w.Prompt,
		Input: w.Input, StreamOptions: w.StreamOptions}
	if w.Model == nil || *w.Model == "" {
		return nil, BadRequest("missing_model", "you must provide a model parameter")
	}
	r.Model = *w.Model
	r.Temperature = w.Temperature
	if w.N != nil {
		r.N = *w.N
	}
	if w.Stream != nil {
		r.Stream = *w.Stream
	}
	if len(w.StreamOptions) > 0 && !isNull(w.StreamOptions) {
		var so struct {
			IncludeUsage bool `json:"include_usage"`
		}
		if err := json.Unmarshal(w.StreamOptions, &so); err != nil {
			return nil, BadRequest("invalid_value", "stream_options must be an object: %v", err)
		}
		r.IncludeUsage = so.IncludeUsage
	}
	if w.MaxCompletionTokens != nil {
		r.MaxTokens = *w.MaxCompletionTokens
	} else if w.MaxTokens != nil {
		r.MaxTokens = *w.MaxTokens
	}
	return r, r.validate()
}

func (r *Request) validate() error {
	switch r.Endpoint {
	case ChatCompletions:
		if len(r.Messages) == 0 || isNull(r.Messages) {
			return BadRequest("missing_messages", "you must provide a messages parameter (a non-empty array)")
		}
		if r.Messages[0] != '[' || bytes.Equal(bytes.TrimSpace(r.Messages[1:]), []byte("]")) {
			return BadRequest("invalid_messages", "messages must be a non-empty array of message objects")
		}
	case Completions:
		if len(r.Prompt) == 0 || isNull(r.Prompt) {
			return BadRequest("missing_prompt", "you must provide a prompt parameter")
		}
	case Embeddings:
		if len(r.Input) == 0 || isNull(r.Input) {
			return BadRequest("missing_input", "you must provide an input parameter (a string or an array)")
		}
		if r.Stream {
			return BadRequest("invalid_value", "embeddings cannot be streamed; remove stream")
		}
	}
	if r.MaxTokens < 0 {
		return BadRequest("invalid_value", "max_tokens must not be negative")
	}
	return nil
}

func isNull(b json.RawMessage) bool { return string(b) == "null" }

// Load returns the request parsed from r's body, parsing it on first use
// and keeping it on the request for the handlers after. endpoint is the
// path after /v1/.
func Load(r *http.Request, endpoint string) (*Request, error) {
	if v, ok := caddyhttp.GetVar(r.Context(), varKey).(loaded); ok {
		return v.req, v.err
	}
	req, err := load(r, endpoint)
	caddyhttp.SetVar(r.Context(), varKey, loaded{req, err})
	return req, err
}

// loaded is the outcome of the one parse, kept so that every handler sees
// the same request, or the same error.
type loaded struct {
	req *Request
	err error
}

func load(r *http.Request, endpoint string) (*Request, error) {
	if r.Body == nil {
		return nil, BadRequest("missing_body", "the request has no body; send a JSON object")
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, &Error{Status: 499, Type: "invalid_request_error", Code: "client_closed",
			Message: fmt.Sprintf("reading the request body: %v", err)}
	}
	if int64(len(body)) > MaxBodyBytes {
		return nil, &Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error",
			Code: "body_too_large", Message: fmt.Sprintf("the request body is larger than %d bytes", MaxBodyBytes)}
	}
	return Parse(endpoint, body)
}

// Changed reports whether a handler changed the request.
func (r *Request) Changed() bool { return r.changed }

// Set replaces one top-level field with a JSON value, marking the request
// changed.
func (r *Request) Set(field string, value json.RawMessage) error {
	if r.fields == nil {
		r.fields = make(map[string]json.RawMessage)
		if err := json.Unmarshal(r.Raw, &r.fields); err != nil {
			return err
		}
	}
	r.fields[field] = value
	r.changed = true
	return nil
}

// UpstreamBody returns the body for one upstream: the model name replaced
// when the upstream names it differently, and include_usage asked for on
// streams so that usage can be counted. It never changes r.
func (r *Request) UpstreamBody(model string) ([]byte, error) {
	needUsage := r.Stream && !r.IncludeUsage
	if !r.changed && model == "" && !needUsage {
		return r.Raw, nil
	}
	if !r.changed && model == "" && needUsage && len(r.StreamOptions) == 0 {
		// Common case, no re-encode: splice the option in after '{'.
		i := bytes.IndexByte(r.Raw, '{')
		if i < 0 {
			return nil, errors.New("request body is not an object")
		}
		out := make([]byte, 0, len(r.Raw)+48)
		out = append(out, r.Raw[:i+1]...)
		out = append(out, `"stream_options":{"include_usage":true}`...)
		if rest := bytes.TrimSpace(r.Raw[i+1:]); len(rest) > 0 && rest[0] != '}' {
			out = append(out, ',')
		}
		return append(out, r.Raw[i+1:]...), nil
	}
	fields := make(map[string]json.RawMessage)
	if r.fields != nil {
		for k, v := range r.fields {
			fields[k] = v
		}
	} else if err := json.Unmarshal(r.Raw, &fields); err != nil {
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

// PromptTokensEstimate guesses the prompt's size in tokens from its bytes
// (about four per token), for reservations before the real count is known.
func (r *Request) PromptTokensEstimate() int64 {
	n := len(r.Messages) + len(r.Prompt) + len(r.Input)
	return int64(n/4 + 1)
}
