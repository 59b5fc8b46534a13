package llmcache

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/llmgw/llmgw/modules/openai"
)

// answer is a cached answer in one shape for both kinds of request: a
// whole answer is stored as it came; a streamed one is assembled from its
// events. Hits are served from it whole or replayed as a stream.
type answer struct {
	Chat    bool           `json:"chat"`
	Model   string         `json:"model"`
	Choices []answerChoice `json:"choices"`
	Usage   openai.Usage   `json:"usage"`
}

type answerChoice struct {
	Index        int        `json:"index"`
	Content      string     `json:"content"`
	ToolCalls    []toolCall `json:"tool_calls,omitempty"`
	FinishReason string     `json:"finish_reason"`
}

type toolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

var errNotCacheable = errors.New("answer is not cacheable")

// cacheable refuses answers that must not be replayed: cut off, filtered,
// refused, or empty.
func (a *answer) cacheable() error {
	if len(a.Choices) == 0 {
		return errNotCacheable
	}
	for _, c := range a.Choices {
		switch c.FinishReason {
		case "stop", "length", "tool_calls":
		default:
			return errNotCacheable // content_filter, missing (cut), …
		}
	}
	return nil
}

// wireAnswer is the subset of a whole OpenAI answer the cache keeps.
type wireAnswer struct {
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int    `json:"index"`
		Text    string `json:"text"`
		Message *struct {
			Content   *string `json:"content"`
			Refusal   *string `json:"refusal"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage openai.Usage `json:"usage"`
}

// parseWhole reads a non-streamed answer.
func parseWhole(body []byte) (*answer, error) {
	var w wireAnswer
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, err
	}
	a := &answer{Chat: w.Object == "chat.completion", Model: w.Model, Usage: w.Usage}
	for _, c := range w.Choices {
		ac := answerChoice{Index: c.Index, Content: c.Text, FinishReason: c.FinishReason}
		if m := c.Message; m != nil {
			if m.Refusal != nil && *m.Refusal != "" {
				return nil, errNotCacheable
			}
			if m.Content != nil {
				ac.Content = *m.Content
			}
			for _, tc := range m.ToolCalls {
				ac.ToolCalls = append(ac.ToolCalls, toolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
			}
		}
		a.Choices = append(a.Choices, ac)
	}
	return a, a.cacheable()
}

// wireChunk is the subset of a stream chunk the assembler reads.
type wireChunk struct {
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index int    `json:"index"`
		Text  string `json:"text"`
		Delta *struct {
			Content   string  `json:"content"`
			Refusal   *string `json:"refusal"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Error json.RawMessage `json:"error"`
}

// assemble builds an answer from a stream's SSE events. A stream without
// [DONE], with an error event or a refusal is not cacheable.
func assemble(events []byte, usage openai.Usage) (*answer, error) {
	a := &answer{Usage: usage}
	byIndex := map[int]*answerChoice{}
	done := false
	for _, line := range bytes.Split(events, []byte("\n")) {
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			done = true
			continue
		}
		var ch wireChunk
		if err := json.Unmarshal(data, &ch); err != nil || len(ch.Error) > 0 {
			return nil, errNotCacheable
		}
		a.Chat = a.Chat || ch.Object == "chat.completion.chunk"
		if ch.Model != "" {
			a.Model = ch.Model
		}
		for _, c := range ch.Choices {
			ac := byIndex[c.Index]
			if ac == nil {
				ac = &answerChoice{Index: c.Index}
				byIndex[c.Index] = ac
			}
			ac.Content += c.Text
			if d := c.Delta; d != nil {
				if d.Refusal != nil && *d.Refusal != "" {
					return nil, errNotCacheable
				}
				ac.Content += d.Content
				for _, tc := range d.ToolCalls {
					for len(ac.ToolCalls) <= tc.Index {
						ac.ToolCalls = append(ac.ToolCalls, toolCall{})
					}
					t := &ac.ToolCalls[tc.Index]
					if tc.ID != "" {
						t.ID = tc.ID
					}
					t.Name += tc.Function.Name
					t.Arguments += tc.Function.Arguments
				}
			}
			if c.FinishReason != nil {
				ac.FinishReason = *c.FinishReason
			}
		}
	}
	if !done {
		return nil, errNotCacheable
	}
	for i := 0; i < len(byIndex); i++ {
		c, ok := byIndex[i]
		if !ok {
			return nil, errNotCacheable
		}
		a.Choices = append(a.Choices, *c)
	}
	return a, a.cacheable()
}

