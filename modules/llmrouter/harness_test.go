package llmrouter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	openaieng "github.com/llmgw/llmgw/engines/openai"
	"github.com/llmgw/llmgw/plugins/engine"
)

// TestMain runs the test binary as the openai engine plugin when the llm
// app starts it ("<exe> engine openai", as llmgw runs its built-in
// engines), so that the router's tests use a real llm app in process: its
// catalog, fleets and replicas, with providers that are httptest servers.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "engine" && os.Args[2] == "openai" {
		engine.Serve(openaieng.New(), os.Args[3:])
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// provider is an HTTP server standing for one outside provider: it
// answers every request with answer and counts the POSTs (the requests
// the router sends on; the llm app's checks of a replica are GETs), with
// the key each came with.
type provider struct {
	name   string
	url    string // base URL, ending in /v1
	mu     sync.Mutex
	keys   []string // the Authorization of each request, in order
	answer http.HandlerFunc
}

func (p *provider) hits() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.keys)
}

func (p *provider) keysSeen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.keys...)
}

// startProvider starts a provider whose answer is answer.
func startProvider(t testing.TB, name string, answer http.HandlerFunc) *provider {
	t.Helper()
	p := &provider{name: name, answer: answer}
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodPost {
			p.mu.Lock()
			p.keys = append(p.keys, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
			p.mu.Unlock()
		}
		p.answer(w, r)
	}))
	p.url = srv + "/v1"
	return p
}

// refusedURL is a base URL nothing listens on: connecting is refused.
func refusedURL(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("http://127.0.0.1:%d/v1", freePort(t))
}

func newServer(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// answerWith answers status and body as JSON, with the headers given as
// name, value pairs.
func answerWith(status int, body string, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// chatAnswer is a chat completion that names who made it.
func chatAnswer(who string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"` + who +
		`","choices":[{"index":0,"message":{"role":"assistant","content":"from ` + who +
		`"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`
}

// model is one catalog entry of the llm app, an openai-engine model.
type model struct {
	name      string
	baseURL   string
	apiKey    string
	fallbacks []string
	options   map[string]string // more engine options
	more      map[string]any    // more fields of the model's JSON
}

// startRouter loads, in this process, a config of the llm app with
// models and an HTTP server whose one handler is llm_router with the
// router's JSON fields (router, may be empty), and returns the server's
// base URL. The config is stopped when the test ends.
func startRouter(t testing.TB, router string, models ...model) string {
	t.Helper()
	return startRouterApp(t, nil, router, models...)
}

// startRouterApp is startRouter with more fields of the llm app's JSON.
func startRouterApp(t testing.TB, app map[string]any, router string, models ...model) string {
	t.Helper()
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	var ms []map[string]any
	for _, m := range models {
		// Probing off: these tests send requests to providers that fail
		// on purpose, before any health check would have marked them.
		opts := map[string]string{"base_url": m.baseURL, "probe_interval": "0"}
		if m.apiKey != "" {
			opts["api_key"] = m.apiKey
		}
		for k, v := range m.options {
			opts[k] = v
		}
		mj := map[string]any{"name": m.name, "engine": "openai", "options": opts,
			"fallbacks": m.fallbacks, "scaling": map[string]int{"min": 1, "max": 1}}
		maps.Copy(mj, m.more)
		ms = append(ms, mj)
	}
	port := freePort(t)
	llmApp := map[string]any{"models": ms, "hold_timeout": "1s"}
	maps.Copy(llmApp, app)
	handler := map[string]any{"handler": "llm_router"}
	if router != "" {
		if err := json.Unmarshal([]byte(router), &handler); err != nil {
			t.Fatal(err)
		}
		handler["handler"] = "llm_router"
	}
	cfg, err := json.Marshal(map[string]any{
		"admin":   map[string]any{"disabled": true},
		"logging": map[string]any{"logs": map[string]any{"default": map[string]any{"level": "ERROR"}}},
		"apps": map[string]any{
			"llm": llmApp,
			"http": map[string]any{"servers": map[string]any{"s": map[string]any{
				"listen": []string{fmt.Sprintf("127.0.0.1:%d", port)},
				"routes": []any{map[string]any{"handle": []any{handler}}},
			}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := caddy.Load(cfg, true); err != nil {
		t.Fatalf("loading the config: %v", err)
	}
	t.Cleanup(func() { _ = caddy.Stop() })
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}

// chat sends a chat completion for model and returns the answer.
func chat(t testing.TB, base, model string, stream bool) (*http.Response, string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"stream":%t,"messages":[{"role":"user","content":"hi"}]}`, model, stream)
	c := &http.Client{Timeout: 20 * time.Second}
	resp, err := c.Post(base+"/v1/chat/completions", "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return resp, string(b)
}

// errorCode is the code of an OpenAI-shaped error body, or "" when body
// is not one.
func errorCode(body string) string {
	var e struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(body), &e) != nil || e.Error == nil {
		return ""
	}
	return e.Error.Code
}
