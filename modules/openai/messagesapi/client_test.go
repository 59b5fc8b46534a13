package messagesapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmgw/llmgw/modules/openai"
)

// engineFunc answers a translated request as the router would: the chat
// completions answer written to w.
type engineFunc func(w http.ResponseWriter, req *openai.Request)

// messagesServer serves /v1/messages as the gateway does: Enter parses
// and translates the request, the engine writes a chat answer, the writer
// Enter returned turns it into a Messages answer. seen gets each chat
// request the engine saw.
func messagesServer(t *testing.T, engine engineFunc, seen chan<- []byte) anthropic.Client {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
		w2, req, err := openai.Enter(w, r)
		if err != nil {
			var e *openai.Error
			if errors.As(err, &e) {
				e.Write(w2)
			}
			return
		}
		if seen != nil {
			seen <- req.Raw
		}
		engine(w2, req)
	}))
	t.Cleanup(srv.Close)
	return anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("k"), option.WithMaxRetries(0))
}

// streamEvents writes SSE events one write each, flushing, as the router
// forwards them.
func streamEvents(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	rc := http.NewResponseController(w)
	for _, e := range events {
		_, _ = w.Write([]byte("data: " + e + "\n\n"))
		_ = rc.Flush()
	}
}

const toolArgs = `{"city":"Par\u00eds \"centre\"","note":"a\\b\nc"}`

func toolStream(w http.ResponseWriter) {
	frag := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	streamEvents(w,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"reasoning_content":"the user wants weather"}}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"Let me check"}}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":" the café."}}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_w","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":`+frag(toolArgs[:9])+`}}]}}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":`+frag(toolArgs[9:])+`}}]}}]}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":22,"total_tokens":62}}`,
		`[DONE]`)
}

func weatherTool() []anthropic.ToolUnionParam {
	return []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
		Properties: map[string]any{"city": map[string]any{"type": "string"}}}, "get_weather")}
}

// The official Go client, plain, streamed with a tool call, and the tool
// result in the next turn.
func TestMessagesOfficialClient(t *testing.T) {
	seen := make(chan []byte, 4)
	client := messagesServer(t, func(w http.ResponseWriter, req *openai.Request) {
		if req.Stream {
			toolStream(w)
			return
		}
		writeWhole(w, 200, []byte(`{"id":"chatcmpl-2","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Sunny, 21°C."},"finish_reason":"stop"}],"usage":{"prompt_tokens":55,"completion_tokens":6,"total_tokens":61}}`))
	}, seen)
	ctx := context.Background()

	stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model: "claude-x", MaxTokens: 100, Tools: weatherTool(),
		System:   []anthropic.TextBlockParam{{Text: "be brief"}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather in Paris?"))},
	})
	var m anthropic.Message
	var partial strings.Builder
	for stream.Next() {
		ev := stream.Current()
		if ev.Type == "content_block_delta" && ev.Delta.Type == "input_json_delta" {
			partial.WriteString(ev.Delta.PartialJSON)
		}
		if err := m.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, <-seen, `{"model":"claude-x","max_tokens":100,"stream":true,"stream_options":{"include_usage":true},
	  "messages":[{"role":"system","content":"be brief"},{"role":"user","content":"weather in Paris?"}],
	  "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`)
	if partial.String() != toolArgs {
		t.Errorf("got partial_json %q, want %q", partial.String(), toolArgs)
	}
	if len(m.Content) != 3 || m.Content[0].Thinking != "the user wants weather" || m.Content[1].Text != "Let me check the café." ||
		m.Content[2].Name != "get_weather" || m.Content[2].ID != "call_w" || string(m.Content[2].Input) != toolArgs {
		t.Fatalf("got %s", m.RawJSON())
	}
	if m.StopReason != "tool_use" || m.Usage.InputTokens != 40 || m.Usage.OutputTokens != 22 || m.Model != "claude-x" {
		t.Errorf("got stop %q usage %d/%d model %q", m.StopReason, m.Usage.InputTokens, m.Usage.OutputTokens, m.Model)
	}

	// The next turn: the call and its result.
	res, err := client.Messages.New(ctx, anthropic.MessageNewParams{
		Model: "claude-x", MaxTokens: 100, Tools: weatherTool(),
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("weather in Paris?")),
			m.ToParam(),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock("call_w", "21°C, sunny", false)),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var chat struct {
		Messages []struct {
			Role       string
			Content    any
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string
				Function struct{ Name, Arguments string }
			} `json:"tool_calls"`
		}
	}
	raw := <-seen
	if err := json.Unmarshal(raw, &chat); err != nil {
		t.Fatal(err)
	}
	if len(chat.Messages) != 3 {
		t.Fatalf("got %s", raw)
	}
	a, tool := chat.Messages[1], chat.Messages[2]
	if a.Role != "assistant" || a.Content != "Let me check the café." || len(a.ToolCalls) != 1 || a.ToolCalls[0].ID != "call_w" {
		t.Errorf("got assistant %+v", a)
	}
	if got := a.ToolCalls[0].Function.Arguments; got != toolArgs {
		t.Errorf("got arguments %q, want the engine's %q", got, toolArgs)
	}
	if tool.Role != "tool" || tool.ToolCallID != "call_w" || tool.Content != "21°C, sunny" {
		t.Errorf("got tool message %+v", tool)
	}
	if res.Content[0].Text != "Sunny, 21°C." || res.StopReason != "end_turn" || res.Usage.InputTokens != 55 || res.Usage.OutputTokens != 6 {
		t.Errorf("got %s", res.RawJSON())
	}
}

