package responsesapi

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/responses"

	"github.com/llmgw/llmgw/modules/openai"
)

// TestResponsesWhole checks non-streamed answers: read with openai-go's
// Response, in whatever pieces the chat answer was written.
func TestResponsesWhole(t *testing.T) {
	args := `{"city":"Par\u00eds \"x\" \\ \n"}`
	for _, tc := range []struct {
		name, chat, status, text, reasoning, reason string
		calls                                       []chatCall
	}{
		{"text", `{"id":"c","object":"chat.completion","model":"engine","choices":[{"index":0,"message":{"role":"assistant","content":"Grüße 👋"},"finish_reason":"stop"}],
			"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`, "completed", "Grüße 👋", "", "", nil},
		{"reasoning and calls", `{"choices":[{"index":0,"message":{"role":"assistant","content":null,"reasoning_content":"hmm\n…",
			"tool_calls":[{"id":"call_1","type":"function","function":{"name":"w","arguments":` + strconv.Quote(args) + `}},{"id":"call_2","type":"function","function":{"name":"v","arguments":"{}"}}]},
			"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`, "completed", "", "hmm\n…", "",
			[]chatCall{{"call_1", "w", args}, {"call_2", "v", "{}"}}},
		{"cut short", "{\n  \"choices\": [ {\"index\": 0, \"message\": {\"role\": \"assistant\", \"content\": \"abc\"}, \"finish_reason\": \"length\"} ],\n  \"usage\": {\"prompt_tokens\": 1, \"completion_tokens\": 3, \"total_tokens\": 4}\n}\n",
			"incomplete", "abc", "", "max_output_tokens", nil},
	} {
		for seed := range uint64(4) { // with and without a Content-Length
			rng := rand.New(rand.NewPCG(1, seed))
			t.Logf("%s, seed %d", tc.name, seed)
			turn := newTurn(t, `{"model":"client","input":"x","store":false,"temperature":0.2,"metadata":{"k":"v"},"max_output_tokens":100}`)
			rec := serve(turn, 200, "application/json", chunks(rng, []byte(tc.chat)), rng)
			if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(rec.Body.Len()) {
				t.Fatalf("Content-Length %s for %d bytes", cl, rec.Body.Len())
			}
			var resp responses.Response
			if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
				t.Fatalf("openai-go: %v\n%s", err, rec.Body)
			}
			if resp.ID != turn.id || resp.Object != "response" || string(resp.Status) != tc.status || resp.Model != "client" ||
				resp.IncompleteDetails.Reason != tc.reason || resp.Temperature != 0.2 || resp.Metadata["k"] != "v" || resp.MaxOutputTokens != 100 {
				t.Fatalf("got %s", rec.Body)
			}
			if resp.OutputText() != tc.text || resp.Usage.InputTokens != 9 && tc.status == "completed" || resp.Usage.TotalTokens == 0 {
				t.Fatalf("got text %q, usage %+v; want %q", resp.OutputText(), resp.Usage, tc.text)
			}
			var calls []chatCall
			var reasoning string
			for _, item := range resp.Output {
				switch v := item.AsAny().(type) {
				case responses.ResponseFunctionToolCall:
					calls = append(calls, chatCall{v.CallID, v.Name, v.Arguments})
				case responses.ResponseReasoningItem:
					reasoning = v.Content[0].Text
				}
			}
			if fmt.Sprint(calls) != fmt.Sprint(tc.calls) || reasoning != tc.reasoning {
				t.Fatalf("got calls %q and reasoning %q, want %q and %q", calls, reasoning, tc.calls, tc.reasoning)
			}
		}
	}
}

// TestResponsesStoreChain stores a streamed answer with a tool call,
// continues it with previous_response_id, and reads, lists and deletes
// it through ServeStoredResponse.
func TestResponsesStoreChain(t *testing.T) {
	SetResponseStore(newMemoryStore(10, 1<<20))
	defer SetResponseStore(nil)
	turn := newTurn(t, `{"model":"m","instructions":"old","input":[{"role":"user","content":"weather?"}],"stream":true}`)
	a := chatAnswer{content: "Checking.", calls: []chatCall{{"call_9", "w", `{"q":"é\n"}`}}, finish: "tool_calls",
		usage: `{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}`}
	serve(turn, 200, "text/event-stream", [][]byte{a.stream(rand.New(rand.NewPCG(3, 4)))}, nil)

	next, err := responsesRequest(t, `{"model":"m","previous_response_id":"`+turn.id+`","input":[{"type":"function_call_output","call_id":"call_9","output":"sunny"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","messages":[{"role":"user","content":"weather?"},
		{"role":"assistant","content":"Checking.","tool_calls":[{"id":"call_9","type":"function","function":{"name":"w","arguments":"{\"q\":\"é\\n\"}"}}]},
		{"role":"tool","tool_call_id":"call_9","content":"sunny"}]}`
	if got, w := fmt.Sprint(jsonValue(t, next.Raw)), fmt.Sprint(jsonValue(t, []byte(want))); got != w {
		t.Fatalf("got %s\nwant %s", next.Raw, want)
	}

	get := func(method, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest(method, "/v1/responses/"+path, nil)
		id, _, _ := strings.Cut(path, "?")
		ServeStoredResponse(rec, r, id)
		return rec
	}
	rec := get(http.MethodGet, turn.id)
	var resp responses.Response
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); rec.Code != 200 || err != nil || resp.ID != turn.id || resp.OutputText() != "Checking." {
		t.Fatalf("GET: %d %v %s", rec.Code, err, rec.Body)
	}
	rec = get(http.MethodGet, turn.id+"/input_items?order=asc")
	var items responses.ResponseItemList
	if err := json.Unmarshal(rec.Body.Bytes(), &items); rec.Code != 200 || err != nil || len(items.Data) != 1 || items.Data[0].ID == "" ||
		items.Data[0].Type != "message" || items.Data[0].AsMessage().Content[0].Text != "weather?" {
		t.Fatalf("input_items: %d %v %s", rec.Code, err, rec.Body)
	}
	if rec = get(http.MethodDelete, turn.id); rec.Code != 200 || rec.Body.String() != `{"id":"`+turn.id+`","object":"response","deleted":true}` {
		t.Fatalf("DELETE: %d %s", rec.Code, rec.Body)
	}
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		rec = get(m, turn.id)
		var e openai.ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &e); rec.Code != 404 || err != nil || !strings.Contains(e.Error.Message, turn.id) {
			t.Fatalf("%s after DELETE: %d %s", m, rec.Code, rec.Body)
		}
	}
}

