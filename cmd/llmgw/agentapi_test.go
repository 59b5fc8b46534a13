package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
	"github.com/openai/openai-go/v3"
	oaistream "github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
)

// agentModels: a chat model, an echo model (answers with the prompt, so
// that redaction and restoring can be seen) and a slow one (streams long
// enough to be cut).
const agentModels = `
		model sim-chat {
			engine sim
			option max_tokens 12
			context_length 4096
		}
		model echo {
			engine sim
			option echo true
		}
		model slow {
			engine sim
			option max_tokens 400
			option tokens_per_second 40
		}`

// agentChain is every llm_* handler in front of the router, so that each
// is seen to work on the Responses and Messages APIs.
const agentChain = `		llm_guardrails {
			pii {
				email
			}
		}
		llm_cache {
			ttl 1m
		}`

func startAgentGateway(t *testing.T) *gateway {
	t.Helper()
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{})}
	q := ""
	g.quota = &q
	g.before = agentChain
	g.writeConfig(agentModels+tenancyBlock("", "", "models *", ""), "")
	g.start()
	return g
}

func anthropicClient(g *gateway, key string) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(g.base), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
}

var weatherTool = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"city":  map[string]any{"type": "string", "description": "the city"},
		"units": map[string]any{"type": "string", "enum": []any{"celsius", "fahrenheit"}},
	},
	"required": []any{"city"},
}

