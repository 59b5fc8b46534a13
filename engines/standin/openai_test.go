package standin

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	oaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

func newOpenAI(t *testing.T, opts ...oaioption.RequestOption) (*Server, string, openai.Client) {
	t.Helper()
	s := New(Options{Keys: []string{"sk-good"}})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	opts = append([]oaioption.RequestOption{oaioption.WithBaseURL(srv.URL + "/v1"), oaioption.WithAPIKey("sk-good"), oaioption.WithMaxRetries(0)}, opts...)
	return s, srv.URL, openai.NewClient(opts...)
}

func respParams(t *testing.T, body string) responses.ResponseNewParams {
	t.Helper()
	var p responses.ResponseNewParams
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// streamResponse runs a streamed Responses request and returns the
// events and the text and arguments their deltas carry.
func streamResponse(t *testing.T, c openai.Client, p responses.ResponseNewParams) (events []responses.ResponseStreamEventUnion, text, args string) {
	t.Helper()
	st := c.Responses.NewStreaming(t.Context(), p)
	for st.Next() {
		ev := st.Current()
		events = append(events, ev)
		switch ev.Type {
		case "response.output_text.delta":
			text += ev.Delta
		case "response.function_call_arguments.delta":
			args += ev.Delta
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	for i, ev := range events {
		if ev.SequenceNumber != int64(i) {
			t.Errorf("event %d (%s) has sequence_number %d", i, ev.Type, ev.SequenceNumber)
		}
	}
	return events, text, args
}

func TestResponsesText(t *testing.T) {
	_, _, c := newOpenAI(t)
	p := respParams(t, `{"model":"gpt-x","input":"Hi there","instructions":"be brief"}`)
	whole, err := c.Responses.New(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if got := whole.OutputText(); got != "Hello from the stand-in. You said: Hi there" || whole.Status != "completed" || whole.Usage.InputTokens != 4 || whole.Usage.OutputTokens != 8 {
		t.Errorf("got %q %s %+v", got, whole.Status, whole.Usage)
	}
	events, text, _ := streamResponse(t, c, p)
	var types []string
	for _, ev := range events {
		types = append(types, ev.Type)
	}
	want := "response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta"
	if got := strings.Join(types, " "); !strings.HasPrefix(got, want) ||
		!strings.HasSuffix(got, "response.output_text.done response.content_part.done response.output_item.done response.completed") {
		t.Errorf("events: %s", got)
	}
	final := events[len(events)-1].Response
	if text != whole.OutputText() || final.OutputText() != text || final.Usage.TotalTokens != whole.Usage.TotalTokens {
		t.Errorf("streamed %q, final %q, usage %+v", text, final.OutputText(), final.Usage)
	}

	short, err := c.Responses.New(t.Context(), respParams(t, `{"model":"gpt-x","input":"Hi there","max_output_tokens":2}`))
	if err != nil {
		t.Fatal(err)
	}
	if short.Status != "incomplete" || short.IncompleteDetails.Reason != "max_output_tokens" || short.OutputText() != "Hello from" {
		t.Errorf("got %s %+v %q", short.Status, short.IncompleteDetails, short.OutputText())
	}
}

func TestResponsesFunctionCall(t *testing.T) {
	s, _, c := newOpenAI(t)
	p := respParams(t, `{"model":"gpt-x","input":[{"type":"message","role":"user","content":"call get_weather"}],"tools":[{"type":"function","name":"get_weather",
		"parameters":{"type":"object","properties":{"city":{"type":"string"},"units":{"enum":["c","f"]}}}}]}`)
	whole, err := c.Responses.New(t.Context(), p)
	if err != nil {
		t.Fatalf("%v: %s", err, s.Last().Body)
	}
	call := whole.Output[0].AsFunctionCall()
	if call.Type != "function_call" || call.Name != "get_weather" || !strings.HasPrefix(call.CallID, "call_") || !json.Valid([]byte(call.Arguments)) {
		t.Fatalf("got %+v", call)
	}
	events, _, args := streamResponse(t, c, p)
	var done string
	for _, ev := range events {
		if ev.Type == "response.function_call_arguments.done" {
			done = ev.Arguments
		}
	}
	if args != call.Arguments || done != call.Arguments || !strings.Contains(args, `\\`) || !strings.Contains(args, "東京") {
		t.Errorf("streamed %q, done %q, whole %q", args, done, call.Arguments)
	}

	next := respParams(t, `{"model":"gpt-x","input":[{"type":"message","role":"user","content":"call get_weather"},
		{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{}"},
		{"type":"function_call_output","call_id":"call_1","output":"rain all day"}]}`)
	res, err := c.Responses.New(t.Context(), next)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.OutputText(); got != `The tool returned: "rain all day".` {
		t.Errorf("got %q", got)
	}

	schema, err := c.Responses.New(t.Context(), respParams(t, `{"model":"gpt-x","input":"x","text":{"format":{"type":"json_schema","name":"w",
		"schema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ N *int }
	if err := json.Unmarshal([]byte(schema.OutputText()), &v); err != nil || v.N == nil {
		t.Errorf("json_schema output %q: %v", schema.OutputText(), err)
	}
}

func TestChatAndAzure(t *testing.T) {
	s, url, c := newOpenAI(t)
	body := `{"model":"gpt-x","messages":[{"role":"user","content":"Hi"}]}`
	var p openai.ChatCompletionNewParams
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	whole, err := c.Chat.Completions.New(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	st := c.Chat.Completions.NewStreaming(t.Context(), p)
	var acc openai.ChatCompletionAccumulator
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != whole.Choices[0].Message.Content || acc.Usage.TotalTokens != whole.Usage.TotalTokens || whole.Usage.CompletionTokens != 7 {
		t.Errorf("streamed %q %+v, whole %q %+v", acc.Choices[0].Message.Content, acc.Usage, whole.Choices[0].Message.Content, whole.Usage)
	}

	// Azure's deployment API: the key in api-key, the version in the query.
	az := openai.NewClient(oaioption.WithBaseURL(url+"/openai/deployments/dep1"), oaioption.WithHeader("api-key", "sk-good"),
		oaioption.WithQuery("api-version", "2024-10-21"), oaioption.WithMaxRetries(0))
	if _, err := az.Chat.Completions.New(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	if got := s.Last().URL; got != "/openai/deployments/dep1/chat/completions?api-version=2024-10-21" {
		t.Errorf("URL: got %s", got)
	}
	for _, tc := range []struct {
		name   string
		client openai.Client
		status int
	}{
		{"deployment without api-version", openai.NewClient(oaioption.WithBaseURL(url+"/openai/deployments/dep1"), oaioption.WithHeader("api-key", "sk-good"), oaioption.WithMaxRetries(0)), 404},
		{"Azure path with Bearer", openai.NewClient(oaioption.WithBaseURL(url+"/openai/v1"), oaioption.WithAPIKey("sk-good"), oaioption.WithMaxRetries(0)), 401},
		{"bad key", openai.NewClient(oaioption.WithBaseURL(url+"/v1"), oaioption.WithAPIKey("sk-bad"), oaioption.WithMaxRetries(0)), 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.client.Chat.Completions.New(t.Context(), p)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status {
				t.Errorf("got %v, want status %d", err, tc.status)
			}
		})
	}
	v1 := openai.NewClient(oaioption.WithBaseURL(url+"/openai/v1"), oaioption.WithHeader("api-key", "sk-good"), oaioption.WithMaxRetries(0))
	if _, err := v1.Responses.New(t.Context(), respParams(t, `{"model":"dep1","input":"hi"}`)); err != nil {
		t.Errorf("Azure v1 Responses: %v", err)
	}

	s.Exhaust("sk-good", 2*time.Second)
	_, err = c.Chat.Completions.New(t.Context(), p)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Response.Header.Get("retry-after") != "2" || apiErr.Code != "rate_limit_exceeded" {
		t.Errorf("exhausted: got %v", err)
	}
}

func TestResponsesFailMidstream(t *testing.T) {
	_, _, c := newOpenAI(t)
	st := c.Responses.NewStreaming(t.Context(), respParams(t, `{"model":"gpt-x","input":"please FAIL_MIDSTREAM"}`))
	var last responses.ResponseStreamEventUnion
	deltas := 0
	for st.Next() {
		last = st.Current()
		if last.Type == "response.output_text.delta" {
			deltas++
		}
	}
	if last.Type != "response.failed" || last.Response.Status != "failed" || last.Response.Error.Code != "server_error" || deltas != 2 {
		t.Errorf("got %s %s %+v after %d deltas (stream error %v)", last.Type, last.Response.Status, last.Response.Error, deltas, st.Err())
	}
}
