package standin

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

func newAnthropic(t *testing.T) (*Server, anthropic.Client) {
	t.Helper()
	s := New(Options{Keys: []string{"good", "spare"}})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("good"), option.WithMaxRetries(0))
}

func msgParams(t *testing.T, body string) anthropic.MessageNewParams {
	t.Helper()
	var p anthropic.MessageNewParams
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

const weatherTool = `"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{
	"city":{"type":"string"},"days":{"type":"integer"},"when":{"type":"object","properties":{"hour":{"type":"integer"}}}},"required":["city"]}}]`

// stream runs a streamed request and returns the accumulated message, the
// event types in order, and the stream's error.
func stream(t *testing.T, c anthropic.Client, p anthropic.MessageNewParams) (anthropic.Message, []string, error) {
	t.Helper()
	st := c.Messages.NewStreaming(t.Context(), p)
	var msg anthropic.Message
	var types []string
	for st.Next() {
		ev := st.Current()
		types = append(types, ev.Type)
		if err := msg.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	return msg, types, st.Err()
}

func TestMessagesText(t *testing.T) {
	s, c := newAnthropic(t)
	p := msgParams(t, `{"model":"claude-x","max_tokens":100,"messages":[{"role":"user","content":"Hi there, stand-in"}]}`)
	whole, err := c.Messages.New(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := whole.Content[0].Text, "Hello from the stand-in. You said: Hi there, stand-in"; got != want || whole.StopReason != "end_turn" || whole.Model != "claude-x" {
		t.Errorf("got %q (%s, %s), want %q", got, whole.StopReason, whole.Model, want)
	}
	if whole.Usage.InputTokens != 3 || whole.Usage.OutputTokens != 9 {
		t.Errorf("usage: got %+v", whole.Usage)
	}
	last := s.Last()
	if last.Header.Get("Authorization") != "Bearer good" || last.Header.Get("anthropic-version") == "" || last.Status != 200 {
		t.Errorf("exchange: %+v", last)
	}

	msg, types, err := stream(t, c, p)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Content[0].Text != whole.Content[0].Text || msg.StopReason != "end_turn" || msg.Usage.OutputTokens != whole.Usage.OutputTokens || msg.Usage.InputTokens != 3 {
		t.Errorf("streamed %q %s %+v", msg.Content[0].Text, msg.StopReason, msg.Usage)
	}
	want := "message_start content_block_start content_block_delta"
	if got := strings.Join(types, " "); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "content_block_stop message_delta message_stop") {
		t.Errorf("events: %s", got)
	}
	raw := string(s.Last().Response)
	if !strings.Contains(raw, "event: ping\ndata: {\"type\":\"ping\"}\n\n") ||
		!strings.HasPrefix(raw, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_") {
		t.Errorf("stream bytes:\n%s", raw)
	}
}

func TestMessagesToolUse(t *testing.T) {
	s, c := newAnthropic(t)
	p := msgParams(t, `{"model":"m","max_tokens":100,`+weatherTool+`,"messages":[{"role":"user","content":"What does get_weather say for Paris?"}]}`)
	whole, err := c.Messages.New(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if len(whole.Content) != 2 || whole.Content[1].Type != "tool_use" || whole.Content[1].Name != "get_weather" || whole.StopReason != "tool_use" {
		t.Fatalf("got %+v", whole.Content)
	}
	var in struct {
		City string
		Days *int
		When struct{ Hour *int }
	}
	if err := json.Unmarshal(whole.Content[1].Input, &in); err != nil || !strings.Contains(in.City, `"`) || !strings.Contains(in.City, "東京") || in.Days == nil || in.When.Hour == nil {
		t.Errorf("input %s: %v", whole.Content[1].Input, err)
	}
	msg, _, err := stream(t, c, p)
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Content[1].Input) != string(whole.Content[1].Input) || msg.StopReason != "tool_use" || msg.Usage.OutputTokens != whole.Usage.OutputTokens {
		t.Errorf("streamed input %s, whole %s", msg.Content[1].Input, whole.Content[1].Input)
	}
	if n := strings.Count(string(s.Last().Response), `"type":"input_json_delta"`); n < 5 {
		t.Errorf("%d input_json_delta events, want several", n)
	}

	// The tool's result, in the next turn.
	next := msgParams(t, `{"model":"m","max_tokens":100,`+weatherTool+`,"messages":[{"role":"user","content":"get_weather"},
		{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny and 21 degrees"}]}]}`)
	res, err := c.Messages.New(t.Context(), next)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].Text; got != `The tool returned: "sunny and 21 degrees".` || res.StopReason != "end_turn" {
		t.Errorf("got %q %s", got, res.StopReason)
	}
}

func TestMessagesThinkingAndStops(t *testing.T) {
	_, c := newAnthropic(t)
	p := msgParams(t, `{"model":"m","max_tokens":100,"thinking":{"type":"enabled","budget_tokens":1024},"stop_sequences":["said"],"messages":[{"role":"user","content":"hi"}]}`)
	msg, _, err := stream(t, c, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 2 || msg.Content[0].Type != "thinking" || msg.Content[0].Thinking == "" || msg.Content[0].Signature == "" {
		t.Fatalf("got %+v", msg.Content)
	}
	if msg.Content[1].Text != "Hello from the stand-in. You " || msg.StopReason != "stop_sequence" || msg.StopSequence != "said" {
		t.Errorf("got %q %s %q", msg.Content[1].Text, msg.StopReason, msg.StopSequence)
	}
	whole, err := c.Messages.New(t.Context(), msgParams(t, `{"model":"m","max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if whole.Content[0].Text != "Hello from the" || whole.StopReason != "max_tokens" || whole.Usage.OutputTokens != 3 {
		t.Errorf("got %q %s %+v", whole.Content[0].Text, whole.StopReason, whole.Usage)
	}
}

func TestMessagesPromptCaching(t *testing.T) {
	s, c := newAnthropic(t)
	body := `{"model":"m","max_tokens":10,"system":[{"type":"text","text":"a long system prompt of eight words","cache_control":{"type":"ephemeral"}}],
		"messages":[{"role":"user","content":"and a question"}]}`
	first, err := c.Messages.New(t.Context(), msgParams(t, body))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(s.Last().Body), `"cache_control":{"type":"ephemeral"}`) {
		t.Errorf("the request arrived without cache_control: %s", s.Last().Body)
	}
	msg, _, err := stream(t, c, msgParams(t, body))
	if err != nil {
		t.Fatal(err)
	}
	if first.Usage.CacheCreationInputTokens != 7 || first.Usage.CacheReadInputTokens != 0 || first.Usage.InputTokens != 3 {
		t.Errorf("first usage: %+v", first.Usage)
	}
	if msg.Usage.CacheCreationInputTokens != 0 || msg.Usage.CacheReadInputTokens != 7 || msg.Usage.InputTokens != 3 {
		t.Errorf("second usage: %+v", msg.Usage)
	}
	n, err := c.Messages.CountTokens(t.Context(), anthropic.MessageCountTokensParams{Model: "m",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("four words of text"))}})
	if err != nil || n.InputTokens != 4 {
		t.Errorf("count_tokens: %+v, %v", n, err)
	}
}

func TestMessagesErrors(t *testing.T) {
	s, c := newAnthropic(t)
	p := msgParams(t, `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"please FAIL_MIDSTREAM now"}]}`)
	msg, _, err := stream(t, c, p)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.Type() != "overloaded_error" || len(msg.Content) != 1 || msg.Content[0].Text == "" {
		t.Errorf("mid-stream: got %v after %+v", err, msg.Content)
	}
	if !strings.HasSuffix(string(s.Last().Response), "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n") {
		t.Errorf("stream bytes:\n%s", s.Last().Response)
	}

	ok := msgParams(t, `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`)
	_, err = c.Messages.New(t.Context(), ok, option.WithAPIKey("bad"))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Type() != "authentication_error" {
		t.Errorf("bad key: got %v", err)
	}
	s.Exhaust("good", 7*time.Second)
	_, err = c.Messages.New(t.Context(), ok)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Type() != "rate_limit_error" || apiErr.Response.Header.Get("retry-after") != "7" {
		t.Errorf("exhausted key: got %v", err)
	}
	if _, err := c.Messages.New(t.Context(), ok, option.WithAPIKey("spare")); err != nil {
		t.Errorf("the other key: %v", err)
	}
	s.Restore("good")
	if _, err := c.Messages.New(t.Context(), ok); err != nil {
		t.Errorf("restored key: %v", err)
	}

	srv := httptest.NewServer(s)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`))
	req.Header.Set("x-api-key", "good")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || string(b) != `{"type":"error","error":{"type":"invalid_request_error","message":"anthropic-version: header is required"}}` {
		t.Errorf("no version: %d %s", resp.StatusCode, b)
	}
}

// What a client reads is what the stand-in recorded, byte for byte.
func TestRecordedBytes(t *testing.T) {
	seen := make(chan Exchange, 1)
	s := New(Options{Observe: func(e Exchange) { seen <- e }})
	srv := httptest.NewServer(s)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":50,"stream":true,`+weatherTool+`,"messages":[{"role":"user","content":"get_weather"}]}`))
	req.Header.Set("x-api-key", "any")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := s.Last().Response; string(got) != string(b) || len(b) == 0 {
		t.Errorf("recorded %d bytes, read %d", len(got), len(b))
	}
	select {
	case e := <-seen:
		if string(e.Response) != string(b) || e.Status != 200 || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
			t.Errorf("observed %d %d bytes", e.Status, len(e.Response))
		}
	case <-time.After(5 * time.Second):
		t.Error("no exchange observed")
	}
}