func TestResponsesAPI(t *testing.T) {
	g := startAgentGateway(t)
	c := keyClient(g, "secret-1")

	t.Run("plain", func(t *testing.T) {
		resp, err := c.Responses.New(bg, responses.ResponseNewParams{
			Model:        "sim-chat",
			Instructions: openai.String("answer briefly"),
			Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("tell me about rivers")},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(strings.Fields(resp.OutputText())); got != 12 {
			t.Errorf("answer has %d words, want 12: %q", got, resp.OutputText())
		}
		// Without a limit the sim's answer has its own length and ends
		// as a model's does (finish_reason stop): completed.
		if resp.Status != "completed" ||
			resp.Usage.OutputTokens != 12 || resp.Usage.InputTokens == 0 ||
			resp.Usage.TotalTokens != resp.Usage.InputTokens+resp.Usage.OutputTokens {
			t.Errorf("status %q usage %+v", resp.Status, resp.Usage)
		}
		// A limit that cuts the answer (finish_reason length) is
		// incomplete, as OpenAI answers when max_output_tokens is hit.
		cut, err := c.Responses.New(bg, responses.ResponseNewParams{
			Model:           "sim-chat",
			Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("tell me about rivers")},
			MaxOutputTokens: openai.Int(5),
		})
		if err != nil {
			t.Fatal(err)
		}
		if cut.Status != "incomplete" || cut.IncompleteDetails.Reason != "max_output_tokens" || cut.Usage.OutputTokens != 5 {
			t.Errorf("cut by max_output_tokens: status %q details %+v usage %+v", cut.Status, cut.IncompleteDetails, cut.Usage)
		}
		if !strings.HasPrefix(resp.ID, "resp_") || resp.Model != "sim-chat" {
			t.Errorf("id %q model %q", resp.ID, resp.Model)
		}
		waitFor(t, 5*time.Second, "the access log to label the API", func() bool {
			return strings.Contains(g.logs.String(), `"llm_api":"responses"`)
		})
	})

	t.Run("a whole answer is completed", func(t *testing.T) {
		resp, err := c.Responses.New(bg, responses.ResponseNewParams{
			Model:           "echo",
			Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("say it back, with ünïcödé and 東京")},
			MaxOutputTokens: openai.Int(100),
		})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != "completed" || resp.OutputText() != "say it back, with ünïcödé and 東京" {
			t.Errorf("status %q text %q", resp.Status, resp.OutputText())
		}
	})

	t.Run("streamed", func(t *testing.T) {
		stream := c.Responses.NewStreaming(bg, responses.ResponseNewParams{
			Model: "sim-chat",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("tell me about lakes")},
		})
		var text strings.Builder
		var types []string
		var completed responses.Response
		seq := int64(-1)
		for stream.Next() {
			ev := stream.Current()
			types = append(types, ev.Type)
			if ev.SequenceNumber <= seq {
				t.Errorf("sequence_number %d after %d", ev.SequenceNumber, seq)
			}
			seq = ev.SequenceNumber
			switch ev.Type {
			case "response.output_text.delta":
				text.WriteString(ev.Delta)
			case "response.completed", "response.incomplete":
				completed = ev.Response
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(types) < 4 || types[0] != "response.created" || types[len(types)-1] != "response.completed" {
			t.Fatalf("events: %v", types)
		}
		if got := completed.OutputText(); got != text.String() || len(strings.Fields(got)) != 12 {
			t.Errorf("deltas %q, completed %q", text.String(), got)
		}
		if completed.Usage.OutputTokens != 12 || completed.Usage.InputTokens == 0 {
			t.Errorf("usage %+v", completed.Usage)
		}
	})

	var callID, firstID, args string
	t.Run("function call streamed", func(t *testing.T) {
		stream := c.Responses.NewStreaming(bg, responses.ResponseNewParams{
			Model: "sim-chat",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is the weather in Paris? Use get_weather.")},
			Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", weatherTool, false)},
		})
		var deltas strings.Builder
		var done string
		var completed responses.Response
		for stream.Next() {
			ev := stream.Current()
			switch ev.Type {
			case "response.function_call_arguments.delta":
				deltas.WriteString(ev.Delta)
			case "response.function_call_arguments.done":
				done = ev.Arguments
			case "response.completed":
				completed = ev.Response
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if deltas.String() != done || !json.Valid([]byte(done)) {
			t.Fatalf("argument deltas %q, done %q", deltas.String(), done)
		}
		for _, it := range completed.Output {
			if it.Type == "function_call" {
				fc := it.AsFunctionCall()
				callID, args = fc.CallID, fc.Arguments
				if fc.Name != "get_weather" {
					t.Errorf("called %q", fc.Name)
				}
			}
		}
		if callID == "" || args != done {
			t.Fatalf("completed output %+v: call id %q arguments %q, want %q", completed.Output, callID, args, done)
		}
		firstID = completed.ID
	})

	t.Run("function output with previous_response_id", func(t *testing.T) {
		if firstID == "" {
			t.Skip("no first turn")
		}
		resp, err := c.Responses.New(bg, responses.ResponseNewParams{
			Model:              "sim-chat",
			PreviousResponseID: openai.String(firstID),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: openai.String(callID),
					Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("22 degrees and sunny in Paris")}}},
			}},
			Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", weatherTool, false)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(resp.OutputText(), "22 degrees") {
			t.Errorf("the answer does not use the tool's output: %q", resp.OutputText())
		}
		if resp.PreviousResponseID != firstID {
			t.Errorf("previous_response_id %q", resp.PreviousResponseID)
		}
	})

	t.Run("json schema", func(t *testing.T) {
		resp, err := c.Responses.New(bg, responses.ResponseNewParams{
			Model: "sim-chat",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("describe Paris")},
			Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
				OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "city", Schema: weatherTool}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(resp.OutputText()), &v); err != nil || v["city"] == nil {
			t.Errorf("answer is not the schema's object: %q (%v)", resp.OutputText(), err)
		}
	})

	t.Run("stored, per key, deleted", func(t *testing.T) {
		resp, err := c.Responses.New(bg, responses.ResponseNewParams{
			Model: "sim-chat",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("remember this")},
		})
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Responses.Get(bg, resp.ID, responses.ResponseGetParams{})
		if err != nil || got.OutputText() != resp.OutputText() {
			t.Fatalf("get: %v %q, want %q", err, got.OutputText(), resp.OutputText())
		}
		var apiErr *openai.Error
		other := keyClient(g, "secret-2")
		if _, err := other.Responses.Get(bg, resp.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
			t.Errorf("another key read the response: %v", err)
		}
		if err := c.Responses.Delete(bg, resp.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Responses.Get(bg, resp.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
			t.Errorf("after delete: %v", err)
		}
		_, err = c.Responses.New(bg, responses.ResponseNewParams{
			Model:              "sim-chat",
			PreviousResponseID: openai.String(resp.ID),
			Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("and then?")},
		})
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Param != "previous_response_id" {
			t.Errorf("continuing a deleted response: %v", err)
		}
	})
	defer checkSettled(t, g)

	t.Run("bad request", func(t *testing.T) {
		resp, body := postKey(t, g.base+"/v1/responses", "secret-1", `{"model":"sim-chat","input":[{"type":"message","role":"user","content":7}]}`)
		if resp.StatusCode != 400 || !strings.Contains(string(body), `"param":"input[0].content"`) {
			t.Errorf("status %d: %s", resp.StatusCode, body)
		}
	})
}

