package responsesapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/llmgw/llmgw/modules/openai"
)

func responsesRequest(t *testing.T, body string) (*openai.Request, error) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(body))
	return parseResponses(r, []byte(body))
}

func jsonValue(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return v
}

// TestResponsesRequest checks the chat request each kind of Responses
// request becomes.
func TestResponsesRequest(t *testing.T) {
	for _, tc := range []struct {
		name, body, chat string
	}{
		{"string input", `{"model":"m","input":"hi"}`,
			`{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{"instructions first, developer as system", `{"model":"m","instructions":"be brief","input":[{"role":"developer","content":"dev"},{"role":"user","content":"q"}]}`,
			`{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"system","content":"dev"},{"role":"user","content":"q"}]}`},
		{"one text part is the text", `{"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"a\u00e9"}]}]}`,
			`{"model":"m","messages":[{"role":"user","content":"aé"}]}`},
		{"parts with an image", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"what?"},{"type":"input_image","image_url":"data:image/png;base64,AAAA","detail":"low"}]}]}`,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"what?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}}]}]}`},
		{"assistant text, calls and their outputs", `{"model":"m","input":[
			{"role":"user","content":"weather?"},
			{"type":"message","role":"assistant","content":[{"type":"output_text","text":"checking","annotations":[]}]},
			{"type":"function_call","call_id":"c1","name":"w","arguments":"{\"city\":\"Par\\u00eds\\n\"}"},
			{"type":"function_call","call_id":"c2","name":"w","arguments":"{}"},
			{"type":"reasoning","id":"rs_1","summary":[]},
			{"type":"function_call_output","call_id":"c1","output":"sunny"},
			{"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"rain"}]}]}`,
			`{"model":"m","messages":[{"role":"user","content":"weather?"},
			{"role":"assistant","content":"checking","tool_calls":[
				{"id":"c1","type":"function","function":{"name":"w","arguments":"{\"city\":\"Par\\u00eds\\n\"}"}},
				{"id":"c2","type":"function","function":{"name":"w","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"sunny"},
			{"role":"tool","tool_call_id":"c2","content":"rain"}]}`},
		{"calls without text", `{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"x"}]}`,
			`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"x"}]}`},
		{"options", `{"model":"m","input":"x","tools":[{"type":"function","name":"f","description":"d","parameters":{"type":"object"},"strict":true},{"type":"function","name":"g"}],
			"tool_choice":{"type":"function","name":"f"},"parallel_tool_calls":false,"max_output_tokens":64,"temperature":0.5,"top_p":0.9,
			"user":"u","reasoning":{"effort":"low"},"metadata":{"k":"v"},"truncation":"auto","store":false,"include":["x"],"service_tier":"auto"}`,
			`{"model":"m","messages":[{"role":"user","content":"x"}],
			"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"},"strict":true}},{"type":"function","function":{"name":"g"}}],
			"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false,"max_tokens":64,
			"temperature":0.5,"top_p":0.9,"user":"u","reasoning_effort":"low"}`},
		{"json schema", `{"model":"m","input":"x","text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object"},"strict":true}}}`,
			`{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"},"strict":true}}}`},
		{"json object", `{"model":"m","input":"x","text":{"format":{"type":"json_object"}}}`,
			`{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}`},
		{"plain text format", `{"model":"m","input":"x","text":{"format":{"type":"text"}},"tool_choice":"required"}`,
			`{"model":"m","messages":[{"role":"user","content":"x"}],"tool_choice":"required"}`},
		{"stream asks for usage", `{"model":"m","input":"x","stream":true}`,
			`{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":true}}`},
		{"nulls are absent", `{"model":"m","input":"x","instructions":null,"tools":null,"temperature":null}`,
			`{"model":"m","messages":[{"role":"user","content":"x"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := responsesRequest(t, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(jsonValue(t, []byte(tc.chat)), jsonValue(t, req.Raw)); diff != "" {
				t.Errorf("chat body (-want +got)\n%s\n%s", diff, req.Raw)
			}
			if req.API != openai.APIResponses || string(req.Original) != tc.body || req.Translation == nil {
				t.Errorf("got API %q, Original %q, Translation %v", req.API, req.Original, req.Translation)
			}
		})
	}
}

// TestResponsesRequestArgumentsVerbatim checks that a call's arguments
// reach the engine byte for byte, escapes and all.
func TestResponsesRequestArgumentsVerbatim(t *testing.T) {
	args := `"{\"a\":\"\\\"q\\\" \\\\ \\u00e9 \u00e9\\n\"}"`
	req, err := responsesRequest(t, `{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":`+args+`}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(req.Raw), `"arguments":`+args+`}`) {
		t.Errorf("got %s, want the arguments %s verbatim", req.Raw, args)
	}
}

