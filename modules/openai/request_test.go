package openai

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, endpoint, body string
		code                 string // expected error code, "" for none
		want                 Request
	}{
		{"chat", ChatCompletions, `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":7}`, "",
			Request{Model: "m", MaxTokens: 7}},
		{"chat stream with usage", ChatCompletions, `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, "",
			Request{Model: "m", Stream: true, IncludeUsage: true}},
		{"max_completion_tokens wins", ChatCompletions, `{"model":"m","messages":[{"role":"user"}],"max_tokens":7,"max_completion_tokens":9}`, "",
			Request{Model: "m", MaxTokens: 9}},
		{"completion", Completions, `{"model":"m","prompt":"x"}`, "", Request{Model: "m"}},
		{"embedding", Embeddings, `{"model":"m","input":["a","b"]}`, "", Request{Model: "m"}},
		{"not json", ChatCompletions, `{"model"`, "invalid_json", Request{}},
		{"not an object", ChatCompletions, `[1,2]`, "invalid_json", Request{}},
		{"no model", ChatCompletions, `{"messages":[{"role":"user"}]}`, "missing_model", Request{}},
		{"empty model", ChatCompletions, `{"model":"","messages":[{"role":"user"}]}`, "missing_model", Request{}},
		{"model not a string", ChatCompletions, `{"model":3,"messages":[{"role":"user"}]}`, "invalid_type", Request{}},
		{"null messages", ChatCompletions, `{"model":"m","messages":null}`, "missing_messages", Request{}},
		{"empty messages", ChatCompletions, `{"model":"m","messages":[ ]}`, "invalid_messages", Request{}},
		{"messages not array", ChatCompletions, `{"model":"m","messages":"hi"}`, "invalid_messages", Request{}},
		{"no prompt", Completions, `{"model":"m"}`, "missing_prompt", Request{}},
		{"no input", Embeddings, `{"model":"m"}`, "missing_input", Request{}},
		{"streamed embeddings", Embeddings, `{"model":"m","input":"x","stream":true}`, "invalid_value", Request{}},
		{"negative max_tokens", ChatCompletions, `{"model":"m","messages":[{"role":"user"}],"max_tokens":-1}`, "invalid_value", Request{}},
		{"bad stream_options", ChatCompletions, `{"model":"m","messages":[{"role":"user"}],"stream_options":3}`, "invalid_type", Request{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.endpoint, []byte(tc.body))
			if tc.code != "" {
				e, ok := err.(*Error)
				if !ok || e.Code != tc.code || e.Status != 400 {
					t.Fatalf("got %v, want a 400 with code %s", err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			g := Request{Model: got.Model, Stream: got.Stream, IncludeUsage: got.IncludeUsage, MaxTokens: got.MaxTokens}
			if diff := cmp.Diff(tc.want, g, cmp.AllowUnexported(Request{})); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestUpstreamBody(t *testing.T) {
	for _, tc := range []struct {
		name, body, model string
		want              map[string]any
		same              bool
	}{
		{name: "unchanged non-stream is the original bytes", body: `{"model":"m", "messages":[{"role":"user"}]}`, same: true},
		{name: "stream that asked for usage is unchanged", body: `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user"}]}`, same: true},
		{name: "stream gains include_usage", body: `{"model":"m","stream":true,"messages":[{"role":"user"}]}`,
			want: map[string]any{"model": "m", "stream": true, "messages": []any{map[string]any{"role": "user"}}, "stream_options": map[string]any{"include_usage": true}}},
		{name: "stream keeps other stream options", body: `{"model":"m","stream":true,"stream_options":{"include_obfuscation":false},"messages":[{"role":"user"}]}`,
			want: map[string]any{"model": "m", "stream": true, "messages": []any{map[string]any{"role": "user"}}, "stream_options": map[string]any{"include_usage": true, "include_obfuscation": false}}},
		{name: "model renamed", body: `{"model":"m","messages":[{"role":"user"}],"temperature":0.5}`, model: "provider-m",
			want: map[string]any{"model": "provider-m", "messages": []any{map[string]any{"role": "user"}}, "temperature": 0.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse(ChatCompletions, []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.UpstreamBody(tc.model)
			if err != nil {
				t.Fatal(err)
			}
			if tc.same {
				if &got[0] != &r.Raw[0] {
					t.Error("body was copied, want the original bytes")
				}
				return
			}
			var m map[string]any
			if err := json.Unmarshal(got, &m); err != nil {
				t.Fatalf("upstream body %s is not JSON: %v", got, err)
			}
			if diff := cmp.Diff(tc.want, m); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
			if r.Changed() {
				t.Error("UpstreamBody changed the request")
			}
		})
	}
}

func TestSetSplices(t *testing.T) {
	raw := `{"model":"m", "messages" : [{"role":"user","content":"a \"b\" {c}"}],"n":1}`
	r, err := Parse(ChatCompletions, []byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Set("temperature", json.RawMessage("0")); err != nil {
		t.Fatal(err)
	}
	if err := r.Set("messages", json.RawMessage(`[{"role":"user","content":"x"}]`)); err != nil {
		t.Fatal(err)
	}
	b, _ := r.UpstreamBody("")
	want := `{"temperature":0,"model":"m", "messages" : [{"role":"user","content":"x"}],"n":1}`
	if !r.Changed() || string(b) != want || string(r.Raw) != raw {
		t.Errorf("got changed=%v body %s", r.Changed(), b)
	}
	// With a renamed model the changed body is the one re-encoded.
	b, _ = r.UpstreamBody("other")
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil || got["model"] != "other" || got["temperature"] != 0.0 || got["n"] != 1.0 {
		t.Errorf("renamed: %s", b)
	}
	for _, bad := range []string{`[1]`, `{"a" 1}`, `{"a":"x`} {
		if _, _, err := memberSpan([]byte(bad), "a"); err == nil {
			t.Errorf("memberSpan(%s): no error", bad)
		}
	}
}

func TestFindUsage(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       Usage
		ok         bool
	}{
		{"response", `{"id":"x","usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`, Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}, true},
		{"spaced", `{"usage" : { "prompt_tokens": 3, "completion_tokens": 4 }}`, Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}, true},
		{"null", `{"usage":null}`, Usage{}, false},
		{"absent", `{"choices":[]}`, Usage{}, false},
		{"in content only", `{"content":"the \"usage\" word"}`, Usage{}, false},
		{"embeddings", `{"data":[],"usage":{"prompt_tokens":6,"total_tokens":6}}`, Usage{PromptTokens: 6, CompletionTokens: 0, TotalTokens: 6}, true},
		{"nested details", `{"usage":{"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens":1,"x":"}"}}`, Usage{PromptTokens: 5, CompletionTokens: 1, TotalTokens: 6, CachedTokens: 2}, true},
		{"cut off", `{"usage":{"prompt_tokens":5`, Usage{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := FindUsage([]byte(tc.body))
			if ok != tc.ok || got != tc.want {
				t.Errorf("got %+v %v, want %+v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestErrorJSON(t *testing.T) {
	got := string((&Error{Status: 404, Message: "no", Type: "invalid_request_error", Code: "model_not_found", Param: "model"}).JSON())
	want := `{"error":{"message":"no","type":"invalid_request_error","param":"model","code":"model_not_found"}}`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

var benchBody = []byte(`{"model":"sim-chat","stream":true,"max_tokens":64,"temperature":0.7,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write a short poem about the sea and the mountains, in four lines."}]}`)

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(ChatCompletions, benchBody); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUpstreamBodyStreamSplice(b *testing.B) {
	r, _ := Parse(ChatCompletions, benchBody)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.UpstreamBody(""); err != nil {
			b.Fatal(err)
		}
	}
}

var benchAnswer = []byte(`{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"a fairly ordinary answer of a few words"},"finish_reason":"stop"}],"usage":{"prompt_tokens":31,"completion_tokens":20,"total_tokens":51,"prompt_tokens_details":{"cached_tokens":0}}}`)

func BenchmarkFindUsage(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := FindUsage(benchAnswer); !ok {
			b.Fatal("no usage")
		}
	}
}

// TestCapOutput: a cap is spliced in as max_tokens (and a Responses
// request's max_output_tokens in its own bytes) without counting as a
// change, so a request in another API may still reach an engine that
// speaks it unchanged otherwise.
func TestCapOutput(t *testing.T) {
	raw := `{"model":"m","messages":[{"role":"user","content":"x"}]}`
	r, err := Parse(ChatCompletions, []byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CapOutput(4096); err != nil {
		t.Fatal(err)
	}
	b, _ := r.UpstreamBody("")
	if want := `{"max_tokens":4096,"model":"m","messages":[{"role":"user","content":"x"}]}`; string(b) != want || r.Changed() || r.MaxTokens != 4096 || string(r.Raw) != raw {
		t.Errorf("got body %s changed=%v max_tokens=%d, want %s unchanged", b, r.Changed(), r.MaxTokens, want)
	}
	r.API, r.Original = APIResponses, []byte(`{"model":"m","input":"x"}`)
	if err := r.CapOutput(100); err != nil {
		t.Fatal(err)
	}
	if n, _ := r.NativeBody(""); string(n) != `{"max_output_tokens":100,"model":"m","input":"x"}` {
		t.Errorf("native body: got %s", n)
	}
	if err := r.Set("temperature", json.RawMessage("0")); err != nil || !r.Changed() {
		t.Errorf("Set after a cap: changed=%v, %v", r.Changed(), err)
	}
}
