package messagesapi

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"

	"github.com/llmgw/llmgw/modules/openai"
)

// chunkReader hands out b in random pieces, as a network does.
type chunkReader struct {
	b   []byte
	rng *rand.Rand
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b[:1+r.rng.IntN(min(len(r.b), 40))])
	r.b = r.b[n:]
	return n, nil
}

// chatStream is what a chat client reads of a stream.
type chatStream struct {
	content, reasoning string
	args, ids, names   []string
	finish             string
	usage              *openai.Usage
	errEvent           string
	done               bool
	acc                oai.ChatCompletionAccumulator
}

func readChatStream(t *testing.T, b []byte) *chatStream {
	t.Helper()
	var s chatStream
	for _, ev := range strings.Split(strings.TrimSuffix(string(b), "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok {
			t.Fatalf("not a data event: %q", ev)
		}
		if data == "[DONE]" {
			s.done = true
			continue
		}
		if s.done {
			t.Fatalf("event after [DONE]: %q", ev)
		}
		var c struct {
			Error   json.RawMessage
			Choices []struct {
				Delta struct {
					Content          string
					ReasoningContent string `json:"reasoning_content"`
					ToolCalls        []struct {
						Index    int
						ID       string
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				}
				FinishReason string `json:"finish_reason"`
			}
			Usage *openai.Usage
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		if c.Error != nil {
			s.errEvent = data
			continue
		}
		var chunk oai.ChatCompletionChunk
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("openai-go does not decode %q: %v", data, err)
		}
		s.acc.AddChunk(chunk)
		if c.Usage != nil {
			s.usage = c.Usage
			if len(c.Choices) != 0 || !openai.IsUsageOnlyChunk([]byte(data)) {
				t.Errorf("usage chunk with choices: %s", data)
			}
		}
		for _, ch := range c.Choices {
			s.content += ch.Delta.Content
			s.reasoning += ch.Delta.ReasoningContent
			for _, tc := range ch.Delta.ToolCalls {
				for len(s.args) <= tc.Index {
					s.args, s.ids, s.names = append(s.args, ""), append(s.ids, ""), append(s.names, "")
				}
				s.args[tc.Index] += tc.Function.Arguments
				s.ids[tc.Index] += tc.ID
				s.names[tc.Index] += tc.Function.Name
			}
			if ch.FinishReason != "" {
				s.finish = ch.FinishReason
			}
		}
	}
	return &s
}

// expected reads what a Messages stream carries: text, thinking and each
// tool's partial_json joined, and the usage.
func expected(t *testing.T, sse []byte) (text, thinking string, args []string) {
	for _, line := range strings.Split(string(sse), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var e struct {
			Type         string
			ContentBlock struct{ Type string } `json:"content_block"`
			Delta        struct {
				Type, Text, Thinking string
				PartialJSON          string `json:"partial_json"`
			}
		}
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatal(err)
		}
		switch {
		case e.ContentBlock.Type == "tool_use":
			args = append(args, "")
		case e.Delta.Type == "input_json_delta":
			args[len(args)-1] += e.Delta.PartialJSON
		}
		text += e.Delta.Text
		thinking += e.Delta.Thinking
	}
	return
}

