package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmgw/llmgw/modules/openai"
	"github.com/llmgw/llmgw/modules/openai/messagesapi"
	_ "github.com/llmgw/llmgw/modules/openai/responsesapi" // registers the Responses API for Enter
)

// enter runs Enter on a POST of body to path with a Content-Type, and
// returns the error answer as the client gets it (status and body), or
// 0 when the request was accepted.
func enter(t *testing.T, path, contentType, body string) (int, string) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
	rec := httptest.NewRecorder()
	w, _, err := openai.Enter(rec, r)
	var e *openai.Error
	if !errors.As(err, &e) {
		return 0, ""
	}
	e.Write(w)
	return rec.Code, rec.Body.String()
}

const chatBody = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`

// A body that is not sent as JSON is refused with a 415 saying to send
// application/json, in the API's own error shape.
func TestContentType(t *testing.T) {
	for _, ct := range []string{"", "application/json", "application/json; charset=utf-8", "Application/JSON", "application/vnd.api+json", "application/merge-patch+json;x=1"} {
		if code, body := enter(t, "/v1/chat/completions", ct, chatBody); code != 0 {
			t.Errorf("%q: got %d %s, want it accepted", ct, code, body)
		}
	}
	for _, tc := range []struct{ path, ct, body, shape string }{
		{"/v1/chat/completions", "text/plain", chatBody, `"error":{"message":`},
		{"/v1/completions", "application/x-www-form-urlencoded", `model=m&prompt=hi`, `"error":{"message":`},
		{"/v1/embeddings", "multipart/form-data; boundary=x", `--x`, `"error":{"message":`},
		{"/v1/responses", "text/json", `{"model":"m","input":"hi"}`, `"error":{"message":`},
		{"/v1/messages", "application/xml", `<m/>`, `"type":"error","error":{"type":"invalid_request_error"`},
		{"/v1/chat/completions", "application/jsonp", chatBody, `"error":{"message":`},
	} {
		code, body := enter(t, tc.path, tc.ct, tc.body)
		if code != http.StatusUnsupportedMediaType || !strings.Contains(body, "application/json") || !strings.Contains(body, tc.shape) {
			t.Errorf("%s with %q: got %d %s", tc.path, tc.ct, code, body)
		}
	}
	// curl -d's default type gets told how to fix it.
	if _, body := enter(t, "/v1/chat/completions", "application/x-www-form-urlencoded", chatBody); !strings.Contains(body, "-H 'Content-Type: application/json'") {
		t.Errorf("a form: got %s", body)
	}
}

// An image URL with another scheme than http, https and data is refused
// before anything reaches an engine, naming where it is, in every API.
func TestMediaURLSchemes(t *testing.T) {
	chat := func(u string) string {
		return `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"what?"},{"type":"image_url","image_url":{"url":` + u + `}}]}]}`
	}
	for _, tc := range []struct{ path, body, param string }{
		{"/v1/chat/completions", chat(`"file:///etc/passwd"`), "messages[0].content[1].image_url.url"},
		{"/v1/chat/completions", chat(`"  FILE:/etc/passwd"`), "messages[0].content[1].image_url.url"},
		{"/v1/chat/completions", chat(`"\u0066ile:///etc/passwd"`), "messages[0].content[1].image_url.url"},
		{"/v1/chat/completions", chat(`"/etc/passwd"`), "messages[0].content[1].image_url.url"},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":"file:///v.mp4"}}]}]}`, "messages[0].content[0].video_url.url"},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":"gopher://x/"}]}]}`, "messages[0].content[0].image_url"},
		{"/v1/responses", `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"file:///etc/passwd"}]}]}`, "input[0].content[0].image_url"},
		{"/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"file:///etc/passwd"}}]}]}`, "messages[0].content[0].source.url"},
	} {
		code, body := enter(t, tc.path, "application/json", tc.body)
		if code != 400 || !strings.Contains(body, tc.param) || !strings.Contains(body, "http(s) URL or a data: URL") {
			t.Errorf("%s %s: got %d %s, want a 400 naming %s", tc.path, tc.body, code, body, tc.param)
		}
	}
	for _, u := range []string{`"https://x.test/a.png"`, `"HTTP://x.test/a.png"`, `"data:image/png;base64,iVBO"`} {
		if code, body := enter(t, "/v1/chat/completions", "", chat(u)); code != 0 {
			t.Errorf("%s: got %d %s, want it accepted", u, code, body)
		}
	}
}

// Invalid UTF-8 is refused at every endpoint, in the API's shape.
func TestInvalidUTF8Answer(t *testing.T) {
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"` + "\xff" + `"}]}`},
		{"/v1/responses", `{"model":"m","input":"` + "\xc3(" + `"}`},
		{"/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"` + "\xed\xa0\x80" + `"}]}`},
	} {
		code, body := enter(t, tc.path, "application/json", tc.body)
		if code != 400 || !strings.Contains(body, "not valid UTF-8") || !json.Valid([]byte(body)) {
			t.Errorf("%s: got %d %s", tc.path, code, body)
		}
	}
}

// A decode error says which member was wrong in the API's terms, never
// Go's types.
func TestDecodeProblem(t *testing.T) {
	_, err := messagesapi.ChatToMessagesBody([]byte(`{"model":"m","top_k":"five","messages":[{"role":"user","content":"x"}]}`), "")
	e, ok := err.(*openai.Error)
	if !ok || e.Status != 400 || !strings.Contains(e.Message, "top_k must be an integer, not string") {
		t.Fatalf("got %v", err)
	}
	_, err = messagesapi.ChatToMessagesBody([]byte(`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"f","arguments":{}}}]}]}`), "")
	if err == nil || !strings.Contains(err.Error(), "messages.tool_calls.function.arguments must be a string, not object") {
		t.Errorf("got %v", err)
	}
	_, err = messagesapi.MessagesToChatBody([]byte(`{"id":"x","content":"text"}`))
	for _, e := range []error{err} {
		if e == nil || strings.Contains(e.Error(), "Go ") || strings.Contains(e.Error(), "openai.") || strings.Contains(e.Error(), "messagesapi.") || strings.Contains(e.Error(), "struct") {
			t.Errorf("got %v", e)
		}
	}
}
