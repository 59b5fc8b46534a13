package llmcache

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/llmgw/llmgw/modules/openai"
)

func TestExactKeyIsCanonical(t *testing.T) {
	base := `{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.5}`
	k := func(scope, body string) string {
		key, err := exactKey(scope, "m", "chat/completions", []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return key
	}
	want := k("p:a", base)
	for _, same := range []string{
		`{ "temperature": 0.5, "messages": [ {"content":"hi", "role":"user"} ], "model":"m" }`,
		`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}],"temperature":0.5}`,
		`{"model":"alias","messages":[{"role":"user","content":"hi"}],"temperature":0.5,"user":"u1"}`,
	} {
		if got := k("p:a", same); got != want {
			t.Errorf("%s: key differs", same)
		}
	}
	for _, diff := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi!"}],"temperature":0.5}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.7}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.5,"tools":[]}`,
	} {
		if k("p:a", diff) == want {
			t.Errorf("%s: key is the same", diff)
		}
	}
	if k("p:b", base) == want {
		t.Error("another scope has the same key")
	}
}

const simStream = `data: {"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}

data: {"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}

data: {"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":" wide wörld"},"finish_reason":null}]}

data: {"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

`

func TestAssemble(t *testing.T) {
	a, err := assemble([]byte(simStream), openai.Usage{PromptTokens: 3, CompletionTokens: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := &answer{Chat: true, Model: "m", Usage: openai.Usage{PromptTokens: 3, CompletionTokens: 3},
		Choices: []answerChoice{{Content: "Hello wide wörld", FinishReason: "stop"}}}
	if diff := cmp.Diff(want, a, ignoreInline); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	for name, events := range map[string]string{
		"cut before [DONE]": strings.TrimSuffix(simStream, "data: [DONE]\n\n"),
		"cut before finish": strings.Replace(simStream, `"finish_reason":"stop"`, `"finish_reason":null`, 1),
		"error event":       strings.Replace(simStream, "data: [DONE]", `data: {"error":{"message":"boom"}}`+"\n\ndata: [DONE]", 1),
		"content filter":    strings.Replace(simStream, `"finish_reason":"stop"`, `"finish_reason":"content_filter"`, 1),
		"refusal":           strings.Replace(simStream, `"content":"Hello"`, `"refusal":"no"`, 1),
	} {
		if _, err := assemble([]byte(events), openai.Usage{}); err == nil {
			t.Errorf("%s: stored", name)
		}
	}
}

func TestReplayRoundTrip(t *testing.T) {
	a := &answer{Chat: true, Model: "m", Usage: openai.Usage{PromptTokens: 5, CompletionTokens: 7},
		Choices: []answerChoice{{Content: "one two  three", FinishReason: "tool_calls",
			ToolCalls: []toolCall{{ID: "c1", Name: "f", Arguments: `{"city":"Zürich","days":3,"note":"ünïcødé ärgümënts"}`}}}}}
	rec := httptest.NewRecorder()
	a.writeStream(rec, "m", true)
	got, err := assemble(rec.Body.Bytes(), a.Usage)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, got, ignoreInline); diff != "" {
		t.Errorf("replayed stream assembles differently (-want +got)\n%s", diff)
	}
	if !strings.Contains(rec.Body.String(), `"cached_tokens":5`) {
		t.Error("the usage chunk does not mark the prompt as cached")
	}
	rec = httptest.NewRecorder()
	a.writeWhole(rec, "m")
	whole, err := parseWhole(rec.Body.Bytes(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a.Choices, whole.Choices); diff != "" {
		t.Errorf("whole answer differs (-want +got)\n%s", diff)
	}
}

func TestQueryKeysAndContext(t *testing.T) {
	q := func(body string) *query {
		req, err := openai.Parse(openai.ChatCompletions, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		x, err := newQuery("p:a", "m", req, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	a := q(`{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"What is the capital of Peru?"}]}`)
	b := q(`{"messages":[{"content":"be brief","role":"system"},{"role":"user","content":[{"type":"text","text":"Tell me the capital of Peru."}]}],"model":"m"}`)
	c := q(`{"model":"m","messages":[{"role":"system","content":"be verbose"},{"role":"user","content":"What is the capital of Peru?"}]}`)
	if a.bucket == "" || a.bucket != b.bucket {
		t.Errorf("the same context in two bodies: buckets %q and %q", a.bucket, b.bucket)
	}
	if a.key == b.key || a.bucket == c.bucket || a.key == c.key {
		t.Error("different questions or contexts share a key")
	}
	if b.question != "Tell me the capital of Peru. " || a.an == nil {
		t.Errorf("question %q, analysis %v", b.question, a.an)
	}
	if k, _ := exactKey("p:a", "m", openai.ChatCompletions, []byte(`{"model":"x","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"What is the capital of Peru?"}]}`)); k != a.key {
		t.Error("exactKey and newQuery disagree")
	}
}

func TestSemanticLookupStaysInItsBucket(t *testing.T) {
	s, err := newEntries(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destruct()
	ans := &answer{Chat: true, Choices: []answerChoice{{Content: "Lima", FinishReason: "stop"}}}
	question := "What is the capital of Peru?"
	s.putLocal(&entry{key: "k", bucket: "tenant-a", question: question, an: analyze(question), ans: ans, expires: time.Now().Add(time.Hour)})
	if e, _ := s.nearest(&query{bucket: "tenant-b", an: analyze("Tell me the capital of Peru.")}, defaultThreshold); e != nil {
		t.Error("another bucket's entry answered")
	}
	if e, _ := s.nearest(&query{bucket: "tenant-a", an: analyze("Tell me the capital of Peru.")}, defaultThreshold); e == nil {
		t.Error("the bucket's own entry did not answer")
	}
}

func TestKeysOf(t *testing.T) {
	base := keysOf("p:a", "m", openai.ChatCompletions, []byte(`{"model":"x","temperature":0,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"What is the capital of Peru?"}]}`), true)
	if !base.semantic || base.question != "What is the capital of Peru?" {
		t.Fatalf("question not split off: %+v", base)
	}
	// The same request written otherwise, and with delivery-only members.
	same := keysOf("p:a", "m", openai.ChatCompletions, []byte("{ \"messages\" : [ {\"content\":\"be brief\",\"role\":\"system\"},\n {\"role\":\"user\",\"content\":\"What is the capital of Peru\\u003f\"} ],\n \"temperature\":0, \"stream\":true, \"user\":\"u1\", \"model\":\"y\" }"), true)
	if same != base {
		t.Errorf("the same request has other keys:\n%+v\n%+v", same, base)
	}
	// Another question in the same context: same bucket, other key.
	other := keysOf("p:a", "m", openai.ChatCompletions, []byte(`{"model":"x","temperature":0,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"How many people live in Lima?"}]}`), true)
	if other.bucket != base.bucket || other.exact == base.exact {
		t.Errorf("another question: bucket %v (want same), key %v (want other)", other.bucket == base.bucket, other.exact == base.exact)
	}
	// Another context: another bucket.
	for _, body := range []string{
		`{"model":"x","temperature":0,"messages":[{"role":"system","content":"be verbose"},{"role":"user","content":"What is the capital of Peru?"}]}`,
		`{"model":"x","temperature":1,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"What is the capital of Peru?"}]}`,
		`{"model":"x","temperature":0,"messages":[{"role":"user","content":"What is the capital of Peru?"}]}`,
	} {
		if k := keysOf("p:a", "m", openai.ChatCompletions, []byte(body), true); k.bucket == base.bucket || k.exact == base.exact {
			t.Errorf("%s shares a key with the base request", body)
		}
	}
	if k := keysOf("p:b", "m", openai.ChatCompletions, []byte(`{"model":"x","temperature":0,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"What is the capital of Peru?"}]}`), true); k.bucket == base.bucket || k.exact == base.exact {
		t.Error("another scope shares a key")
	}
	// Text parts are the question; an assistant's last turn is none.
	parts := keysOf("p:a", "m", openai.ChatCompletions, []byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"Hello"},{"type":"text","text":"there"}]}]}`), true)
	if parts.question != "Hello there " {
		t.Errorf("text parts gave %q", parts.question)
	}
	if k := keysOf("p:a", "m", openai.ChatCompletions, []byte(`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}`), true); k.semantic {
		t.Error("an assistant's last turn was taken for a question")
	}
	// A completion's prompt, first member or not.
	p1 := keysOf("p:a", "m", openai.Completions, []byte(`{"prompt":"Once upon a time","max_tokens":5}`), true)
	p2 := keysOf("p:a", "m", openai.Completions, []byte(`{"max_tokens":5,"prompt":"Long ago"}`), true)
	if !p1.semantic || p1.question != "Once upon a time" || p1.bucket != p2.bucket {
		t.Errorf("prompts: %+v %+v", p1, p2)
	}
}

func TestAssembleShapes(t *testing.T) {
	// Two choices, escapes, a tool call whose arguments come in pieces,
	// extra whitespace, and members in another order.
	events := "data: {\"choices\":[{\"index\":1,\"delta\":{\"role\":\"assistant\",\"content\":\"B:\\n\\\"quoted\\\" \\u00e9\"},\"finish_reason\":null}],\"model\":\"m2\",\"object\":\"chat.completion.chunk\"}\n\n" +
		"data:{\"object\":\"chat.completion.chunk\",\"model\":\"m2\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n" +
		"data: {\"object\":\"chat.completion.chunk\",\"model\":\"m2\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\":\"}}]},\"finish_reason\":null}]}\n\n" +
		"data: {\"object\":\"chat.completion.chunk\",\"model\":\"m2\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"Paris\\\"}\"}}]},\"finish_reason\":\"tool_calls\"},{\"index\":1,\"delta\":{},\"finish_reason\":\"length\"}]}\n\n" +
		"data: {\"object\":\"chat.completion.chunk\",\"model\":\"m2\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":4,\"total_tokens\":13}}\n\n" +
		"data: [DONE]\n\n"
	a, err := assemble([]byte(events), openai.Usage{PromptTokens: 9, CompletionTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	want := &answer{Chat: true, Model: "m2", Usage: openai.Usage{PromptTokens: 9, CompletionTokens: 4}, Choices: []answerChoice{
		{Index: 0, FinishReason: "tool_calls", ToolCalls: []toolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
		{Index: 1, Content: "B:\n\"quoted\" é", FinishReason: "length"},
	}}
	if diff := cmp.Diff(want, a, ignoreInline); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	// A completion stream.
	c, err := assemble([]byte("data: {\"object\":\"text_completion\",\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\"Once\",\"finish_reason\":null}]}\n\ndata: {\"object\":\"text_completion\",\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" upon\",\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"), openai.Usage{})
	if err != nil || c.Chat || c.Choices[0].Content != "Once upon" {
		t.Errorf("completion stream: %+v, %v", c, err)
	}
	// A chunk cut in the middle, or a second choice never finished.
	for name, bad := range map[string]string{
		"cut chunk":        strings.Replace(events, `"model":"m2","choices":[]`, `"model":"m2","choi`, 1),
		"choice 1 missing": strings.Replace(events, `{"index":1,"delta":{},"finish_reason":"length"}`, `{"index":3,"delta":{},"finish_reason":"length"}`, 1),
	} {
		if _, err := assemble([]byte(bad), openai.Usage{}); err == nil {
			t.Errorf("%s: stored", name)
		}
	}
	// Whole answers: escapes, a null content with tool calls, a cut body.
	whole := `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"a\tb \"c\" \ud83d\ude00"},"finish_reason":"stop"},{"index":1,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}`
	w, err := parseWhole([]byte(whole), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantWhole := &answer{Chat: true, Model: "m", Usage: openai.Usage{PromptTokens: 3, CompletionTokens: 5, TotalTokens: 8}, Choices: []answerChoice{
		{Index: 0, Content: "a\tb \"c\" 😀", FinishReason: "stop"},
		{Index: 1, FinishReason: "tool_calls", ToolCalls: []toolCall{{ID: "t1", Name: "f", Arguments: `{"x":1}`}}},
	}}
	if diff := cmp.Diff(wantWhole, w, ignoreInline); diff != "" {
		t.Errorf("whole (-want +got)\n%s", diff)
	}
	for _, bad := range []string{
		whole[:len(whole)-40], // cut inside
		whole[:len(whole)-1],  // its closing brace missing
		whole + `{"id":"y"}`,  // two answers
		whole + ` garbage`,
		`[` + whole + `]`,
		strings.Replace(whole, `"index":0,`, `"index":0`, 1) + `"`, // a stray quote
	} {
		if _, err := parseWhole([]byte(bad), nil); err == nil {
			t.Errorf("a malformed whole answer was stored: %.60q…", bad)
		}
	}
	u := openai.Usage{PromptTokens: 30, CompletionTokens: 50, TotalTokens: 80}
	if w, err := parseWhole([]byte(whole), &u); err != nil || w.Usage != u {
		t.Errorf("with the router's usage: %+v, %v; want that usage", w, err)
	}
	if _, err := parseWhole([]byte(strings.Replace(whole, `"content":null`, `"content":null,"refusal":"no"`, 1)), nil); err == nil {
		t.Error("a refusal was stored")
	}
}

// TestTeeKeepsWhatWasWritten writes an answer through the tee as the
// router does (at once), in pieces, without a length, and too long: keep
// sees the whole answer exactly once, or not at all.
func TestTeeKeepsWhatWasWritten(t *testing.T) {
	body := []byte(`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
	for _, tc := range []struct {
		name   string
		length bool
		pieces []int // lengths of the writes
		limit  int
		kept   bool // by the tee itself, when the last byte is written
	}{
		{"at once", true, []int{len(body)}, 1 << 20, true},
		{"in pieces", true, []int{10, 1, len(body) - 11}, 1 << 20, true},
		{"no length", false, []int{len(body)}, 1 << 20, false},
		{"too long", true, []int{len(body)}, 20, false},
		{"too long, in pieces", true, []int{10, len(body) - 10}, 20, false},
		{"in pieces again", true, []int{3, len(body) - 3}, 1 << 20, true},
		{"no length again", false, []int{5, 7, len(body) - 12}, 1 << 20, false},
	} {
		rec := httptest.NewRecorder()
		tw := &teeWriter{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: rec}, limit: tc.limit}
		var got []string
		tw.keep = func(tw *teeWriter) { got = append(got, string(tw.body())) }
		if tc.length {
			tw.Header().Set("Content-Length", strconv.Itoa(len(body)))
		}
		tw.WriteHeader(http.StatusOK)
		off := 0
		for _, n := range tc.pieces {
			if _, err := tw.Write(body[off : off+n]); err != nil {
				t.Fatal(err)
			}
			off += n
		}
		if rec.Body.String() != string(body) {
			t.Errorf("%s: the client got %q", tc.name, rec.Body.String())
		}
		switch {
		case tc.kept && (len(got) != 1 || got[0] != string(body) || !tw.kept):
			t.Errorf("%s: keep saw %q, want the body once", tc.name, got)
		case !tc.kept && len(got) != 0:
			t.Errorf("%s: keep ran (%q), want it left to the end of the request", tc.name, got)
		}
		if !tc.kept && tc.limit > len(body) && string(tw.body()) != string(body) {
			t.Errorf("%s: the tee holds %q at the end, want the body", tc.name, tw.body())
		}
		if tc.limit < len(body) && !tw.overflow {
			t.Errorf("%s: an answer over the limit was not marked overflowing", tc.name)
		}
		tw.release() // the next cases reuse its buffer
		if tw.pooled != nil || tw.buf.Len() != 0 {
			t.Errorf("%s: the tee still holds its buffer after release", tc.name)
		}
	}
}

// ignoreInline leaves out of comparisons the memory an answer keeps for
// its choices: what it holds is in Choices.
var ignoreInline = cmpopts.IgnoreUnexported(answer{})