// cachedUsage is usage marked as served from the cache: OpenAI's
// cached_tokens detail holds the whole prompt.
func (a *answer) usageJSON() map[string]any {
	u := a.Usage
	return map[string]any{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens,
		"total_tokens":          u.PromptTokens + u.CompletionTokens,
		"prompt_tokens_details": map[string]any{"cached_tokens": u.PromptTokens}}
}

func newID(chat bool) string {
	p := "cmpl-cache-"
	if chat {
		p = "chatcmpl-cache-"
	}
	return p + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// writeWhole serves a hit as a whole answer.
func (a *answer) writeWhole(w http.ResponseWriter, model string) {
	choices := make([]map[string]any, len(a.Choices))
	for i, c := range a.Choices {
		if !a.Chat {
			choices[i] = map[string]any{"index": c.Index, "text": c.Content, "finish_reason": c.FinishReason, "logprobs": nil}
			continue
		}
		msg := map[string]any{"role": "assistant", "content": c.Content, "refusal": nil}
		if len(c.ToolCalls) > 0 {
			calls := make([]map[string]any, len(c.ToolCalls))
			for j, t := range c.ToolCalls {
				calls[j] = map[string]any{"id": t.ID, "type": "function", "function": map[string]any{"name": t.Name, "arguments": t.Arguments}}
			}
			msg["tool_calls"] = calls
			if c.Content == "" {
				msg["content"] = nil
			}
		}
		choices[i] = map[string]any{"index": c.Index, "message": msg, "finish_reason": c.FinishReason, "logprobs": nil}
	}
	obj := "text_completion"
	if a.Chat {
		obj = "chat.completion"
	}
	body, _ := json.Marshal(map[string]any{"id": newID(a.Chat), "object": obj, "created": time.Now().Unix(),
		"model": model, "choices": choices, "usage": a.usageJSON()})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// writeStream replays a hit as a stream: a role chunk, content in
// word-sized chunks (tool-call arguments in fragments), a finish chunk,
// usage when asked, and [DONE].
func (a *answer) writeStream(w http.ResponseWriter, model string, includeUsage bool) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	id, created := newID(a.Chat), time.Now().Unix()
	obj := "text_completion"
	if a.Chat {
		obj = "chat.completion.chunk"
	}
	send := func(choices []map[string]any, usage any) {
		c := map[string]any{"id": id, "object": obj, "created": created, "model": model, "choices": choices}
		if usage != nil {
			c["usage"] = usage
		}
		b, _ := json.Marshal(c)
		_, _ = w.Write(append(append([]byte("data: "), b...), '\n', '\n'))
	}
	for _, c := range a.Choices {
		piece := func(d map[string]any, finish any) map[string]any {
			if a.Chat {
				return map[string]any{"index": c.Index, "delta": d, "finish_reason": finish, "logprobs": nil}
			}
			text, _ := d["content"].(string)
			return map[string]any{"index": c.Index, "text": text, "finish_reason": finish, "logprobs": nil}
		}
		if a.Chat {
			send([]map[string]any{piece(map[string]any{"role": "assistant", "content": ""}, nil)}, nil)
		}
		for _, word := range splitWords(c.Content) {
			send([]map[string]any{piece(map[string]any{"content": word}, nil)}, nil)
		}
		for j, t := range c.ToolCalls {
			send([]map[string]any{piece(map[string]any{"tool_calls": []map[string]any{{"index": j, "id": t.ID, "type": "function",
				"function": map[string]any{"name": t.Name, "arguments": ""}}}}, nil)}, nil)
			for _, frag := range fragments(t.Arguments, 16) {
				send([]map[string]any{piece(map[string]any{"tool_calls": []map[string]any{{"index": j,
					"function": map[string]any{"arguments": frag}}}}, nil)}, nil)
			}
		}
		send([]map[string]any{piece(map[string]any{}, c.FinishReason)}, nil)
	}
	if includeUsage {
		send([]map[string]any{}, a.usageJSON())
	}
	_, _ = w.Write([]byte("data: [DONE]\n\n"))
	_ = http.NewResponseController(w).Flush()
}

// splitWords cuts text into pieces that each start at a word, keeping
// every byte, so that the pieces join back to the text.
func splitWords(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s[1:], ' ')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// fragments cuts s into pieces of about n bytes, never inside a rune.
func fragments(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if cut == 0 {
			cut = n
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}
