package messagesapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/llmgw/llmgw/modules/openai"
)

// jsonEqual compares two JSON texts by value.
func jsonEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want %s: %v", want, err)
	}
	if diff := cmp.Diff(w, g); diff != "" {
		t.Errorf("(-want +got)\n%s\ngot %s", diff, got)
	}
}

func TestParseMessages(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
		countOnly        bool
	}{
		{"plain string", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":10}`, false},
		{"system string, stream, sampling, user",
			`{"model":"m","max_tokens":5,"system":"be brief","stream":true,"temperature":0.5,"top_p":0.9,"top_k":40,"stop_sequences":["END"],"metadata":{"user_id":"u1"},"messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true},"temperature":0.5,"top_p":0.9,"top_k":40,"stop":["END"],"user":"u1"}`, false},
		{"system blocks with cache_control",
			`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"one","cache_control":{"type":"ephemeral"}},{"type":"text","text":"two"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`,
			`{"model":"m","messages":[{"role":"system","content":"one\ntwo"},{"role":"user","content":"hi"}],"max_tokens":5}`, false},
		{"images and text",
			`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},{"type":"image","source":{"type":"url","url":"https://x.test/a.jpg"}},{"type":"text","text":"what?"}]}]}`,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},{"type":"image_url","image_url":{"url":"https://x.test/a.jpg"}},{"type":"text","text":"what?"}]}],"max_tokens":5}`, false},
		{"plain-text document",
			`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"the doc"}},{"type":"text","text":"sum up"}]}]}`,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"the doc"},{"type":"text","text":"sum up"}]}],"max_tokens":5}`, false},
		{"tool turn",
			`{"model":"m","max_tokens":5,
			  "tools":[{"name":"get_weather","description":"weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],
			  "tool_choice":{"type":"any","disable_parallel_tool_use":true},
			  "messages":[
			    {"role":"user","content":"weather?"},
			    {"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"x"},{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city": "Par\u00eds \"x\""}}]},
			    {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"},{"type":"tool_result","tool_use_id":"toolu_2","is_error":true,"content":[{"type":"text","text":"boom"}]},{"type":"text","text":"and now?"}]}]}`,
			`{"model":"m","messages":[
			    {"role":"user","content":"weather?"},
			    {"role":"assistant","content":"Checking.","tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Par\\u00eds \\\"x\\\"\"}"}}]},
			    {"role":"tool","tool_call_id":"toolu_1","content":"sunny"},
			    {"role":"tool","tool_call_id":"toolu_2","content":"Error: boom"},
			    {"role":"user","content":"and now?"}],
			  "max_tokens":5,
			  "tools":[{"type":"function","function":{"name":"get_weather","description":"weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
			  "tool_choice":"required","parallel_tool_calls":false}`, false},
		{"tool choice by name, thinking budget",
			`{"model":"m","max_tokens":9000,"thinking":{"type":"enabled","budget_tokens":5000},"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f"},"messages":[{"role":"user","content":"go"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"go"}],"max_tokens":9000,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"f"}},"reasoning_effort":"medium"}`, false},
		{"assistant only tool calls",
			`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}]}]}`,
			`{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":""}],"max_tokens":5}`, false},
		{"output_config format",
			`{"model":"m","max_tokens":5,"output_config":{"effort":"low","format":{"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}}},"messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"response_format":{"type":"json_schema","json_schema":{"name":"output","schema":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}}}}`, false},
		{"beta output_format",
			`{"model":"m","max_tokens":5,"output_format":{"type":"json_schema","schema":{"type":"object"}},"messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"response_format":{"type":"json_schema","json_schema":{"name":"output","schema":{"type":"object"}}}}`, false},
		{"output_config wins over output_format",
			`{"model":"m","max_tokens":5,"output_format":{"type":"json_schema","schema":{"title":"old"}},"output_config":{"format":{"type":"json_schema","schema":{"title":"new"}}},"messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"response_format":{"type":"json_schema","json_schema":{"name":"output","schema":{"title":"new"}}}}`, false},
		{"count_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`,
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":1,"stream":false}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := parseMessages(nil, []byte(tc.body), tc.countOnly)
			if err != nil {
				t.Fatal(err)
			}
			jsonEqual(t, req.Raw, tc.want)
			if req.API != openai.APIMessages || string(req.Original) != tc.body || req.Translation == nil || req.CountOnly != tc.countOnly {
				t.Errorf("got API %q, CountOnly %v, Translation %v; want the Messages request kept", req.API, req.CountOnly, req.Translation)
			}
		})
	}
}

