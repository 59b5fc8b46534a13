package responsesapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmgw/llmgw/modules/openai"
)

// chatAnswer is what an engine answers, for building its chat stream.
type chatAnswer struct {
	reasoning, content string
	calls              []chatCall
	finish             string
	usage              string // chat's usage object
}

type chatCall struct{ id, name, args string }

// stream returns the chat SSE stream an engine would send, the texts cut
// into deltas of random sizes (on rune boundaries, as engines cut them).
func (a chatAnswer) stream(rng *rand.Rand) []byte {
	var b bytes.Buffer
	chunk := func(delta map[string]any, finish any) {
		c := map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "engine-model",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		j, _ := json.Marshal(c)
		fmt.Fprintf(&b, "data: %s\n\n", j)
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	for _, piece := range cut(rng, a.reasoning) {
		chunk(map[string]any{"reasoning_content": piece}, nil)
	}
	for _, piece := range cut(rng, a.content) {
		chunk(map[string]any{"content": piece}, nil)
	}
	for i, c := range a.calls {
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.id, "type": "function",
			"function": map[string]any{"name": c.name, "arguments": ""}}}}, nil)
		for _, piece := range cut(rng, c.args) {
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": piece}}}}, nil)
		}
	}
	chunk(map[string]any{}, a.finish)
	fmt.Fprintf(&b, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":%s}\n\n", a.usage)
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// cut splits s into 1 to 8 pieces at rune boundaries.
func cut(rng *rand.Rand, s string) []string {
	var out []string
	for len(s) > 0 {
		n := 1 + rng.IntN(8)
		i := 0
		for k := 0; k < n && i < len(s); k++ {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

// chunks splits b anywhere: inside events, lines and UTF-8 sequences.
func chunks(rng *rand.Rand, b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		n := 1 + rng.IntN(min(len(b), 40))
		if rng.IntN(10) == 0 {
			n = len(b) // respNow and then the rest at once
		}
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

// newTurn parses a Responses request and returns its translation.
func newTurn(t testing.TB, body string) *respTurn {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(body))
	req, err := parseResponses(r, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return req.Translation.(*respTurn)
}

// serve writes a chat answer through the turn's writer as the router does
// (a status, then the body in the given pieces, flushing after some) and
// returns what the client received.
func serve(turn *respTurn, status int, contentType string, pieces [][]byte, rng *rand.Rand) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	w := turn.Writer(rec)
	w.Header().Set("Content-Type", contentType)
	n := 0
	for _, p := range pieces {
		n += len(p)
	}
	if rng == nil || rng.IntN(2) == 0 { // else the length is unknown
		w.Header().Set("Content-Length", strconv.Itoa(n))
	}
	w.WriteHeader(status)
	for _, p := range pieces {
		_, _ = w.Write(p)
		if rng != nil && rng.IntN(3) == 0 {
			_ = http.NewResponseController(w).Flush()
		}
	}
	return rec
}

// respEvent is one event the client received.
type respEvent struct {
	name string
	data map[string]any
	raw  string
}

func readRespEvents(t testing.TB, body []byte) []respEvent {
	t.Helper()
	var out []respEvent
	for _, block := range strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n") {
		name, data, ok := strings.Cut(block, "\ndata: ")
		if !ok || !strings.HasPrefix(name, "event: ") || strings.Contains(data, "\n") {
			t.Fatalf("malformed event %q", block)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("event data is not JSON: %v: %s", err, data)
		}
		out = append(out, respEvent{name: name[len("event: "):], data: m, raw: data})
	}
	return out
}

// checked is what checkEvents found in a translated stream.
type checked struct {
	text, reasoning string
	args            map[string]string // call_id: arguments, from the deltas
	calls           []string          // call_ids in output order
	final           map[string]any    // the terminal event's response
	// annots are the annotation.added events' annotations, and textAt
	// the message's text the deltas had given when each arrived.
	annots []map[string]any
	textAt []string
	search []string // the file_search_call events, by name
}

// checkEvents checks the documented order of a Responses stream and
// gathers its texts from the deltas.
func checkEvents(t testing.TB, evs []respEvent) checked {
	t.Helper()
	c := checked{args: map[string]string{}}
	if len(evs) < 3 || evs[0].name != "response.created" || evs[1].name != "response.in_progress" {
		t.Fatalf("stream does not start with response.created, response.in_progress: %v", names(evs))
	}
	type state struct {
		typ, callID     string
		added, partOpen bool
		done            bool
		index           float64
	}
	items := map[string]*state{}
	var nextIndex float64
	for i, ev := range evs {
		if ev.data["type"] != ev.name {
			t.Fatalf("event %d: event name %q, data type %v", i, ev.name, ev.data["type"])
		}
		if ev.data["sequence_number"] != float64(i) {
			t.Fatalf("event %d (%s): sequence_number %v", i, ev.name, ev.data["sequence_number"])
		}
		id, _ := ev.data["item_id"].(string)
		st := items[id]
		switch ev.name {
		case "response.output_item.added":
			item := ev.data["item"].(map[string]any)
			id = item["id"].(string)
			if items[id] != nil || ev.data["output_index"] != nextIndex {
				t.Fatalf("event %d: item %s added twice or out of order", i, id)
			}
			cid, _ := item["call_id"].(string)
			items[id] = &state{typ: item["type"].(string), callID: cid, added: true, index: nextIndex}
			if cid != "" {
				c.calls = append(c.calls, cid)
			}
			nextIndex++
		case "response.content_part.added":
			if st == nil || st.done || st.partOpen {
				t.Fatalf("event %d: part added to %s out of order", i, id)
			}
			st.partOpen = true
		case "response.output_text.delta", "response.reasoning_text.delta", "response.output_text.done",
			"response.reasoning_text.done", "response.content_part.done":
			if st == nil || !st.partOpen || ev.data["output_index"] != st.index {
				t.Fatalf("event %d: %s for %s outside its part", i, ev.name, id)
			}
			switch ev.name {
			case "response.output_text.delta":
				c.text += ev.data["delta"].(string)
			case "response.reasoning_text.delta":
				c.reasoning += ev.data["delta"].(string)
			case "response.content_part.done":
				st.partOpen = false
			}
		case "response.function_call_arguments.delta", "response.function_call_arguments.done":
			if st == nil || st.typ != "function_call" || st.done {
				t.Fatalf("event %d: %s for %s out of order", i, ev.name, id)
			}
			if ev.name == "response.function_call_arguments.delta" {
				c.args[st.callID] += ev.data["delta"].(string)
			} else if ev.data["arguments"] != c.args[st.callID] {
				t.Fatalf("event %d: arguments.done %q, deltas made %q", i, ev.data["arguments"], c.args[st.callID])
			}
		case "response.file_search_call.in_progress", "response.file_search_call.searching", "response.file_search_call.completed":
			if st == nil || st.typ != "file_search_call" || st.done || ev.data["output_index"] != st.index {
				t.Fatalf("event %d: %s for %s out of order", i, ev.name, id)
			}
			c.search = append(c.search, ev.name)
		case "response.output_text.annotation.added":
			if st == nil || !st.partOpen || st.typ != "message" || ev.data["output_index"] != st.index ||
				ev.data["content_index"] != float64(0) || ev.data["annotation_index"] != float64(len(c.annots)) {
				t.Fatalf("event %d: %s out of order: %s", i, ev.name, ev.raw)
			}
			c.annots = append(c.annots, ev.data["annotation"].(map[string]any))
			c.textAt = append(c.textAt, c.text)
		case "response.output_item.done":
			id = ev.data["item"].(map[string]any)["id"].(string)
			if st = items[id]; st == nil || st.done || st.partOpen {
				t.Fatalf("event %d: item %s done out of order", i, id)
			}
			st.done = true
		case "response.completed", "response.incomplete", "response.failed":
			if ev.name != "response.failed" && i != len(evs)-1 {
				t.Fatalf("event %d: %s is not the last", i, ev.name)
			}
			c.final = ev.data["response"].(map[string]any)
		case "error":
			if i != len(evs)-1 || c.final == nil {
				t.Fatalf("event %d: error not last or not after response.failed", i)
			}
		case "response.created", "response.in_progress":
			if i > 1 {
				t.Fatalf("event %d: %s again", i, ev.name)
			}
		default:
			t.Fatalf("event %d: unexpected %s", i, ev.name)
		}
	}
	for id, st := range items {
		if !st.done && (c.final == nil || c.final["status"] != "failed") {
			t.Fatalf("item %s never done", id)
		}
	}
	return c
}

func names(evs []respEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.name)
	}
	return out
}

