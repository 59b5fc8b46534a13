package llmcache

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
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
	// ReasoningTokens is usage's completion_tokens_details.reasoning_tokens.
	ReasoningTokens int64 `json:"reasoning_tokens,omitempty"`

	one [1]answerChoice // Choices' memory for an answer of one choice, most
}

// choicesFor gives a Choices with room for n, in a's own memory when one.
func (a *answer) choicesFor(n int) []answerChoice {
	if n <= len(a.one) {
		return a.one[:0]
	}
	return make([]answerChoice, 0, n)
}

type answerChoice struct {
	Index        int        `json:"index"`
	Content      string     `json:"content"`
	ToolCalls    []toolCall `json:"tool_calls,omitempty"`
	FinishReason string     `json:"finish_reason"`
	// Reasoning is the message's reasoning_content (or reasoning).
	Reasoning string `json:"reasoning,omitempty"`
	// Logprobs is the choice's logprobs in a whole answer's form (a
	// stream's, joined), as the engine gave them; nil when not asked.
	Logprobs json.RawMessage `json:"logprobs,omitempty"`
	// StopReason is the choice's stop_reason (vLLM's: the stop sequence
	// or token that ended it), as the engine gave it; nil when none.
	StopReason json.RawMessage `json:"stop_reason,omitempty"`
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

// The answers kept are read by their bytes (openai.Members), not decoded
// into structures: a miss keeps every answer it passes, so this is on the
// path of every request that misses.

// answerScratch is the reused memory of reading one answer.
type answerScratch struct {
	top, choice, inner, call, fn []openai.Member
	choices, calls               [][]byte
}

var answerScratchPool = sync.Pool{New: func() any { return new(answerScratch) }}

// release returns sc to the pool, dropping its slices of the answer.
func (sc *answerScratch) release() {
	clear(sc.top[:cap(sc.top)])
	clear(sc.choice[:cap(sc.choice)])
	clear(sc.inner[:cap(sc.inner)])
	clear(sc.call[:cap(sc.call)])
	clear(sc.fn[:cap(sc.fn)])
	clear(sc.choices[:cap(sc.choices)])
	clear(sc.calls[:cap(sc.calls)])
	answerScratchPool.Put(sc)
}

// member is the value of the member key of ms, or nil.
func member(ms []openai.Member, key string) []byte {
	for i := len(ms) - 1; i >= 0; i-- { // the last of a repeated key, as decoding does
		if string(ms[i].Key) == key {
			return ms[i].Value
		}
	}
	return nil
}

// jsonText is the text of a JSON string value; anything else is "".
func jsonText(v []byte) string {
	if len(v) < 2 || v[0] != '"' {
		return ""
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1])
	}
	return string(openai.AppendUnquoted(nil, v))
}

// appendText appends the text of a JSON string value; anything else adds
// nothing.
func appendText(dst, v []byte) []byte {
	if len(v) < 2 || v[0] != '"' {
		return dst
	}
	return openai.AppendUnquoted(dst, v)
}

// finishReason is a finish reason's text: the common ones are constants,
// so that kept answers do not each hold a copy.
func finishReason(v []byte) string {
	switch string(v) {
	case `"stop"`:
		return "stop"
	case `"length"`:
		return "length"
	case `"tool_calls"`:
		return "tool_calls"
	}
	return jsonText(v)
}

// modelName is the text of an answer's model, one copy per name for all
// kept answers (up to maxModelNames names; past them, a copy each).
func modelName(v []byte) string {
	if len(v) < 2 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 {
		return jsonText(v)
	}
	inner := v[1 : len(v)-1]
	modelNames.RLock()
	n, ok := modelNames.m[string(inner)]
	modelNames.RUnlock()
	if ok {
		return n
	}
	n = string(inner)
	modelNames.Lock()
	if modelNames.m == nil {
		modelNames.m = map[string]string{}
	}
	if len(modelNames.m) < maxModelNames {
		modelNames.m[n] = n
	}
	modelNames.Unlock()
	return n
}

var modelNames struct {
	sync.RWMutex
	m map[string]string
}

const maxModelNames = 1024

