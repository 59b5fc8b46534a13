package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Usage is token accounting for one answer.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
	// Estimated is set when the upstream reported no usage (a stream cut
	// short) and the router counted what it forwarded instead.
	Estimated bool `json:"-"`
	// Cached is set when llm_cache answered: no model did the work.
	Cached bool `json:"-"`
	// CachedTokens are the prompt's tokens the engine had cached
	// (prompt_tokens_details.cached_tokens).
	CachedTokens int64 `json:"-"`
}

const usageVar = "llm.usage"

// SetUsage records the answer's usage on the request, for the handlers
// that settle after the router (the router sets it).
func SetUsage(r *http.Request, u Usage) { caddyhttp.SetVar(r.Context(), usageVar, u) }

// GetUsage returns the usage the router recorded, if any.
func GetUsage(r *http.Request) (Usage, bool) {
	u, ok := caddyhttp.GetVar(r.Context(), usageVar).(Usage)
	return u, ok
}

var usageKey = []byte(`"usage"`)

// FindUsage extracts the usage object from a response body or a stream
// chunk without decoding the rest. It returns false when there is none
// (or it is null).
func FindUsage(b []byte) (Usage, bool) {
	i := bytes.LastIndex(b, usageKey)
	if i < 0 {
		return Usage{}, false
	}
	rest := bytes.TrimLeft(b[i+len(usageKey):], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return Usage{}, false
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	if len(rest) == 0 || rest[0] != '{' {
		return Usage{}, false
	}
	end := objectEnd(rest)
	if end < 0 {
		return Usage{}, false
	}
	var w struct {
		Usage
		Details struct {
			Cached int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	}
	if err := json.Unmarshal(rest[:end], &w); err != nil {
		return Usage{}, false
	}
	u := w.Usage
	u.CachedTokens = w.Details.Cached
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return u, true
}

// IsUsageOnlyChunk reports whether a stream chunk carries usage and no
// choices: the chunk sent because stream_options.include_usage was set.
func IsUsageOnlyChunk(data []byte) bool {
	return bytes.Contains(data, []byte(`"choices":[]`)) || bytes.Contains(data, []byte(`"choices": []`))
}

// objectEnd returns the length of the JSON object at the start of b
// (through its closing brace), or -1 if it does not close.
func objectEnd(b []byte) int {
	depth, inString, escaped := 0, false, false
	for i, c := range b {
		switch {
		case escaped:
			escaped = false
		case inString:
			switch c {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

// ChatAnswer is what a caller wanting a short answer reads of a chat
// completion (a guard model's verdict, for instance).
type ChatAnswer struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
}

// Content is the first choice's text.
func (a *ChatAnswer) Content() (string, error) {
	if len(a.Choices) == 0 {
		return "", errors.New("the answer has no choices")
	}
	return a.Choices[0].Message.Content, nil
}
