package standin

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/llmgw/llmgw/engines/internal/synth"
)

// openaiAuth checks the key of an OpenAI request: Authorization: Bearer
// on /v1 paths, api-key on Azure's /openai paths. It answers and returns
// false when the request may not go on.
func (s *Server) openaiAuth(w http.ResponseWriter, r *http.Request) bool {
	azure := strings.HasPrefix(r.URL.Path, "/openai/")
	var key string
	if azure {
		key = r.Header.Get("api-key")
	} else {
		key, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	status, ra, msg := s.key(key)
	switch {
	case status == 0 && azure && strings.HasPrefix(r.URL.Path, "/openai/deployments/") && r.URL.Query().Get("api-version") == "":
		writeJSON(w, http.StatusNotFound, obj{"error", obj{"code", "404", "message", "Resource not found"}})
	case status == 0:
		return true
	case status == http.StatusTooManyRequests:
		retryAfterHeader(w, ra)
		openaiError(w, status, "requests", "Rate limit reached: "+msg)
	case azure:
		writeJSON(w, status, obj{"error", obj{"code", "401", "message", "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."}})
	default:
		writeJSON(w, status, obj{"error", obj{"message", "Incorrect API key provided: " + msg, "type", "invalid_request_error", "param", nil, "code", "invalid_api_key"}})
	}
	return false
}

func openaiError(w http.ResponseWriter, status int, typ, msg string) {
	code := any(nil)
	if status == http.StatusTooManyRequests {
		code = "rate_limit_exceeded"
	}
	writeJSON(w, status, obj{"error", obj{"message", msg, "type", typ, "param", nil, "code", code}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(encode(v))
}

// chat serves chat completions with text answers.
func (s *Server) chat(w http.ResponseWriter, r *http.Request, body []byte) {
	if !s.openaiAuth(w, r) {
		return
	}
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Stream        bool `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
		openaiError(w, http.StatusBadRequest, "invalid_request_error", "the body must be JSON with a non-empty messages array")
		return
	}
	prompt := 0
	var user string
	for _, m := range req.Messages {
		user = textOf(m.Content)
		prompt += countTokens(user)
	}
	ws := words(reply(user))
	id, created := s.id("chatcmpl-"), time.Now().Unix()
	usage := obj{"prompt_tokens", prompt, "completion_tokens", len(ws), "total_tokens", prompt + len(ws)}
	if !req.Stream {
		writeJSON(w, http.StatusOK, obj{"id", id, "object", "chat.completion", "created", created, "model", req.Model,
			"choices", []any{obj{"index", 0, "message", obj{"role", "assistant", "content", strings.Join(ws, ""), "refusal", nil},
				"logprobs", nil, "finish_reason", "stop"}}, "usage", usage})
		return
	}
	ev := s.startSSE(w, "text/event-stream")
	chunk := func(delta obj, finish any) obj {
		return obj{"id", id, "object", "chat.completion.chunk", "created", created, "model", req.Model,
			"choices", []any{obj{"index", 0, "delta", delta, "logprobs", nil, "finish_reason", finish}}}
	}
	ev.event("", chunk(obj{"role", "assistant", "content", "", "refusal", nil}, nil))
	for _, p := range ws {
		ev.event("", chunk(obj{"content", p}, nil))
	}
	ev.event("", chunk(obj{}, "stop"))
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		ev.event("", obj{"id", id, "object", "chat.completion.chunk", "created", created, "model", req.Model, "choices", []any{}, "usage", usage})
	}
	ev.event("", "[DONE]")
}

// textOf is the text of OpenAI content: a string or parts with text.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// respRequest is the part of a Responses request the stand-in reads.
type respRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	Stream             bool              `json:"stream"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Store              *bool             `json:"store"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	Metadata           json.RawMessage   `json:"metadata"`
	Text               *struct {
		Format struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"text"`
}

type respItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Output  json.RawMessage `json:"output"`
}

type respTool struct {
	Type       string          `json:"type"`
	Name       string          `json:"name"`
	Parameters json.RawMessage `json:"parameters"`
}

// respOutput is one output item of an answer.
type respOutput struct {
	id, callID, name string // name set: a function call
	pieces           []string
}

// planResponse reads the input and decides the output items and the input tokens.
func (s *Server) planResponse(req *respRequest) (out []respOutput, input int, truncated bool) {
	var items []respItem
	var str string
	if json.Unmarshal(req.Input, &str) == nil {
		items = []respItem{{Type: "message", Role: "user", Content: req.Input}}
	} else {
		_ = json.Unmarshal(req.Input, &items)
	}
	if req.Instructions != nil {
		input += countTokens(*req.Instructions)
	}
	var last respItem
	for _, it := range items {
		input += countTokens(textOf(it.Content)) + countTokens(textOf(it.Output))
		last = it
	}
	rng := seeded(2, req.Input, req.Tools, req.Text)
	if last.Type == "function_call_output" {
		return []respOutput{{id: s.id("msg_"), pieces: words(toolReply(textOf(last.Output)))}}, input, false
	}
	user := textOf(last.Content)
	for _, t := range req.calledTools(user) {
		out = append(out, respOutput{id: s.id("fc_"), callID: s.id("call_"), name: t.Name, pieces: synth.Fragments(synth.Object(t.Parameters, rng), rng)})
	}
	if len(out) > 0 {
		return out, input, false
	}
	var ws []string
	if req.Text != nil && req.Text.Format.Type == "json_schema" {
		ws = synth.Fragments(synth.Object(req.Text.Format.Schema, rng), rng)
	} else {
		ws = words(reply(user))
	}
	if m := req.MaxOutputTokens; m != nil && *m > 0 && len(ws) > *m {
		ws, truncated = ws[:*m], true
	}
	return []respOutput{{id: s.id("msg_"), pieces: ws}}, input, truncated
}

// calledTools are the function tools the answer calls: the one
// tool_choice names, else those the user's text names, else with
// "required" the first; "none" calls none.
func (r *respRequest) calledTools(user string) []respTool {
	var tools []respTool
	var names []string
	for _, raw := range r.Tools {
		var t respTool
		if json.Unmarshal(raw, &t) == nil && t.Type == "function" && t.Name != "" {
			tools = append(tools, t)
			names = append(names, t.Name)
		}
	}
	if len(tools) == 0 {
		return nil
	}
	var mode string
	var named struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(r.ToolChoice, &mode) != nil && json.Unmarshal(r.ToolChoice, &named) == nil && named.Name != "" {
		names = []string{named.Name}
		mode = "required"
	}
	if mode == "none" {
		return nil
	}
	called := mentioned(user, names)
	if len(called) == 0 && mode == "required" {
		called = names[:1]
	}
	if len(called) > 1 && r.ParallelToolCalls != nil && !*r.ParallelToolCalls {
		called = called[:1]
	}
	var out []respTool
	for _, n := range called {
		for _, t := range tools {
			if t.Name == n {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

// item is an output item as the API shows it, in progress or done.
func (o respOutput) item(done bool) obj {
	status, text := "in_progress", ""
	if done {
		status, text = "completed", strings.Join(o.pieces, "")
	}
	if o.name != "" {
		return obj{"id", o.id, "type", "function_call", "status", status, "arguments", text, "call_id", o.callID, "name", o.name}
	}
	content := []any{}
	if done {
		content = []any{textPart(text)}
	}
	return obj{"id", o.id, "type", "message", "status", status, "content", content, "role", "assistant"}
}

func textPart(text string) obj {
	return obj{"type", "output_text", "annotations", []any{}, "logprobs", []any{}, "text", text}
}

// response is the response object.
func (req *respRequest) response(id string, created int64, status string, output []any, usage, errv, incomplete any) obj {
	tools := []any{}
	for _, t := range req.Tools {
		tools = append(tools, t)
	}
	var choice any = "auto"
	if len(req.ToolChoice) > 0 {
		choice = req.ToolChoice
	}
	format := any(obj{"type", "text"})
	if req.Text != nil {
		b, _ := json.Marshal(req.Text.Format)
		format = json.RawMessage(b)
	}
	meta := any(obj{})
	if len(req.Metadata) > 0 {
		meta = req.Metadata
	}
	return obj{"id", id, "object", "response", "created_at", created, "status", status,
		"error", errv, "incomplete_details", incomplete, "instructions", req.Instructions,
		"max_output_tokens", req.MaxOutputTokens, "model", req.Model, "output", output,
		"parallel_tool_calls", req.ParallelToolCalls == nil || *req.ParallelToolCalls,
		"previous_response_id", req.PreviousResponseID, "reasoning", obj{"effort", nil, "summary", nil},
		"store", req.Store == nil || *req.Store, "temperature", orOne(req.Temperature), "text", obj{"format", format},
		"tool_choice", choice, "tools", tools, "top_p", orOne(req.TopP), "truncation", "disabled",
		"usage", usage, "user", nil, "metadata", meta}
}

func orOne(f *float64) float64 {
	if f == nil {
		return 1
	}
	return *f
}

// responses serves POST /v1/responses.
func (s *Server) responses(w http.ResponseWriter, r *http.Request, body []byte) {
	if !s.openaiAuth(w, r) {
		return
	}
	var req respRequest
	if err := json.Unmarshal(body, &req); err != nil || len(req.Input) == 0 || req.Model == "" {
		openaiError(w, http.StatusBadRequest, "invalid_request_error", "the body must be JSON with model and input")
		return
	}
	out, input, truncated := s.planResponse(&req)
	outTokens := 0
	for _, o := range out {
		outTokens += len(o.pieces)
	}
	usage := obj{"input_tokens", input, "input_tokens_details", obj{"cached_tokens", 0},
		"output_tokens", outTokens, "output_tokens_details", obj{"reasoning_tokens", 0}, "total_tokens", input + outTokens}
	status, incomplete := "completed", any(nil)
	if truncated {
		status, incomplete = "incomplete", obj{"reason", "max_output_tokens"}
	}
	id, created := s.id("resp_"), time.Now().Unix()
	items := make([]any, len(out))
	for i, o := range out {
		items[i] = o.item(true)
	}
	if !req.Stream {
		writeJSON(w, http.StatusOK, req.response(id, created, status, items, usage, nil, incomplete))
		return
	}
	s.streamResponse(w, &req, id, created, out, func(done []any) obj {
		return req.response(id, created, status, done, usage, nil, incomplete)
	}, strings.Contains(string(body), FailMidstream))
}

// streamResponse writes the Responses API's semantic events, each with
// its sequence_number.
func (s *Server) streamResponse(w http.ResponseWriter, req *respRequest, id string, created int64, out []respOutput, final func([]any) obj, fail bool) {
	ev := s.startSSE(w, "text/event-stream; charset=utf-8")
	seq := 0
	send := func(typ string, kv ...any) {
		ev.event(typ, append(obj{"type", typ, "sequence_number", seq}, kv...))
		seq++
	}
	send("response.created", "response", req.response(id, created, "in_progress", []any{}, nil, nil, nil))
	send("response.in_progress", "response", req.response(id, created, "in_progress", []any{}, nil, nil, nil))
	done := []any{}
	for i, o := range out {
		send("response.output_item.added", "output_index", i, "item", o.item(false))
		if o.name == "" {
			send("response.content_part.added", "item_id", o.id, "output_index", i, "content_index", 0, "part", textPart(""))
		}
		for j, p := range o.pieces {
			if fail && j == 2 {
				send("response.failed", "response", req.response(id, created, "failed", done, nil,
					obj{"code", "server_error", "message", "The model failed while streaming its answer."}, nil))
				return
			}
			if o.name != "" {
				send("response.function_call_arguments.delta", "item_id", o.id, "output_index", i, "delta", p)
			} else {
				send("response.output_text.delta", "item_id", o.id, "output_index", i, "content_index", 0, "delta", p, "logprobs", []any{})
			}
		}
		text := strings.Join(o.pieces, "")
		if o.name != "" {
			send("response.function_call_arguments.done", "item_id", o.id, "output_index", i, "name", o.name, "arguments", text)
		} else {
			send("response.output_text.done", "item_id", o.id, "output_index", i, "content_index", 0, "text", text, "logprobs", []any{})
			send("response.content_part.done", "item_id", o.id, "output_index", i, "content_index", 0, "part", textPart(text))
		}
		send("response.output_item.done", "output_index", i, "item", o.item(true))
		done = append(done, o.item(true))
	}
	f := final(done)
	typ := "response.completed"
	for i := 0; i+1 < len(f); i += 2 {
		if f[i] == "status" && f[i+1] == "incomplete" {
			typ = "response.incomplete"
		}
	}
	send(typ, "response", f)
}
