package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/llmgw/llmgw/engines/internal/synth"
	"github.com/llmgw/llmgw/engines/sim/prefixcache"
)

// request holds the fields of an OpenAI request the simulator acts on;
// every other field is accepted and ignored.
type request struct {
	Model         string          `json:"model"`
	Messages      []message       `json:"messages"`
	Prompt        json.RawMessage `json:"prompt"`
	Input         json.RawMessage `json:"input"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           int             `json:"max_tokens"`
	MaxCompletionTokens int             `json:"max_completion_tokens"`
	N                   int             `json:"n"`
	Seed                *int64          `json:"seed"`
	Stop                json.RawMessage `json:"stop"`
	Tools               []tool          `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	ReasoningEffort     string          `json:"reasoning_effort"`
	ResponseFormat      *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
	Logprobs       json.RawMessage `json:"logprobs"`
	TopLogprobs    *int            `json:"top_logprobs"`
	Dimensions     int             `json:"dimensions"`
	EncodingFormat string          `json:"encoding_format"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type tool struct {
	Type     string `json:"type"`
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
}

var lexicon = synth.Lexicon

// text returns the plain text of a message's content (string or parts).
func (m message) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(m.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
		b.WriteByte(' ')
	}
	return b.String()
}

func (r *request) promptText() string {
	if r.Messages != nil {
		var b strings.Builder
		for _, m := range r.Messages {
			b.WriteString(m.text())
			b.WriteByte('\n')
		}
		return b.String()
	}
	var s string
	if json.Unmarshal(r.Prompt, &s) == nil {
		return s
	}
	var ss []string
	_ = json.Unmarshal(r.Prompt, &ss)
	return strings.Join(ss, "\n")
}

// promptTokens are the prompt's tokens as the prefix cache sees them:
// each message's role, then its words.
func (r *request) promptTokens() []string {
	if r.Messages == nil {
		return strings.Fields(r.promptText())
	}
	var out []string
	for _, m := range r.Messages {
		out = append(out, "<|"+m.Role+"|>")
		out = append(out, strings.Fields(m.text())...)
	}
	return out
}

// lastText is the last message's text, or the prompt.
func (r *request) lastText() string {
	if len(r.Messages) > 0 {
		return r.Messages[len(r.Messages)-1].text()
	}
	return r.promptText()
}

// pieces cuts s into pieces of at most n bytes, at rune boundaries.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		end := min(n, len(s))
		for end < len(s) && !utf8.RuneStart(s[end]) {
			end++
		}
		out = append(out, s[:end])
		s = s[end:]
	}
	return out
}

func (r *request) inputs() ([]string, error) {
	var s string
	if json.Unmarshal(r.Input, &s) == nil {
		return []string{s}, nil
	}
	var ss []string
	if json.Unmarshal(r.Input, &ss) == nil && len(ss) > 0 {
		return ss, nil
	}
	var toks [][]int
	if json.Unmarshal(r.Input, &toks) == nil && len(toks) > 0 {
		out := make([]string, len(toks))
		for i, t := range toks {
			out[i] = fmt.Sprint(t)
		}
		return out, nil
	}
	var tok []int
	if json.Unmarshal(r.Input, &tok) == nil && len(tok) > 0 {
		return []string{fmt.Sprint(tok)}, nil
	}
	return nil, errors.New("input must be a string, an array of strings or an array of token arrays")
}

func (r *request) stops() []string {
	var s string
	if json.Unmarshal(r.Stop, &s) == nil && s != "" {
		return []string{s}
	}
	var ss []string
	_ = json.Unmarshal(r.Stop, &ss)
	return ss
}

// calledTools returns the tools the answer calls, in the order the
// request lists them: the one tool_choice names; else the function tools
// the last message (a user's) mentions by name, ignoring case; else, when
// tool_choice is "required", the first tool. With parallel_tool_calls
// false, only the first of them. tool_choice "none" calls nothing.
func (r *request) calledTools() []*tool {
	var funcs []*tool
	for i := range r.Tools {
		if (r.Tools[i].Type == "" || r.Tools[i].Type == "function") && r.Tools[i].Function.Name != "" {
			funcs = append(funcs, &r.Tools[i])
		}
	}
	if len(funcs) == 0 {
		return nil
	}
	var mode string
	if json.Unmarshal(r.ToolChoice, &mode) != nil {
		var c struct {
			Function struct{ Name string } `json:"function"`
		}
		if json.Unmarshal(r.ToolChoice, &c) == nil && c.Function.Name != "" {
			for _, t := range funcs {
				if t.Function.Name == c.Function.Name {
					return []*tool{t}
				}
			}
			return nil
		}
	}
	if mode == "none" {
		return nil
	}
	var called []*tool
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == "user" {
		text := strings.ToLower(r.Messages[n-1].text())
		for _, t := range funcs {
			if strings.Contains(text, strings.ToLower(t.Function.Name)) {
				called = append(called, t)
			}
		}
	}
	if len(called) == 0 && mode == "required" {
		called = funcs[:1]
	}
	if len(called) > 1 && r.ParallelToolCalls != nil && !*r.ParallelToolCalls {
		called = called[:1]
	}
	return called
}

// reasoningTokens is how long the simulated reasoning is: by the
// request's reasoning_effort, else medium when the model always reasons.
func (r *request) reasoningTokens(always bool) int {
	switch r.ReasoningEffort {
	case "":
		if always {
			return 8
		}
		return 0
	case "none":
		return 0
	case "minimal":
		return 2
	case "low":
		return 4
	case "high":
		return 16
	case "xhigh":
		return 24
	}
	return 8
}

func countTokens(s string) int { return len(strings.Fields(s)) }

// choice is one generated answer: reasoning, then words or tool calls.
type choice struct {
	reasoning []string
	words     []string
	finish    string
	calls     []toolCall
	// stop is the stop sequence that ended the answer, named in the
	// choice's stop_reason as vLLM does; "" when none did.
	stop string
	// logprobs has one entry per word when the request asks for them.
	logprobs []tokenLogprob
}

// toolCall is one call of a choice: its arguments whole and in the
// fragments a stream carries them in.
type toolCall struct {
	id    string
	tool  *tool
	args  string
	frags []string
}

// tokens is the choice's completion tokens: one per piece streamed.
func (c choice) tokens() int {
	n := len(c.reasoning) + len(c.words)
	for _, tc := range c.calls {
		n += 1 + len(tc.frags)
	}
	return n
}

// logprobsWanted is what a request asks of logprobs (see logprobsAsked).
type logprobsWanted struct {
	on  bool
	top int
}

// plan makes the answer's choices. A limit the request sets (max_tokens,
// max_completion_tokens) bounds each choice's reasoning and answer
// together, as engines count reasoning among the completion's tokens;
// without one, the answer has the model's length after its reasoning.
func (s *Server) plan(req *request, chat bool, lp logprobsWanted) (prompt int, choices []choice) {
	text := req.promptText()
	prompt = countTokens(text) + 3*len(req.Messages)
	asked := req.MaxTokens
	if req.MaxCompletionTokens > 0 {
		asked = req.MaxCompletionTokens
	}
	n := max(req.N, 1)
	h := fnv.New64a()
	_, _ = h.Write([]byte(text))
	seed := h.Sum64()
	if req.Seed != nil {
		seed ^= uint64(*req.Seed)
	}
	var called []*tool
	if chat {
		called = req.calledTools()
	}
	think, limit := s.budget(req, chat, asked)
	for i := range n {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		c := choice{finish: "length"}
		if limit > 0 {
			c = s.choose(req, chat, called, limit, rng)
		}
		if asked > 0 && len(c.words) > limit { // an echo or an object cut short
			c.words, c.finish, c.stop = c.words[:limit], "length", ""
		}
		if asked <= 0 && c.finish == "length" {
			// Without a limit the answer has the model's own length and
			// ends as a real model's does, with stop: only a limit the
			// request set cuts an answer short.
			c.finish = "stop"
		}
		if think > 0 {
			thought := rand.New(rand.NewPCG(seed^0x9e3779b97f4a7c15, uint64(i)))
			for range think {
				c.reasoning = append(c.reasoning, " "+lexicon[thought.IntN(len(lexicon))])
			}
			c.reasoning[0] = strings.TrimPrefix(c.reasoning[0], " ")
		}
		if lp.on {
			c.logprobs = logprobsOf(c.words, lp.top, rand.New(rand.NewPCG(seed^0x5851f42d4c957f2d, uint64(i))))
		}
		choices = append(choices, c)
	}
	return prompt, choices
}

// budget is how many tokens of reasoning and of answer a choice has:
// within the limit the request asked for (asked > 0), else the model's
// answer length after the reasoning.
func (s *Server) budget(req *request, chat bool, asked int) (think, limit int) {
	if chat {
		think = req.reasoningTokens(s.cfg.Reasoning)
	}
	if asked <= 0 {
		return think, s.cfg.MaxTokens
	}
	think = min(think, asked)
	return think, asked - think
}

// choose makes one answer: the tool calls, the echo, a reply to a tool's
// output, a JSON object for a JSON schema, or words.
func (s *Server) choose(req *request, chat bool, called []*tool, limit int, rng *rand.Rand) choice {
	if len(called) > 0 {
		c := choice{finish: "tool_calls"}
		for _, t := range called {
			args := synth.Object(t.Function.Parameters, rng)
			c.calls = append(c.calls, toolCall{id: "call_" + strconv.FormatUint(rand.Uint64(), 36), tool: t,
				args: args, frags: synth.Fragments(args, rng)})
		}
		return c
	}
	if s.cfg.Echo {
		return choice{words: pieces(req.lastText(), 3), finish: "stop"}
	}
	if n := len(req.Messages); chat && n > 0 && req.Messages[n-1].Role == "tool" {
		out := []rune(req.Messages[n-1].text())
		text := `The tool returned: "` + string(out[:min(len(out), 40)]) + `".`
		return choice{words: strings.SplitAfter(text, " "), finish: "stop"}
	}
	if rf := req.ResponseFormat; rf != nil && rf.Type == "json_schema" && rf.JSONSchema != nil && len(rf.JSONSchema.Schema) > 0 {
		return choice{words: synth.Fragments(synth.Object(rf.JSONSchema.Schema, rng), rng), finish: "stop"}
	}
	c := choice{finish: "length"}
	for range limit {
		c.words = append(c.words, " "+lexicon[rng.IntN(len(lexicon))])
	}
	c.words[0] = strings.TrimPrefix(c.words[0], " ")
	if req.ResponseFormat != nil && strings.HasPrefix(req.ResponseFormat.Type, "json") {
		c.words = append([]string{`{"answer": "`}, append(c.words, `"}`)...)
		c.finish = "stop"
	}
	c.applyStop(req.stops())
	return c
}

// applyStop ends the answer before the earliest place any stop sequence
// appears, whichever of them it is, and names that sequence.
func (c *choice) applyStop(stops []string) {
	if len(stops) == 0 {
		return
	}
	text := strings.Join(c.words, "")
	at, which := -1, ""
	for _, st := range stops {
		if st == "" {
			continue
		}
		// At one place the shorter sequence wins: streamed token by
		// token, it is complete first.
		if i := strings.Index(text, st); i >= 0 && (at < 0 || i < at || i == at && len(st) < len(which)) {
			at, which = i, st
		}
	}
	if at < 0 {
		return
	}
	n := 0
	for i, w := range c.words {
		if n+len(w) > at {
			c.words = append(c.words[:i], w[:at-n])
			if c.words[i] == "" {
				c.words = c.words[:i]
			}
			break
		}
		n += len(w)
	}
	c.finish, c.stop = "stop", which
}

// stopReason is the choice's stop_reason as vLLM gives it: the stop
// sequence that ended it, else null.
func (c *choice) stopReason() any {
	if c.stop == "" {
		return nil
	}
	return c.stop
}

// answer writes a chat or text completion, streamed or whole.
func (s *Server) answer(w http.ResponseWriter, ctx context.Context, req *request, chat bool) error {
	if chat && len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "messages must be a non-empty array")
		return errors.New("bad request")
	}
	lp, err := req.logprobsAsked(chat)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return err
	}
	prompt, choices := s.plan(req, chat, lp)
	completion, reasoning := 0, 0
	for _, c := range choices {
		completion += c.tokens()
		reasoning += len(c.reasoning)
	}
	id := "simcmpl-" + strconv.FormatUint(rand.Uint64(), 36)
	usage := map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
	if reasoning > 0 {
		usage["completion_tokens_details"] = map[string]int{"reasoning_tokens": reasoning}
	}
	ttft := s.cfg.TTFT
	if s.cache != nil {
		cached := min(s.cache.Use(prefixcache.Blocks(req.promptTokens()))*prefixcache.BlockTokens, prompt)
		usage["prompt_tokens_details"] = map[string]int{"cached_tokens": cached}
		s.promptTokens.Add(int64(prompt))
		s.cachedTokens.Add(int64(cached))
		if r := s.cfg.PrefillTokensPerSecond; r > 0 {
			ttft += time.Duration(float64(prompt-cached) / r * float64(time.Second))
		}
	}
	if err := s.pace(ctx, ttft); err != nil {
		return err
	}
	if !req.Stream {
		if err := s.pace(ctx, s.tokenDelay()*time.Duration(completion)); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, wholeAnswer(id, req.Model, s.cfg.Model, chat, choices, usage))
		return nil
	}
	return s.stream(w, ctx, req, chat, id, choices, usage)
}

func (s *Server) tokenDelay() time.Duration {
	if s.cfg.TokensPerSecond <= 0 {
		return 0
	}
	return time.Duration(float64(time.Second) / s.cfg.TokensPerSecond)
}

func (s *Server) pace(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func wholeAnswer(id, model, served string, chat bool, choices []choice, usage map[string]any) map[string]any {
	out := make([]map[string]any, len(choices))
	for i, c := range choices {
		text := strings.Join(c.words, "")
		if !chat {
			out[i] = map[string]any{"index": i, "text": text, "finish_reason": c.finish, "stop_reason": c.stopReason(), "logprobs": nil}
			if c.logprobs != nil {
				out[i]["logprobs"] = textLogprobs(c.logprobs, 0)
			}
			continue
		}
		msg := map[string]any{"role": "assistant", "content": text, "refusal": nil}
		if len(c.reasoning) > 0 {
			msg["reasoning_content"] = strings.Join(c.reasoning, "")
		}
		if len(c.calls) > 0 {
			msg["content"] = nil
			calls := make([]map[string]any, len(c.calls))
			for k, tc := range c.calls {
				calls[k] = map[string]any{"id": tc.id, "type": "function",
					"function": map[string]any{"name": tc.tool.Function.Name, "arguments": tc.args}}
			}
			msg["tool_calls"] = calls
		}
		out[i] = map[string]any{"index": i, "message": msg, "finish_reason": c.finish, "stop_reason": c.stopReason(), "logprobs": nil}
		if c.logprobs != nil {
			out[i]["logprobs"] = chatLogprobs(c.logprobs)
		}
	}
	obj := "chat.completion"
	if !chat {
		obj = "text_completion"
	}
	return map[string]any{"id": id, "object": obj, "created": time.Now().Unix(), "model": model,
		"system_fingerprint": fingerprint(served), "choices": out, "usage": usage}
}

// fingerprint names the catalog model a replica serves, so a client (or a
// test) can tell which model answered, for instance after a fallback.
func fingerprint(served string) string { return "llmgw-sim:" + served }
