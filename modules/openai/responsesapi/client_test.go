package responsesapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

// TestFileSearchClient drives a searched request with openai-go over
// HTTP, as a knowledge-base handler would serve it (Request.FileSearch
// read, Request.Retrieval set before the answer): whole and streamed,
// the file_search_call item and the citations in the client's own types,
// and the items sent back in the next turn.
func TestFileSearchClient(t *testing.T) {
	SetResponseStore(newMemoryStore(100, 1<<20))
	defer SetResponseStore(nil)
	rv := testRetrieval()
	text := "Reset it under Settings [1], or ask your admin [2]."
	srv := chatServer(t, func(req *openai.Request) chatAnswer {
		fs := req.FileSearch
		if fs == nil || fmt.Sprint(fs.VectorStoreIDs) != "[kb_docs]" || fs.MaxNumResults != 5 || fs.ScoreThreshold != 0.2 || !fs.IncludeResults {
			t.Errorf("the handler sees FileSearch %+v", fs)
		} else {
			req.Retrieval = rv
		}
		if strings.Contains(string(req.Raw), "file_search") {
			t.Errorf("the file_search tool reached the model: %s", req.Raw)
		}
		return chatAnswer{content: text, finish: "stop", usage: `{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}`}
	})
	client := oai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("k"), option.WithMaxRetries(0))
	ctx := context.Background()
	tool := responses.ToolParamOfFileSearch([]string{"kb_docs"})
	tool.OfFileSearch.MaxNumResults = oai.Int(5)
	tool.OfFileSearch.RankingOptions = responses.FileSearchToolRankingOptionsParam{ScoreThreshold: oai.Float(0.2), Ranker: "auto"}
	params := responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("how do I reset my password?")},
		Tools: []responses.ToolUnionParam{tool}, Include: []responses.ResponseIncludable{responses.ResponseIncludableFileSearchCallResults}}
	want := []citation{{"file-a", "a.md", 27}, {"file-b", `b "quoted".pdf`, 50}}

	resp, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	checkClientSearch(t, "whole", resp, text, want)

	stream := client.Responses.NewStreaming(ctx, params)
	var got []citation
	var final responses.Response
	for stream.Next() {
		switch ev := stream.Current(); ev.Type {
		case "response.output_text.annotation.added":
			c := ev.Annotation.AsFileCitation()
			got = append(got, citation{c.FileID, c.Filename, c.Index})
		case "response.completed":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("streamed: %v, annotations %v", err, got)
	}
	checkClientSearch(t, "streamed", &final, text, want)

	// The Agents SDK sends the output items back as the next input.
	input := responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("how do I reset my password?", responses.EasyInputMessageRoleUser),
		{OfFileSearchCall: new(resp.Output[0].AsFileSearchCall().ToParam())},
		{OfOutputMessage: new(resp.Output[1].AsMessage().ToParam())},
		responses.ResponseInputItemParamOfMessage("thanks", responses.EasyInputMessageRoleUser),
	}
	next := params
	next.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
	if resp, err = client.Responses.New(ctx, next); err != nil || resp.OutputText() != text {
		t.Fatalf("items sent back: %v %+v", err, resp)
	}
}

func checkClientSearch(t *testing.T, name string, resp *responses.Response, text string, want []citation) {
	t.Helper()
	fs := resp.Output[0].AsFileSearchCall()
	if resp.Output[0].Type != "file_search_call" || fs.ID != "fs_test1" || fs.Status != "completed" || len(fs.Results) != 5 ||
		fs.Results[0].Filename != "a.md" || fs.Results[0].Attributes["lang"].OfString != "en" || resp.OutputText() != text {
		t.Fatalf("%s: got %s", name, resp.RawJSON())
	}
	var got []citation
	for _, a := range resp.Output[1].AsMessage().Content[0].Annotations {
		c := a.AsFileCitation()
		got = append(got, citation{c.FileID, c.Filename, c.Index})
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: got annotations %v, want %v", name, got, want)
	}
}
