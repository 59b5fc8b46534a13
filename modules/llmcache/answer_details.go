package llmcache

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/llmgw/llmgw/modules/openai"
)

// What an answer has besides its text and tool calls, kept so that a hit
// gives what the miss gave: reasoning (which the Messages and Responses
// translations turn into thinking blocks and reasoning items), its token
// count, logprobs and vLLM's stop_reason (which names the stop sequence a
// Messages answer reports). The cache key holds the members that ask for
// them (logprobs, top_logprobs, reasoning_effort, stop).

// keepRaw copies a JSON value to keep: nil for none or null, and for a
// value that is not JSON (so that what is served is always JSON).
func keepRaw(v []byte) json.RawMessage {
	if len(v) == 0 || string(v) == "null" || !json.Valid(v) {
		return nil
	}
	return bytes.Clone(v)
}

// reasoningOf is a message's or delta's reasoning text: reasoning_content
// (vLLM, llama.cpp, DeepSeek), else reasoning (Ollama, OpenRouter).
func reasoningOf(ms []openai.Member) []byte {
	if r := member(ms, "reasoning_content"); len(r) > 0 && r[0] == '"' {
		return r
	}
	return member(ms, "reasoning")
}

var reasoningKey = []byte(`"reasoning_tokens"`)

// reasoningTokens reads usage's completion_tokens_details.reasoning_tokens.
func reasoningTokens(usage []byte) int64 {
	if !bytes.Contains(usage, reasoningKey) {
		return 0
	}
	details := member(openai.AppendMembers(nil, usage), "completion_tokens_details")
	n, _ := strconv.ParseInt(string(member(openai.AppendMembers(nil, details), "reasoning_tokens")), 10, 64)
	return max(n, 0)
}

// logprobsJoin joins the logprobs of a stream's chunks into a whole
// answer's: chat's content entries, or the legacy completion arrays.
type logprobsJoin struct {
	seen                                bool
	content                             [][]byte // chat: logprobs.content's entries
	tokens, lps, tops, offsets, refusal [][]byte // completions: the four arrays; chat: refusal's entries
}

func (j *logprobsJoin) add(v []byte) {
	if len(v) == 0 || v[0] != '{' {
		return
	}
	j.seen = true
	ms := openai.AppendMembers(nil, v)
	j.content = openai.AppendElements(j.content, member(ms, "content"))
	j.refusal = openai.AppendElements(j.refusal, member(ms, "refusal"))
	j.tokens = openai.AppendElements(j.tokens, member(ms, "tokens"))
	j.lps = openai.AppendElements(j.lps, member(ms, "token_logprobs"))
	j.tops = openai.AppendElements(j.tops, member(ms, "top_logprobs"))
	j.offsets = openai.AppendElements(j.offsets, member(ms, "text_offset"))
}

// whole is the joined logprobs in a whole answer's form, or nil.
func (j *logprobsJoin) whole(chat bool) json.RawMessage {
	if !j.seen {
		return nil
	}
	var out []byte
	if chat {
		out = appendArray(append(out, `{"content":`...), j.content)
		if len(j.refusal) == 0 {
			out = append(out, `,"refusal":null}`...)
		} else {
			out = append(appendArray(append(out, `,"refusal":`...), j.refusal), '}')
		}
	} else {
		out = appendArray(append(out, `{"tokens":`...), j.tokens)
		out = appendArray(append(out, `,"token_logprobs":`...), j.lps)
		out = appendArray(append(out, `,"top_logprobs":`...), j.tops)
		out = append(appendArray(append(out, `,"text_offset":`...), j.offsets), '}')
	}
	return keepRaw(out)
}

func appendArray(out []byte, elems [][]byte) []byte {
	out = append(out, '[')
	for i, e := range elems {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, e...)
	}
	return append(out, ']')
}

// contentPiece is one chunk of replayed content, with its logprobs.
type contentPiece struct {
	text     string
	logprobs json.RawMessage
}

