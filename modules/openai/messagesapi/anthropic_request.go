package messagesapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/llmgw/llmgw/modules/openai"
)

// The upstream side: an engine that speaks only Anthropic's Messages API
// (Anthropic's own, or a provider in front of it) serves chat completions
// requests through these translations. The router sends
// ChatToMessagesBody's body to the engine's /v1/messages and reads the
// answer back with MessagesToChatBody, MessagesToChatStream or
// MessagesErrorToOpenAI; a Messages client's request to such an engine
// passes through unchanged, its usage read with MessagesUsage.

// DefaultMessagesMaxTokens is the max_tokens of a Messages request made
// from a chat request that sets none: Messages requires one.
const DefaultMessagesMaxTokens = 4096

// Thinking budgets a chat reasoning_effort maps to.
var thinkingBudgets = map[string]int64{"minimal": 1024, "low": 1024, "medium": 4096, "high": 16384}

var now = time.Now

type chatReqIn struct {
	Model               string          `json:"model"`
	Messages            []chatMsgIn     `json:"messages"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	TopK                *int64          `json:"top_k"`
	Stop                json.RawMessage `json:"stop"`
	User                string          `json:"user"`
	N                   *int64          `json:"n"`
	Tools               []struct {
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	ReasoningEffort   string          `json:"reasoning_effort"`
	ResponseFormat    *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

type chatMsgIn struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
}

type chatPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

type msgsReqOut struct {
	Model         string         `json:"model"`
	MaxTokens     int64          `json:"max_tokens"`
	System        []msgsBlock    `json:"system,omitempty"`
	Messages      []msgsMsgOut   `json:"messages"`
	StopSequences []string       `json:"stop_sequences,omitempty"`
	Stream        bool           `json:"stream,omitempty"`
	Temperature   *float64       `json:"temperature,omitempty"`
	TopP          *float64       `json:"top_p,omitempty"`
	TopK          *int64         `json:"top_k,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
	Tools         []msgsToolOut  `json:"tools,omitempty"`
	ToolChoice    map[string]any `json:"tool_choice,omitempty"`
	Thinking      map[string]any `json:"thinking,omitempty"`
	OutputConfig  map[string]any `json:"output_config,omitempty"`
}

type msgsMsgOut struct {
	Role    string      `json:"role"`
	Content []msgsBlock `json:"content"`
}

// msgsBlock is a content block of a Messages request.
type msgsBlock map[string]any

type msgsToolOut struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// ChatToMessagesBody translates a chat completions request into a Messages
// request for an engine that speaks only Messages; model, when not "",
// replaces the request's model. System and developer messages become
// system, tool messages tool_result blocks of a user turn (consecutive
// ones in one turn, as Messages requires for parallel calls), tool_calls
// tool_use blocks with the arguments as input, stop stop_sequences, user
// metadata.user_id, reasoning_effort a thinking budget (minimal and low
// 1024 tokens, medium 4096, high 16384, kept below max_tokens, none when
// that leaves less than 1024 or a tool use is forced; with thinking on,
// temperature and top_k are dropped, as Messages requires).
// max_tokens is max_completion_tokens, else max_tokens, else 4096
// (DefaultMessagesMaxTokens); a temperature above 1 is sent as 1.
// response_format json_schema becomes output_config.format, Messages'
// structured outputs.
// Refused with a 400: n above 1, response_format json_object (Messages
// has no JSON mode without a schema), audio and file parts, function
// messages. Other members
// (seed, penalties, logprobs, logit_bias) have no Messages equivalent and
// are dropped.
func ChatToMessagesBody(chat []byte, model string) ([]byte, error) {
	var c chatReqIn
	if err := json.Unmarshal(chat, &c); err != nil {
		return nil, openai.BadRequest("invalid_request", "the request could not be read for this model's engine (Messages): %s", openai.DecodeProblem(err))
	}
	out := msgsReqOut{Model: c.Model, Stream: c.Stream, TopP: c.TopP, TopK: c.TopK, MaxTokens: DefaultMessagesMaxTokens}
	if model != "" {
		out.Model = model
	}
	switch {
	case c.MaxCompletionTokens != nil:
		out.MaxTokens = *c.MaxCompletionTokens
	case c.MaxTokens != nil:
		out.MaxTokens = *c.MaxTokens
	}
	if c.N != nil && *c.N > 1 {
		return nil, openai.RangeError("n", "1: this model's engine (Messages) answers one choice")
	}
	if err := outputConfig(&c, &out); err != nil {
		return nil, err
	}
	if t := c.Temperature; t != nil {
		v := min(*t, 1)
		out.Temperature = &v
	}
	if c.User != "" {
		out.Metadata = map[string]any{"user_id": c.User}
	}
	var err error
	if out.StopSequences, err = chatStops(c.Stop); err != nil {
		return nil, err
	}
	if out.System, out.Messages, err = messagesOf(c.Messages); err != nil {
		return nil, err
	}
	if err := toolsOf(&c, &out); err != nil {
		return nil, err
	}
	forced := out.ToolChoice != nil && (out.ToolChoice["type"] == "any" || out.ToolChoice["type"] == "tool")
	if b, ok := thinkingBudgets[c.ReasoningEffort]; ok && !forced {
		if b >= out.MaxTokens {
			b = out.MaxTokens - 1
		}
		if b >= 1024 {
			out.Thinking = map[string]any{"type": "enabled", "budget_tokens": b}
			out.Temperature, out.TopK = nil, nil
		}
	}
	return marshalNoEscape(out)
}

