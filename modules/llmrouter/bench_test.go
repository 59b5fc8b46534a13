package llmrouter

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
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

// benchProvider is an outside provider answering a chat completion
// whole, or streamed in 16 chunks.
func benchProvider(b *testing.B) *provider {
	whole := chatAnswer("p")
	stream := strings.Repeat("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok\"}}]}\n\n", 16) + "data: [DONE]\n\n"
	return startProvider(b, "p", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") == "text/event-stream" {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, stream)
			return
		}
		answerWith(200, whole)(w, r)
	})
}

// BenchmarkProxy is one request through ServeHTTP to a replica of the
// llm app (an openai-engine model whose provider is an HTTP server),
// whole and streamed: the router's own work per request, with the
// upstream's round trip.
func BenchmarkProxy(b *testing.B) {
	p := benchProvider(b)
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
				// With the variables Caddy gives every request.
				ctx := context.WithValue(context.Background(), caddyhttp.VarsCtxKey, map[string]any{})
				r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", strings.NewReader(bc.body))
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

// BenchmarkRequestLog is BenchmarkProxy's whole and streamed requests
// with the request log off and on (the default), in requests as Caddy
// makes them (with their variables, so the log fields are kept on the
// request). Besides ns/op it reports cpu-ns/op: the process's CPU time
// per request, on every thread, so the log's writer counts too.
func BenchmarkRequestLog(b *testing.B) {
	p := benchProvider(b)
	for _, log := range []string{"off", "on"} {
		for _, bc := range []struct{ name, body string }{
			{"whole", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
			{"stream", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		} {
			b.Run(log+"/"+bc.name, func(b *testing.B) {
				app := map[string]any{"request_log": map[string]any{"off": log == "off"}}
				startRouterApp(b, app, "", model{name: "m", baseURL: p.url})
				rt := new(Router)
				if err := rt.Provision(caddy.ActiveContext()); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = rt.Cleanup() })
				benchRequests(b, rt, bc.body)
			})
		}
	}
}

func benchRequests(b *testing.B, rt *Router, body string) {
	w := &discard{h: http.Header{}}
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		ctx := context.WithValue(context.Background(), caddyhttp.VarsCtxKey, map[string]any{})
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		clear(w.h)
		w.status = 0
		if err := rt.ServeHTTP(w, r, nil); err != nil || w.status != 200 {
			b.Fatalf("got %d %v", w.status, err)
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