// Anthropic's documented example streams, in random chunkings: the chat
// stream carries the same text, thinking and arguments, and the usage.
func TestMessagesToChatStreamDocs(t *testing.T) {
	for _, tc := range []struct {
		file, finish                string
		prompt, completion          int64
		wantText, wantArg, wantName string
	}{
		{"messages_basic.sse", "stop", 25, 15, "Hello!", "", ""},
		{"messages_tool_use.sse", "tool_calls", 472, 89, "Okay, let's check the weather for San Francisco, CA:",
			`{"location": "San Francisco, CA", "unit": "fahrenheit"}`, "get_weather"},
		{"messages_thinking.sse", "stop", 0, 0, "The greatest common divisor of 1071 and 462 is **21**.", "", ""},
	} {
		t.Run(tc.file, func(t *testing.T) {
			sse, err := os.ReadFile("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			text, thinking, args := expected(t, sse)
			if text != tc.wantText || (tc.wantArg != "" && args[0] != tc.wantArg) {
				t.Fatalf("fixture reads %q %q", text, args)
			}
			for i := range 200 {
				rng := rand.New(rand.NewPCG(uint64(i), 11))
				out, err := io.ReadAll(MessagesToChatStream(io.NopCloser(&chunkReader{sse, rng})))
				if err != nil {
					t.Fatal(err)
				}
				s := readChatStream(t, out)
				if s.content != text || s.reasoning != thinking || strings.Join(s.args, "|") != strings.Join(args, "|") || !s.done || s.errEvent != "" {
					t.Fatalf("chunking %d: got %q %q %q done %v err %s\n%s", i, s.content, s.reasoning, s.args, s.done, s.errEvent, out)
				}
				if s.finish != tc.finish || s.usage == nil || s.usage.PromptTokens != tc.prompt || s.usage.CompletionTokens != tc.completion {
					t.Fatalf("got finish %q usage %+v", s.finish, s.usage)
				}
				if tc.wantName != "" && (s.names[0] != tc.wantName || s.ids[0] != "toolu_01T1x1fJ34qAmk2tNTrN7Up6") {
					t.Fatalf("got tool %q %q", s.names, s.ids)
				}
				if got := s.acc.Choices[0].Message.Content; got != text {
					t.Fatalf("openai-go accumulated %q", got)
				}
				if tc.wantArg != "" && s.acc.Choices[0].Message.ToolCalls[0].Function.Arguments != tc.wantArg {
					t.Fatalf("openai-go accumulated arguments %q", s.acc.Choices[0].Message.ToolCalls[0].Function.Arguments)
				}
			}
		})
	}
}

func TestMessagesToChatStreamErrors(t *testing.T) {
	sse, err := os.ReadFile("testdata/messages_tool_use.sse")
	if err != nil {
		t.Fatal(err)
	}
	cut := sse[:bytes.Index(sse, []byte("event: content_block_stop"))]
	for _, tc := range []struct {
		name, tail, want string
	}{
		{"error event", "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n",
			`{"error":{"message":"Overloaded","type":"server_error","param":null,"code":"overloaded_error"}}`},
		{"cut short", "", `{"error":{"message":"the model's stream ended before message_stop","type":"server_error","param":null,"code":"api_error"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append(append([]byte{}, cut...), tc.tail...)
			out, err := io.ReadAll(MessagesToChatStream(io.NopCloser(bytes.NewReader(in))))
			if err != nil {
				t.Fatal(err)
			}
			s := readChatStream(t, out)
			if s.errEvent != tc.want || s.done || s.content != "Okay, let's check the weather for San Francisco, CA:" {
				t.Errorf("got error %s, done %v, content %q", s.errEvent, s.done, s.content)
			}
		})
	}
}

// A chat stream through the Messages writer and back through
// MessagesToChatStream keeps its text, reasoning and arguments byte for
// byte, and its usage.
func TestMessagesRoundTrip(t *testing.T) {
	for i := range 200 {
		rng := rand.New(rand.NewPCG(uint64(i), 13))
		script := randomScript(rng)
		rec := httptest.NewRecorder()
		w := (&messagesTurn{model: "m", stream: true}).Writer(rec)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		writeChunked(w, script.sse(rng), rng)
		out, err := io.ReadAll(MessagesToChatStream(io.NopCloser(&chunkReader{rec.Body.Bytes(), rng})))
		if err != nil {
			t.Fatal(err)
		}
		s := readChatStream(t, out)
		reasoning, text, args := script.joined()
		if s.content != text || s.reasoning != reasoning || strings.Join(s.args, "\x00") != strings.Join(args, "\x00") {
			t.Fatalf("seed %d: got %q %q %q, want %q %q %q", i, s.content, s.reasoning, s.args, text, reasoning, args)
		}
		if s.finish != script.finish || s.usage == nil || s.usage.PromptTokens != script.prompt || s.usage.CompletionTokens != script.output {
			t.Fatalf("seed %d: got %q %+v", i, s.finish, s.usage)
		}
	}
}

func TestChatToMessagesBody(t *testing.T) {
	chat := `{"model":"gw-model","max_completion_tokens":300,"stream":true,"stream_options":{"include_usage":true},
	  "temperature":1.4,"top_p":0.9,"stop":"END","user":"u7","seed":3,"reasoning_effort":"low",
	  "messages":[
	    {"role":"system","content":"be brief"},
	    {"role":"developer","content":[{"type":"text","text":"and kind"}]},
	    {"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}},{"type":"image_url","image_url":{"url":"https://x.test/a.jpg"}}]},
	    {"role":"assistant","content":null,"tool_calls":[
	      {"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\": \"é\\n\"}"}},
	      {"id":"call_2","type":"function","function":{"name":"g","arguments":""}}]},
	    {"role":"tool","tool_call_id":"call_1","content":"one"},
	    {"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"two"}]},
	    {"role":"user","content":"so?"}],
	  "tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}},{"type":"function","function":{"name":"g"}}],
	  "tool_choice":"required","parallel_tool_calls":false}`
	got, err := ChatToMessagesBody([]byte(chat), "claude-up")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, got, `{"model":"claude-up","max_tokens":300,"stream":true,"top_p":0.9,
	  "stop_sequences":["END"],"metadata":{"user_id":"u7"},
	  "system":[{"type":"text","text":"be brief"},{"type":"text","text":"and kind"}],
	  "messages":[
	    {"role":"user","content":[{"type":"text","text":"look"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}},{"type":"image","source":{"type":"url","url":"https://x.test/a.jpg"}}]},
	    {"role":"assistant","content":[{"type":"tool_use","id":"call_1","name":"f","input":{"a":"é\n"}},{"type":"tool_use","id":"call_2","name":"g","input":{}}]},
	    {"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"one"},{"type":"tool_result","tool_use_id":"call_2","content":"two"},{"type":"text","text":"so?"}]}],
	  "tools":[{"name":"f","description":"d","input_schema":{"type":"object"}},{"name":"g","input_schema":{"type":"object","properties":{}}}],
	  "tool_choice":{"type":"any","disable_parallel_tool_use":true},"temperature":1}`)

	got, err = ChatToMessagesBody([]byte(`{"model":"m","temperature":1.5,"messages":[{"role":"user","content":"hi"}]}`), "")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, got, `{"model":"m","max_tokens":4096,"temperature":1,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`)

	got, err = ChatToMessagesBody([]byte(`{"model":"m","max_tokens":3000,"temperature":0.2,"top_k":5,"reasoning_effort":"medium","messages":[{"role":"user","content":"hi"}]}`), "")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, got, `{"model":"m","max_tokens":3000,"thinking":{"type":"enabled","budget_tokens":2999},"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`)

	got, err = ChatToMessagesBody([]byte(`{"model":"m","response_format":{"type":"json_schema","json_schema":{"name":"w","strict":true,"schema":{"type":"object","properties":{"a":{"type":"integer"}}}}},"messages":[{"role":"user","content":"hi"}]}`), "")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, got, `{"model":"m","max_tokens":4096,"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"integer"}}}}},"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`)

	for _, tc := range []struct{ name, body, param string }{
		{"n", `{"model":"m","n":2,"messages":[{"role":"user","content":"x"}]}`, "n"},
		{"json schema without schema", `{"model":"m","response_format":{"type":"json_schema"},"messages":[{"role":"user","content":"x"}]}`, "response_format.json_schema.schema"},
		{"json object", `{"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"x"}]}`, "response_format"},
		{"arguments", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"f","arguments":"[1]"}}]}]}`, "messages[0].tool_calls[0].function.arguments"},
		{"audio", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio"}]}]}`, "messages[0].content[0].type"},
		{"function role", `{"model":"m","messages":[{"role":"function","content":"x"}]}`, "messages[0].role"},
	} {
		_, err := ChatToMessagesBody([]byte(tc.body), "")
		if e, ok := err.(*openai.Error); !ok || e.Status != 400 || e.Param != tc.param {
			t.Errorf("%s: got %v, want a 400 with param %s", tc.name, err, tc.param)
		}
	}
}