// TestResponsesStoreFalse checks that store: false keeps nothing.
func TestResponsesStoreFalse(t *testing.T) {
	SetResponseStore(newMemoryStore(10, 1<<20))
	defer SetResponseStore(nil)
	turn := newTurn(t, `{"model":"m","input":"x","store":false}`)
	serve(turn, 200, "application/json", [][]byte{[]byte(`{"choices":[{"index":0,"message":{"content":"y"},"finish_reason":"stop"}]}`)}, nil)
	if _, err := currentStore().Get(context.Background(), "", turn.id); err != ErrNotStored {
		t.Fatalf("got %v, want nothing stored", err)
	}
}

// TestMemoryStore checks the in-memory store's bounds: count, bytes and
// time to live, oldest out first, scopes apart.
func TestMemoryStore(t *testing.T) {
	ctx := context.Background()
	clock := time.Unix(1000, 0)
	respNow = func() time.Time { return clock }
	defer func() { respNow = time.Now }()
	s := newMemoryStore(3, 100)
	for i := range 4 {
		_ = s.Put(ctx, "k", fmt.Sprint(i), []byte("0123456789"), time.Minute)
	}
	if _, err := s.Get(ctx, "k", "0"); err != ErrNotStored {
		t.Errorf("the oldest of 4 in a store of 3: %v", err)
	}
	if v, err := s.Get(ctx, "k", "3"); err != nil || string(v) != "0123456789" {
		t.Errorf("got %q %v", v, err)
	}
	if _, err := s.Get(ctx, "other", "3"); err != ErrNotStored {
		t.Errorf("another scope sees it: %v", err)
	}
	_ = s.Put(ctx, "k", "big", make([]byte, 90), time.Minute)
	if _, err := s.Get(ctx, "k", "1"); err != ErrNotStored || s.bytes > 100 {
		t.Errorf("over 100 bytes: %v, %d bytes", err, s.bytes)
	}
	if err := s.Put(ctx, "k", "huge", make([]byte, 200), time.Minute); err == nil {
		t.Error("a value larger than the store was taken")
	}
	clock = clock.Add(2 * time.Minute)
	if _, err := s.Get(ctx, "k", "big"); err != ErrNotStored {
		t.Errorf("expired: %v", err)
	}
	if err := s.Delete(ctx, "k", "nope"); err != ErrNotStored {
		t.Errorf("delete unknown: %v", err)
	}
}

// TestResponsesWholeOdd checks answers that are not chat completions: a
// JSON object without choices is a 502 that says so; a body that is not
// an object passes as it is.
func TestResponsesWholeOdd(t *testing.T) {
	turn := newTurn(t, `{"model":"m","input":"x","store":false}`)
	rec := serve(turn, 200, "application/json", [][]byte{[]byte(`{"object":"list","data":[]}`)}, nil)
	if rec.Code != 502 || !strings.Contains(rec.Body.String(), "could not be translated to the Responses API") {
		t.Errorf("got %d %s", rec.Code, rec.Body)
	}
	turn = newTurn(t, `{"model":"m","input":"x","store":false}`)
	rec = serve(turn, 200, "text/plain", [][]byte{[]byte("plain"), []byte(" text")}, nil)
	if rec.Code != 200 || rec.Body.String() != "plain text" || rec.Header().Get("Content-Length") != "10" {
		t.Errorf("got %d %q", rec.Code, rec.Body)
	}
}

// TestResponsesTruncationEcho checks that the response echoes the
// request's truncation, "disabled" when it had none.
func TestResponsesTruncationEcho(t *testing.T) {
	for _, tc := range []struct{ member, want string }{{`,"truncation":"auto"`, "auto"}, {`,"truncation":"disabled"`, "disabled"}, {"", "disabled"}} {
		turn := newTurn(t, `{"model":"m","input":"x","store":false`+tc.member+`}`)
		rec := serve(turn, 200, "application/json", [][]byte{[]byte(`{"choices":[{"index":0,"message":{"content":"y"},"finish_reason":"stop"}]}`)}, nil)
		var resp responses.Response
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || string(resp.Truncation) != tc.want {
			t.Errorf("truncation%s: got %v %q, want %q", tc.member, err, resp.Truncation, tc.want)
		}
	}
}
