package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmgw/llmgw/engines/standin"
)

// startProvider runs the stand-in provider (engines/standin: it speaks
// Anthropic's Messages API and OpenAI's Responses API as their
// documentation shows them; no paid provider is called).
func startProvider(t *testing.T, keys ...string) (*standin.Server, string) {
	t.Helper()
	s := standin.New(standin.Options{Keys: keys, Delay: time.Millisecond})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

// TestAnthropicEngine: Messages clients pass through to an Anthropic
// provider byte for byte; chat-completions and Responses clients are
// translated to Messages; a refused key moves on to the next.
func TestAnthropicEngine(t *testing.T) {
	prov, url := startProvider(t, "key-spent", "key-good")
	prov.Exhaust("key-spent", time.Minute)
	g := startGateway(t, `
		model claude {
			engine anthropic
			option base_url `+url+`/v1
			option api_key "key-spent, key-good"
			option model claude-test
		}`, "")
	ac := anthropicClient(g, "none")
	user := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("tell me about the sea"))}

	t.Run("messages pass through unchanged", func(t *testing.T) {
		var raw *http.Response
		msg, err := ac.Messages.New(bg, anthropic.MessageNewParams{Model: "claude", MaxTokens: 64, Messages: user,
			System: []anthropic.TextBlockParam{{Text: "be brief", CacheControl: anthropic.NewCacheControlEphemeralParam()}}},
			aoption.WithResponseInto(&raw))
		if err != nil {
			t.Fatal(err)
		}
		last := prov.Last()
		if !strings.Contains(msg.Content[0].Text, "tell me about the sea") || msg.Usage.InputTokens == 0 {
			t.Errorf("answer %+v", msg)
		}
		if !strings.Contains(string(last.Body), `"model":"claude-test"`) || !strings.Contains(string(last.Body), `"cache_control"`) {
			t.Errorf("the provider got %s", last.Body)
		}
		if got := last.Header.Get("X-Api-Key"); got != "key-good" {
			t.Errorf("the provider got key %q, want the second after the first was refused", got)
		}
		if !strings.Contains(g.logs.String(), "provider refused a key") {
			t.Error("moving on to the next key was not logged")
		}
		again, err := ac.Messages.New(bg, anthropic.MessageNewParams{Model: "claude", MaxTokens: 64, Messages: user})
		if err != nil || prov.Last().Header.Get("X-Api-Key") != "key-good" || again.Content[0].Text != msg.Content[0].Text {
			t.Errorf("the next request did not keep the working key: %v %q", err, prov.Last().Header.Get("X-Api-Key"))
		}
	})

	t.Run("streamed bytes unchanged", func(t *testing.T) {
		body := `{"model":"claude","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"What is the weather in Paris? Use get_weather."}],` +
			`"tools":[{"name":"get_weather","description":"weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]}`
		req, _ := http.NewRequest(http.MethodPost, g.base+"/v1/messages", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("anthropic-version", "2023-06-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if sent := prov.Last().Response; !bytes.Equal(got, sent) || !bytes.Contains(got, []byte("input_json_delta")) {
			t.Errorf("the client got other bytes than the provider sent:\n%s\n---\n%s", got, sent)
		}
		if prov.Last().Header.Get("Anthropic-Version") != "2023-06-01" {
			t.Errorf("anthropic-version: %q", prov.Last().Header.Get("Anthropic-Version"))
		}
	})

	t.Run("count_tokens", func(t *testing.T) {
		n, err := ac.Messages.CountTokens(bg, anthropic.MessageCountTokensParams{Model: "claude", Messages: user})
		if err != nil || n.InputTokens == 0 || !strings.HasSuffix(prov.Last().URL, "/v1/messages/count_tokens") {
			t.Errorf("count_tokens: %v %+v, provider saw %s", err, n, prov.Last().URL)
		}
	})

	t.Run("error mid-stream", func(t *testing.T) {
		stream := ac.Messages.NewStreaming(bg, anthropic.MessageNewParams{Model: "claude", MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("please " + standin.FailMidstream))}})
		n := 0
		for stream.Next() {
			n++
		}
		if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "overloaded") {
			t.Errorf("after %d events: %v, want the provider's overloaded_error", n, err)
		}
	})

	oc := g.client()
	t.Run("chat completions translated to Messages", func(t *testing.T) {
		resp, err := oc.Chat.Completions.New(bg, openai.ChatCompletionNewParams{Model: "claude", MaxTokens: openai.Int(64),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("tell me about the sea")}})
		if err != nil {
			t.Fatal(err)
		}
		var sent struct {
			System   any               `json:"system"`
			Messages []json.RawMessage `json:"messages"`
		}
		_ = json.Unmarshal(prov.Last().Body, &sent)
		if !strings.HasSuffix(prov.Last().URL, "/v1/messages") || sent.System == nil || len(sent.Messages) != 1 {
			t.Errorf("the provider got %s %s", prov.Last().URL, prov.Last().Body)
		}
		if !strings.Contains(resp.Choices[0].Message.Content, "tell me about the sea") || resp.Usage.PromptTokens == 0 ||
			resp.Choices[0].FinishReason != "stop" {
			t.Errorf("answer %+v", resp)
		}
		stream := oc.Chat.Completions.NewStreaming(bg, openai.ChatCompletionNewParams{Model: "claude", MaxTokens: openai.Int(64),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris? Use get_weather.")},
			Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
				Name: "get_weather", Parameters: openai.FunctionParameters(weatherTool)})},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		calls := acc.Choices[0].Message.ToolCalls
		if len(calls) != 1 || calls[0].Function.Name != "get_weather" || !json.Valid([]byte(calls[0].Function.Arguments)) ||
			acc.Choices[0].FinishReason != "tool_calls" || acc.Usage.CompletionTokens == 0 {
			t.Errorf("tool call %+v finish %q usage %+v", calls, acc.Choices[0].FinishReason, acc.Usage)
		}
	})

	t.Run("responses translated to Messages", func(t *testing.T) {
		r, err := oc.Responses.New(bg, responses.ResponseNewParams{Model: "claude",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("tell me about the sea")}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(r.OutputText(), "tell me about the sea") || r.Usage.InputTokens == 0 {
			t.Errorf("answer %q usage %+v", r.OutputText(), r.Usage)
		}
	})

	fams := scrape(t, g)
	if v, _ := value(fams, "llmgw_tokens_total", map[string]string{"model": "claude", "kind": "prompt"}); v == 0 {
		t.Error("no prompt tokens counted for the provider's answers")
	}
}

