package llmrouter

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// discard is a ResponseWriter that keeps nothing but the headers, reset
// for each request, so that a benchmark counts the router's allocations
// and not a recorder's.
type discard struct {
	h      http.Header
	status int
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(status int)      { d.status = status }
func (d *discard) Flush()                      {}

// BenchmarkProxy is one request through ServeHTTP to a replica of the
// llm app (an openai-engine model whose provider is an HTTP server),
// whole and streamed: the router's own work per request, with the
// upstream's round trip.
func BenchmarkProxy(b *testing.B) {
	whole := chatAnswer("p")
	stream := strings.Repeat("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok\"}}]}\n\n", 16) + "data: [DONE]\n\n"
	p := startProvider(b, "p", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") == "text/event-stream" {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, stream)
			return
		}
		answerWith(200, whole)(w, r)
	})
	startRouter(b, "", model{name: "m", baseURL: p.url})
	rt := new(Router)
	if err := rt.Provision(caddy.ActiveContext()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rt.Cleanup() })
	for _, bc := range []struct {
		name string
		body string
	}{
		{"whole", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{"stream", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			w := &discard{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/v1/chat/completions", strings.NewReader(bc.body))
				r.Header.Set("Content-Type", "application/json")
				clear(w.h)
				w.status = 0
				if err := rt.ServeHTTP(w, r, nil); err != nil || w.status != 200 {
					b.Fatalf("got %d %v", w.status, err)
				}
			}
		})
	}
}
