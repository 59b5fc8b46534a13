package messagesapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	oai "github.com/openai/openai-go/v3"
	oaiopt "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/llmgw/llmgw/modules/openai"
)

// The Messages example answer of Anthropic's tool use docs.
const docsToolAnswer = `{"id":"msg_01Aq9w938a90dw8q","type":"message","model":"claude-3-opus-20240229","stop_reason":"tool_use","role":"assistant",
 "content":[{"type":"text","text":"<thinking>I need to call the get_weather function.</thinking>"},
   {"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"get_weather","input":{"location": "San Francisco, CA", "unit": "celsius"}}],
 "usage":{"input_tokens":472,"output_tokens":89}}`

// standInAnthropic answers /v1/messages as Anthropic's docs show: the
// documented tool-use stream in random pieces, or the documented answer.
// Each request it gets is decoded with the official client's types.
func standInAnthropic(t *testing.T, seen chan<- anthropic.MessageNewParams) *httptest.Server {
	stream, err := os.ReadFile("testdata/messages_tool_use.sse")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p anthropic.MessageNewParams
		if err := json.Unmarshal(body, &p); err != nil || p.MaxTokens == 0 || len(p.Messages) == 0 {
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"type":"error","error":{"type":"invalid_request_error","message":"bad request body"}}`))
			return
		}
		seen <- p
		if !bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(docsToolAnswer))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		writeChunked(w, stream, rand.New(rand.NewPCG(5, 6)))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// chatFront serves chat completions in front of a Messages engine with
// the upstream translations, as the router does for such an engine.
func chatFront(t *testing.T, upstream string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, err := openai.Parse(openai.ChatCompletions, body)
		if err != nil {
			err.(*openai.Error).Write(w)
			return
		}
		up, err := ChatToMessagesBody(req.Raw, "claude-up")
		if err != nil {
			err.(*openai.Error).Write(w)
			return
		}
		resp, err := http.Post(upstream+"/v1/messages", "application/json", bytes.NewReader(up))
		if err != nil {
			t.Error(err)
			return
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode >= 400:
			b, _ := io.ReadAll(resp.Body)
			w.WriteHeader(resp.StatusCode)
			_, _ = w.Write(MessagesErrorToOpenAI(resp.StatusCode, b))
		case req.Stream:
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.Copy(w, MessagesToChatStream(resp.Body))
		default:
			b, _ := io.ReadAll(resp.Body)
			out, err := MessagesToChatBody(b)
			if err != nil {
				t.Error(err)
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(out)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// openai-go in front of a stand-in Messages engine: the request reaches
// it in Messages' shapes, the documented answers come back as chat
// completions, tool call arguments byte for byte.
func TestChatClientOnMessagesEngine(t *testing.T) {
	seen := make(chan anthropic.MessageNewParams, 2)
	front := chatFront(t, standInAnthropic(t, seen).URL)
	client := oai.NewClient(oaiopt.WithBaseURL(front.URL+"/v1/"), oaiopt.WithAPIKey("k"), oaiopt.WithMaxRetries(0))
	weather := oai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "get_weather", Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"location": map[string]any{"type": "string"}}},
	})
	call := oai.ChatCompletionMessageToolCallUnionParam{OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
		ID: "toolu_0", Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"location":"Paris"}`},
	}}
	params := oai.ChatCompletionNewParams{
		Model: "gw", MaxTokens: oai.Int(1024), Tools: []oai.ChatCompletionToolUnionParam{weather},
		Messages: []oai.ChatCompletionMessageParamUnion{
			oai.SystemMessage("Be brief."),
			oai.UserMessage("weather in Paris?"),
			{OfAssistant: &oai.ChatCompletionAssistantMessageParam{ToolCalls: []oai.ChatCompletionMessageToolCallUnionParam{call}}},
			oai.ToolMessage("sunny, 21 C", "toolu_0"),
			oai.UserMessage("and San Francisco?"),
		},
	}
	ctx := context.Background()
	whole, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	p := <-seen
	if p.Model != "claude-up" || p.System[0].Text != "Be brief." || len(p.Messages) != 3 {
		t.Fatalf("the engine got model %q system %v, %d messages", p.Model, p.System, len(p.Messages))
	}
	if tu := p.Messages[1].OfAssistant.Content[0].OfToolUse; tu == nil || tu.ID != "toolu_0" || tu.Name != "get_weather" {
		t.Errorf("the engine got assistant %+v", p.Messages[1])
	}
	if tr := p.Messages[2].OfUser.Content[0].OfToolResult; tr == nil || tr.ToolUseID != "toolu_0" || p.Messages[2].OfUser.Content[1].OfText.Text != "and San Francisco?" {
		t.Errorf("the engine got user turn %+v", p.Messages[2])
	}
	m := whole.Choices[0].Message
	if m.ToolCalls[0].Function.Arguments != `{"location": "San Francisco, CA", "unit": "celsius"}` || whole.Choices[0].FinishReason != "tool_calls" || whole.Usage.PromptTokens != 472 {
		t.Errorf("got %s", whole.RawJSON())
	}

	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc oai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	<-seen
	got := acc.Choices[0].Message
	if got.Content != "Okay, let's check the weather for San Francisco, CA:" || got.ToolCalls[0].ID != "toolu_01T1x1fJ34qAmk2tNTrN7Up6" ||
		got.ToolCalls[0].Function.Arguments != `{"location": "San Francisco, CA", "unit": "fahrenheit"}` {
		t.Errorf("accumulated %+v", got)
	}
	if acc.Usage.PromptTokens != 472 || acc.Usage.CompletionTokens != 89 || acc.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("got usage %+v, finish %q", acc.Usage, acc.Choices[0].FinishReason)
	}
}

// A Messages engine's error reaches the chat client in OpenAI's shape.
func TestChatClientOnMessagesEngineError(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(529)
		_, _ = w.Write([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	}))
	t.Cleanup(up.Close)
	client := oai.NewClient(oaiopt.WithBaseURL(chatFront(t, up.URL).URL+"/v1/"), oaiopt.WithAPIKey("k"), oaiopt.WithMaxRetries(0))
	_, err := client.Chat.Completions.New(context.Background(), oai.ChatCompletionNewParams{
		Model: "gw", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("hi")}})
	var e *oai.Error
	if !errors.As(err, &e) || e.StatusCode != 529 || e.Code != "overloaded_error" || !strings.Contains(e.Message, "Overloaded") {
		t.Errorf("got %v", err)
	}
}

// openai-go's structured outputs on a Messages engine: the schema reaches
// it as output_config.format, as the official client's types read it.
func TestChatClientOnMessagesEngineStructured(t *testing.T) {
	seen := make(chan anthropic.MessageNewParams, 1)
	front := chatFront(t, standInAnthropic(t, seen).URL)
	client := oai.NewClient(oaiopt.WithBaseURL(front.URL+"/v1/"), oaiopt.WithAPIKey("k"), oaiopt.WithMaxRetries(0))
	schema := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"}}
	_, err := client.Chat.Completions.New(context.Background(), oai.ChatCompletionNewParams{
		Model: "gw", Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("where?")},
		ResponseFormat: oai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "place", Schema: schema, Strict: oai.Bool(true)}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := <-seen
	got, _ := json.Marshal(p.OutputConfig.Format.Schema)
	want, _ := json.Marshal(schema)
	if string(got) != string(want) || p.OutputConfig.Format.Type != "json_schema" {
		t.Errorf("the engine got output_config %+v, want the schema %s", p.OutputConfig, want)
	}
}