func TestMessagesOfficialClientCountTokens(t *testing.T) {
	seen := make(chan []byte, 1)
	client := messagesServer(t, func(w http.ResponseWriter, req *openai.Request) {
		if !req.CountOnly {
			t.Error("count_tokens is not CountOnly")
		}
		writeWhole(w, 200, []byte(`{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"length"}],"usage":{"prompt_tokens":31,"completion_tokens":1,"total_tokens":32}}`))
	}, seen)
	n, err := client.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{
		Model: "claude-x", Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("count me"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n.InputTokens != 31 {
		t.Errorf("got %d input tokens, want 31", n.InputTokens)
	}
	jsonEqual(t, <-seen, `{"model":"claude-x","messages":[{"role":"user","content":"count me"}],"max_tokens":1,"stream":false}`)
}

// Errors reach the official client in Anthropic's shape: a request
// refused before the engine, an engine's error status, and an error in
// the middle of a stream.
func TestMessagesOfficialClientErrors(t *testing.T) {
	client := messagesServer(t, func(w http.ResponseWriter, req *openai.Request) {
		if req.Stream {
			streamEvents(w, `{"id":"c","choices":[{"index":0,"delta":{"content":"par"}}]}`)
			(&openai.Error{Status: 502, Type: "server_error", Code: "upstream_stream_error", Message: "the model's stream broke off"}).WriteEvent(w)
			return
		}
		(&openai.Error{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "slow down"}).Write(w)
	}, nil)
	ctx := context.Background()
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))}

	_, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-x", MaxTokens: 0, Messages: msgs})
	var e *anthropic.Error
	if !errors.As(err, &e) || e.StatusCode != 400 || e.Type() != "invalid_request_error" || !strings.Contains(e.Message, "max_tokens") {
		t.Errorf("bad request: got %v", err)
	}
	_, err = client.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-x", MaxTokens: 5, Messages: msgs})
	if !errors.As(err, &e) || e.StatusCode != 429 || e.Type() != "rate_limit_error" || e.Message != "slow down" {
		t.Errorf("engine error: got %v", err)
	}
	stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "claude-x", MaxTokens: 5, Messages: msgs})
	var text string
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "content_block_delta" {
			text += ev.Delta.Text
		}
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "broke off") || text != "par" {
		t.Errorf("mid-stream: got %v after %q", err, text)
	}
}

// The official client's structured outputs: output_config.format reaches
// the engine as response_format json_schema, and the engine's JSON comes
// back as the answer's text.
func TestMessagesOfficialClientStructured(t *testing.T) {
	seen := make(chan []byte, 1)
	client := messagesServer(t, func(w http.ResponseWriter, req *openai.Request) {
		writeWhole(w, 200, []byte(`{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":"{\"city\":\"Paris\"}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14}}`))
	}, seen)
	schema := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"}, "additionalProperties": false}
	msg, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "claude-x", MaxTokens: 100,
		Messages:     []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("where?"))},
		OutputConfig: anthropic.OutputConfigParam{Format: anthropic.JSONOutputFormatParam{Schema: schema}},
	})
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, <-seen, `{"model":"claude-x","messages":[{"role":"user","content":"where?"}],"max_tokens":100,
	  "response_format":{"type":"json_schema","json_schema":{"name":"output",
	    "schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}}}`)
	if len(msg.Content) != 1 || msg.Content[0].Text != `{"city":"Paris"}` {
		t.Errorf("got %s", msg.RawJSON())
	}
}