func TestMessagesAPI(t *testing.T) {
	g := startAgentGateway(t)
	c := anthropicClient(g, "secret-1")
	user := func(s string) []anthropic.MessageParam {
		return []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(s))}
	}

	t.Run("plain", func(t *testing.T) {
		msg, err := c.Messages.New(bg, anthropic.MessageNewParams{
			Model: "echo", MaxTokens: 64, Messages: user("say it back, with ünïcödé and 東京"),
			System: []anthropic.TextBlockParam{{Text: "answer briefly"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) != 1 || msg.Content[0].Text != "say it back, with ünïcödé and 東京" {
			t.Errorf("content %+v", msg.Content)
		}
		if msg.StopReason != anthropic.StopReasonEndTurn || msg.Usage.OutputTokens == 0 || msg.Usage.InputTokens == 0 {
			t.Errorf("stop %q usage %+v", msg.StopReason, msg.Usage)
		}
		if msg.Role != "assistant" || msg.Type != "message" {
			t.Errorf("role %q type %q", msg.Role, msg.Type)
		}
		waitFor(t, 5*time.Second, "the access log to label the API", func() bool {
			return strings.Contains(g.logs.String(), `"llm_api":"messages"`)
		})
	})

	t.Run("max_tokens", func(t *testing.T) {
		msg, err := c.Messages.New(bg, anthropic.MessageNewParams{Model: "sim-chat", MaxTokens: 5, Messages: user("go on and on")})
		if err != nil {
			t.Fatal(err)
		}
		if msg.StopReason != anthropic.StopReasonMaxTokens || msg.Usage.OutputTokens != 5 {
			t.Errorf("stop %q usage %+v", msg.StopReason, msg.Usage)
		}
	})

	t.Run("streamed", func(t *testing.T) {
		stream := c.Messages.NewStreaming(bg, anthropic.MessageNewParams{Model: "sim-chat", MaxTokens: 12, Messages: user("tell me about lakes")})
		var msg anthropic.Message
		var text strings.Builder
		var types []string
		for stream.Next() {
			ev := stream.Current()
			if err := msg.Accumulate(ev); err != nil {
				t.Fatal(err)
			}
			types = append(types, ev.Type)
			if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
				text.WriteString(ev.Delta.Text)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(types) < 5 || types[0] != "message_start" || types[len(types)-1] != "message_stop" || types[len(types)-2] != "message_delta" {
			t.Fatalf("events %v", types)
		}
		if len(msg.Content) != 1 || msg.Content[0].Text != text.String() || len(strings.Fields(text.String())) != 12 {
			t.Errorf("accumulated %+v, deltas %q", msg.Content, text.String())
		}
		if msg.StopReason != anthropic.StopReasonMaxTokens || msg.Usage.OutputTokens != 12 || msg.Usage.InputTokens == 0 {
			t.Errorf("stop %q usage %+v", msg.StopReason, msg.Usage)
		}
	})

	tools := []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather", Description: anthropic.String("the weather in a city"),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: weatherTool["properties"], Required: []string{"city"}}}}}
	t.Run("tool use streamed, then its result", func(t *testing.T) {
		first := user("What is the weather in Paris? Use get_weather.")
		stream := c.Messages.NewStreaming(bg, anthropic.MessageNewParams{Model: "sim-chat", MaxTokens: 256, Messages: first, Tools: tools})
		var msg anthropic.Message
		var partial strings.Builder
		for stream.Next() {
			ev := stream.Current()
			if err := msg.Accumulate(ev); err != nil {
				t.Fatal(err)
			}
			if ev.Type == "content_block_delta" && ev.Delta.Type == "input_json_delta" {
				partial.WriteString(ev.Delta.PartialJSON)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		var use anthropic.ContentBlockUnion
		for _, b := range msg.Content {
			if b.Type == "tool_use" {
				use = b
			}
		}
		if msg.StopReason != anthropic.StopReasonToolUse || use.Name != "get_weather" || use.ID == "" {
			t.Fatalf("stop %q content %+v", msg.StopReason, msg.Content)
		}
		var whole, streamed any
		if json.Unmarshal(use.Input, &whole) != nil || json.Unmarshal([]byte(partial.String()), &streamed) != nil {
			t.Fatalf("input %s, partial_json %q", use.Input, partial.String())
		}
		if a, b := mustJSON(whole), mustJSON(streamed); a != b {
			t.Errorf("input %s differs from the streamed %s", a, b)
		}
		next := append(first, msg.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "22 degrees and sunny in Paris", false)))
		ans, err := c.Messages.New(bg, anthropic.MessageNewParams{Model: "sim-chat", MaxTokens: 256, Messages: next, Tools: tools})
		if err != nil {
			t.Fatal(err)
		}
		if len(ans.Content) == 0 || !strings.Contains(ans.Content[0].Text, "22 degrees") {
			t.Errorf("the answer does not use the tool's result: %+v", ans.Content)
		}
	})

	t.Run("count_tokens", func(t *testing.T) {
		n, err := c.Messages.CountTokens(bg, anthropic.MessageCountTokensParams{Model: "sim-chat", Messages: user("tell me about rivers")})
		if err != nil {
			t.Fatal(err)
		}
		msg, err := c.Messages.New(bg, anthropic.MessageNewParams{Model: "sim-chat", MaxTokens: 3, Messages: user("tell me about rivers")})
		if err != nil {
			t.Fatal(err)
		}
		if n.InputTokens == 0 || n.InputTokens != msg.Usage.InputTokens {
			t.Errorf("count_tokens %d, the answer's input tokens %d", n.InputTokens, msg.Usage.InputTokens)
		}
	})

	t.Run("redacted and restored", func(t *testing.T) {
		msg := accumulateMessage(t, c.Messages.NewStreaming(bg, anthropic.MessageNewParams{Model: "echo", MaxTokens: 256,
			Messages: user("write to jane.doe@example.com about the invoice")}))
		if len(msg.Content) == 0 || !strings.Contains(msg.Content[0].Text, "jane.doe@example.com") {
			t.Errorf("the echoed address was not restored: %+v", msg.Content)
		}
	})

	t.Run("cached answer in the client's API", func(t *testing.T) {
		p := anthropic.MessageNewParams{Model: "sim-chat", MaxTokens: 64, Messages: user("what is a delta?")}
		a, err := c.Messages.New(bg, p)
		if err != nil {
			t.Fatal(err)
		}
		var raw *http.Response
		b, err := c.Messages.New(bg, p, aoption.WithResponseInto(&raw))
		if err != nil {
			t.Fatal(err)
		}
		if raw.Header.Get("X-Llmgw-Cache") != "hit-exact" || b.Content[0].Text != a.Content[0].Text {
			t.Errorf("cache %q: %q vs %q", raw.Header.Get("X-Llmgw-Cache"), b.Content[0].Text, a.Content[0].Text)
		}
	})

	t.Run("x-api-key", func(t *testing.T) {
		for key, want := range map[string]int{"secret-1": 200, "wrong": 401} {
			req, _ := http.NewRequest(http.MethodPost, g.base+"/v1/messages",
				strings.NewReader(`{"model":"sim-chat","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("x-api-key", key)
			req.Header.Set("anthropic-version", "2023-06-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want || (want == 401 && !strings.Contains(string(b), `"authentication_error"`)) {
				t.Errorf("x-api-key %s: %d %s", key, resp.StatusCode, b)
			}
		}
	})

	t.Run("errors in Anthropic's shape", func(t *testing.T) {
		wrong := anthropicClient(g, "wrong")
		_, err := wrong.Messages.New(bg, anthropic.MessageNewParams{Model: "sim-chat", MaxTokens: 8, Messages: user("hi")})
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || !strings.Contains(apiErr.RawJSON(), `"authentication_error"`) {
			t.Errorf("bad key: %v", err)
		}
		_, err = c.Messages.New(bg, anthropic.MessageNewParams{Model: "nope", MaxTokens: 8, Messages: user("hi")})
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || !strings.Contains(apiErr.RawJSON(), `"not_found_error"`) {
			t.Errorf("unknown model: %v", err)
		}
		resp, body := postKey(t, g.base+"/v1/messages", "secret-1", `{"model":"sim-chat","messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode != 400 || !strings.Contains(string(body), `"type":"error"`) || !strings.Contains(string(body), "max_tokens") {
			t.Errorf("missing max_tokens: %d %s", resp.StatusCode, body)
		}
	})

	t.Run("engine dies mid-stream", func(t *testing.T) {
		reps := g.readyReplicas("slow", 1)
		stream := c.Messages.NewStreaming(bg, anthropic.MessageNewParams{Model: "slow", MaxTokens: 400, Messages: user("a long story")})
		n := 0
		for stream.Next() {
			if n++; n == 5 {
				_ = syscall.Kill(int(reps[0].PID), syscall.SIGKILL)
			}
		}
		if err := stream.Err(); err == nil || n < 5 {
			t.Errorf("after %d events the stream ended without an error", n)
		}
	})

	checkSettled(t, g)
}

// checkSettled checks that llm_quota settled the key's usage of sim-chat.
func checkSettled(t *testing.T, g *gateway) {
	t.Helper()
	fams := scrape(t, g)
	for _, dir := range []string{"input", "output"} {
		if v, _ := value(fams, "llmgw_usage_tokens_total", map[string]string{"key": "k1", "model": "sim-chat", "direction": dir}); v < 12 {
			t.Errorf("llm_quota settled %v %s tokens for k1", v, dir)
		}
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

func postKey(t *testing.T, url, key, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// accumulateMessage reads a streamed Messages answer to its end, as the
// official client accumulates it.
func accumulateMessage(t *testing.T, stream *ssestream.Stream[anthropic.MessageStreamEventUnion]) anthropic.Message {
	t.Helper()
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	return msg
}

// accumulateChat reads a streamed chat completion to its end, as the
// official client accumulates it, and counts its chunks.
func accumulateChat(t *testing.T, stream *oaistream.Stream[openai.ChatCompletionChunk]) (openai.ChatCompletionAccumulator, int) {
	t.Helper()
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	return acc, chunks
}