func TestMessagesToChatBody(t *testing.T) {
	body := `{"id":"msg_01Aq9w938a90dw8q","type":"message","model":"claude-3-opus-20240229","stop_reason":"tool_use","role":"assistant",
	  "content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"text","text":"<thinking>SF</thinking>"},
	    {"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"get_weather","input":{"location": "San Francisco, CA", "unit": "celsius"}}],
	  "usage":{"input_tokens":10,"output_tokens":20,"cache_creation_input_tokens":5,"cache_read_input_tokens":100}}`
	got, err := MessagesToChatBody([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	var c oai.ChatCompletion
	if err := json.Unmarshal(got, &c); err != nil {
		t.Fatal(err)
	}
	m := c.Choices[0].Message
	if c.ID != "msg_01Aq9w938a90dw8q" || m.Content != "<thinking>SF</thinking>" || c.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("got %s", got)
	}
	if tc := m.ToolCalls[0]; tc.ID != "toolu_01A09q90qw90lq917835lq9" || tc.Function.Name != "get_weather" || tc.Function.Arguments != `{"location": "San Francisco, CA", "unit": "celsius"}` {
		t.Errorf("got tool call %+v", tc)
	}
	if u := c.Usage; u.PromptTokens != 115 || u.CompletionTokens != 20 || u.TotalTokens != 135 || u.PromptTokensDetails.CachedTokens != 100 {
		t.Errorf("got usage %+v", u)
	}
	if !strings.Contains(string(got), `"reasoning_content":"hm"`) {
		t.Errorf("no reasoning_content in %s", got)
	}
	if u, ok := openai.FindUsage(got); !ok || u.PromptTokens != 115 {
		t.Errorf("FindUsage got %+v", u)
	}
}

func TestMessagesErrorToOpenAI(t *testing.T) {
	for _, tc := range []struct {
		status     int
		body, want string
	}{
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			`{"error":{"message":"Overloaded","type":"server_error","param":null,"code":"overloaded_error"}}`},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"},"request_id":"req_1"}`,
			`{"error":{"message":"max_tokens: Field required","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`},
		{502, `<html>bad gateway</html>`,
			`{"error":{"message":"\u003chtml\u003ebad gateway\u003c/html\u003e","type":"server_error","param":null,"code":"api_error"}}`},
	} {
		if got := MessagesErrorToOpenAI(tc.status, []byte(tc.body)); string(got) != tc.want {
			t.Errorf("%d: got %s, want %s", tc.status, got, tc.want)
		}
	}
}

func TestMessagesUsage(t *testing.T) {
	basic, err := os.ReadFile("testdata/messages_basic.sse")
	if err != nil {
		t.Fatal(err)
	}
	var total openai.Usage
	for _, ev := range strings.Split(string(basic), "\n\n") {
		u, ok := MessagesUsage([]byte(ev))
		if !ok {
			continue
		}
		if u.PromptTokens > 0 {
			total.PromptTokens = u.PromptTokens
		}
		total.CompletionTokens = u.CompletionTokens
	}
	if total.PromptTokens != 25 || total.CompletionTokens != 15 {
		t.Errorf("got %+v from the basic stream, want 25/15", total)
	}
	u, ok := MessagesUsage([]byte(`{"type":"message","usage":{"input_tokens":3,"cache_read_input_tokens":4,"output_tokens":5}}`))
	if !ok || u.PromptTokens != 7 || u.CompletionTokens != 5 || u.TotalTokens != 12 {
		t.Errorf("whole body: got %+v", u)
	}
	if _, ok := MessagesUsage([]byte(`{"type": "ping"}`)); ok {
		t.Error("a ping has usage")
	}
}
