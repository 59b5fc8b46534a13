package llmguard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

var coldBuf = make([]byte, 5<<20)

func flushCaches() {
	for i := 0; i < len(coldBuf); i += 64 {
		coldBuf[i]++
	}
}

func BenchmarkRequestCold(b *testing.B) {
	answer := []byte(`{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"The sea is calm tonight."},"finish_reason":"stop"}],"usage":{"prompt_tokens":30,"completion_tokens":3,"total_tokens":33}}`)
	next := nextUpstream{answer: answer}
	p := &PII{Scope: Scope{On: []Stage{Input}}}
	r := &Regex{Scope: Scope{On: []Stage{Input}}, Deny: []Pattern{{Name: "codename", Regex: `(?i)project\s+(zeus|hera)`}}}
	if err := p.Provision(caddyCtx()); err != nil {
		b.Fatal(err)
	}
	if err := r.Provision(caddyCtx()); err != nil {
		b.Fatal(err)
	}
	g := newGuardB(b, []Check{p, r})
	bodies := make([]string, 1000)
	for i := range bodies {
		body, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 1, "messages": []any{
			map[string]any{"role": "user", "content": fmt.Sprintf("How do I cable camera door email card for ticket %d?", 1000000+i)}}})
		bodies[i] = string(body)
	}
	for _, cold := range []bool{false, true} {
		for _, guarded := range []bool{false, true} {
			b.Run(fmt.Sprintf("cold=%v/guarded=%v", cold, guarded), func(b *testing.B) {
				var took time.Duration
				n := 0
				for i := 0; b.Loop(); i++ {
					if cold {
						flushCaches()
					}
					r := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(bodies[i%len(bodies)]))
					r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
					w := httptest.NewRecorder()
					t0 := time.Now()
					var err error
					if guarded {
						err = g.ServeHTTP(w, r, next)
					} else {
						err = next.ServeHTTP(w, r)
					}
					took += time.Since(t0)
					n++
					if err != nil || w.Code != 200 {
						b.Fatal(err, w.Code)
					}
				}
				b.ReportMetric(float64(took.Nanoseconds())/float64(n), "req-ns")
			})
		}
	}
}