func TestResponsesRequestRejects(t *testing.T) {
	for _, tc := range []struct {
		name, body, param, code, msg string
	}{
		{"not json", `{"model":`, "", "invalid_json", "not valid JSON"},
		{"no model", `{"input":"x"}`, "model", "missing_model", "model"},
		{"no input", `{"model":"m"}`, "input", "missing_required_parameter", "input"},
		{"empty input", `{"model":"m","input":[]}`, "input", "invalid_value", "must not be empty"},
		{"input type", `{"model":"m","input":3}`, "input", "invalid_type", "a string or an array"},
		{"item type", `{"model":"m","input":["x"]}`, "input[0]", "invalid_type", "input item"},
		{"bad role", `{"model":"m","input":[{"role":"tool","content":"x"}]}`, "input[0].role", "invalid_value", "must be one of"},
		{"no content", `{"model":"m","input":[{"role":"user"}]}`, "input[0].content", "missing_required_parameter", "content"},
		{"content type", `{"model":"m","input":[{"role":"user","content":{}}]}`, "input[0].content", "invalid_type", "a string or an array"},
		{"image url type", `{"model":"m","input":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":5}]}]}`,
			"input[1].content[1].image_url", "invalid_type", "a string"},
		{"image by file id", `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"file-1"}]}]}`,
			"input[0].content[0].file_id", "unsupported_value", "file_id is not supported"},
		{"image detail", `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"https://x/y.png","detail":"max"}]}]}`,
			"input[0].content[0].detail", "invalid_value", "must be one of"},
		{"image from assistant", `{"model":"m","input":[{"role":"assistant","content":[{"type":"input_image","image_url":"https://x"}]}]}`,
			"input[0].content[0].type", "unsupported_value", "user messages only"},
		{"file part", `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`,
			"input[0].content[0].type", "unsupported_value", "input_file"},
		{"text part without text", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text"}]}]}`,
			"input[0].content[0].text", "missing_required_parameter", "text"},
		{"call without name", `{"model":"m","input":[{"type":"function_call","call_id":"c","arguments":"{}"}]}`,
			"input[0].name", "missing_required_parameter", "name"},
		{"call arguments type", `{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":{}}]}`,
			"input[0].arguments", "invalid_type", "a string"},
		{"output without call_id", `{"model":"m","input":[{"type":"function_call_output","output":"x"}]}`,
			"input[0].call_id", "missing_required_parameter", "call_id"},
		{"output image", `{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"https://x"}]}]}`,
			"input[0].output[0].type", "unsupported_value", "user messages only"},
		{"item reference", `{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`, "input[0].type", "unsupported_value", "item_reference"},
		{"computer call", `{"model":"m","input":[{"type":"computer_call_output","call_id":"c"}]}`, "input[0].type", "unsupported_value", `"computer_call_output" is not supported`},
		{"web search tool", `{"model":"m","input":"x","tools":[{"type":"function","name":"f"},{"type":"web_search"}]}`,
			"tools[1].type", "unsupported_tool", `"web_search" is not supported`},
		{"tool name type", `{"model":"m","input":"x","tools":[{"type":"function","name":1}]}`, "tools[0].name", "invalid_type", "a string"},
		{"tool_choice value", `{"model":"m","input":"x","tool_choice":"any"}`, "tool_choice", "invalid_value", "must be one of"},
		{"tool_choice tool type", `{"model":"m","input":"x","tool_choice":{"type":"web_search_preview"}}`, "tool_choice", "invalid_value", "other tool types"},
		{"format type", `{"model":"m","input":"x","text":{"format":{"type":"yaml"}}}`, "text.format.type", "invalid_value", "json_schema"},
		{"max_output_tokens", `{"model":"m","input":"x","max_output_tokens":0}`, "max_output_tokens", "invalid_value", "at least 1"},
		{"temperature", `{"model":"m","input":"x","temperature":3}`, "temperature", "invalid_value", "from 0 to 2"},
		{"top_p type", `{"model":"m","input":"x","top_p":"1"}`, "top_p", "invalid_type", "a number"},
		{"stream type", `{"model":"m","input":"x","stream":"yes"}`, "stream", "invalid_type", "a boolean"},
		{"metadata type", `{"model":"m","input":"x","metadata":[]}`, "metadata", "invalid_type", "an object"},
		{"truncation", `{"model":"m","input":"x","truncation":"middle"}`, "truncation", "invalid_value", "auto"},
		{"background", `{"model":"m","input":"x","background":true}`, "background", "unsupported_parameter", "background"},
		{"conversation", `{"model":"m","input":"x","conversation":"conv_1"}`, "conversation", "unsupported_parameter", "previous_response_id"},
		{"prompt template", `{"model":"m","input":"x","prompt":{"id":"pmpt_1"}}`, "prompt", "unsupported_parameter", "prompt templates"},
		{"effort type", `{"model":"m","input":"x","reasoning":{"effort":1}}`, "reasoning.effort", "invalid_type", "a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := responsesRequest(t, tc.body)
			e, ok := err.(*openai.Error)
			if !ok || e.Status != 400 || e.Code != tc.code || e.Param != tc.param || !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("got %#v, want a 400 %s at %q saying %q", err, tc.code, tc.param, tc.msg)
			}
		})
	}
}

