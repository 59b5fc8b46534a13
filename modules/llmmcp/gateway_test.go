package llmmcp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

type slowArgs struct {
	Steps int `json:"steps"`
}

// upstreamServer is a real MCP server over Streamable HTTP with an echo
// tool and a slow tool that sends progress notifications.
func upstreamServer(t testing.TB) string {
	s := upstreamMCPServer()
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

// upstreamMCPServer is upstreamServer's MCP server, for any transport.
func upstreamMCPServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, a struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "slow"}, func(ctx context.Context, req *mcp.CallToolRequest, a slowArgs) (*mcp.CallToolResult, any, error) {
		for i := 1; i <= a.Steps; i++ {
			time.Sleep(10 * time.Millisecond)
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: float64(a.Steps)})
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	return s
}

// testGateway serves a gateway in front of url. The tenant is the key
// named in X-Test-Key (default k), allowed every tool.
func testGateway(t testing.TB, url string) string {
	c, err := (&ServerConfig{Name: fmt.Sprintf("up%d", time.Now().UnixNano()%1e6), URL: url}).resolve(func(v string) (string, error) { return v, nil })
	if err != nil {
		t.Fatal(err)
	}
	g, err := newGateway(zap.NewNop(), []*ServerConfig{c}, gatewayOptions{sessionTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Destruct() })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
		tn := &tenancy.Tenant{KeyID: "k"}
		if k := r.Header.Get("X-Test-Key"); k != "" {
			tn = &tenancy.Tenant{KeyID: k}
		}
		tenancy.SetTenant(r, tn)
		if r.Method == http.MethodPost {
			if call, _ := noteTool(r); call != nil && g.fastCall(w, r, tn, call) {
				return
			}
		}
		g.serveStreamable(w, r, tn)
	}))
	t.Cleanup(srv.Close)
	deadline := time.Now().Add(5 * time.Second)
	for len(g.routes.Load().tools) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if len(g.routes.Load().tools) == 0 {
		t.Fatal("the gateway lists no tools")
	}
	return srv.URL
}

func TestProgressForwarded(t *testing.T) {
	gw := testGateway(t, upstreamServer(t))
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	s, name := progressClient(t, gw, func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		got = append(got, r.Params)
		mu.Unlock()
	})
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"steps": 3}, Meta: mcp.Meta{"progressToken": "tok"}})
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 || got[2].ProgressToken != "tok" || got[2].Progress != 3 {
		t.Fatalf("got %d progress notifications %+v, want 3 with token tok", len(got), got)
	}
}

func benchCalls(b *testing.B, url, tool string) {
	s, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	args := map[string]any{"text": "hello"}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkToolCall compares a tool call made to an MCP server directly
// and through the gateway in front of it (all in one process).
func BenchmarkToolCall(b *testing.B) {
	up := upstreamServer(b)
	b.Run("direct", func(b *testing.B) { benchCalls(b, up, "echo") })
	gw := testGateway(b, up)
	s, _ := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: gw}, nil)
	tools, _ := s.ListTools(context.Background(), nil)
	s.Close()
	name := ""
	for _, tl := range tools.Tools {
		if len(tl.Name) > 5 && tl.Name[len(tl.Name)-5:] == "_echo" {
			name = tl.Name
		}
	}
	b.Run("gateway", func(b *testing.B) { benchCalls(b, gw, name) })
}

type testKey string

func (k testKey) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Test-Key", string(k))
	return http.DefaultTransport.RoundTrip(r)
}

// TestSessionStaysWithItsKey checks that a tools/call in another key's
// session is refused, on the fast path as through the SDK.
func TestSessionStaysWithItsKey(t *testing.T) {
	gw := testGateway(t, upstreamServer(t))
	s, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: gw, HTTPClient: &http.Client{Transport: testKey("a")}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tools, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	name := tools.Tools[0].Name
	for _, tc := range []struct {
		name, key string
		progress  bool
		status    int
		body      string
	}{
		{"own key, fast path", "a", false, 200, `"result":{"content":[{"type":"text","text":"hi"}]}`},
		{"other key, fast path", "b", false, 403, "session user mismatch"},
		{"other key, with progress", "b", true, 403, "session user mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := ""
			if tc.progress {
				meta = `,"_meta":{"progressToken":"p"}`
			}
			body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + name + `","arguments":{"text":"hi"}` + meta + `}}`
			req, _ := http.NewRequest("POST", gw, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", s.ID())
			req.Header.Set("Mcp-Protocol-Version", s.InitializeResult().ProtocolVersion)
			req.Header.Set("X-Test-Key", tc.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(raw), tc.body) {
				t.Errorf("got %d %s, want %d with %s", resp.StatusCode, raw, tc.status, tc.body)
			}
			if tc.status == 200 && resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type %q: the call did not take the fast path (a JSON answer)", resp.Header.Get("Content-Type"))
			}
		})
	}
}

func TestSeparatorNames(t *testing.T) {
	up := upstreamServer(t)
	for _, tc := range []struct {
		sep, want string
	}{{"", "sep__echo"}, {".", "sep.echo"}, {"-", "sep-echo"}} {
		t.Run("separator "+tc.sep, func(t *testing.T) {
			c, err := (&ServerConfig{Name: "sep", URL: up}).resolve(func(v string) (string, error) { return v, nil })
			if err != nil {
				t.Fatal(err)
			}
			g, err := newGateway(zap.NewNop(), []*ServerConfig{c}, gatewayOptions{sep: tc.sep})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Destruct()
			deadline := time.Now().Add(5 * time.Second)
			for len(g.routes.Load().tools) == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			r, ok := g.routes.Load().tools[tc.want]
			if !ok || r.perm != (perm{"sep", "echo"}) {
				t.Errorf("routes %v: want %s for server sep's tool echo", g.routes.Load().tools, tc.want)
			}
		})
	}
}