// outputConfig translates response_format: json_schema becomes
// output_config.format, Messages' structured outputs.
func outputConfig(c *chatReqIn, out *msgsReqOut) error {
	f := c.ResponseFormat
	switch {
	case f == nil || f.Type == "" || f.Type == "text":
		return nil
	case f.Type != "json_schema":
		return unsupported("response_format", "a JSON mode without a schema is not supported by this model's engine (Messages); use json_schema with a schema")
	case f.JSONSchema == nil || openai.KindOf(f.JSONSchema.Schema) != openai.KindObject:
		return openai.TypeError("response_format.json_schema.schema", "a JSON schema object (this model's engine, Messages, needs one)")
	}
	out.OutputConfig = map[string]any{"format": map[string]any{"type": "json_schema", "schema": f.JSONSchema.Schema}}
	return nil
}

func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}

func chatStops(v json.RawMessage) ([]string, error) {
	switch openai.KindOf(v) {
	case openai.KindString:
		var s string
		_ = json.Unmarshal(v, &s)
		return []string{s}, nil
	case openai.KindArray:
		var ss []string
		if err := json.Unmarshal(v, &ss); err != nil {
			return nil, openai.TypeError("stop", "a string or an array of strings")
		}
		return ss, nil
	}
	return nil, nil
}

// messagesOf turns chat messages into a system prompt and Messages turns.
func messagesOf(msgs []chatMsgIn) ([]msgsBlock, []msgsMsgOut, error) {
	var system []msgsBlock
	var turns []msgsMsgOut
	add := func(role string, blocks ...msgsBlock) {
		if len(blocks) == 0 {
			return
		}
		if n := len(turns); n > 0 && turns[n-1].Role == role {
			turns[n-1].Content = append(turns[n-1].Content, blocks...)
			return
		}
		turns = append(turns, msgsMsgOut{Role: role, Content: blocks})
	}
	for i, m := range msgs {
		at := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "developer":
			text, err := chatText(at, m.Content)
			if err != nil {
				return nil, nil, err
			}
			if text != "" {
				system = append(system, msgsBlock{"type": "text", "text": text})
			}
		case "user":
			blocks, err := userBlocks(at, m.Content)
			if err != nil {
				return nil, nil, err
			}
			add("user", blocks...)
		case "assistant":
			blocks, err := assistantBlocks(at, &m)
			if err != nil {
				return nil, nil, err
			}
			add("assistant", blocks...)
		case "tool":
			text, err := chatText(at, m.Content)
			if err != nil {
				return nil, nil, err
			}
			add("user", msgsBlock{"type": "tool_result", "tool_use_id": m.ToolCallID, "content": text})
		default:
			return nil, nil, openai.RangeError(at+".role", `"system", "developer", "user", "assistant" or "tool" for this model's engine (Messages)`)
		}
	}
	return system, turns, nil
}

