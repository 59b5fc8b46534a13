package llmguard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/openai"
)

// echoRouter stands in for llm_router in these handler tests (the real
// router and engines run in the cmd/llmgw tests): it answers with the
// last message's text as the model would see it, whole or streamed in
// 3-byte pieces, and keeps the body it was given.
type echoRouter struct {
	seen  atomic.Value // string
	tools bool         // answer with a tool call whose arguments are the text
}

func (e *echoRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	_, req, err := openai.Enter(w, r)
	if err != nil {
		return err
	}
	body, _ := req.UpstreamBody("")
	e.seen.Store(string(body))
	var in struct {
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return err
	}
	text := in.Messages[len(in.Messages)-1].Content
	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": text}
		if e.tools {
			msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
				"id": "call_1", "type": "function", "function": map[string]any{"name": "send", "arguments": text}}}}
		}
		w.Header().Set("Content-Type", "application/json")
		return json.NewEncoder(w).Encode(map[string]any{"id": "c1", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": "stop"}}})
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	for len(text) > 0 {
		n := min(3, len(text))
		for n < len(text) && !utf8.RuneStart(text[n]) {
			n++
		}
		piece, _ := json.Marshal(text[:n])
		delta := fmt.Sprintf(`{"content":%s}`, piece)
		if e.tools {
			delta = fmt.Sprintf(`{"tool_calls":[{"index":0,"function":{"arguments":%s}}]}`, piece)
		}
		if _, err := fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\n\n", delta); err != nil {
			return nil
		}
		text = text[n:]
	}
	fmt.Fprint(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	return nil
}

func newGuard(t *testing.T, g *Guardrails, checks ...Check) *Guardrails {
	t.Helper()
	for _, c := range checks {
		if p, ok := c.(caddy.Provisioner); ok {
			if err := p.Provision(caddyCtx()); err != nil {
				t.Fatal(err)
			}
		}
	}
	g.checks = checks
	g.logger = zap.NewNop()
	if g.OutputBlock == "" {
		g.OutputBlock = "error"
	}
	if g.Refusal == "" {
		g.Refusal = "I can't help with that."
	}
	if g.Window == 0 {
		g.Window = 256
	}
	return g
}

// call sends one chat request through the guard to next; it returns the
// status, the answer's text (content, tool arguments, or error message)
// and the guard's outcome summary.
func call(t *testing.T, g *Guardrails, next caddyhttp.Handler, text string, stream bool, tenant *tenancy.Tenant) (int, string, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "m", "stream": stream,
		"messages": []any{map[string]any{"role": "user", "content": text}}})
	r := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(string(body)))
	extra := new(caddyhttp.ExtraLogFields)
	ctx := context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{})
	ctx = context.WithValue(ctx, caddyhttp.ExtraLogFieldsCtxKey, extra)
	r = r.WithContext(ctx)
	if tenant != nil {
		tenancy.SetTenant(r, tenant)
	}
	w := httptest.NewRecorder()
	if err := g.ServeHTTP(w, r, next); err != nil {
		t.Fatal(err)
	}
	summary, _ := caddyhttp.GetVar(r.Context(), "llm.guard").(string)
	if w.Code != 200 {
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		_ = json.Unmarshal(w.Body.Bytes(), &e)
		return w.Code, e.Error.Message, summary
	}
	if !stream {
		var a struct {
			Choices []struct {
				Message struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						Function struct{ Arguments string } `json:"function"`
					} `json:"tool_calls"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
			t.Fatalf("answer %q: %v", w.Body.String(), err)
		}
		m := a.Choices[0].Message
		if len(m.ToolCalls) > 0 {
			return 200, m.ToolCalls[0].Function.Arguments, summary
		}
		return 200, *m.Content + "|" + a.Choices[0].FinishReason, summary
	}
	var all strings.Builder
	for _, ev := range strings.Split(w.Body.String(), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						Function struct{ Arguments string } `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
			Error *struct{ Message string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		if c.Error != nil {
			all.WriteString("ERROR: " + c.Error.Message)
			continue
		}
		for _, ch := range c.Choices {
			all.WriteString(ch.Delta.Content)
			for _, tc := range ch.Delta.ToolCalls {
				all.WriteString(tc.Function.Arguments)
			}
		}
	}
	return 200, all.String(), summary
}

func TestToolArgumentsRestored(t *testing.T) {
	g := newGuard(t, &Guardrails{}, &PII{})
	next := &echoRouter{tools: true}
	const text = `{"to": "ana@example.com", "card": "4111 1111 1111 1111"}`
	for _, stream := range []bool{false, true} {
		code, got, _ := call(t, g, next, text, stream, nil)
		if code != 200 || got != text {
			t.Errorf("stream %v: %d %q", stream, code, got)
		}
		if seen := next.seen.Load().(string); strings.Contains(seen, "ana@example.com") || !strings.Contains(seen, "EMAIL_1") {
			t.Errorf("the model saw %s", seen)
		}
	}
}

func TestOutputBlockModes(t *testing.T) {
	deny := func() *Regex {
		return &Regex{Scope: Scope{On: []Stage{Output}}, Deny: []Pattern{{Name: "word", Regex: "forbidden"}}}
	}
	next := &echoRouter{}
	const text = "this is fine but forbidden stuff follows"

	// Lookahead 0: the stream is cut where the match completes; the
	// text after it never arrives.
	g := newGuard(t, &Guardrails{}, deny())
	_, got, sum := call(t, g, next, text, true, nil)
	if !strings.HasPrefix(got, "this is fine but ") || strings.Contains(got, "stuff") || !strings.Contains(got, `ERROR: the answer was stopped by guardrail "regex"`) {
		t.Errorf("error mode: %q", got)
	}
	if sum != "regex/output:blocked" {
		t.Errorf("summary %q", sum)
	}
	// Refusal: the refusal text ends the answer.
	g = newGuard(t, &Guardrails{OutputBlock: "refusal", Refusal: "No.", Lookahead: 16}, deny())
	_, got, _ = call(t, g, next, text, true, nil)
	if got != "this is fine but No." {
		t.Errorf("refusal mode: %q", got)
	}
	_, got, _ = call(t, g, next, text, false, nil)
	if got != "No.|content_filter" {
		t.Errorf("refusal mode, whole: %q", got)
	}
	// Output redaction masks values the model made up.
	g = newGuard(t, &Guardrails{Lookahead: 32}, &PII{Scope: Scope{On: []Stage{Output}}})
	for _, stream := range []bool{false, true} {
		_, got, _ = call(t, g, next, "mail bob@example.org now", stream, nil)
		if want := "mail [EMAIL] now"; !strings.HasPrefix(got, want) {
			t.Errorf("stream %v: masked output %q, want %q", stream, got, want)
		}
	}
}

func TestScopesAndSkips(t *testing.T) {
	next := &echoRouter{}
	r := &Regex{Scope: Scope{Name: "acme-only", Tenants: []string{"acme/research"}}, Deny: []Pattern{{Name: "x", Regex: "secret plan"}}}
	j := &Judge{Scope: Scope{On: []Stage{Output}}, Model: "guard", Endpoint: "http://127.0.0.1:1"}
	g := newGuard(t, &Guardrails{}, r, j)
	acme := &tenancy.Tenant{KeyID: "k1", Org: "acme", Team: "research", Project: "p"}
	other := &tenancy.Tenant{KeyID: "k2", Org: "acme", Team: "sales", Project: "p"}
	if code, _, _ := call(t, g, next, "the secret plan", false, acme); code != 400 {
		t.Errorf("acme/research: %d, want 400", code)
	}
	code, _, sum := call(t, g, next, "the secret plan", true, other)
	if code != 200 || !strings.Contains(sum, "acme-only/input:skipped(tenant not in its tenants)") {
		t.Errorf("acme/sales: %d %q", code, sum)
	}
	if !strings.Contains(sum, "judge/output:skipped(it needs the whole answer and this one is streamed)") {
		t.Errorf("judge on a stream: %q", sum)
	}
	_, _, sum = call(t, g, next, "the secret plan", false, nil)
	if !strings.Contains(sum, "acme-only/input:skipped(no tenant") {
		t.Errorf("no tenant: %q", sum)
	}
}

// guardStandIn stands in for a guard model's OpenAI-compatible endpoint
// (no guard model can run here): it answers with the verdict it is told
// and, when told to, takes its time.
func guardStandIn(t *testing.T, verdict *atomic.Value, delay time.Duration) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer guard-key" {
			http.Error(w, "wrong path or key", 400)
			return
		}
		var req struct {
			Messages []llm.ChatMessage `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		v := verdict.Load().(string)
		if len(req.Messages) == 2 && req.Messages[1].Role == "assistant" && strings.Contains(req.Messages[1].Content, "violent") {
			v = "unsafe\nS1"
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": v}}}})
	}))
	t.Cleanup(s.Close)
	return s
}

func TestJudgeStandIn(t *testing.T) {
	var verdict atomic.Value
	srv := guardStandIn(t, &verdict, 0)
	next := &echoRouter{}
	judge := func(onErr string, cats ...string) *Judge {
		return &Judge{Scope: Scope{OnError: onErr, On: []Stage{Input, Output}}, Model: "llama-guard", Endpoint: srv.URL + "/v1/", APIKey: "guard-key", Categories: cats}
	}
	g := newGuard(t, &Guardrails{}, judge("deny"))
	for _, c := range []struct {
		verdict string
		code    int
		msg     string
	}{
		{"safe", 200, ""},
		{"  SAFE \n", 200, ""},
		{"unsafe\nS1,S10", 400, `blocked by guardrail "judge": a match for UNSAFE (judged unsafe: S1, S10)`},
		{`{"safe": false, "categories": ["violence"]}`, 400, "judged unsafe: violence"},
		{`{"flagged": false}`, 200, ""},
		{`{"verdict": "unsafe", "categories": "S2, S3"}`, 400, "S2, S3"},
		{"I think it is fine", 503, "neither safe nor unsafe"},
		{`{"score": 1}`, 503, "no safe, flagged or verdict field"},
	} {
		verdict.Store(c.verdict)
		code, msg, _ := call(t, g, next, "hello", false, nil)
		if code != c.code || !strings.Contains(msg, c.msg) {
			t.Errorf("verdict %q: %d %q; want %d %q", c.verdict, code, msg, c.code, c.msg)
		}
	}
	// Categories narrow what blocks.
	g = newGuard(t, &Guardrails{}, judge("deny", "S10"))
	verdict.Store("unsafe\nS1")
	if code, _, _ := call(t, g, next, "hello", false, nil); code != 200 {
		t.Errorf("a category not listed blocked: %d", code)
	}
	// On output the exchange is judged: the answer is blocked.
	verdict.Store("safe")
	code, msg, _ := call(t, g, next, "violent words", false, nil)
	if code != 200 {
		g = newGuard(t, &Guardrails{}, judge("deny"))
	}
	g = newGuard(t, &Guardrails{}, judge("deny"))
	code, msg, sum := call(t, g, next, "violent words", false, nil)
	if code != 400 || !strings.Contains(msg, "the answer was blocked") || sum != "judge/input:passed judge/output:blocked" {
		t.Errorf("judged answer: %d %q %q", code, msg, sum)
	}

	// Timeouts: on_error decides.
	slow := guardStandIn(t, &verdict, 2*time.Second)
	for _, c := range []struct {
		onErr string
		code  int
		sum   string
	}{{"allow", 200, "judge/input:errored"}, {"deny", 503, "judge/input:errored"}} {
		j := &Judge{Scope: Scope{OnError: c.onErr, Timeout: caddy.Duration(100 * time.Millisecond)}, Model: "g", Endpoint: slow.URL + "/v1", APIKey: "guard-key"}
		g := newGuard(t, &Guardrails{}, j)
		start := time.Now()
		code, msg, sum := call(t, g, next, "hello", false, nil)
		if code != c.code || !strings.HasPrefix(sum, c.sum) {
			t.Errorf("on_error %s: %d %q %q", c.onErr, code, msg, sum)
		}
		if c.code == 503 && !strings.Contains(msg, "timed out") {
			t.Errorf("on_error deny: message %q does not say it timed out", msg)
		}
		if time.Since(start) > 1500*time.Millisecond {
			t.Errorf("the timeout did not cut the call")
		}
	}
}

// presidioStandIn stands in for Presidio's analyzer and anonymizer REST
// services (they cannot run here): the analyzer finds the names it is
// given, with offsets in characters as Presidio counts them.
func presidioStandIn(t *testing.T, names ...string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/analyze":
			var req struct {
				Text     string `json:"text"`
				Language string `json:"language"`
			}
			_ = json.NewDecoder(r.Body).Decode(&req)
			if req.Language != "en" {
				http.Error(w, "language", 400)
				return
			}
			out := []presidioResult{}
			for _, n := range names {
				if i := strings.Index(req.Text, n); i >= 0 {
					start := utf8.RuneCountInString(req.Text[:i])
					out = append(out, presidioResult{EntityType: "PERSON", Start: start, End: start + utf8.RuneCountInString(n), Score: 0.85})
				}
			}
			_ = json.NewEncoder(w).Encode(out)
		case "/anonymize":
			var req struct {
				Text    string           `json:"text"`
				Results []presidioResult `json:"analyzer_results"`
			}
			_ = json.NewDecoder(r.Body).Decode(&req)
			runes := []rune(req.Text)
			for i := len(req.Results) - 1; i >= 0; i-- {
				res := req.Results[i]
				runes = append(runes[:res.Start], append([]rune("<"+res.EntityType+">"), runes[res.End:]...)...)
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"text": string(runes)})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func TestWebhookStandIn(t *testing.T) {
	srv := presidioStandIn(t, "José Müller")
	next := &echoRouter{}
	// Analyze: the names become placeholders and come back in the answer.
	g := newGuard(t, &Guardrails{}, &Webhook{URL: srv.URL})
	const text = "Grüße an José Müller, bitte"
	for _, stream := range []bool{false, true} {
		code, got, sum := call(t, g, next, text, stream, nil)
		if code != 200 || !strings.HasPrefix(got, text) || sum != "webhook/input:redacted" {
			t.Errorf("stream %v: %d %q %q", stream, code, got, sum)
		}
		if seen := next.seen.Load().(string); !strings.Contains(seen, "Grüße an \\u003cPERSON_1\\u003e, bitte") && !strings.Contains(seen, "Grüße an <PERSON_1>, bitte") {
			t.Errorf("the model saw %s", seen)
		}
	}
	// Anonymize: the service's text replaces the prompt's, for good.
	g = newGuard(t, &Guardrails{}, &Webhook{URL: srv.URL, AnonymizerURL: srv.URL})
	_, got, _ := call(t, g, next, text, false, nil)
	if got != "Grüße an <PERSON>, bitte|stop" {
		t.Errorf("anonymized: %q", got)
	}
	// A service that is down: on_error.
	g = newGuard(t, &Guardrails{}, &Webhook{URL: "http://127.0.0.1:1", Scope: Scope{OnError: "allow"}})
	code, _, sum := call(t, g, next, text, false, nil)
	if code != 200 || !strings.HasPrefix(sum, "webhook/input:errored") {
		t.Errorf("service down, allow: %d %q", code, sum)
	}
	g = newGuard(t, &Guardrails{}, &Webhook{URL: "http://127.0.0.1:1"})
	if code, _, _ := call(t, g, next, text, false, nil); code != 503 {
		t.Errorf("service down, deny: %d", code)
	}
}

func TestParseVerdict(t *testing.T) {
	for _, c := range []struct {
		in     string
		unsafe bool
		cats   string
		err    bool
	}{
		{"safe", false, "", false},
		{"unsafe\nS1, S2", true, "S1 S2", false},
		{"unsafe", true, "", false},
		{`{"verdict":"safe"}`, false, "", false},
		{`{"verdict":"maybe"}`, false, "", true},
		{"", false, "", true},
	} {
		u, cats, err := parseVerdict(c.in)
		if u != c.unsafe || strings.Join(cats, " ") != c.cats || (err != nil) != c.err {
			t.Errorf("parseVerdict(%q) = %v %q %v", c.in, u, cats, err)
		}
	}
	_ = errors.New
}
