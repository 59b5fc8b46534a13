package responsesapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/llmgw/llmgw/modules/openai"
)

// TestFileSearchRequest checks what a request with a file_search tool
// becomes: the tool is the gateway's (Request.FileSearch), never a chat
// tool; tool_choice and include as the API documents them.
func TestFileSearchRequest(t *testing.T) {
	const fn = `{"type":"function","name":"f"}`
	const chatFn = `[{"type":"function","function":{"name":"f"}}]`
	full := &openai.FileSearch{VectorStoreIDs: []string{"vs_docs", "vs_faq"}, MaxNumResults: 7,
		Filters:        json.RawMessage(`{"type":"and","filters":[{"type":"eq","key":"lang","value":"en"},{"type":"in","key":"team","value":["a","b"]}]}`),
		ScoreThreshold: 0.25}
	ids := func(s ...string) *openai.FileSearch { return &openai.FileSearch{VectorStoreIDs: s} }
	for _, tc := range []struct {
		name, members string // members of the request besides model and input
		tools         string // the chat request's tools, "" for none
		choice        string // the chat request's tool_choice, "" for none
		want          *openai.FileSearch
	}{
		{"all members", `"tools":[{"type":"file_search","vector_store_ids":["vs_docs","vs_faq"],"max_num_results":7,
			"filters":{"type":"and","filters":[{"type":"eq","key":"lang","value":"en"},{"type":"in","key":"team","value":["a","b"]}]},
			"ranking_options":{"ranker":"auto","score_threshold":0.25,"hybrid_search":{"embedding_weight":1,"text_weight":1}}}]`, "", "", full},
		{"nulls are absent", `"tools":[{"type":"file_search","vector_store_ids":["v"],"max_num_results":null,"filters":null,"ranking_options":null}]`,
			"", "", ids("v")},
		{"beside a function", `"tools":[` + fn + `,{"type":"file_search","vector_store_ids":["v"]}]`, chatFn, "", ids("v")},
		{"include results", `"include":["message.output_text.logprobs","file_search_call.results"],"tools":[{"type":"file_search","vector_store_ids":["v"]}]`,
			"", "", &openai.FileSearch{VectorStoreIDs: []string{"v"}, IncludeResults: true}},
		{"include results first", `"tools":[{"type":"file_search","vector_store_ids":["v"]}],"include":["file_search_call.results"]`,
			"", "", &openai.FileSearch{VectorStoreIDs: []string{"v"}, IncludeResults: true}},
		{"other include", `"include":["reasoning.encrypted_content"],"tools":[{"type":"file_search","vector_store_ids":["v"]}]`, "", "", ids("v")},
		{"choice file_search alone", `"tool_choice":{"type":"file_search"},"tools":[{"type":"file_search","vector_store_ids":["v"]}]`, "", "", ids("v")},
		{"choice file_search with a function", `"tool_choice":{"type":"file_search"},"tools":[{"type":"file_search","vector_store_ids":["v"]},` + fn + `]`,
			chatFn, `"auto"`, ids("v")},
		{"required alone", `"tool_choice":"required","tools":[{"type":"file_search","vector_store_ids":["v"]}]`, "", "", ids("v")},
		{"required with a function", `"tools":[{"type":"file_search","vector_store_ids":["v"]},` + fn + `],"tool_choice":"required"`,
			chatFn, `"auto"`, ids("v")},
		{"a function forced", `"tools":[{"type":"file_search","vector_store_ids":["v"]},` + fn + `],"tool_choice":{"type":"function","name":"f"}`,
			chatFn, `{"type":"function","function":{"name":"f"}}`, ids("v")},
		{"none: no search", `"tool_choice":"none","tools":[{"type":"file_search","vector_store_ids":["v"]}],"include":["file_search_call.results"]`,
			"", "", nil},
		{"none with a function", `"tool_choice":"none","tools":[` + fn + `,{"type":"file_search","vector_store_ids":["v"]}]`, chatFn, `"none"`, nil},
		{"no file_search", `"tools":[` + fn + `],"include":["file_search_call.results"]`, chatFn, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"m","input":"q","store":false,` + tc.members + `}`
			req, err := responsesRequest(t, body)
			if err != nil {
				t.Fatal(err)
			}
			want := `{"model":"m","messages":[{"role":"user","content":"q"}]`
			if tc.tools != "" {
				want += `,"tools":` + tc.tools
			}
			if tc.choice != "" {
				want += `,"tool_choice":` + tc.choice
			}
			if diff := cmp.Diff(jsonValue(t, []byte(want+"}")), jsonValue(t, req.Raw)); diff != "" {
				t.Errorf("chat body (-want +got)\n%s\n%s", diff, req.Raw)
			}
			if diff := cmp.Diff(tc.want, req.FileSearch); diff != "" {
				t.Errorf("FileSearch (-want +got)\n%s", diff)
			}
			if p := req.Translation.(*respTurn).PassThrough(); p != !strings.Contains(tc.members, "file_search\"") {
				t.Errorf("PassThrough %v: a request with a file_search tool must reach the gateway's search", p)
			}
		})
	}
}

// TestFileSearchInputItems checks that file_search_call items a client
// sends back (the output of an earlier turn) are dropped from the chat
// conversation, never refused, and listed as input items.
func TestFileSearchInputItems(t *testing.T) {
	SetResponseStore(newMemoryStore(10, 1<<20))
	defer SetResponseStore(nil)
	body := `{"model":"m","tools":[{"type":"file_search","vector_store_ids":["v"]}],"input":[
		{"role":"user","content":"q1"},
		{"id":"fs_1","type":"file_search_call","status":"completed","queries":["q1"],"results":null},
		{"id":"fs_2","type":"file_search_call","status":"completed","queries":["q1"],"results":[{"file_id":"f","filename":"a.md","score":0.9,"text":"t","attributes":{}}]},
		{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"a1 [1]",
			"annotations":[{"type":"file_citation","file_id":"f","filename":"a.md","index":6}]}]},
		{"role":"user","content":"q2"}]}`
	req, err := responsesRequest(t, body)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","messages":[{"role":"user","content":"q1"},{"role":"assistant","content":"a1 [1]"},{"role":"user","content":"q2"}]}`
	if diff := cmp.Diff(jsonValue(t, []byte(want)), jsonValue(t, req.Raw)); diff != "" {
		t.Errorf("chat body (-want +got)\n%s", diff)
	}
	turn := req.Translation.(*respTurn)
	serve(turn, 200, "application/json", [][]byte{[]byte(`{"choices":[{"index":0,"message":{"content":"a2"},"finish_reason":"stop"}]}`)}, nil)
	items, e := inputItems(turn.id, turn.input, httpGet("/v1/responses/"+turn.id+"/input_items?order=asc"))
	if e != nil || !strings.Contains(string(items), `"id":"fs_1","type":"file_search_call"`) {
		t.Errorf("input_items: %v %s", e, items)
	}
}

