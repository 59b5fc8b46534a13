package responsesapi

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmgw/llmgw/modules/openai"
)

// chatServer answers requests the way the llm_* handlers do: Enter, then
// a chat-completions answer written as the router writes it (a whole body
// with Content-Length, or events each written and flushed). answer
// chooses the answer from the chat request.
func chatServer(t *testing.T, answer func(req *openai.Request) chatAnswer) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, ok := strings.CutPrefix(r.URL.Path, "/v1/responses/"); ok {
			ServeStoredResponse(w, r, id)
			return
		}
		w, req, err := openai.Enter(w, r)
		if err != nil {
			var e *openai.Error
			errors.As(err, &e)
			e.Write(w)
			return
		}
		a := answer(req)
		if !req.Stream {
			body := a.whole()
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(200)
			_, _ = w.Write(body)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		rc := http.NewResponseController(w)
		for _, ev := range bytes.SplitAfter(a.stream(rand.New(rand.NewPCG(5, 6))), []byte("\n\n")) {
			_, _ = w.Write(ev)
			_ = rc.Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// whole returns the answer as a non-streamed chat completion.
func (a chatAnswer) whole() []byte {
	var b bytes.Buffer
	b.WriteString(`{"id":"chatcmpl-1","object":"chat.completion","model":"engine","choices":[{"index":0,"message":{"role":"assistant","content":`)
	b.WriteString(strconv.Quote(a.content)) // the test texts are ones Quote writes as JSON
	if len(a.calls) > 0 {
		b.WriteString(`,"tool_calls":[`)
		for i, c := range a.calls {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"id":` + strconv.Quote(c.id) + `,"type":"function","function":{"name":` + strconv.Quote(c.name) +
				`,"arguments":` + strconv.Quote(c.args) + `}}`)
		}
		b.WriteByte(']')
	}
	b.WriteString(`},"finish_reason":"` + a.finish + `"}],"usage":` + a.usage + `}`)
	return b.Bytes()
}

// TestResponsesClient drives the translation with openai-go's Responses
// client over HTTP: plain, streamed, a streamed function call whose
// output comes back in the next turn by previous_response_id, a JSON
// schema, GET and DELETE of a stored response.
func TestResponsesClient(t *testing.T) {
	SetResponseStore(newMemoryStore(100, 1<<20))
	defer SetResponseStore(nil)
	args := `{"city":"Zürich","note":"a \"b\" \\ c"}`
	srv := chatServer(t, func(req *openai.Request) chatAnswer {
		usage := `{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}`
		switch raw := string(req.Raw); {
		case strings.Contains(raw, `"role":"tool"`):
			if !strings.Contains(raw, `"tool_call_id":"call_w"`) || !strings.Contains(raw, `"arguments":`+strconv.Quote(args)) {
				t.Errorf("the second turn lost the call: %s", raw)
			}
			return chatAnswer{content: "It is sunny in Zürich.", finish: "stop", usage: usage}
		case strings.Contains(raw, `"tools"`):
			return chatAnswer{calls: []chatCall{{"call_w", "weather", args}}, finish: "tool_calls", usage: usage}
		case strings.Contains(raw, `"json_schema"`):
			return chatAnswer{content: `{"answer":42}`, finish: "stop", usage: usage}
		}
		return chatAnswer{content: "Hello, wörld!", finish: "stop", usage: usage}
	})
	client := oai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("k"), option.WithMaxRetries(0))
	ctx := context.Background()
	hi := responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("hi")}}

	resp, err := client.Responses.New(ctx, hi)
	if err != nil || resp.OutputText() != "Hello, wörld!" || resp.Usage.TotalTokens != 12 {
		t.Fatalf("plain: %v %+v", err, resp)
	}

	stream := client.Responses.NewStreaming(ctx, hi)
	var text string
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "response.output_text.delta" {
			text += ev.Delta
		}
	}
	if stream.Err() != nil || text != "Hello, wörld!" {
		t.Fatalf("streamed: %v %q", stream.Err(), text)
	}

	tool := responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: "weather",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}
	callParams := hi
	callParams.Tools = []responses.ToolUnionParam{tool}
	stream = client.Responses.NewStreaming(ctx, callParams)
	var first responses.Response
	var streamedArgs string
	for stream.Next() {
		switch ev := stream.Current(); ev.Type {
		case "response.function_call_arguments.delta":
			streamedArgs += ev.Delta
		case "response.completed":
			first = ev.Response
		}
	}
	if stream.Err() != nil || streamedArgs != args || len(first.Output) != 1 || first.Output[0].AsFunctionCall().Arguments != args {
		t.Fatalf("function call: %v %q %+v", stream.Err(), streamedArgs, first.Output)
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput("sunny")
	out.OfFunctionCallOutput.CallID = oai.String(first.Output[0].AsFunctionCall().CallID)
	resp, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "m", PreviousResponseID: oai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}, Tools: callParams.Tools})
	if err != nil || resp.OutputText() != "It is sunny in Zürich." || resp.PreviousResponseID != first.ID {
		t.Fatalf("second turn: %v %+v", err, resp)
	}

	schema := hi
	schema.Text = responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigParamOfJSONSchema("a",
		map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "integer"}}})}
	resp, err = client.Responses.New(ctx, schema)
	if err != nil || resp.OutputText() != `{"answer":42}` || resp.Text.Format.Type != "json_schema" {
		t.Fatalf("json schema: %v %+v", err, resp)
	}

	got, err := client.Responses.Get(ctx, resp.ID, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != `{"answer":42}` {
		t.Fatalf("get: %v %+v", err, got)
	}
	if err := client.Responses.Delete(ctx, resp.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = client.Responses.Get(ctx, resp.ID, responses.ResponseGetParams{})
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("get after delete: %v", err)
	}
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "m", PreviousResponseID: oai.String(resp.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("more")}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Param != "previous_response_id" {
		t.Fatalf("previous deleted: %v", err)
	}
}
