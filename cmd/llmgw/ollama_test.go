package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/llmgw/llmgw/plugins/enginetest"
	"github.com/llmgw/llmgw/plugins/enginetest/tinygguf"
)

// ollamaBin finds the Ollama that .ci/install builds.
func ollamaBin(t *testing.T) string {
	t.Helper()
	p := enginetest.OllamaBin()
	if p == "" {
		t.Fatal(enginetest.OllamaMissing)
	}
	return p
}

// tinyModel writes the tiny test model: it answers with words until
// max_tokens.
func tinyModel(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := tinygguf.WriteFile(path, tinygguf.Default()); err != nil {
		t.Fatal(err)
	}
	return path
}

func ollamaModels(t *testing.T, model string) string {
	return fmt.Sprintf(`
		engine ollama {
			option bin %s
		}
		%s`, ollamaBin(t), model)
}

func TestOllamaServesChatCompletionsEmbeddings(t *testing.T) {
	src := tinyModel(t)
	g := startGateway(t, ollamaModels(t, `model tiny {
			engine ollama
			source `+src+`
			context_length 512
			target_concurrency 4
			min 1
		}`), "")
	c := g.client()
	g.readyReplicas("tiny", 1)

	resp, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
		Model: "tiny", MaxTokens: openai.Int(8), Temperature: openai.Float(0),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("tell me about the sea")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content == "" || resp.Usage.CompletionTokens < 1 || resp.Usage.CompletionTokens > 8 || resp.Usage.PromptTokens < 1 {
		t.Errorf("chat: %q, usage %+v", resp.Choices[0].Message.Content, resp.Usage)
	}
	if resp.Model != "tiny" {
		t.Errorf("the answer names model %q, want the catalog's name", resp.Model)
	}

	stream := c.Chat.Completions.NewStreaming(bg, openai.ChatCompletionNewParams{
		Model: "tiny", MaxTokens: openai.Int(16), Temperature: openai.Float(0),
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("and the mountains")},
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
	if chunks < 4 || acc.Choices[0].Message.Content == "" || acc.Usage.CompletionTokens < 1 {
		t.Errorf("stream: %d chunks, %q, usage %+v", chunks, acc.Choices[0].Message.Content, acc.Usage)
	}

	comp, err := c.Completions.New(bg, openai.CompletionNewParams{
		Model: "tiny", MaxTokens: openai.Int(8), Temperature: openai.Float(0),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("the river")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if comp.Choices[0].Text == "" || comp.Usage.CompletionTokens < 1 {
		t.Errorf("completion: %q, usage %+v", comp.Choices[0].Text, comp.Usage)
	}

	emb, err := c.Embeddings.New(bg, openai.EmbeddingNewParams{
		Model: "tiny", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hello world")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(emb.Data) != 1 || len(emb.Data[0].Embedding) != 64 {
		t.Errorf("embeddings: %d vectors of %d", len(emb.Data), len(emb.Data[0].Embedding))
	}
	// The agent APIs, translated to chat completions for Ollama.
	r, err := c.Responses.New(bg, responses.ResponseNewParams{
		Model: "tiny", MaxOutputTokens: openai.Int(16), Temperature: openai.Float(0),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("tell me about the sea")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.OutputText() == "" || r.Usage.OutputTokens < 1 || r.Usage.OutputTokens > 16 || r.Usage.InputTokens < 1 {
		t.Errorf("responses: %q, usage %+v", r.OutputText(), r.Usage)
	}
	rs := c.Responses.NewStreaming(bg, responses.ResponseNewParams{
		Model: "tiny", MaxOutputTokens: openai.Int(16), Temperature: openai.Float(0),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("tell me about the sea")},
	})
	var deltas strings.Builder
	var done responses.Response
	for rs.Next() {
		switch ev := rs.Current(); ev.Type {
		case "response.output_text.delta":
			deltas.WriteString(ev.Delta)
		case "response.completed", "response.incomplete":
			done = ev.Response
		}
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	if deltas.String() != done.OutputText() || deltas.String() != r.OutputText() {
		t.Errorf("responses streamed %q, completed %q, whole %q", deltas.String(), done.OutputText(), r.OutputText())
	}
	ac := anthropic.NewClient(aoption.WithBaseURL(g.base), aoption.WithAPIKey("none"), aoption.WithMaxRetries(0))
	mp := anthropic.MessageNewParams{Model: "tiny", MaxTokens: 16,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("tell me about the sea"))}}
	zero := aoption.WithJSONSet("temperature", 0)
	msg, err := ac.Messages.New(bg, mp, zero)
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != r.OutputText() || msg.Usage.OutputTokens != r.Usage.OutputTokens {
		t.Errorf("messages: %+v usage %+v; responses said %q", msg.Content, msg.Usage, r.OutputText())
	}
	ms := ac.Messages.NewStreaming(bg, mp, zero)
	var acc2 anthropic.Message
	for ms.Next() {
		if err := acc2.Accumulate(ms.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := ms.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc2.Content) != 1 || acc2.Content[0].Text != msg.Content[0].Text || acc2.StopReason != msg.StopReason {
		t.Errorf("messages streamed %+v (%s), whole %+v (%s)", acc2.Content, acc2.StopReason, msg.Content, msg.StopReason)
	}

	fams := scrape(t, g)
	if v, _ := value(fams, "llmgw_requests_total", map[string]string{"model": "tiny", "api": "messages", "status": "200"}); v != 2 {
		t.Errorf("messages requests counted: %v", v)
	}
	if v, _ := value(fams, "llmgw_tokens_total", map[string]string{"model": "tiny", "kind": "completion"}); v < 3 {
		t.Errorf("completion tokens counted: %v", v)
	}
}

func TestOllamaOnDemandAndIdleStop(t *testing.T) {
	src := tinyModel(t)
	g := startGateway(t, ollamaModels(t, `model lazy {
			engine ollama
			source `+src+`
			context_length 256
			min 0
			idle_timeout 2s
		}`), "")
	if st := g.models()["lazy"]; st.State != "idle" || len(st.Replicas) != 0 {
		t.Fatalf("before any request: %q with %d replicas", st.State, len(st.Replicas))
	}
	// starts ollama, creates and loads the model; the tiny model never
	// ends an answer by itself, so the answer's length is bounded
	c := g.client()
	if _, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
		Model: "lazy", MaxTokens: openai.Int(8),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	}); err != nil {
		t.Fatalf("chat with lazy: %v", err)
	}
	rs := g.models()["lazy"].Replicas
	if len(rs) != 1 {
		t.Fatalf("after a request: %d replicas", len(rs))
	}
	waitFor(t, 20*time.Second, "the idle replica to stop", func() bool { return len(g.models()["lazy"].Replicas) == 0 })
	waitFor(t, 10*time.Second, "ollama to exit", func() bool { return !processAlive(int(rs[0].PID)) })
}

func TestOllamaReplicaKilledMidStream(t *testing.T) {
	src := tinyModel(t)
	g := startGateway(t, ollamaModels(t, `model pair {
			engine ollama
			source `+src+`
			context_length 2048
			min 2
			max 2
		}`), "")
	g.readyReplicas("pair", 2)
	c := g.client()
	stream := c.Chat.Completions.NewStreaming(bg, openai.ChatCompletionNewParams{
		Model: "pair", MaxTokens: openai.Int(1800), Temperature: openai.Float(0),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("write a long story")},
	})
	if !stream.Next() {
		t.Fatalf("no first chunk: %v", stream.Err())
	}
	// Kill the replica serving the stream.
	var victim int64
	waitFor(t, 5*time.Second, "the stream's replica", func() bool {
		for _, r := range g.models()["pair"].Replicas {
			if r.Inflight > 0 {
				victim = r.PID
				return true
			}
		}
		return false
	})
	if err := syscall.Kill(int(victim), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for stream.Next() {
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "error") {
		t.Errorf("the client got no error event when its replica died: %v", err)
	}
	// The next request is served by the other replica.
	resp, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
		Model: "pair", MaxTokens: openai.Int(4),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	if err != nil || resp.Choices[0].Message.Content == "" {
		t.Fatalf("after the kill: %v", err)
	}
}

// An Ollama model answers requests with tools, whole and streamed, through
// the official client, including a conversation that carries an earlier
// tool call and its result. The tiny test model cannot choose to call a
// tool, so this shows that Ollama accepts the request (its template
// declares tools) and that the answer is well formed, not that a tool is
// called.
func TestOllamaAcceptsTools(t *testing.T) {
	src := tinyModel(t)
	g := startGateway(t, ollamaModels(t, `model tiny {
			engine ollama
			source `+src+`
			context_length 1024
			min 1
		}`), "")
	c := g.client()
	g.readyReplicas("tiny", 1)
	weather := openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "get_weather", Description: openai.String("the weather in a city"),
		Parameters: shared.FunctionParameters{"type": "object", "required": []string{"city"},
			"properties": map[string]any{"city": map[string]any{"type": "string", "description": "the city"}}},
	})
	call := openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
		ID: "call_1", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"city":"Paris"}`},
	}}
	params := openai.ChatCompletionNewParams{
		Model: "tiny", MaxTokens: openai.Int(8), Temperature: openai.Float(0),
		Tools: []openai.ChatCompletionToolUnionParam{weather},
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("Be brief."),
			openai.UserMessage("weather in Paris?"),
			{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{call}}},
			openai.ToolMessage("sunny, 21 C", "call_1"),
			openai.UserMessage("and tomorrow?"),
		},
	}
	whole, err := c.Chat.Completions.New(bg, params)
	if err != nil {
		t.Fatalf("a request with tools: %v", err)
	}
	if len(whole.Choices) != 1 || (whole.Choices[0].Message.Content == "" && len(whole.Choices[0].Message.ToolCalls) == 0) || whole.Usage.CompletionTokens < 1 {
		t.Errorf("answer: %+v", whole)
	}
	stream := c.Chat.Completions.NewStreaming(bg, params)
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("a streamed request with tools: %v", err)
	}
	if chunks < 1 || len(acc.Choices) != 1 || acc.Choices[0].FinishReason == "" ||
		(acc.Choices[0].Message.Content == "" && len(acc.Choices[0].Message.ToolCalls) == 0) {
		t.Errorf("stream: %d chunks, %+v", chunks, acc.Choices)
	}
}
