package llmguard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/openai"
)

// benchPrompt is n bytes of prose with an email address and a card
// number in every kilobyte (the same text llmgw-bench sends).
func benchPrompt(n int) string {
	const para = "Please summarise the quarterly report for the operations team. Revenue grew in every region, " +
		"costs fell after the move to the new data centre, and the support queue is shorter than last year. " +
		"Questions go to ops-lead@example.com; the corporate card 4111 1111 1111 1111 pays for the offsite. " +
		"The board meets on Tuesday to discuss hiring, the roadmap for the next two quarters, and the budget for " +
		"training. Keep the summary under two hundred words, use plain language, and list three risks with an owner " +
		"for each. Mention the customer survey results and the uptime figures from the monitoring dashboards. "
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(para)
	}
	return b.String()[:n]
}

func benchChecks(b *testing.B) []Check {
	p := &PII{Scope: Scope{On: []Stage{Input, Output}}}
	r := &Regex{Scope: Scope{On: []Stage{Input, Output}}, Deny: []Pattern{{Name: "codename", Regex: `(?i)project\s+(zeus|hera)`}}}
	if err := p.Provision(caddyCtx()); err != nil {
		b.Fatal(err)
	}
	if err := r.Provision(caddyCtx()); err != nil {
		b.Fatal(err)
	}
	return []Check{p, r}
}

// nextUpstream stands in for the router: it asks for the upstream body,
// as the router does, and answers with a short whole answer.
type nextUpstream struct{ answer []byte }

func (n nextUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	_, req, err := openai.Enter(w, r)
	if err != nil {
		return err
	}
	if _, err := req.UpstreamBody(""); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(n.answer)
	return nil
}

// BenchmarkRequest is one whole request through llm_guardrails (pii and
// regex on input and output) against the same request with the stand-in
// router alone, per prompt size.
func BenchmarkRequest(b *testing.B) {
	answer := []byte(`{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"The sea is calm tonight, the mountains hold the light; a river runs between them, and the gulls are out of sight."},"finish_reason":"stop"}],"usage":{"prompt_tokens":300,"completion_tokens":30,"total_tokens":330}}`)
	next := nextUpstream{answer: answer}
	for _, size := range []int{1 << 10, 10 << 10, 100 << 10} {
		body, _ := json.Marshal(map[string]any{"model": "m", "messages": []any{
			map[string]any{"role": "system", "content": "You are a helpful assistant."},
			map[string]any{"role": "user", "content": benchPrompt(size)}}})
		g := newGuardB(b, benchChecks(b))
		for _, guarded := range []bool{false, true} {
			name := fmt.Sprintf("%dKB/router-alone", size>>10)
			if guarded {
				name = fmt.Sprintf("%dKB/guarded", size>>10)
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					r := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(string(body)))
					r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
					w := httptest.NewRecorder()
					var err error
					if guarded {
						err = g.ServeHTTP(w, r, next)
					} else {
						err = next.ServeHTTP(w, r)
					}
					if err != nil || w.Code != 200 {
						b.Fatal(err, w.Code)
					}
				}
			})
		}
	}
}

// BenchmarkStreamChunk is the cost per streamed chunk of restoring
// placeholders, and of restoring with pii and regex checks on output.
func BenchmarkStreamChunk(b *testing.B) {
	words := strings.Fields("The sea is calm tonight and <EMAIL_1> should hear from us about the card <CARD_1> soon enough")
	var chunks [][]byte
	for _, w := range words {
		piece, _ := json.Marshal(" " + w)
		chunks = append(chunks, fmt.Appendf(nil, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%s},\"finish_reason\":null}]}\n\n", piece))
	}
	for _, withChecks := range []bool{false, true} {
		name := "restore"
		var checks []Check
		if withChecks {
			name = "restore+pii+regex"
			checks = benchChecks(b)
		}
		b.Run(name, func(b *testing.B) {
			g := newGuardB(b, nil)
			st := &state{g: g, model: "m"}
			st.vault.placeholder(KindEmail, "ana@example.com")
			st.vault.placeholder(KindCard, "4111 1111 1111 1111")
			w := httptest.NewRecorder()
			ow := newOutputWriter(w, st, &openai.Request{Endpoint: openai.ChatCompletions, Stream: true}, checks)
			ow.Header().Set("Content-Type", "text/event-stream")
			ow.WriteHeader(200)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				_, _ = ow.Write(chunks[i%len(chunks)])
				i++
				if w.Body.Len() > 1<<20 {
					w.Body.Reset()
				}
			}
		})
	}
}

func newGuardB(b *testing.B, checks []Check) *Guardrails {
	g := &Guardrails{Window: 256, OutputBlock: "error", Refusal: "no", checks: checks}
	g.logger = zap.NewNop()
	return g
}

// BenchmarkDetectors is each PII detector over a kilobyte of prose.
func BenchmarkDetectors(b *testing.B) {
	text := benchPrompt(1 << 10)
	for _, name := range detectorOrder {
		b.Run(name, func(b *testing.B) {
			var out []detection
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				out = detectors[name](text, out[:0])
			}
		})
	}
}