// TestFileSearchRejects checks every way a file_search tool, include or
// tool_choice can be wrong: a 400 in the API's shape naming the member.
func TestFileSearchRejects(t *testing.T) {
	tool := func(members string) string {
		return `{"model":"m","input":"x","tools":[{"type":"function","name":"f"},{"type":"file_search",` + members + `}]}`
	}
	eleven := `"vector_store_ids":["a","b","c","d","e","f","g","h","i","j","k"]`
	for _, tc := range []struct {
		name, body, param, code, msg string
	}{
		{"two tools", `{"model":"m","input":"x","tools":[{"type":"file_search","vector_store_ids":["a"]},{"type":"file_search","vector_store_ids":["b"]}]}`,
			"tools[1]", "invalid_value", "second file_search tool"},
		{"no ids", tool(`"max_num_results":3`), "tools[1].vector_store_ids", "missing_required_parameter", "knowledge base ids"},
		{"null ids", tool(`"vector_store_ids":null`), "tools[1].vector_store_ids", "missing_required_parameter", "knowledge base ids"},
		{"ids type", tool(`"vector_store_ids":"vs_a"`), "tools[1].vector_store_ids", "invalid_type", "an array of 1 to 10"},
		{"no id", tool(`"vector_store_ids":[]`), "tools[1].vector_store_ids", "invalid_value", "not an empty array"},
		{"eleven ids", tool(eleven), "tools[1].vector_store_ids", "invalid_value", "(it has 11)"},
		{"id type", tool(`"vector_store_ids":["a",7]`), "tools[1].vector_store_ids[1]", "invalid_type", "a non-empty string"},
		{"empty id", tool(`"vector_store_ids":[""]`), "tools[1].vector_store_ids[0]", "invalid_type", "a non-empty string"},
		{"max_num_results 0", tool(`"vector_store_ids":["a"],"max_num_results":0`), "tools[1].max_num_results", "invalid_value", "from 1 to 50"},
		{"max_num_results 51", tool(`"vector_store_ids":["a"],"max_num_results":51`), "tools[1].max_num_results", "invalid_value", "from 1 to 50"},
		{"max_num_results type", tool(`"vector_store_ids":["a"],"max_num_results":"5"`), "tools[1].max_num_results", "invalid_type", "an integer"},
		{"max_num_results fraction", tool(`"vector_store_ids":["a"],"max_num_results":2.5`), "tools[1].max_num_results", "invalid_type", "an integer"},
		{"filters type", tool(`"vector_store_ids":["a"],"filters":[]`), "tools[1].filters", "invalid_type", "an object"},
		{"filter type", tool(`"vector_store_ids":["a"],"filters":{"type":"like","key":"k","value":"v"}`), "tools[1].filters.type", "invalid_value", "must be one of"},
		{"filter without type", tool(`"vector_store_ids":["a"],"filters":{"key":"k","value":"v"}`), "tools[1].filters.type", "missing_required_parameter", `"eq"`},
		{"filter without key", tool(`"vector_store_ids":["a"],"filters":{"type":"eq","value":"v"}`), "tools[1].filters.key", "missing_required_parameter", "a string"},
		{"filter key type", tool(`"vector_store_ids":["a"],"filters":{"type":"eq","key":1,"value":"v"}`), "tools[1].filters.key", "invalid_type", "a string"},
		{"filter value type", tool(`"vector_store_ids":["a"],"filters":{"type":"eq","key":"k","value":{}}`), "tools[1].filters.value", "invalid_type", "a string, number"},
		{"filter without value", tool(`"vector_store_ids":["a"],"filters":{"type":"eq","key":"k"}`), "tools[1].filters.value", "missing_required_parameter", "a string, number"},
		{"compound filters type", tool(`"vector_store_ids":["a"],"filters":{"type":"or","filters":{}}`), "tools[1].filters.filters", "invalid_type", "an array"},
		{"nested filter", tool(`"vector_store_ids":["a"],"filters":{"type":"or","filters":[{"type":"eq","key":"k","value":1},{"type":"ne","value":1}]}`),
			"tools[1].filters.filters[1].key", "missing_required_parameter", "a string"},
		{"deep filter", tool(`"vector_store_ids":["a"],"filters":` + strings.Repeat(`{"type":"and","filters":[`, 9) + `{"type":"eq","key":"k","value":1}` + strings.Repeat(`]}`, 9)),
			"tools[1].filters" + strings.Repeat(".filters[0]", 8), "invalid_value", "at most 8 deep"},
		{"ranking type", tool(`"vector_store_ids":["a"],"ranking_options":0.5`), "tools[1].ranking_options", "invalid_type", "an object"},
		{"score threshold", tool(`"vector_store_ids":["a"],"ranking_options":{"score_threshold":1.5}`), "tools[1].ranking_options.score_threshold", "invalid_value", "from 0 to 1"},
		{"score threshold type", tool(`"vector_store_ids":["a"],"ranking_options":{"score_threshold":"high"}`), "tools[1].ranking_options.score_threshold", "invalid_type", "a number"},
		{"ranker", tool(`"vector_store_ids":["a"],"ranking_options":{"ranker":"bm25"}`), "tools[1].ranking_options.ranker", "invalid_value", "default-2024-11-15"},
		{"hybrid type", tool(`"vector_store_ids":["a"],"ranking_options":{"hybrid_search":1}`), "tools[1].ranking_options.hybrid_search", "invalid_type", "an object"},
		{"include type", `{"model":"m","input":"x","include":"file_search_call.results"}`, "include", "invalid_type", "an array of strings"},
		{"include element", `{"model":"m","input":"x","include":["file_search_call.results",1]}`, "include[1]", "invalid_type", "a string"},
		{"choice without the tool", `{"model":"m","input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"file_search"}}`,
			"tool_choice", "invalid_value", "needs a file_search tool"},
		{"other hosted tool", `{"model":"m","input":"x","tools":[{"type":"file_search","vector_store_ids":["a"]},{"type":"web_search"}]}`,
			"tools[1].type", "unsupported_tool", "only function and file_search tools are"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := responsesRequest(t, tc.body)
			e, ok := err.(*openai.Error)
			if !ok || e.Status != 400 || e.Type != "invalid_request_error" || e.Code != tc.code || e.Param != tc.param || !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("got %#v, want a 400 %s at %q saying %q", err, tc.code, tc.param, tc.msg)
			}
			if !strings.HasPrefix(e.Message, e.Param) && tc.param != "tool_choice" {
				t.Errorf("the message %q does not start with the member %s", e.Message, e.Param)
			}
		})
	}
}

func httpGet(target string) *http.Request { return httptest.NewRequest(http.MethodGet, target, nil) }
