package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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
	ResponseFormat      *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	Dimensions     int    `json:"dimensions"`
	EncodingFormat string `json:"encoding_format"`
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

var lexicon = strings.Fields(`the a model answer simulated gateway token stream quick brown fox
jumps over lazy dog river mountain cloud signal engine replica request response latency light
bright calm steady green blue seven eleven paper garden window music ocean forest stone`)

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

// forcedTool returns the tool the request forces, if any.
func (r *request) forcedTool() *tool {
	if len(r.Tools) == 0 || len(r.ToolChoice) == 0 {
		return nil
	}
	var s string
	if json.Unmarshal(r.ToolChoice, &s) == nil {
		if s == "required" {
			return &r.Tools[0]
		}
		return nil
	}
	var c struct {
		Function struct{ Name string } `json:"function"`
	}
	if json.Unmarshal(r.ToolChoice, &c) != nil {
		return nil
	}
	for i := range r.Tools {
		if r.Tools[i].Function.Name == c.Function.Name {
			return &r.Tools[i]
		}
	}
	return nil
}

func countTokens(s string) int { return len(strings.Fields(s)) }

// choice is one generated answer: words, or a tool call.
type choice struct {
	words  []string
	finish string
	tool   *tool
	args   string
}

func (s *Server) plan(req *request, chat bool) (prompt int, choices []choice) {
	text := req.promptText()
	prompt = countTokens(text) + 3*len(req.Messages)
	limit := s.cfg.MaxTokens
	if req.MaxTokens > 0 {
		limit = req.MaxTokens
	}
	if req.MaxCompletionTokens > 0 {
		limit = req.MaxCompletionTokens
	}
	n := max(req.N, 1)
	h := fnv.New64a()
	_, _ = h.Write([]byte(text))
	seed := h.Sum64()
	if req.Seed != nil {
		seed ^= uint64(*req.Seed)
	}
	forced := (*tool)(nil)
	if chat {
		forced = req.forcedTool()
	}
	for i := range n {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		if forced != nil {
			choices = append(choices, choice{tool: forced, args: toolArgs(forced, rng), finish: "tool_calls"})
			continue
		}
		if s.cfg.Echo {
			choices = append(choices, choice{words: pieces(req.lastText(), 3), finish: "stop"})
			continue
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
		choices = append(choices, c)
	}
	return prompt, choices
}

func (c *choice) applyStop(stops []string) {
	if len(stops) == 0 {
		return
	}
	var acc strings.Builder
	for i, w := range c.words {
		acc.WriteString(w)
		for _, st := range stops {
			if st == "" {
				continue
			}
			if idx := strings.Index(acc.String(), st); idx >= 0 {
				keep := acc.String()[:idx]
				prev := len(acc.String()) - len(w)
				c.words = append(c.words[:i], keep[min(prev, len(keep)):])
				if c.words[i] == "" {
					c.words = c.words[:i]
				}
				c.finish = "stop"
				return
			}
		}
	}
}

// toolArgs makes arguments that fit the tool's JSON schema properties.
func toolArgs(t *tool, rng *rand.Rand) string {
	var schema struct {
		Properties map[string]struct {
			Type string   `json:"type"`
			Enum []string `json:"enum"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(t.Function.Parameters, &schema)
	args := make(map[string]any, len(schema.Properties))
	names := make([]string, 0, len(schema.Properties))
	for name := range schema.Properties {
		names = append(names, name)
	}
	sort.Strings(names) // the same draws for the same names, every time
	for _, name := range names {
		p := schema.Properties[name]
		switch {
		case len(p.Enum) > 0:
			args[name] = p.Enum[rng.IntN(len(p.Enum))]
		case p.Type == "integer":
			args[name] = rng.IntN(100)
		case p.Type == "number":
			args[name] = float64(rng.IntN(1000)) / 10
		case p.Type == "boolean":
			args[name] = rng.IntN(2) == 1
		default:
			args[name] = lexicon[rng.IntN(len(lexicon))]
		}
	}
	b, _ := json.Marshal(args)
	return string(b)
}

// answer writes a chat or text completion, streamed or whole.
func (s *Server) answer(w http.ResponseWriter, ctx context.Context, req *request, chat bool) error {
	if chat && len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "messages must be a non-empty array")
		return errors.New("bad request")
	}
	prompt, choices := s.plan(req, chat)
	completion := 0
	for _, c := range choices {
		completion += len(c.words)
		if c.tool != nil {
			completion += countTokens(c.args) + 1
		}
	}
	id := "simcmpl-" + strconv.FormatUint(rand.Uint64(), 36)
	usage := map[string]int{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
	if err := s.pace(ctx, s.cfg.TTFT); err != nil {
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

func wholeAnswer(id, model, served string, chat bool, choices []choice, usage map[string]int) map[string]any {
	out := make([]map[string]any, len(choices))
	for i, c := range choices {
		text := strings.Join(c.words, "")
		if !chat {
			out[i] = map[string]any{"index": i, "text": text, "finish_reason": c.finish, "logprobs": nil}
			continue
		}
		msg := map[string]any{"role": "assistant", "content": text, "refusal": nil}
		if c.tool != nil {
			msg["content"] = nil
			msg["tool_calls"] = []map[string]any{{"id": callID(id, i), "type": "function",
				"function": map[string]any{"name": c.tool.Function.Name, "arguments": c.args}}}
		}
		out[i] = map[string]any{"index": i, "message": msg, "finish_reason": c.finish, "logprobs": nil}
	}
	obj := "chat.completion"
	if !chat {
		obj = "text_completion"
	}
	return map[string]any{"id": id, "object": obj, "created": time.Now().Unix(), "model": model,
		"system_fingerprint": fingerprint(served), "choices": out, "usage": usage}
}

func callID(id string, i int) string { return fmt.Sprintf("call_%s_%d", id[len("simcmpl-"):], i) }

// fingerprint names the catalog model a replica serves, so a client (or a
// test) can tell which model answered, for instance after a fallback.
func fingerprint(served string) string { return "llmgw-sim:" + served }
