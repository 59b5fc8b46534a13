package messagesapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/llmgw/llmgw/modules/openai"
)

// msgsAnswer is a whole Messages answer.
type msgsAnswer struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Content []struct {
		Type     string          `json:"type"`
		Text     string          `json:"text"`
		Thinking string          `json:"thinking"`
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Input    json.RawMessage `json:"input"`
	} `json:"content"`
	StopReason string     `json:"stop_reason"`
	Usage      msgsUsageJ `json:"usage"`
}

type msgsUsageJ struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens int64  `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64  `json:"cache_read_input_tokens"`
}

// prompt is the whole prompt's tokens, cached or not, as chat counts them.
func (u *msgsUsageJ) prompt() int64 {
	var n int64
	if u.InputTokens != nil {
		n = *u.InputTokens
	}
	return n + u.CacheCreationInputTokens + u.CacheReadInputTokens
}

func (u *msgsUsageJ) output() int64 {
	if u.OutputTokens == nil {
		return 0
	}
	return *u.OutputTokens
}

// finishReason maps a Messages stop_reason to chat's finish_reason.
func finishReason(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	return "stop"
}

// MessagesToChatBody translates a whole Messages answer into a chat
// completion: text blocks joined as content, thinking as
// reasoning_content, tool_use blocks as tool_calls with the input's bytes
// as the arguments; usage counts cached and cache-writing input tokens in
// prompt_tokens (the cached ones also in prompt_tokens_details). Server
// tool blocks have no chat form and are left out.
func MessagesToChatBody(b []byte) ([]byte, error) {
	var m msgsAnswer
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("reading the Messages answer: %s", openai.DecodeProblem(err))
	}
	var text, thinking strings.Builder
	type call struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	var calls []call
	for _, c := range m.Content {
		switch c.Type {
		case "text":
			text.WriteString(c.Text)
		case "thinking":
			thinking.WriteString(c.Thinking)
		case "tool_use":
			k := call{ID: c.ID, Type: "function"}
			k.Function.Name, k.Function.Arguments = c.Name, string(c.Input)
			calls = append(calls, k)
		}
	}
	msg := map[string]any{"role": "assistant", "content": text.String()}
	if thinking.Len() > 0 {
		msg["reasoning_content"] = thinking.String()
	}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
		if text.Len() == 0 {
			msg["content"] = nil
		}
	}
	p, o := m.Usage.prompt(), m.Usage.output()
	return marshalNoEscape(map[string]any{
		"id": m.ID, "object": "chat.completion", "created": now().Unix(), "model": m.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finishReason(m.StopReason), "logprobs": nil}},
		"usage": map[string]any{"prompt_tokens": p, "completion_tokens": o, "total_tokens": p + o,
			"prompt_tokens_details": map[string]any{"cached_tokens": m.Usage.CacheReadInputTokens}},
	})
}

// MessagesErrorToOpenAI translates a Messages error body
// ({"type":"error","error":{"type","message"}}) into OpenAI's shape, the
// Messages error type kept as the code. A body that is not one keeps its
// text as the message.
func MessagesErrorToOpenAI(status int, b []byte) []byte {
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil || e.Error.Message == "" {
		e.Error.Message = strings.TrimSpace(string(b[:min(len(b), 1024)]))
		if e.Error.Message == "" {
			e.Error.Message = http.StatusText(status)
		}
		e.Error.Type = anthropicErrorType(status)
	}
	return openAIError(e.Error.Type, e.Error.Message)
}

// openAIError is an OpenAI error body for a Messages error type.
func openAIError(anthropicType, message string) []byte {
	typ := anthropicType
	switch anthropicType {
	case "api_error", "overloaded_error", "timeout_error":
		typ = "server_error"
	case "request_too_large":
		typ = "invalid_request_error"
	}
	return (&openai.Error{Type: typ, Code: anthropicType, Message: message}).JSON()
}

// MessagesUsage reads the usage of a native Messages answer: a whole body,
// or one stream event (its data, or the event with its event: and data:
// lines). A stream splits it: message_start carries the input tokens (with
// cache reads and writes, summed into PromptTokens as chat counts them)
// and a first output count, message_delta the output tokens so far and,
// from some providers, the input again. Both counts are cumulative, never
// increments: a caller keeps the PromptTokens of the last event that has
// some (non-zero) and the CompletionTokens of the last event, and sums
// them for TotalTokens. Other events report false.
func MessagesUsage(event []byte) (openai.Usage, bool) {
	data := event
	if i := bytes.Index(event, []byte("data:")); i >= 0 && (i == 0 || event[i-1] == '\n') {
		data = bytes.TrimSpace(event[i+5:])
		if j := bytes.IndexByte(data, '\n'); j >= 0 {
			data = data[:j]
		}
	}
	var e struct {
		Type    string      `json:"type"`
		Usage   *msgsUsageJ `json:"usage"`
		Message struct {
			Usage *msgsUsageJ `json:"usage"`
		} `json:"message"`
	}
	if json.Unmarshal(data, &e) != nil {
		return openai.Usage{}, false
	}
	u := e.Usage
	switch e.Type {
	case "message_start":
		u = e.Message.Usage
	case "message", "message_delta":
	default:
		return openai.Usage{}, false
	}
	if u == nil {
		return openai.Usage{}, false
	}
	out := openai.Usage{PromptTokens: u.prompt(), CompletionTokens: u.output()}
	out.TotalTokens = out.PromptTokens + out.CompletionTokens
	return out, true
}
