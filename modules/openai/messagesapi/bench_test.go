package messagesapi

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmgw/llmgw/modules/openai"
)

// A conversation of some turns, as a Messages request and as the chat
// request it becomes.
func benchBodies() (messages, chat []byte) {
	var m, c strings.Builder
	m.WriteString(`{"model":"m","max_tokens":256,"stream":true,"system":"You are a helpful assistant.","messages":[`)
	c.WriteString(`{"model":"m","max_tokens":256,"stream":true,"messages":[{"role":"system","content":"You are a helpful assistant."}`)
	for i := range 8 {
		if i > 0 {
			m.WriteByte(',')
		}
		fmt.Fprintf(&m, `{"role":"user","content":"question %d about something fairly long to make the turn realistic"},{"role":"assistant","content":"answer %d with a few sentences of text in it, as models write them."}`, i, i)
		fmt.Fprintf(&c, `,{"role":"user","content":"question %d about something fairly long to make the turn realistic"},{"role":"assistant","content":"answer %d with a few sentences of text in it, as models write them."}`, i, i)
	}
	m.WriteString(`,{"role":"user","content":"last"}]}`)
	c.WriteString(`,{"role":"user","content":"last"}]}`)
	return []byte(m.String()), []byte(c.String())
}

func BenchmarkParseChat(b *testing.B) {
	_, chat := benchBodies()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := openai.Parse(openai.ChatCompletions, chat); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseMessages(b *testing.B) {
	msgs, _ := benchBodies()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseMessages(nil, msgs, false); err != nil {
			b.Fatal(err)
		}
	}
}

// chatEvents is a chat stream of 200 text chunks.
func chatEvents() [][]byte {
	var out [][]byte
	out = append(out, []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`+"\n\n"))
	for i := range 200 {
		out = append(out, fmt.Appendf(nil, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word%d"},"finish_reason":null}]}`+"\n\n", i))
	}
	out = append(out, []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n"))
	out = append(out, []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":200,"total_tokens":210}}`+"\n\n"))
	return append(out, []byte("data: [DONE]\n\n"))
}

type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) WriteHeader(int)             {}
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }

func benchStream(b *testing.B, wrap func(http.ResponseWriter) http.ResponseWriter) {
	events := chatEvents()
	b.ReportAllocs()
	for b.Loop() {
		w := wrap(&discard{h: http.Header{"Content-Type": {"text/event-stream"}}})
		w.WriteHeader(200)
		for _, e := range events {
			_, _ = w.Write(e)
		}
	}
}

// BenchmarkStreamChat is the baseline: a chat stream written as it is.
func BenchmarkStreamChat(b *testing.B) {
	benchStream(b, func(w http.ResponseWriter) http.ResponseWriter { return w })
}

// BenchmarkStreamMessages is the same stream translated to Messages events.
func BenchmarkStreamMessages(b *testing.B) {
	benchStream(b, (&messagesTurn{model: "m", stream: true}).Writer)
}

func BenchmarkWholeMessages(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		writeWhole((&messagesTurn{model: "m"}).Writer(httptest.NewRecorder()), 200, []byte(chatWhole))
	}
}

// BenchmarkMessagesToChatStream translates a Messages stream of 200 text
// deltas to chat chunks.
func BenchmarkMessagesToChatStream(b *testing.B) {
	var sse strings.Builder
	sse.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"c\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n")
	sse.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	for i := range 200 {
		fmt.Fprintf(&sse, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" word%d\"}}\n\n", i)
	}
	sse.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	sse.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":200}}\n\n")
	sse.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	in := []byte(sse.String())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := io.Copy(io.Discard, MessagesToChatStream(io.NopCloser(bytes.NewReader(in)))); err != nil {
			b.Fatal(err)
		}
	}
}
