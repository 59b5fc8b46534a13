package responsesapi

import (
	"bytes"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/llmgw/llmgw/modules/openai"
)

type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) Flush()                      {}

// respBenchStream is a chat stream of about 256 tokens, as events.
func respBenchStream() [][]byte {
	a := chatAnswer{content: strings.Repeat("The quick brown fox jumps over the lazy dog. ", 28), finish: "stop",
		usage: `{"prompt_tokens":20,"completion_tokens":256,"total_tokens":276}`}
	return bytes.SplitAfter(a.stream(rand.New(rand.NewPCG(1, 1))), []byte("\n\n"))
}

// BenchmarkResponsesStream translates a 256-token chat stream written
// event by event, each flushed, as the router writes it.
func BenchmarkResponsesStream(b *testing.B) {
	events := respBenchStream()
	body := `{"model":"m","input":"hi","stream":true,"store":false}`
	r := httptest.NewRequest(http.MethodPost, "/v1/responses", nil)
	b.ReportAllocs()
	for b.Loop() {
		req, err := parseResponses(r, []byte(body))
		if err != nil {
			b.Fatal(err)
		}
		w := req.Translation.Writer(&discardWriter{h: http.Header{"Content-Type": {"text/event-stream"}}})
		w.WriteHeader(200)
		rc := http.NewResponseController(w)
		for _, ev := range events {
			_, _ = w.Write(ev)
			_ = rc.Flush()
		}
	}
}

// BenchmarkChatStream is the same stream to a chat client: the parse and
// the writes the translation adds to.
func BenchmarkChatStream(b *testing.B) {
	events := respBenchStream()
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`
	b.ReportAllocs()
	for b.Loop() {
		if _, err := openai.Parse(openai.ChatCompletions, []byte(body)); err != nil {
			b.Fatal(err)
		}
		w := &discardWriter{h: http.Header{"Content-Type": {"text/event-stream"}}}
		w.WriteHeader(200)
		rc := http.NewResponseController(w)
		for _, ev := range events {
			_, _ = w.Write(ev)
			_ = rc.Flush()
		}
	}
}

// BenchmarkResponsesWhole parses a Responses request and translates its
// non-streamed answer (64 tokens).
func BenchmarkResponsesWhole(b *testing.B) {
	a := chatAnswer{content: strings.Repeat("river ", 64), finish: "length", usage: `{"prompt_tokens":20,"completion_tokens":64,"total_tokens":84}`}
	answer := a.whole()
	body := `{"model":"m","stream":false,"max_output_tokens":64,"store":false,"instructions":"You are a helpful assistant.","input":"How do I reset my password?"}`
	r := httptest.NewRequest(http.MethodPost, "/v1/responses", nil)
	b.ReportAllocs()
	for b.Loop() {
		req, err := parseResponses(r, []byte(body))
		if err != nil {
			b.Fatal(err)
		}
		w := req.Translation.Writer(&discardWriter{h: http.Header{"Content-Type": {"application/json"}}})
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		w.WriteHeader(200)
		_, _ = w.Write(answer)
	}
}

// BenchmarkResponsesStreamSearched is BenchmarkResponsesStream after a
// knowledge-base search: the file_search_call item first and the
// answer's markers cited as they stream.
func BenchmarkResponsesStreamSearched(b *testing.B) {
	a := chatAnswer{content: strings.Repeat("The quick brown fox [1] jumps over the lazy dog [2, 3]. ", 20), finish: "stop",
		usage: `{"prompt_tokens":20,"completion_tokens":256,"total_tokens":276}`}
	events := bytes.SplitAfter(a.stream(rand.New(rand.NewPCG(1, 1))), []byte("\n\n"))
	body := `{"model":"m","input":"hi","stream":true,"store":false,"tools":[{"type":"file_search","vector_store_ids":["kb"]}]}`
	r := httptest.NewRequest(http.MethodPost, "/v1/responses", nil)
	rv := testRetrieval()
	b.ReportAllocs()
	for b.Loop() {
		req, err := parseResponses(r, []byte(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Retrieval = rv
		w := req.Translation.Writer(&discardWriter{h: http.Header{"Content-Type": {"text/event-stream"}}})
		w.WriteHeader(200)
		rc := http.NewResponseController(w)
		for _, ev := range events {
			_, _ = w.Write(ev)
			_ = rc.Flush()
		}
	}
}
