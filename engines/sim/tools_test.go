package sim

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

const weatherTools = `"tools":[
 {"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{
   "city":{"type":"string"},"days":{"type":"integer"},"metric":{"type":"boolean"},"unit":{"enum":["c","f"]},
   "tags":{"type":"array","items":{"type":"string"}},"where":{"type":"object","properties":{"lat":{"type":"number"}}}}}}},
 {"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"zone":{"type":"string"}}}}}]`

// chunkDelta is the part of a streamed chunk the tests read.
type chunkDelta struct {
	Choices []struct {
		Delta struct {
			Content          *string `json:"content"`
			ReasoningContent string  `json:"reasoning_content"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      *string `json:"name"`
					Arguments string  `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage map[string]any `json:"usage"`
}

// streamed posts body with stream set and returns its chunks.
func streamed(t *testing.T, s *Server, body string) []chunkDelta {
	t.Helper()
	body = strings.Replace(body, "{", `{"stream":true,"stream_options":{"include_usage":true},`, 1)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
	var out []chunkDelta
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c chunkDelta
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		out = append(out, c)
	}
	return out
}

type wholeCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func wholeCalls(t *testing.T, out map[string]any) ([]wholeCall, string) {
	t.Helper()
	c := out["choices"].([]any)[0].(map[string]any)
	b, _ := json.Marshal(c["message"].(map[string]any)["tool_calls"])
	var calls []wholeCall
	_ = json.Unmarshal(b, &calls)
	return calls, c["finish_reason"].(string)
}

func TestToolCallDecision(t *testing.T) {
	s := NewServer(ServerConfig{Model: "m"})
	for _, tc := range []struct {
		name, body string
		want       []string // tools called, in order
	}{
		{"mentioned", `{"messages":[{"role":"user","content":"What is the GET_WEATHER in Paris?"}],` + weatherTools + `}`, []string{"get_weather"}},
		{"two mentioned", `{"messages":[{"role":"user","content":"get_time and get_weather please"}],` + weatherTools + `}`, []string{"get_weather", "get_time"}},
		{"not parallel", `{"parallel_tool_calls":false,"messages":[{"role":"user","content":"get_time and get_weather"}],` + weatherTools + `}`, []string{"get_weather"}},
		{"not mentioned", `{"messages":[{"role":"user","content":"hello"}],` + weatherTools + `}`, nil},
		{"required", `{"tool_choice":"required","messages":[{"role":"user","content":"hello"}],` + weatherTools + `}`, []string{"get_weather"}},
		{"named", `{"tool_choice":{"type":"function","function":{"name":"get_time"}},"messages":[{"role":"user","content":"get_weather"}],` + weatherTools + `}`, []string{"get_time"}},
		{"none", `{"tool_choice":"none","messages":[{"role":"user","content":"get_weather"}],` + weatherTools + `}`, nil},
		{"mentioned by the system only", `{"messages":[{"role":"user","content":"get_weather"},{"role":"assistant","content":"ok"}],` + weatherTools + `}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, out := call(t, s, "/v1/chat/completions", tc.body)
			calls, finish := wholeCalls(t, out)
			var got []string
			for _, c := range calls {
				got = append(got, c.Function.Name)
				if !strings.HasPrefix(c.ID, "call_") || c.Type != "function" || !json.Valid([]byte(c.Function.Arguments)) {
					t.Errorf("call %+v", c)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("got calls %v, want %v", got, tc.want)
			}
			if want := map[bool]string{true: "tool_calls", false: "stop"}[len(tc.want) > 0]; finish != want {
				t.Errorf("finish_reason: got %q, want %q", finish, want)
			}
		})
	}
}

func TestToolCallStream(t *testing.T) {
	s := NewServer(ServerConfig{Model: "m"})
	body := `{"seed":3,"messages":[{"role":"user","content":"get_weather and get_time"}],` + weatherTools + `}`
	_, out := call(t, s, "/v1/chat/completions", body)
	calls, _ := wholeCalls(t, out)
	if len(calls) != 2 {
		t.Fatalf("got %d calls, want 2", len(calls))
	}
	var args struct {
		City   string
		Days   *int
		Metric *bool
		Unit   string
		Tags   []string
		Where  struct{ Lat *float64 }
	}
	if err := json.Unmarshal([]byte(calls[0].Function.Arguments), &args); err != nil {
		t.Fatalf("arguments %q: %v", calls[0].Function.Arguments, err)
	}
	if !strings.ContainsAny(args.City, "\"\\\n") || !strings.Contains(args.City, "東京") || !strings.Contains(args.City, "é") ||
		args.Days == nil || args.Metric == nil || (args.Unit != "c" && args.Unit != "f") || len(args.Tags) != 2 || args.Where.Lat == nil {
		t.Errorf("arguments %q do not fit the schema with awkward strings", calls[0].Function.Arguments)
	}

	chunks := streamed(t, s, body)
	got := make([]strings.Builder, 2)
	var ids, names [2]string
	fragments, awkward := 0, 0
	for _, c := range chunks {
		if len(c.Choices) == 0 {
			continue
		}
		for _, tc := range c.Choices[0].Delta.ToolCalls {
			if tc.Function.Name != nil {
				ids[tc.Index], names[tc.Index] = tc.ID, *tc.Function.Name
				if tc.Function.Arguments != "" || tc.Type != "function" {
					t.Errorf("first chunk of call %d: %+v", tc.Index, tc)
				}
				continue
			}
			fragments++
			a := tc.Function.Arguments
			if !utf8.ValidString(a) {
				t.Errorf("fragment %q is not UTF-8", a)
			}
			if strings.HasSuffix(a, `\`) || (a != "" && a[0] >= 0x80) {
				awkward++
			}
			got[tc.Index].WriteString(a)
		}
	}
	for i := range 2 {
		if got[i].String() != calls[i].Function.Arguments || names[i] != calls[i].Function.Name || !strings.HasPrefix(ids[i], "call_") {
			t.Errorf("call %d streamed as %s %q %q, whole %q", i, ids[i], names[i], got[i].String(), calls[i].Function.Arguments)
		}
	}
	if awkward == 0 || fragments < 10 {
		t.Errorf("%d fragments, %d split at an escape or multi-byte rune; want several of each", fragments, awkward)
	}
	last := chunks[len(chunks)-1]
	if last.Usage["completion_tokens"] != out["usage"].(map[string]any)["completion_tokens"] ||
		last.Usage["completion_tokens"].(float64) != float64(fragments+2) {
		t.Errorf("usage: streamed %v, whole %v, want %d completion tokens", last.Usage, out["usage"], fragments+2)
	}
	if f := chunks[len(chunks)-2].Choices[0].FinishReason; f == nil || *f != "tool_calls" {
		t.Errorf("finish_reason: got %v", f)
	}
}

func TestToolOutputAnswer(t *testing.T) {
	s := NewServer(ServerConfig{Model: "m"})
	_, out := call(t, s, "/v1/chat/completions", `{"messages":[{"role":"user","content":"get_weather"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c","content":"sunny, 21 °C in 東京, and a very long tail that is cut off here"}],`+weatherTools+`}`)
	if got, want := content(out, 0), `The tool returned: "sunny, 21 °C in 東京, and a very long tail".`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestReasoning(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    ServerConfig
		body   string
		tokens int
	}{
		{"effort high", ServerConfig{}, `{"reasoning_effort":"high","messages":[{"role":"user","content":"hi"}]}`, 16},
		{"model reasons", ServerConfig{Reasoning: true}, `{"messages":[{"role":"user","content":"hi"}]}`, 8},
		{"effort none", ServerConfig{Reasoning: true}, `{"reasoning_effort":"none","messages":[{"role":"user","content":"hi"}]}`, 0},
		{"with a tool call", ServerConfig{}, `{"reasoning_effort":"low","messages":[{"role":"user","content":"get_time"}],` + weatherTools + `}`, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewServer(tc.cfg)
			_, out := call(t, s, "/v1/chat/completions", tc.body)
			msg := out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
			whole, _ := msg["reasoning_content"].(string)
			if got := len(strings.Fields(whole)); got != tc.tokens {
				t.Errorf("reasoning %q: %d words, want %d", whole, got, tc.tokens)
			}
			var reasoning, text strings.Builder
			for _, c := range streamed(t, s, tc.body) {
				if len(c.Choices) == 0 {
					continue
				}
				if r := c.Choices[0].Delta.ReasoningContent; r != "" {
					if text.Len() > 0 {
						t.Error("reasoning after content")
					}
					reasoning.WriteString(r)
				}
				if p := c.Choices[0].Delta.Content; p != nil {
					text.WriteString(*p)
				}
			}
			if reasoning.String() != whole {
				t.Errorf("streamed reasoning %q, whole %q", reasoning.String(), whole)
			}
			u := out["usage"].(map[string]any)
			details, _ := u["completion_tokens_details"].(map[string]any)
			if tc.tokens > 0 && (details == nil || details["reasoning_tokens"].(float64) != float64(tc.tokens)) {
				t.Errorf("usage %v, want %d reasoning tokens", u, tc.tokens)
			}
			if tc.tokens == 0 && details != nil {
				t.Errorf("usage %v has reasoning tokens", u)
			}
		})
	}
}

func TestJSONSchemaAnswer(t *testing.T) {
	s := NewServer(ServerConfig{})
	_, out := call(t, s, "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema",
		"json_schema":{"name":"w","schema":{"type":"object","properties":{"city":{"type":"string"},"n":{"type":["integer","null"]}},"required":["city","n"]}}}}`)
	var v struct {
		City string
		N    *int
	}
	if err := json.Unmarshal([]byte(content(out, 0)), &v); err != nil || v.City == "" || v.N == nil {
		t.Errorf("content %q does not fit the schema: %v", content(out, 0), err)
	}
}

// The official client reassembles the streamed calls into the whole
// answer's.
func TestToolCallsOfficialClient(t *testing.T) {
	srv := httptest.NewServer(NewServer(ServerConfig{Model: "m"}))
	defer srv.Close()
	c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("k"))
	var params openai.ChatCompletionNewParams
	if err := json.Unmarshal([]byte(`{"model":"m","reasoning_effort":"low","messages":[{"role":"user","content":"get_weather, get_time"}],`+weatherTools+`}`), &params); err != nil {
		t.Fatal(err)
	}
	whole, err := c.Chat.Completions.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(t.Context(), params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	got, want := acc.Choices[0].Message.ToolCalls, whole.Choices[0].Message.ToolCalls
	if len(got) != 2 || len(want) != 2 {
		t.Fatalf("got %d streamed and %d whole calls, want 2", len(got), len(want))
	}
	for i := range got {
		if got[i].Function.Arguments != want[i].Function.Arguments || got[i].Function.Name != want[i].Function.Name {
			t.Errorf("call %d: streamed %+v, whole %+v", i, got[i].Function, want[i].Function)
		}
	}
	if acc.Usage.CompletionTokens != whole.Usage.CompletionTokens || whole.Usage.CompletionTokensDetails.ReasoningTokens != 4 {
		t.Errorf("usage: streamed %+v, whole %+v", acc.Usage, whole.Usage)
	}
}