// TestResponsesPassThrough: an openai provider that serves the Responses
// API itself (option speaks responses) gets the client's bytes and sends
// its own back unchanged, unless a handler must read the answer (here
// llm_cache storing it): then it is translated to chat completions, which
// the provider also serves.
func TestResponsesPassThrough(t *testing.T) {
	prov, url := startProvider(t)
	g := startGatewayBefore(t, `
		model gpt {
			engine openai
			option base_url `+url+`/v1
			option api_key sk-test
			option speaks responses
			option model gpt-test
		}`, "\t\tllm_cache")
	body := `{"model":"gpt","store":false,"stream":true,"input":"What is the weather in Paris? Use get_weather.",` +
		`"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]}`
	req, _ := http.NewRequest(http.MethodPost, g.base+"/v1/responses", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Cache-Control", "no-store")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	sent := prov.Last()
	if resp.StatusCode != 200 || !bytes.Equal(got, sent.Response) || !bytes.Contains(got, []byte("response.function_call_arguments.delta")) {
		t.Errorf("status %d; the client got other bytes than the provider sent:\n%s\n---\n%s", resp.StatusCode, got, sent.Response)
	}
	if !strings.HasSuffix(sent.URL, "/v1/responses") || !strings.Contains(string(sent.Body), `"model":"gpt-test"`) {
		t.Errorf("the provider got %s %s", sent.URL, sent.Body)
	}
	fams := scrape(t, g)
	if v, _ := value(fams, "llmgw_tokens_total", map[string]string{"model": "gpt", "kind": "completion"}); v == 0 {
		t.Error("no completion tokens counted from the provider's own events")
	}

	c := g.client()
	r, err := c.Responses.New(bg, responses.ResponseNewParams{Model: "gpt",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("tell me about the sea")}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(prov.Last().URL, "/v1/chat/completions") || !strings.Contains(r.OutputText(), "tell me about the sea") {
		t.Errorf("provider saw %s; answer %q", prov.Last().URL, r.OutputText())
	}
	if _, err := c.Responses.Get(bg, r.ID, responses.ResponseGetParams{}); err != nil {
		t.Errorf("the stored response: %v", err)
	}
}

// TestAzureDeployment: the openai engine's Azure options reach a
// deployment URL with its api-version and the api-key header, and a
// second key takes over when the first is out of quota.
func TestAzureDeployment(t *testing.T) {
	prov, url := startProvider(t, "az-spent", "az-good")
	prov.Exhaust("az-spent", time.Minute)
	g := startGateway(t, `
		model gpt4o {
			engine openai
			option base_url `+url+`
			option azure_deployment prod-gpt4o
			option api_version 2024-10-21
			option api_key "az-spent,az-good"
		}`, "")
	c := g.client()
	for range 2 {
		resp, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{Model: "gpt4o",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("tell me about the sea")}})
		if err != nil {
			t.Fatal(err)
		}
		last := prov.Last()
		if last.URL != "/openai/deployments/prod-gpt4o/chat/completions?api-version=2024-10-21" ||
			last.Header.Get("Api-Key") != "az-good" || last.Header.Get("Authorization") != "" {
			t.Errorf("the provider got %s with api-key %q, authorization %q", last.URL, last.Header.Get("Api-Key"), last.Header.Get("Authorization"))
		}
		if !strings.Contains(resp.Choices[0].Message.Content, "tell me about the sea") {
			t.Errorf("answer %q", resp.Choices[0].Message.Content)
		}
	}
	if n := len(prov.Exchanges()); n != 3 {
		t.Errorf("the provider saw %d requests, want 3: the refused key once, then the good one twice", n)
	}
	// Messages clients reach Azure through translation.
	ac := anthropicClient(g, "none")
	msg, err := ac.Messages.New(bg, anthropic.MessageNewParams{Model: "gpt4o", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("tell me about the sea"))}})
	if err != nil || len(msg.Content) == 0 || !strings.Contains(msg.Content[0].Text, "tell me about the sea") {
		t.Errorf("messages through Azure: %v %+v", err, msg)
	}
}