// TestResponsesPrevious checks that previous_response_id continues the
// stored conversation without its instructions, and that an unknown id
// (or another key's) is a 404.
func TestResponsesPrevious(t *testing.T) {
	st := newMemoryStore(10, 1<<20)
	SetResponseStore(st)
	defer SetResponseStore(nil)
	rec := `{"response":{},"messages":[{"role":"user","content":"q1"},{"role":"assistant","content":"a1"}],"input":"q1"}`
	if err := st.Put(context.Background(), "", "resp_1", []byte(rec), storeTTL); err != nil {
		t.Fatal(err)
	}
	_ = st.Put(context.Background(), "other-key", "resp_2", []byte(rec), storeTTL)
	req, err := responsesRequest(t, `{"model":"m","previous_response_id":"resp_1","instructions":"new","input":"q2"}`)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","messages":[{"role":"system","content":"new"},{"role":"user","content":"q1"},{"role":"assistant","content":"a1"},{"role":"user","content":"q2"}]}`
	if diff := cmp.Diff(jsonValue(t, []byte(want)), jsonValue(t, req.Raw)); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if p, ok := req.Translation.(interface{ PassThrough() bool }); !ok || p.PassThrough() {
		t.Error("a request continuing a stored response may pass to an engine as it is")
	}
	if p := newTurn(t, `{"model":"m","input":"x"}`); p.PassThrough() {
		t.Error("a request to be stored may pass to an engine as it is")
	}
	if p := newTurn(t, `{"model":"m","input":"x","store":false}`); !p.PassThrough() {
		t.Error("a request neither stored nor continuing one is kept from an engine that speaks Responses")
	}
	for _, id := range []string{"resp_nope", "resp_2"} {
		_, err = responsesRequest(t, `{"model":"m","previous_response_id":"`+id+`","input":"q2"}`)
		e, ok := err.(*openai.Error)
		if !ok || e.Status != 404 || e.Param != "previous_response_id" || e.Message != "Previous response with id '"+id+"' not found." {
			t.Errorf("got %#v, want a 404 naming %s", err, id)
		}
	}
	_, err = responsesRequest(t, `{"model":"m","previous_response_id":"resp_nope"}`)
	if e, ok := err.(*openai.Error); !ok || e.Status != 404 {
		t.Errorf("unknown id and no input: got %v, want a 404", err)
	}
}
