package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

const simModels = `
		model sim-chat {
			engine sim
			alias gpt-4o-mini
			option max_tokens 12
			context_length 4096
		}
		model sim-embed {
			engine sim
			option embedding_dims 32
		}`

func TestOpenAIClient(t *testing.T) {
	g := startGateway(t, simModels, "")
	c := g.client()

	t.Run("models list", func(t *testing.T) {
		page, err := c.Models.List(bg)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range page.Data {
			ids = append(ids, m.ID)
		}
		if got, want := strings.Join(ids, ","), "sim-chat,gpt-4o-mini,sim-embed"; got != want {
			t.Errorf("models: got %s, want %s", got, want)
		}
	})

	t.Run("chat", func(t *testing.T) {
		resp, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
			Model:     "gpt-4o-mini",
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("tell me about rivers")},
			MaxTokens: openai.Int(5),
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(strings.Fields(resp.Choices[0].Message.Content)); got != 5 {
			t.Errorf("answer has %d words, want 5: %q", got, resp.Choices[0].Message.Content)
		}
		if resp.Usage.CompletionTokens != 5 || resp.Usage.PromptTokens == 0 {
			t.Errorf("usage: got %+v", resp.Usage)
		}
		if resp.Choices[0].FinishReason != "length" {
			t.Errorf("finish_reason: got %q, want length", resp.Choices[0].FinishReason)
		}
	})

	t.Run("chat stream with usage", func(t *testing.T) {
		stream := c.Chat.Completions.NewStreaming(bg, openai.ChatCompletionNewParams{
			Model:         "sim-chat",
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		var acc openai.ChatCompletionAccumulator
		chunks := 0
		for stream.Next() {
			acc.AddChunk(stream.Current())
			chunks++
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if got := len(strings.Fields(acc.Choices[0].Message.Content)); got != 12 {
			t.Errorf("streamed answer has %d words, want 12", got)
		}
		if acc.Usage.CompletionTokens != 12 {
			t.Errorf("usage: got %+v, want 12 completion tokens", acc.Usage)
		}
		if chunks < 14 {
			t.Errorf("got %d chunks, want one per token plus role, finish and usage", chunks)
		}
	})

	t.Run("stream without usage hides the usage chunk", func(t *testing.T) {
		resp, body := post(t, g.base+"/v1/chat/completions",
			`{"model":"sim-chat","stream":true,"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		if strings.Contains(string(body), `"usage"`) {
			t.Errorf("client did not ask for usage but got it:\n%s", body)
		}
		if !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
			t.Errorf("stream does not end with [DONE]:\n%s", body)
		}
		if st := resp.Header.Get("Server-Timing"); !strings.Contains(st, "llm_route;dur=") || !strings.Contains(st, "llm_upstream") {
			t.Errorf("Server-Timing: got %q", st)
		}
	})

	t.Run("completions", func(t *testing.T) {
		resp, err := c.Completions.New(bg, openai.CompletionNewParams{
			Model:     "sim-chat",
			Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("once upon a time")},
			MaxTokens: openai.Int(4),
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(strings.Fields(resp.Choices[0].Text)); got != 4 {
			t.Errorf("completion has %d words, want 4", got)
		}
		stream := c.Completions.NewStreaming(bg, openai.CompletionNewParams{
			Model:     "sim-chat",
			Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("once upon a time")},
			MaxTokens: openai.Int(4),
		})
		var text strings.Builder
		for stream.Next() {
			if ch := stream.Current().Choices; len(ch) > 0 {
				text.WriteString(ch[0].Text)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if text.String() != resp.Choices[0].Text {
			t.Errorf("streamed completion %q differs from the whole one %q", text.String(), resp.Choices[0].Text)
		}
	})

	t.Run("embeddings", func(t *testing.T) {
		resp, err := c.Embeddings.New(bg, openai.EmbeddingNewParams{
			Model: "sim-embed",
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"the cat sat", "the cat sat"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Data) != 2 || len(resp.Data[0].Embedding) != 32 {
			t.Fatalf("got %d embeddings", len(resp.Data))
		}
		for i := range resp.Data[0].Embedding {
			if resp.Data[0].Embedding[i] != resp.Data[1].Embedding[i] {
				t.Fatal("the same text embedded differently")
			}
		}
		if resp.Usage.PromptTokens != 6 {
			t.Errorf("usage: got %+v, want 6 prompt tokens", resp.Usage)
		}
	})

	t.Run("forced tool call streams in fragments", func(t *testing.T) {
		params := openai.ChatCompletionNewParams{
			Model:    "sim-chat",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("weather in Paris?")},
			Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
				Name: "get_weather",
				Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{
					"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}}},
			})},
			ToolChoice: openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}),
		}
		whole, err := c.Chat.Completions.New(bg, params)
		if err != nil {
			t.Fatal(err)
		}
		stream := c.Chat.Completions.NewStreaming(bg, params)
		var acc openai.ChatCompletionAccumulator
		fragments := 0
		for stream.Next() {
			ch := stream.Current()
			acc.AddChunk(ch)
			if len(ch.Choices) > 0 && len(ch.Choices[0].Delta.ToolCalls) > 0 {
				fragments++
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		calls := acc.Choices[0].Message.ToolCalls
		if len(calls) != 1 || calls[0].Function.Name != "get_weather" {
			t.Fatalf("tool calls: got %+v", calls)
		}
		var args struct {
			City string `json:"city"`
			Days *int   `json:"days"`
		}
		if err := json.Unmarshal([]byte(calls[0].Function.Arguments), &args); err != nil || args.City == "" || args.Days == nil {
			t.Errorf("arguments %q do not fit the schema: %v", calls[0].Function.Arguments, err)
		}
		if calls[0].Function.Arguments != whole.Choices[0].Message.ToolCalls[0].Function.Arguments {
			t.Errorf("streamed arguments %q differ from the whole answer's %q",
				calls[0].Function.Arguments, whole.Choices[0].Message.ToolCalls[0].Function.Arguments)
		}
		if fragments < 3 {
			t.Errorf("tool call came in %d fragments, want several", fragments)
		}
		if acc.Choices[0].FinishReason != "tool_calls" {
			t.Errorf("finish_reason: got %q", acc.Choices[0].FinishReason)
		}
	})

	t.Run("unknown model", func(t *testing.T) {
		_, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
			Model:    "sim-caht",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("got %v, want an API error", err)
		}
		if apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" {
			t.Errorf("got %d %q, want 404 model_not_found", apiErr.StatusCode, apiErr.Code)
		}
		if !strings.Contains(apiErr.Message, `"sim-chat"`) {
			t.Errorf("message does not suggest the close name: %q", apiErr.Message)
		}
	})

	for _, tc := range []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"invalid JSON", "/v1/chat/completions", `{"model":`, 400, "invalid_json"},
		{"missing model", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, 400, "missing_model"},
		{"missing messages", "/v1/chat/completions", `{"model":"sim-chat"}`, 400, "missing_messages"},
		{"empty messages", "/v1/chat/completions", `{"model":"sim-chat","messages":[]}`, 400, "invalid_messages"},
		{"missing prompt", "/v1/completions", `{"model":"sim-chat"}`, 400, "missing_prompt"},
		{"missing input", "/v1/embeddings", `{"model":"sim-embed"}`, 400, "missing_input"},
		{"unknown endpoint", "/v1/files", `{}`, 404, "unknown_url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, g.base+tc.path, tc.body)
			var e struct {
				Error struct {
					Message, Type string
					Code          *string
				}
			}
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("body is not an OpenAI error: %s", body)
			}
			if resp.StatusCode != tc.status || e.Error.Code == nil || *e.Error.Code != tc.code || e.Error.Message == "" {
				t.Errorf("got %d %s, want %d with code %s", resp.StatusCode, body, tc.status, tc.code)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type: got %q", ct)
			}
		})
	}

	t.Run("wrong method", func(t *testing.T) {
		resp, err := http.Get(g.base + "/v1/chat/completions")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
			t.Errorf("got %d Allow=%q, want 405 Allow=POST", resp.StatusCode, resp.Header.Get("Allow"))
		}
	})
}

func TestPlaceholdersAndAccessLog(t *testing.T) {
	g := startGateway(t, `
		model m {
			engine sim
			alias m-alias
			option max_tokens 3
		}`, "")
	rep := g.readyReplicas("m", 1)[0]
	resp, body := post(t, g.base+"/v1/chat/completions", `{"model":"m-alias","messages":[{"role":"user","content":"count the tokens"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	for h, want := range map[string]string{"X-Llm-Model": "m", "X-Llm-Replica": rep.ID, "X-Llm-Completion-Tokens": "3"} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s: got %q, want %q", h, got, want)
		}
	}
	// The stream's usage reaches the access log although the client did
	// not ask for it.
	resp, body = post(t, g.base+"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"count the tokens"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	waitFor(t, 5*time.Second, "two access log entries with usage", func() bool {
		n := 0
		for _, line := range strings.Split(g.logs.String(), "\n") {
			if strings.Contains(line, `"http.log.access`) && strings.Contains(line, `"llm_model":"m"`) &&
				strings.Contains(line, `"llm_replica":"`+rep.ID+`"`) &&
				strings.Contains(line, `"llm_prompt_tokens":6`) && strings.Contains(line, `"llm_completion_tokens":3`) {
				n++
			}
		}
		return n == 2
	})
}