var streamCases = []chatAnswer{
	{content: "Grüße, 世界! 👋 naïve café — ok", finish: "stop", usage: `{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}`},
	{reasoning: "Let me think… ∑ étapes\nstep 2", content: "Answer: 42 ✓", finish: "stop",
		usage: `{"prompt_tokens":5,"completion_tokens":30,"total_tokens":35,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":20}}`},
	{content: "Calling tools.", calls: []chatCall{
		{"call_a", "get_weather", `{"city":"Paris \"Île\" \\ é","note":"line1\nline2\ttab \u00e9 \\u00e9","n":[1,2]}`},
		{"call_b", "lookup", `{"q":"日本語 😀 </script> \u2028"}`},
		{"call_c", "pretty", "{\n  \"x\": \"\u00e9\t\\\"\"\r\n}"},
		{"call_d", "noargs", `{}`},
	}, finish: "tool_calls", usage: `{"prompt_tokens":40,"completion_tokens":60,"total_tokens":100}`},
	{content: "cut sho", finish: "length", usage: `{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}`},
}

// TestResponsesStreamChunkings feeds chat streams to the translator in
// random pieces (split inside events and UTF-8 sequences) and checks that
// the client's texts and arguments equal the engine's, byte for byte, in
// the documented event order, with the engine's usage.
func TestResponsesStreamChunkings(t *testing.T) {
	for n, a := range streamCases {
		for seed := range uint64(150) {
			rng := rand.New(rand.NewPCG(uint64(n), seed))
			turn := newTurn(t, `{"model":"client-model","input":"x","stream":true,"store":false}`)
			rec := serve(turn, 200, "text/event-stream", chunks(rng, a.stream(rng)), rng)
			checkRespStream(t, a, rec)
		}
	}
}

