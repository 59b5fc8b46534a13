package openai

import (
	"encoding/json"
	"strings"
	"testing"
	"unsafe"
)

// TestParseRejects checks every member Parse reads: a wrong type or a
// value out of bounds is a 400 that names the member's path in param and
// says what is expected, in words, never in Go's types.
func TestParseRejects(t *testing.T) {
	const chat = `{"model":"m","messages":[{"role":"user","content":"hi"}],`
	for _, tc := range []struct {
		name, endpoint, body string
		param, code, msg     string
	}{
		{"model type", ChatCompletions, `{"model":["m"],"messages":[{"role":"user"}]}`, "model", "invalid_type", "model must be a string"},
		{"messages type", ChatCompletions, `{"model":"m","messages":{"role":"user"}}`, "messages", "invalid_messages", "messages must be a non-empty array"},
		{"message type", ChatCompletions, `{"model":"m","messages":["hi"]}`, "messages[0]", "invalid_type", "messages[0] must be an object with role and content"},
		{"role type", ChatCompletions, `{"model":"m","messages":[{"role":"user"},{"role":1}]}`, "messages[1].role", "invalid_type", "messages[1].role must be a string"},
		{"role missing", ChatCompletions, `{"model":"m","messages":[{"content":"x"}]}`, "messages[0].role", "missing_required_parameter", "messages[0].role is missing"},
		{"content type", ChatCompletions, `{"model":"m","messages":[{"role":"user","content":42}]}`, "messages[0].content", "invalid_type", "messages[0].content must be a string or an array of content parts"},
		{"content object", ChatCompletions, `{"model":"m","messages":[{"role":"user","content":{"text":"x"}}]}`, "messages[0].content", "invalid_type", "messages[0].content must be a string or an array of content parts"},
		{"content part type", ChatCompletions, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},"b"]}]}`, "messages[0].content[1]", "invalid_type", "messages[0].content[1] must be an object"},
		{"content part without type", ChatCompletions, `{"model":"m","messages":[{"role":"user","content":[{"text":"a"}]}]}`, "messages[0].content[0].type", "missing_required_parameter", "needs a type"},
		{"name type", ChatCompletions, `{"model":"m","messages":[{"role":"user","name":5}]}`, "messages[0].name", "invalid_type", "messages[0].name must be a string"},
		{"tool_call_id type", ChatCompletions, `{"model":"m","messages":[{"role":"tool","tool_call_id":true}]}`, "messages[0].tool_call_id", "invalid_type", "must be a string"},
		{"tool_calls type", ChatCompletions, `{"model":"m","messages":[{"role":"assistant","tool_calls":{}}]}`, "messages[0].tool_calls", "invalid_type", "must be an array of tool calls"},
		{"tool call type", ChatCompletions, `{"model":"m","messages":[{"role":"assistant","tool_calls":[1]}]}`, "messages[0].tool_calls[0]", "invalid_type", "must be an object"},
		{"n type", ChatCompletions, chat + `"n":"2"}`, "n", "invalid_type", "n must be an integer"},
		{"n fraction", ChatCompletions, chat + `"n":1.5}`, "n", "invalid_type", "n must be an integer"},
		{"n -1", ChatCompletions, chat + `"n":-1}`, "n", "invalid_value", "n must be an integer from 1 to 128"},
		{"n 0", ChatCompletions, chat + `"n":0}`, "n", "invalid_value", "n must be an integer from 1 to 128"},
		{"n 1000", ChatCompletions, chat + `"n":1000}`, "n", "invalid_value", "from 1 to 128"},
		{"n 2^31", ChatCompletions, chat + `"n":2147483648}`, "n", "invalid_value", "from 1 to 128"},
		{"n 2^64", ChatCompletions, chat + `"n":18446744073709551616}`, "n", "invalid_value", "from 1 to 128"},
		{"max_tokens type", ChatCompletions, chat + `"max_tokens":"10"}`, "max_tokens", "invalid_type", "max_tokens must be an integer"},
		{"max_tokens 0", ChatCompletions, chat + `"max_tokens":0}`, "max_tokens", "invalid_value", "max_tokens must be an integer of at least 1"},
		{"max_completion_tokens -5", ChatCompletions, chat + `"max_completion_tokens":-5}`, "max_completion_tokens", "invalid_value", "at least 1"},
		{"temperature type", ChatCompletions, chat + `"temperature":"hot"}`, "temperature", "invalid_type", "temperature must be a number"},
		{"temperature 2.5", ChatCompletions, chat + `"temperature":2.5}`, "temperature", "invalid_value", "temperature must be a number from 0 to 2"},
		{"temperature -0.1", ChatCompletions, chat + `"temperature":-0.1}`, "temperature", "invalid_value", "from 0 to 2"},
		{"top_p 1.1", ChatCompletions, chat + `"top_p":1.1}`, "top_p", "invalid_value", "top_p must be a number from 0 to 1"},
		{"top_p type", ChatCompletions, chat + `"top_p":[]}`, "top_p", "invalid_type", "top_p must be a number"},
		{"presence_penalty 3", ChatCompletions, chat + `"presence_penalty":3}`, "presence_penalty", "invalid_value", "from -2 to 2"},
		{"frequency_penalty -2.1", ChatCompletions, chat + `"frequency_penalty":-2.1}`, "frequency_penalty", "invalid_value", "from -2 to 2"},
		{"stream type", ChatCompletions, chat + `"stream":"yes"}`, "stream", "invalid_type", "stream must be a boolean"},
		{"stream_options type", ChatCompletions, chat + `"stream_options":3}`, "stream_options", "invalid_type", "stream_options must be an object"},
		{"include_usage type", ChatCompletions, chat + `"stream_options":{"include_usage":"yes"}}`, "stream_options.include_usage", "invalid_type", "must be a boolean"},
		{"stop type", ChatCompletions, chat + `"stop":3}`, "stop", "invalid_type", "stop must be a string or an array of at most 4 strings"},
		{"stop item type", ChatCompletions, chat + `"stop":["a",1]}`, "stop[1]", "invalid_type", "stop[1] must be a string"},
		{"stop 5", ChatCompletions, chat + `"stop":["a","b","c","d","e"]}`, "stop", "invalid_value", "at most 4 strings"},
		{"tools type", ChatCompletions, chat + `"tools":{}}`, "tools", "invalid_type", "tools must be an array of tool objects"},
		{"tool type", ChatCompletions, chat + `"tools":["f"]}`, "tools[0]", "invalid_type", "tools[0] must be an object"},
		{"tool function type", ChatCompletions, chat + `"tools":[{"type":"function","function":"f"}]}`, "tools[0].function", "invalid_type", "must be an object with a name"},
		{"tool function name type", ChatCompletions, chat + `"tools":[{"type":"function","function":{"name":1}}]}`, "tools[0].function.name", "invalid_type", "must be a string"},
		{"tools 129", ChatCompletions, chat + `"tools":[` + strings.Repeat(`{"type":"function","function":{"name":"f"}},`, 128) + `{"type":"function","function":{"name":"f"}}]}`, "tools", "invalid_value", "at most 128 tools (it has 129)"},
		{"tool_choice type", ChatCompletions, chat + `"tool_choice":1}`, "tool_choice", "invalid_type", "a string or an object"},
		{"parallel_tool_calls type", ChatCompletions, chat + `"parallel_tool_calls":1}`, "parallel_tool_calls", "invalid_type", "a boolean"},
		{"logprobs type", ChatCompletions, chat + `"logprobs":1}`, "logprobs", "invalid_type", "a boolean"},
		{"top_logprobs 21", ChatCompletions, chat + `"top_logprobs":21}`, "top_logprobs", "invalid_value", "from 0 to 20"},
		{"response_format type", ChatCompletions, chat + `"response_format":"json"}`, "response_format", "invalid_type", "an object"},
		{"seed type", ChatCompletions, chat + `"seed":"1"}`, "seed", "invalid_type", "an integer"},
		{"user type", ChatCompletions, chat + `"user":1}`, "user", "invalid_type", "user must be a string"},
		{"logit_bias type", ChatCompletions, chat + `"logit_bias":[]}`, "logit_bias", "invalid_type", "an object"},
		{"prompt type", Completions, `{"model":"m","prompt":{}}`, "prompt", "invalid_type", "prompt must be a string, an array of strings or an array of token arrays"},
		{"prompt mixed", Completions, `{"model":"m","prompt":["a",1]}`, "prompt[1]", "invalid_type", "all strings"},
		{"prompt token", Completions, `{"model":"m","prompt":[[1,-2]]}`, "prompt[0][1]", "invalid_value", "from 0 to 2147483647"},
		{"prompt empty", Completions, `{"model":"m","prompt":[]}`, "prompt", "invalid_value", "must not be an empty array"},
		{"completions n", Completions, `{"model":"m","prompt":"x","n":0}`, "n", "invalid_value", "from 1 to 128"},
		{"completions logprobs", Completions, `{"model":"m","prompt":"x","logprobs":6}`, "logprobs", "invalid_value", "from 0 to 5"},
		{"best_of", Completions, `{"model":"m","prompt":"x","best_of":"2"}`, "best_of", "invalid_type", "an integer"},
		{"echo", Completions, `{"model":"m","prompt":"x","echo":"no"}`, "echo", "invalid_type", "a boolean"},
		{"suffix", Completions, `{"model":"m","prompt":"x","suffix":1}`, "suffix", "invalid_type", "a string"},
		{"input type", Embeddings, `{"model":"m","input":5}`, "input", "invalid_type", "input must be a string, an array of strings"},
		{"input empty", Embeddings, `{"model":"m","input":[]}`, "input", "invalid_value", "must not be an empty array"},
		{"input too many", Embeddings, `{"model":"m","input":[` + strings.Repeat(`"a",`, 2048) + `"a"]}`, "input", "invalid_value", "at most 2048 items (it has 2049)"},
		{"dimensions", Embeddings, `{"model":"m","input":"x","dimensions":0}`, "dimensions", "invalid_value", "at least 1"},
		{"encoding_format", Embeddings, `{"model":"m","input":"x","encoding_format":"int8"}`, "encoding_format", "invalid_value", `one of ["float" "base64"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.endpoint, []byte(tc.body))
			e, ok := err.(*Error)
			if !ok {
				t.Fatalf("got %v, want an API error", err)
			}
			if e.Status != 400 || e.Type != "invalid_request_error" || e.Param != tc.param || e.Code != tc.code {
				t.Errorf("got status %d type %s param %q code %s, want 400 invalid_request_error %q %s",
					e.Status, e.Type, e.Param, e.Code, tc.param, tc.code)
			}
			if !strings.Contains(e.Message, tc.msg) {
				t.Errorf("message: got %q, want it to contain %q", e.Message, tc.msg)
			}
			if strings.Contains(e.Message, "Go ") || strings.Contains(e.Message, "unmarshal") {
				t.Errorf("message names Go's types: %q", e.Message)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	for _, tc := range []struct{ name, endpoint, body string }{
		{"nulls are absent", ChatCompletions, `{"model":"m","messages":[{"role":"user","content":"x"}],"n":null,"temperature":null,"stop":null,"tools":null,"max_tokens":null,"stream_options":null}`},
		{"full chat", ChatCompletions, `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:x"}}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"42"}],"n":2,"temperature":0,"top_p":1,"presence_penalty":-2,"frequency_penalty":2,"stop":["a","b","c","d"],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":"auto","seed":-7,"logprobs":true,"top_logprobs":3,"user":"u","extra_body_field":{"anything":[1]}}`},
		{"escaped keys", ChatCompletions, `{"mod\u0065l":"m","messages":[{"r\u006fle":"user"}]}`},
		{"prompt strings", Completions, `{"model":"m","prompt":["a","b"],"max_tokens":3}`},
		{"prompt tokens", Completions, `{"model":"m","prompt":[1,2,3]}`},
		{"prompt token arrays", Completions, `{"model":"m","prompt":[[1,2],[3]]}`},
		{"input", Embeddings, `{"model":"m","input":["a","b"],"dimensions":8,"encoding_format":"base64"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse(tc.endpoint, []byte(tc.body)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestParseKeepsCountsAndSlices(t *testing.T) {
	body := []byte(`{"model":"m","n":3,"temperature":0.5,"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}],"tools":[{"type":"function","function":{"name":"f"}}],"max_tokens":5}`)
	r, err := Parse(ChatCompletions, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.N != 3 || r.MessageCount != 2 || r.ToolCount != 1 || r.MaxTokens != 5 || r.Temperature == nil || *r.Temperature != 0.5 {
		t.Errorf("got n %d messages %d tools %d max_tokens %d temperature %v", r.N, r.MessageCount, r.ToolCount, r.MaxTokens, r.Temperature)
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(body)))
	at := uintptr(unsafe.Pointer(unsafe.SliceData(r.Messages)))
	if at < start || at >= start+uintptr(len(body)) {
		t.Error("messages is a copy, want a slice of the body")
	}
	r, err = Parse(ChatCompletions, []byte(`{"model":"m","messages":[{"role":"user"}],"messages":[{"role":"user"},{"role":"user"}]}`))
	if err != nil || r.MessageCount != 2 {
		t.Errorf("a repeated member: got %v, %d messages, want the last one, 2", err, r.MessageCount)
	}
}

// BenchmarkParse10MB parses a chat request whose message is 10 MB.
func BenchmarkParse10MB(b *testing.B) {
	body := []byte(`{"model":"m","max_tokens":5,"temperature":0.2,"messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum ", 10<<20/12) + `"}]}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(ChatCompletions, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseSmall parses a typical chat request.
func BenchmarkParseSmall(b *testing.B) {
	body := []byte(`{"model":"gpt-4o-mini","stream":true,"max_tokens":256,"temperature":0.7,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Tell me about rivers in three sentences."}]}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(ChatCompletions, body); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzParse: Parse never panics, and what it keeps of the body is JSON.
func FuzzParse(f *testing.F) {
	f.Add(`{"model":"m","messages":[{"role":"user","content":"hi"}],"n":2,"stop":["a"]}`)
	f.Add(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"\"]}"}]}],"tools":[{"type":"function","function":{"name":"f"}}]}`)
	f.Add(`{"model":"m","prompt":[[1,2],[3]],"max_tokens":1e3}`)
	f.Add(` { "model" : "m" , "input" : [ "a" , "b" ] } `)
	f.Fuzz(func(t *testing.T, body string) {
		for _, ep := range []string{ChatCompletions, Completions, Embeddings} {
			r, err := Parse(ep, []byte(body))
			if err != nil {
				continue
			}
			for _, raw := range [][]byte{r.Messages, r.Prompt, r.Input, r.StreamOptions} {
				if len(raw) > 0 && !json.Valid(raw) {
					t.Fatalf("%s: kept %q, not JSON", ep, raw)
				}
			}
		}
	})
}
