package sim

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

type streamer struct {
	w       http.ResponseWriter
	f       http.Flusher
	id      string
	model   string
	served  string
	chat    bool
	created int64
}

func (st *streamer) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf := make([]byte, 0, len(b)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, b...)
	buf = append(buf, "\n\n"...)
	if _, err := st.w.Write(buf); err != nil {
		return err
	}
	st.f.Flush()
	return nil
}

func (st *streamer) chunk(choices []map[string]any) map[string]any {
	obj := "chat.completion.chunk"
	if !st.chat {
		obj = "text_completion"
	}
	return map[string]any{"id": st.id, "object": obj, "created": st.created, "model": st.model,
		"system_fingerprint": fingerprint(st.served), "choices": choices}
}

func (st *streamer) delta(i int, d map[string]any, finish any) map[string]any {
	if st.chat {
		return map[string]any{"index": i, "delta": d, "finish_reason": finish, "logprobs": nil}
	}
	text, _ := d["content"].(string)
	return map[string]any{"index": i, "text": text, "finish_reason": finish, "logprobs": nil}
}

// tokenDelta is one token's delta, with its logprobs when asked; offset
// is where the token starts in the choice's text.
func (st *streamer) tokenDelta(i int, p piece, offset int) map[string]any {
	d := st.delta(i, p.delta, nil)
	switch {
	case p.lp == nil:
	case st.chat:
		d["logprobs"] = chatLogprobs([]tokenLogprob{*p.lp})
	default:
		d["logprobs"] = textLogprobs([]tokenLogprob{*p.lp}, offset)
	}
	return d
}

// stream writes choices as SSE chunks: a role chunk, one chunk per token
// (tool-call arguments in fragments), a finish chunk, a usage chunk when
// asked, then [DONE].
func (s *Server) stream(w http.ResponseWriter, ctx context.Context, req *request, chat bool, id string, choices []choice, usage map[string]any) error {
	f, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	st := &streamer{w: w, f: f, id: id, model: req.Model, served: s.cfg.Model, chat: chat, created: time.Now().Unix()}
	delay := s.tokenDelay()
	for i, c := range choices {
		if chat {
			if err := st.send(st.chunk([]map[string]any{st.delta(i, map[string]any{"role": "assistant", "content": ""}, nil)})); err != nil {
				return err
			}
		}
		offset := 0
		for j, p := range c.pieces() {
			if j > 0 || i > 0 {
				if err := s.pace(ctx, delay); err != nil {
					return err
				}
			}
			if err := st.send(st.chunk([]map[string]any{st.tokenDelta(i, p, offset)})); err != nil {
				return err
			}
			if text, ok := p.delta["content"].(string); ok {
				offset += len(text)
			}
		}
		last := st.delta(i, map[string]any{}, c.finish)
		last["stop_reason"] = c.stopReason()
		if err := st.send(st.chunk([]map[string]any{last})); err != nil {
			return err
		}
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		u := st.chunk([]map[string]any{})
		u["usage"] = usage
		if err := st.send(u); err != nil {
			return err
		}
	}
	if _, err := w.Write([]byte("data: [DONE]\n\n")); err != nil {
		return err
	}
	f.Flush()
	return ctx.Err()
}

// piece is one streamed token: its delta, and its logprobs when asked.
type piece struct {
	delta map[string]any
	lp    *tokenLogprob
}

// pieces are the deltas of one choice: reasoning, then words or tool
// calls whose arguments arrive in fragments, as OpenAI streams them.
func (c choice) pieces() []piece {
	out := make([]piece, 0, c.tokens())
	for _, r := range c.reasoning {
		out = append(out, piece{delta: map[string]any{"reasoning_content": r}})
	}
	for j, w := range c.words {
		p := piece{delta: map[string]any{"content": w}}
		if j < len(c.logprobs) {
			p.lp = &c.logprobs[j]
		}
		out = append(out, p)
	}
	for k, tc := range c.calls {
		out = append(out, piece{delta: map[string]any{"tool_calls": []map[string]any{{"index": k, "id": tc.id, "type": "function",
			"function": map[string]any{"name": tc.tool.Function.Name, "arguments": ""}}}}})
		for _, f := range tc.frags {
			out = append(out, piece{delta: map[string]any{"tool_calls": []map[string]any{{"index": k,
				"function": map[string]any{"arguments": f}}}}})
		}
	}
	return out
}