func checkRespStream(t testing.TB, a chatAnswer, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Header().Get("Content-Length") != "" {
		t.Fatalf("a translated stream keeps Content-Length %q", rec.Header().Get("Content-Length"))
	}
	c := checkEvents(t, readRespEvents(t, rec.Body.Bytes()))
	if c.text != a.content || c.reasoning != a.reasoning {
		t.Fatalf("got text %q and reasoning %q, want %q and %q", c.text, c.reasoning, a.content, a.reasoning)
	}
	if len(c.calls) != len(a.calls) {
		t.Fatalf("got calls %v, want %d", c.calls, len(a.calls))
	}
	for i, call := range a.calls {
		if c.calls[i] != call.id || c.args[call.id] != call.args {
			t.Fatalf("call %d: got %s %q, want %s %q", i, c.calls[i], c.args[call.id], call.id, call.args)
		}
	}
	wantStatus := "completed"
	if a.finish == "length" {
		wantStatus = "incomplete"
	}
	if c.final["status"] != wantStatus || c.final["model"] != "client-model" {
		t.Fatalf("final status %v, model %v", c.final["status"], c.final["model"])
	}
	checkUsage(t, a.usage, c.final["usage"])
	checkOfficialStream(t, a, rec.Body.Bytes())
}

func checkUsage(t testing.TB, chat string, got any) {
	t.Helper()
	var u struct {
		Prompt     int64 `json:"prompt_tokens"`
		Completion int64 `json:"completion_tokens"`
		Total      int64 `json:"total_tokens"`
		PromptD    struct {
			Cached int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionD struct {
			Reasoning int64 `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	}
	_ = json.Unmarshal([]byte(chat), &u)
	want := map[string]any{"input_tokens": float64(u.Prompt), "output_tokens": float64(u.Completion),
		"total_tokens": float64(u.Total), "input_tokens_details": map[string]any{"cached_tokens": float64(u.PromptD.Cached)},
		"output_tokens_details": map[string]any{"reasoning_tokens": float64(u.CompletionD.Reasoning)}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got usage %v, want %v", got, want)
	}
}

// checkOfficialStream reads the stream with openai-go's own SSE reader
// and event types.
func checkOfficialStream(t testing.TB, a chatAnswer, body []byte) {
	t.Helper()
	res := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(body))}
	stream := ssestream.NewStream[responses.ResponseStreamEventUnion](ssestream.NewDecoder(res), nil)
	var text string
	var final responses.Response
	for stream.Next() {
		ev := stream.Current()
		switch v := ev.AsAny().(type) {
		case responses.ResponseTextDeltaEvent:
			text += v.Delta
		case responses.ResponseCompletedEvent:
			final = v.Response
		case responses.ResponseIncompleteEvent:
			final = v.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("openai-go: %v", err)
	}
	if text != a.content || final.OutputText() != a.content {
		t.Fatalf("openai-go read text %q (final %q), want %q", text, final.OutputText(), a.content)
	}
	u, _ := readUsage([]byte(a.usage))
	if final.Usage.InputTokens != u.PromptTokens || final.Usage.OutputTokens != u.CompletionTokens || final.Usage.TotalTokens != u.TotalTokens {
		t.Fatalf("openai-go read usage %+v, want %s", final.Usage, a.usage)
	}
	var calls []chatCall
	for _, item := range final.Output {
		if fc, ok := item.AsAny().(responses.ResponseFunctionToolCall); ok {
			calls = append(calls, chatCall{fc.CallID, fc.Name, fc.Arguments})
		}
	}
	if fmt.Sprint(calls) != fmt.Sprint(a.calls) {
		t.Fatalf("openai-go read calls %q, want %q", calls, a.calls)
	}
}

// FuzzResponsesStream translates streams of arbitrary texts and arguments
// in arbitrary pieces.
func FuzzResponsesStream(f *testing.F) {
	f.Add("héllo wörld", `{"a":"\"\\ é\n"}`, "think", uint64(1))
	f.Add("", `{}`, "", uint64(2))
	f.Add("日本語😀", "not json at all \x00", "🧠", uint64(3))
	f.Fuzz(func(t *testing.T, content, args, reasoning string, seed uint64) {
		if !utf8.ValidString(content) || !utf8.ValidString(args) || !utf8.ValidString(reasoning) {
			return // engines send UTF-8
		}
		a := chatAnswer{reasoning: reasoning, content: content, finish: "stop",
			usage: `{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}`}
		if args != "" {
			a.calls, a.finish = []chatCall{{"call_1", "f", args}, {"call_2", "g", args}}, "tool_calls"
		}
		rng := rand.New(rand.NewPCG(seed, seed>>7))
		turn := newTurn(t, `{"model":"client-model","input":"x","stream":true,"store":false}`)
		checkRespStream(t, a, serve(turn, 200, "text/event-stream", chunks(rng, a.stream(rng)), rng))
	})
}

// TestResponsesStreamEngines checks chat streams as engines send them
// beyond the common shape: CRLF lines, several data lines, one chunk
// holding a whole call, tool calls without an index, usage in the
// finishing chunk, no [DONE].
func TestResponsesStreamEngines(t *testing.T) {
	for _, tc := range []struct {
		name, stream string
		text         string
		calls        []chatCall
	}{
		{"crlf and comments", ": ping\r\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\\u00e9\"}}]}\r\n\r\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\r\n\r\n",
			"aé", nil},
		{"data over two lines", "data: {\"choices\":[{\"index\":0,\n" + "data: \"delta\":{\"content\":\"b\"}}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", "b", nil},
		{"whole calls without index", "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"c1\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\\\":1}\"}}]}}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"c2\",\"function\":{\"name\":\"g\",\"arguments\":\"{}\"}}]}}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n",
			"", []chatCall{{"c1", "f", `{"x":1}`}, {"c2", "g", `{}`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			turn := newTurn(t, `{"model":"m","input":"x","stream":true,"store":false}`)
			rec := serve(turn, 200, "text/event-stream; charset=utf-8", [][]byte{[]byte(tc.stream)}, nil)
			c := checkEvents(t, readRespEvents(t, rec.Body.Bytes()))
			if c.text != tc.text || c.final == nil || c.final["status"] != "completed" {
				t.Fatalf("got text %q, final %v", c.text, c.final)
			}
			if len(c.calls) != len(tc.calls) {
				t.Fatalf("got calls %v, want %v", c.calls, tc.calls)
			}
			for i, call := range tc.calls {
				if c.calls[i] != call.id || c.args[call.id] != call.args {
					t.Fatalf("call %d: got %s %q, want %v", i, c.calls[i], c.args[call.id], call)
				}
			}
		})
	}
}

// TestResponsesStreamError checks that a chat error event mid-stream ends
// the stream with response.failed and an error event, and that openai-go
// raises it.
func TestResponsesStreamError(t *testing.T) {
	turn := newTurn(t, `{"model":"m","input":"x","stream":true}`)
	chat := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"part\"}}]}\n\n" +
		"data: {\"error\":{\"message\":\"the model's stream broke off: EOF\",\"type\":\"server_error\",\"param\":null,\"code\":\"upstream_stream_error\"}}\n\n"
	rec := serve(turn, 200, "text/event-stream", [][]byte{[]byte(chat)}, nil)
	evs := readRespEvents(t, rec.Body.Bytes())
	c := checkEvents(t, evs)
	if c.final["status"] != "failed" || fmt.Sprint(c.final["error"]) != "map[code:upstream_stream_error message:the model's stream broke off: EOF]" {
		t.Fatalf("got response %v", c.final)
	}
	last := evs[len(evs)-1]
	if last.name != "error" || last.data["code"] != "upstream_stream_error" || last.data["message"] != "the model's stream broke off: EOF" {
		t.Fatalf("got last event %s", last.raw)
	}
	res := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(rec.Body.Bytes()))}
	stream := ssestream.NewStream[responses.ResponseStreamEventUnion](ssestream.NewDecoder(res), nil)
	sawFailed := false
	for stream.Next() {
		sawFailed = sawFailed || stream.Current().Type == "response.failed"
	}
	if err := stream.Err(); !sawFailed || err == nil || !strings.Contains(err.Error(), "stream broke off") {
		t.Fatalf("openai-go: saw response.failed %v, error %v", sawFailed, err)
	}
	if _, err := currentStore().Get(t.Context(), "", turn.id); err != ErrNotStored {
		t.Errorf("a failed response was stored: %v", err)
	}
}

// TestResponsesErrorPasses checks that a chat error answer reaches the
// client as it is: the Responses API's errors have chat's shape.
func TestResponsesErrorPasses(t *testing.T) {
	for _, stream := range []bool{false, true} {
		turn := newTurn(t, fmt.Sprintf(`{"model":"m","input":"x","stream":%v}`, stream))
		body := (&openai.Error{Status: 429, Type: "rate_limit_error", Code: "rate_limited", Message: "slow down"}).JSON()
		rec := serve(turn, 429, "application/json", [][]byte{body[:5], body[5:]}, nil)
		if rec.Code != 429 || !bytes.Equal(rec.Body.Bytes(), body) {
			t.Errorf("stream %v: got %d %s, want 429 %s", stream, rec.Code, rec.Body, body)
		}
	}
}

// TestResponsesFlush checks that the translator passes a flush on to the
// client's writer, and that the first event reaches it before the answer
// is over.
func TestResponsesFlush(t *testing.T) {
	turn := newTurn(t, `{"model":"m","input":"x","stream":true,"store":false}`)
	rec := httptest.NewRecorder()
	w := turn.Writer(rec)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	_, _ = w.Write([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hel"))
	_ = http.NewResponseController(w).Flush()
	if !rec.Flushed || !strings.Contains(rec.Body.String(), "response.in_progress") || strings.Contains(rec.Body.String(), "output_text.delta") {
		t.Fatalf("after a flush: flushed %v, body %s", rec.Flushed, rec.Body)
	}
	_, _ = w.Write([]byte("lo\"}}]}\n\n"))
	if !strings.Contains(rec.Body.String(), `"delta":"hello"`) {
		t.Fatalf("the delta did not reach the client when its event did: %s", rec.Body)
	}
}

// FuzzResponsesStreamBytes feeds the translator arbitrary bytes as a
// chat stream: whatever an engine sends, it must not panic, and what it
// writes must be whole events.
func FuzzResponsesStreamBytes(f *testing.F) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, a := range streamCases {
		f.Add(a.stream(rng))
	}
	f.Add([]byte("data: {\"choices\":\n\ndata: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":\"x\"}]}}]}\n\ndata: {\"error\":\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		turn := newTurn(t, `{"model":"m","input":"x","stream":true,"store":false}`)
		rec := serve(turn, 200, "text/event-stream", [][]byte{b}, nil)
		if out := rec.Body.String(); !strings.HasSuffix(out, "}\n\n") {
			t.Fatalf("the output ends inside an event: %q", out[max(0, len(out)-80):])
		}
	})
}