// chatText is the text of a content that is a string or text parts.
func chatText(at string, content json.RawMessage) (string, error) {
	switch openai.KindOf(content) {
	case openai.KindString:
		var s string
		err := json.Unmarshal(content, &s)
		return s, err
	case openai.KindNull:
		return "", nil
	}
	var parts []chatPart
	if err := json.Unmarshal(content, &parts); err != nil {
		return "", openai.TypeError(at+".content", "a string or an array of content parts")
	}
	var b strings.Builder
	for j, p := range parts {
		if p.Type != "text" {
			return "", unsupported(fmt.Sprintf("%s.content[%d].type", at, j), "only text parts are supported here by this model's engine (Messages)")
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

func userBlocks(at string, content json.RawMessage) ([]msgsBlock, error) {
	if openai.KindOf(content) != openai.KindArray {
		text, err := chatText(at, content)
		if err != nil || text == "" {
			return nil, err
		}
		return []msgsBlock{{"type": "text", "text": text}}, nil
	}
	var parts []chatPart
	if err := json.Unmarshal(content, &parts); err != nil {
		return nil, openai.TypeError(at+".content", "a string or an array of content parts")
	}
	var out []msgsBlock
	for j, p := range parts {
		pat := fmt.Sprintf("%s.content[%d]", at, j)
		switch {
		case p.Type == "text":
			if p.Text != "" {
				out = append(out, msgsBlock{"type": "text", "text": p.Text})
			}
		case p.Type == "image_url" && p.ImageURL != nil:
			src, err := imageSource(pat+".image_url.url", p.ImageURL.URL)
			if err != nil {
				return nil, err
			}
			out = append(out, msgsBlock{"type": "image", "source": src})
		default:
			return nil, unsupported(pat+".type", fmt.Sprintf("content parts of type %q are not supported by this model's engine (Messages); use text and image_url", p.Type))
		}
	}
	return out, nil
}

// imageSource turns an image URL (a data: URL or a web address) into a
// Messages image source.
func imageSource(at, url string) (map[string]any, error) {
	rest, ok := strings.CutPrefix(url, "data:")
	if !ok {
		return map[string]any{"type": "url", "url": url}, nil
	}
	mt, data, ok := strings.Cut(rest, ";base64,")
	if !ok {
		return nil, openai.RangeError(at, "a data URL in base64 (data:image/png;base64,…) or an http(s) URL")
	}
	return map[string]any{"type": "base64", "media_type": mt, "data": data}, nil
}

func assistantBlocks(at string, m *chatMsgIn) ([]msgsBlock, error) {
	text, err := chatText(at, m.Content)
	if err != nil {
		return nil, err
	}
	var out []msgsBlock
	if text != "" {
		out = append(out, msgsBlock{"type": "text", "text": text})
	}
	for j, tc := range m.ToolCalls {
		input := json.RawMessage(tc.Function.Arguments)
		if len(bytes.TrimSpace(input)) == 0 {
			input = json.RawMessage("{}")
		}
		if !json.Valid(input) || openai.KindOf(bytes.TrimSpace(input)) != openai.KindObject {
			return nil, openai.TypeError(fmt.Sprintf("%s.tool_calls[%d].function.arguments", at, j), "a JSON object in a string (a Messages engine takes tool input as an object)")
		}
		out = append(out, msgsBlock{"type": "tool_use", "id": tc.ID, "name": tc.Function.Name, "input": input})
	}
	return out, nil
}

func toolsOf(c *chatReqIn, out *msgsReqOut) error {
	for _, t := range c.Tools {
		schema := t.Function.Parameters
		if openai.KindOf(schema) != openai.KindObject {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out.Tools = append(out.Tools, msgsToolOut{Name: t.Function.Name, Description: t.Function.Description, InputSchema: schema})
	}
	if len(out.Tools) == 0 {
		return nil
	}
	switch openai.KindOf(c.ToolChoice) {
	case openai.KindString:
		var s string
		_ = json.Unmarshal(c.ToolChoice, &s)
		switch s {
		case "auto", "none":
			out.ToolChoice = map[string]any{"type": s}
		case "required":
			out.ToolChoice = map[string]any{"type": "any"}
		default:
			return openai.RangeError("tool_choice", `"auto", "required", "none" or a function`)
		}
	case openai.KindObject:
		var f struct {
			Function struct{ Name string } `json:"function"`
		}
		_ = json.Unmarshal(c.ToolChoice, &f)
		out.ToolChoice = map[string]any{"type": "tool", "name": f.Function.Name}
	}
	if p := c.ParallelToolCalls; p != nil && !*p {
		if out.ToolChoice == nil {
			out.ToolChoice = map[string]any{"type": "auto"}
		}
		if out.ToolChoice["type"] != "none" {
			out.ToolChoice["disable_parallel_tool_use"] = true
		}
	}
	return nil
}
