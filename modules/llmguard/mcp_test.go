package llmguard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmgw/llmgw/modules/openai"
)

// toolServer stands in for llm_mcp in these handler tests (the real
// llm_mcp and MCP servers run in the cmd/llmgw tests): it answers
// tools/call for "lookup" (a customer record with an email address, as
// text and structured content) and "echo" (its text argument), as JSON
// or as SSE with a progress notification first, and keeps the arguments
// it was given.
type toolServer struct {
	sse  bool
	args atomic.Value // string
}

func (s *toolServer) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	raw, _ := io.ReadAll(r.Body)
	var m struct {
		ID     json.RawMessage `json:"id"`
		Params struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	s.args.Store(string(m.Params.Arguments))
	var result any
	switch m.Params.Name {
	case "lookup":
		result = map[string]any{
			"content":           []any{map[string]any{"type": "text", "text": "Customer 42: Jane Doe, jane.doe@example.com, plan gold"}},
			"structuredContent": map[string]any{"id": 42, "email": "jane.doe@example.com", "tags": []any{"vip"}},
		}
	default:
		var a struct{ Text string }
		_ = json.Unmarshal(m.Params.Arguments, &a)
		result = map[string]any{"content": []any{map[string]any{"type": "text", "text": a.Text}}}
	}
	reply, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result})
	if !s.sse {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(len(reply)))
		_, _ = w.Write(reply)
		return nil
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	fmt.Fprint(w, "event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":1,\"total\":2}}\n\n")
	_ = http.NewResponseController(w).Flush()
	// The result in two writes, split inside the email address.
	ev := "event: message\nid: 2\ndata: " + string(reply) + "\n\n"
	cut := strings.Index(ev, "jane.doe") + 4
	fmt.Fprint(w, ev[:cut])
	_ = http.NewResponseController(w).Flush()
	fmt.Fprint(w, ev[cut:])
	return nil
}

// mcpCall posts one tools/call as key through g to next and returns the
// body the client got.
func mcpCall(t *testing.T, g *Guardrails, next caddyhttp.Handler, key, tool, args string) string {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, tool, args)
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
	openai.Log(r).Key = key
	w := httptest.NewRecorder()
	if err := g.ServeHTTP(w, r, next); err != nil {
		t.Fatal(err)
	}
	return w.Body.String()
}

func TestToolResultsRedactedAndRestored(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprintf("sse=%v", sse), func(t *testing.T) {
			key := fmt.Sprintf("key-sse-%v", sse)
			g := newGuard(t, &Guardrails{}, &PII{}, &Regex{Scope: Scope{Name: "no-drops"}, Deny: []Pattern{{Name: "sql", Regex: `(?i)drop\s+table`}}})
			srv := &toolServer{sse: sse}
			got := mcpCall(t, g, srv, key, "lookup", `{"id":42}`)
			if strings.Contains(got, "jane.doe@example.com") || strings.Count(got, "<EMAIL_T1>") != 2 {
				t.Fatalf("the client got %s; want the email replaced by <EMAIL_T1> in the text and the structured content", got)
			}
			if sse && !strings.Contains(got, `"method":"notifications/progress"`) {
				t.Fatalf("the progress notification was lost: %s", got)
			}
			// The model puts the placeholder in a later call: the tool
			// gets the value, the client the placeholder again.
			got = mcpCall(t, g, srv, key, "echo", `{"text":"write to <EMAIL_T1> today"}`)
			if a := srv.args.Load().(string); !strings.Contains(a, "write to jane.doe@example.com today") {
				t.Fatalf("the tool got the arguments %s; want the email restored", a)
			}
			if !strings.Contains(got, "write to <EMAIL_T1> today") {
				t.Fatalf("the echoed result %s; want the same placeholder", got)
			}
			// Another key's call keeps the placeholder: vaults are per key.
			mcpCall(t, g, srv, key+"-other", "echo", `{"text":"write to <EMAIL_T1>"}`)
			if a := srv.args.Load().(string); strings.Contains(a, "jane.doe") {
				t.Fatalf("another key's call got the value: %s", a)
			}
			// A chat answer of the same key that repeats the placeholder
			// gives the client the value.
			body := `{"model":"m","messages":[{"role":"user","content":"Contact <EMAIL_T1> about the renewal"}]}`
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
			r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
			openai.Log(r).Key = key
			w := httptest.NewRecorder()
			if err := g.ServeHTTP(w, r, &echoRouter{}); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(w.Body.String(), "Contact jane.doe@example.com about") {
				t.Fatalf("the chat answer %s; want the tool result's placeholder restored", w.Body)
			}
			// A blocked argument refuses the call before the tool.
			srv.args.Store("")
			got = mcpCall(t, g, srv, key, "echo", `{"text":"please DROP TABLE users"}`)
			if srv.args.Load().(string) != "" || !strings.Contains(got, `"code":-32030`) || !strings.Contains(got, `no-drops`) {
				t.Fatalf("a blocked call: the tool got %q, the client %s", srv.args.Load(), got)
			}
		})
	}
}