// jsonIndex is a small non-negative JSON integer, or -1.
func jsonIndex(v []byte) int {
	if len(v) == 0 || len(v) > 4 {
		return -1
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// parseWhole reads a non-streamed answer; usage, when not nil, is its
// usage as the router already read it.
//
// The body is read structurally, not validated byte by byte: it must be
// one object, balanced and whole, with nothing after it (so a cut answer
// is refused), and only the fields an answer keeps are read from it. What
// is served later is encoded afresh from those fields, so a malformed
// scalar elsewhere in an engine's body never reaches a client.
func parseWhole(body []byte, usage *openai.Usage) (*answer, error) {
	sc := answerScratchPool.Get().(*answerScratch)
	defer sc.release()
	var whole bool
	if sc.top, whole = openai.Members(sc.top[:0], body); !whole {
		return nil, errNotCacheable
	}
	a := &answer{Chat: string(member(sc.top, "object")) == `"chat.completion"`, Model: modelName(member(sc.top, "model"))}
	if usage != nil {
		a.Usage = *usage
	} else {
		a.Usage, _ = openai.FindUsage(body)
	}
	a.ReasoningTokens = reasoningTokens(member(sc.top, "usage"))
	sc.choices = openai.AppendElements(sc.choices[:0], member(sc.top, "choices"))
	a.Choices = a.choicesFor(len(sc.choices))
	for _, ch := range sc.choices {
		sc.choice = openai.AppendMembers(sc.choice[:0], ch)
		ac := answerChoice{Index: jsonIndex(member(sc.choice, "index")), Content: jsonText(member(sc.choice, "text")),
			FinishReason: finishReason(member(sc.choice, "finish_reason")),
			Logprobs:     keepRaw(member(sc.choice, "logprobs")), StopReason: keepRaw(member(sc.choice, "stop_reason"))}
		if m := member(sc.choice, "message"); len(m) > 0 && m[0] == '{' {
			sc.inner = openai.AppendMembers(sc.inner[:0], m)
			if jsonText(member(sc.inner, "refusal")) != "" {
				return nil, errNotCacheable
			}
			if c := member(sc.inner, "content"); len(c) > 0 && c[0] == '"' {
				ac.Content = jsonText(c)
			}
			ac.Reasoning = jsonText(reasoningOf(sc.inner))
			sc.calls = openai.AppendElements(sc.calls[:0], member(sc.inner, "tool_calls"))
			for _, tc := range sc.calls {
				sc.call = openai.AppendMembers(sc.call[:0], tc)
				sc.fn = openai.AppendMembers(sc.fn[:0], member(sc.call, "function"))
				ac.ToolCalls = append(ac.ToolCalls, toolCall{ID: jsonText(member(sc.call, "id")),
					Name: jsonText(member(sc.fn, "name")), Arguments: jsonText(member(sc.fn, "arguments"))})
			}
		}
		if ac.Index < 0 {
			return nil, errNotCacheable
		}
		a.Choices = append(a.Choices, ac)
	}
	return a, a.cacheable()
}

// building is a choice of a stream being assembled.
type building struct {
	content, reasoning []byte
	calls              []buildingCall
	finish             string
	stop               []byte // stop_reason, as sent
	logprobs           logprobsJoin
	seen               bool
}

type buildingCall struct {
	id         string
	name, args []byte
}

// maxStreamChoices bounds the choices of a stream the cache assembles.
const maxStreamChoices = 16

// assemble builds an answer from a stream's SSE events. A stream without
// [DONE], with an error event or a refusal is not cacheable.
func assemble(events []byte, usage openai.Usage) (*answer, error) {
	sc := answerScratchPool.Get().(*answerScratch)
	defer sc.release()
	a := &answer{Usage: usage}
	var one [1]building
	choices := one[:0]
	done := false
	var model []byte
	for rest := events; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			done = true
			continue
		}
		var whole bool
		if sc.top, whole = openai.Members(sc.top[:0], data); !whole || member(sc.top, "error") != nil {
			return nil, errNotCacheable
		}
		a.Chat = a.Chat || string(member(sc.top, "object")) == `"chat.completion.chunk"`
		if m := member(sc.top, "model"); len(m) > 2 && !bytes.Equal(m, model) {
			a.Model, model = modelName(m), m
		}
		if u := member(sc.top, "usage"); len(u) > 0 && u[0] == '{' {
			a.ReasoningTokens = reasoningTokens(u)
		}
		sc.choices = openai.AppendElements(sc.choices[:0], member(sc.top, "choices"))
		for _, ch := range sc.choices {
			sc.choice = openai.AppendMembers(sc.choice[:0], ch)
			i := jsonIndex(member(sc.choice, "index"))
			if i < 0 || i >= maxStreamChoices {
				return nil, errNotCacheable
			}
			for len(choices) <= i {
				choices = append(choices, building{})
			}
			b := &choices[i]
			b.seen = true
			b.content = appendText(b.content, member(sc.choice, "text"))
			b.logprobs.add(member(sc.choice, "logprobs"))
			if d := member(sc.choice, "delta"); len(d) > 0 && d[0] == '{' {
				sc.inner = openai.AppendMembers(sc.inner[:0], d)
				if jsonText(member(sc.inner, "refusal")) != "" {
					return nil, errNotCacheable
				}
				b.content = appendText(b.content, member(sc.inner, "content"))
				b.reasoning = appendText(b.reasoning, reasoningOf(sc.inner))
				sc.calls = openai.AppendElements(sc.calls[:0], member(sc.inner, "tool_calls"))
				for _, tc := range sc.calls {
					sc.call = openai.AppendMembers(sc.call[:0], tc)
					k := jsonIndex(member(sc.call, "index"))
					if k < 0 {
						return nil, errNotCacheable
					}
					for len(b.calls) <= k {
						b.calls = append(b.calls, buildingCall{})
					}
					t := &b.calls[k]
					if id := jsonText(member(sc.call, "id")); id != "" {
						t.id = id
					}
					sc.fn = openai.AppendMembers(sc.fn[:0], member(sc.call, "function"))
					t.name = appendText(t.name, member(sc.fn, "name"))
					t.args = appendText(t.args, member(sc.fn, "arguments"))
				}
			}
			if f := member(sc.choice, "finish_reason"); len(f) > 0 && f[0] == '"' {
				b.finish = finishReason(f)
				b.stop = keepRaw(member(sc.choice, "stop_reason"))
			}
		}
	}
	if !done {
		return nil, errNotCacheable
	}
	a.Choices = a.choicesFor(len(choices))
	for i, b := range choices {
		if !b.seen {
			return nil, errNotCacheable
		}
		ac := answerChoice{Index: i, Content: string(b.content), FinishReason: b.finish, Reasoning: string(b.reasoning),
			StopReason: b.stop, Logprobs: b.logprobs.whole(a.Chat)}
		for _, t := range b.calls {
			ac.ToolCalls = append(ac.ToolCalls, toolCall{ID: t.id, Name: string(t.name), Arguments: string(t.args)})
		}
		a.Choices = append(a.Choices, ac)
	}
	return a, a.cacheable()
}

// cachedUsage is usage marked as served from the cache: OpenAI's
// cached_tokens detail holds the whole prompt.
func (a *answer) usageJSON() map[string]any {
	u := a.Usage
	out := map[string]any{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens,
		"total_tokens":          u.PromptTokens + u.CompletionTokens,
		"prompt_tokens_details": map[string]any{"cached_tokens": u.PromptTokens}}
	if a.ReasoningTokens > 0 {
		out["completion_tokens_details"] = map[string]any{"reasoning_tokens": a.ReasoningTokens}
	}
	return out
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
			choices[i] = c.details(map[string]any{"index": c.Index, "text": c.Content, "finish_reason": c.FinishReason})
			continue
		}
		msg := map[string]any{"role": "assistant", "content": c.Content, "refusal": nil}
		if c.Reasoning != "" {
			msg["reasoning_content"] = c.Reasoning
		}
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
		choices[i] = c.details(map[string]any{"index": c.Index, "message": msg, "finish_reason": c.FinishReason})
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
	for i := range a.Choices {
		a.Choices[i].replay(a.Chat, func(ch map[string]any) { send([]map[string]any{ch}, nil) })
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