// The arguments of a tool_use are the input's bytes as sent.
func TestParseMessagesToolInputBytes(t *testing.T) {
	input := `{ "s": "a\"b\\c\u00e9\n", "n": [1, 2.50] }`
	body := `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":` + input + `}]}]}`
	req, err := parseMessages(nil, []byte(body), false)
	if err != nil {
		t.Fatal(err)
	}
	var chat struct {
		Messages []struct {
			ToolCalls []struct {
				Function struct{ Arguments string }
			} `json:"tool_calls"`
		}
	}
	if err := json.Unmarshal(req.Raw, &chat); err != nil {
		t.Fatal(err)
	}
	if got := chat.Messages[0].ToolCalls[0].Function.Arguments; got != input {
		t.Errorf("got arguments %q, want %q", got, input)
	}
}

func TestParseMessagesErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body, param string
		countOnly         bool
	}{
		{"not json", `{"model":`, "", false},
		{"no model", `{"max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, "model", false},
		{"no max_tokens", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, "max_tokens", false},
		{"no messages", `{"model":"m","max_tokens":5}`, "messages", false},
		{"empty messages", `{"model":"m","max_tokens":5,"messages":[]}`, "messages", false},
		{"system role", `{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"x"}]}`, "messages[0].role", false},
		{"bad content", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":3}]}`, "messages[0].content", false},
		{"block without type", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"text":"x"}]}]}`, "messages[0].content[0].type", false},
		{"bad media type", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/tiff","data":"AA=="}}]}]}`, "messages[1].content[0].source.media_type", false},
		{"pdf", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"AA=="}}]}]}`, "messages[0].content[1]", false},
		{"image in tool result", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}]}`, "messages[0].content[0].content[0]", false},
		{"tool_use input not object", `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":"x"}]}]}`, "messages[0].content[0].input", false},
		{"tool_use from user", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]}]}`, "messages[0].content[0]", false},
		{"unknown block", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"search_result"}]}]}`, "messages[0].content[0].type", false},
		{"too many stops", `{"model":"m","max_tokens":5,"stop_sequences":["a","b","c","d","e"],"messages":[{"role":"user","content":"x"}]}`, "stop_sequences", false},
		{"temperature above 1", `{"model":"m","max_tokens":5,"temperature":1.5,"messages":[{"role":"user","content":"x"}]}`, "temperature", false},
		{"server tool", `{"model":"m","max_tokens":5,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"x"}]}`, "tools[0].type", false},
		{"tool without schema", `{"model":"m","max_tokens":5,"tools":[{"name":"f"}],"messages":[{"role":"user","content":"x"}]}`, "tools[0].input_schema", false},
		{"bad tool_choice", `{"model":"m","max_tokens":5,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"some"},"messages":[{"role":"user","content":"x"}]}`, "tool_choice.type", false},
		{"budget over max_tokens", `{"model":"m","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":4000},"messages":[{"role":"user","content":"x"}]}`, "thinking.budget_tokens", false},
		{"output format not a schema", `{"model":"m","max_tokens":5,"output_config":{"format":{"type":"json_object"}},"messages":[{"role":"user","content":"x"}]}`, "output_config.format.type", false},
		{"output format without schema", `{"model":"m","max_tokens":5,"output_format":{"type":"json_schema"},"messages":[{"role":"user","content":"x"}]}`, "output_format.schema", false},
		{"output_config not an object", `{"model":"m","max_tokens":5,"output_config":"json","messages":[{"role":"user","content":"x"}]}`, "output_config", false},
		{"count_tokens without model", `{"messages":[{"role":"user","content":"x"}]}`, "model", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseMessages(nil, []byte(tc.body), tc.countOnly)
			e, ok := err.(*openai.Error)
			if !ok || e.Status != 400 || e.Param != tc.param {
				t.Fatalf("got %v (param %q), want a 400 with param %q", err, paramOf(err), tc.param)
			}
			if tc.param != "" && !strings.Contains(e.Message, tc.param) {
				t.Errorf("message %q does not name %s", e.Message, tc.param)
			}
		})
	}
}

func paramOf(err error) string {
	if e, ok := err.(*openai.Error); ok {
		return e.Param
	}
	return ""
}

// Invalid UTF-8 in a string is refused with a 400 that says so, as at
// every endpoint (see openai's TestParseInvalidUTF8).
func TestParseInvalidUTF8(t *testing.T) {
	for _, parse := range []func([]byte) error{
		func(b []byte) error { _, err := parseMessages(nil, b, false); return err },
	} {
		err := parse([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"` + "\xe9t\xe9" + `"}]}`))
		if e, ok := err.(*openai.Error); !ok || e.Code != "invalid_utf8" {
			t.Errorf("messages: got %v", err)
		}
	}
}