// contentPieces cuts a choice's content for a replayed stream: one piece
// per token with its logprobs when the answer has logprobs whose tokens
// make up the content, else word-sized pieces.
func (c *answerChoice) contentPieces(chat bool) []contentPiece {
	if pieces := c.tokenPieces(chat); pieces != nil {
		return pieces
	}
	words := splitWords(c.Content)
	out := make([]contentPiece, len(words))
	for i, w := range words {
		out[i].text = w
	}
	return out
}

func (c *answerChoice) tokenPieces(chat bool) []contentPiece {
	if len(c.Logprobs) == 0 {
		return nil
	}
	ms := openai.AppendMembers(nil, c.Logprobs)
	var out []contentPiece
	var joined []byte
	if chat {
		for _, e := range openai.AppendElements(nil, member(ms, "content")) {
			tok := member(openai.AppendMembers(nil, e), "token")
			joined = appendText(joined, tok)
			lp := appendArray([]byte(`{"content":`), [][]byte{e})
			out = append(out, contentPiece{text: jsonText(tok), logprobs: append(lp, `,"refusal":null}`...)})
		}
	} else {
		toks := openai.AppendElements(nil, member(ms, "tokens"))
		lps, tops := openai.AppendElements(nil, member(ms, "token_logprobs")), openai.AppendElements(nil, member(ms, "top_logprobs"))
		offs := openai.AppendElements(nil, member(ms, "text_offset"))
		if len(lps) != len(toks) || len(tops) != len(toks) || len(offs) != len(toks) {
			return nil
		}
		for i, tok := range toks {
			joined = appendText(joined, tok)
			lp := appendArray([]byte(`{"tokens":`), toks[i:i+1])
			lp = appendArray(append(lp, `,"token_logprobs":`...), lps[i:i+1])
			lp = appendArray(append(lp, `,"top_logprobs":`...), tops[i:i+1])
			lp = append(appendArray(append(lp, `,"text_offset":`...), offs[i:i+1]), '}')
			out = append(out, contentPiece{text: jsonText(tok), logprobs: lp})
		}
	}
	if string(joined) != c.Content {
		return nil // the tokens do not spell the content: replay words, and no logprobs per piece
	}
	return out
}

// details adds a choice's logprobs (null when not asked) and stop_reason
// to its whole form.
func (c *answerChoice) details(choice map[string]any) map[string]any {
	choice["logprobs"] = nil
	if c.Logprobs != nil {
		choice["logprobs"] = c.Logprobs
	}
	if c.StopReason != nil {
		choice["stop_reason"] = c.StopReason
	}
	return choice
}

// replay sends a choice's chunks for a replayed stream: the role,
// reasoning and content in word-sized pieces (one per token, with its
// logprobs, when the answer has them), tool calls with their arguments in
// fragments, and the finish.
func (c *answerChoice) replay(chat bool, send func(choice map[string]any)) {
	piece := func(d map[string]any, finish any) map[string]any {
		if chat {
			return map[string]any{"index": c.Index, "delta": d, "finish_reason": finish, "logprobs": nil}
		}
		text, _ := d["content"].(string)
		return map[string]any{"index": c.Index, "text": text, "finish_reason": finish, "logprobs": nil}
	}
	if chat {
		send(piece(map[string]any{"role": "assistant", "content": ""}, nil))
		for _, word := range splitWords(c.Reasoning) {
			send(piece(map[string]any{"reasoning_content": word}, nil))
		}
	}
	for _, p := range c.contentPieces(chat) {
		ch := piece(map[string]any{"content": p.text}, nil)
		if p.logprobs != nil {
			ch["logprobs"] = p.logprobs
		}
		send(ch)
	}
	for j, t := range c.ToolCalls {
		send(piece(map[string]any{"tool_calls": []map[string]any{{"index": j, "id": t.ID, "type": "function",
			"function": map[string]any{"name": t.Name, "arguments": ""}}}}, nil))
		for _, frag := range fragments(t.Arguments, 16) {
			send(piece(map[string]any{"tool_calls": []map[string]any{{"index": j,
				"function": map[string]any{"arguments": frag}}}}, nil))
		}
	}
	last := piece(map[string]any{}, c.FinishReason)
	if c.StopReason != nil {
		last["stop_reason"] = c.StopReason
	}
	send(last)
}
