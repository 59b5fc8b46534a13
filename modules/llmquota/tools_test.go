package llmquota

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/mcpwire"
	"go.uber.org/zap"
)

func toolTenant(perMinute, perDay, projectPerMinute int64) *tenancy.Tenant {
	return &tenancy.Tenant{KeyID: "k", Levels: []tenancy.Level{
		tenancy.NewLevel("key", "o/t/p/k-tools", tenancy.Limits{ToolCallsPerMinute: perMinute, ToolCallsPerDay: perDay}),
		tenancy.NewLevel("project", "o/t/p", tenancy.Limits{ToolCallsPerMinute: projectPerMinute}),
	}}
}

// The counters of both stores: every level is checked, and a refused
// batch counts nothing.
func TestToolCallCounters(t *testing.T) {
	_, rs := startRedisStore(t)
	for name, c := range map[string]toolCounter{"memory": newMemoryStore(), "redis": rs} {
		t.Run(name, func(t *testing.T) {
			levels := toolLevels(toolTenant(5, 7, 100))
			now := time.Date(2026, 5, 1, 10, 0, 30, 0, time.UTC)
			ctx := context.Background()
			for i := range 5 {
				if d, err := c.admitTools(ctx, levels, 1, now); err != nil || !d.ok {
					t.Fatalf("call %d refused: %+v %v", i, d, err)
				}
			}
			d, err := c.admitTools(ctx, levels, 1, now)
			if err != nil || d.ok || d.failKind != kindToolsMinute || d.failLevel != 0 {
				t.Fatalf("the 6th call in a minute: %+v %v, want refused per minute at the key", d, err)
			}
			next := now.Add(time.Minute)
			if d, _ := c.admitTools(ctx, levels, 3, next); d.ok || d.failKind != kindToolsDay {
				t.Fatalf("a batch of 3 crossing the day's 7: %+v, want refused per day", d)
			}
			if d, _ := c.admitTools(ctx, levels, 2, next); !d.ok {
				t.Fatalf("2 more (7 in the day) refused: %+v; the refused batch must not have counted", d)
			}
			// The project's limit is shared by its keys.
			proj := toolLevels(&tenancy.Tenant{KeyID: "k2", Levels: []tenancy.Level{
				tenancy.NewLevel("key", "o/t/p/k2-tools", tenancy.Limits{}), tenancy.NewLevel("project", "o/t/p", tenancy.Limits{ToolCallsPerMinute: 8})}})
			if d, _ := c.admitTools(ctx, proj, 6, next); !d.ok {
				t.Fatalf("6 calls of another key under the project's 8: %+v", d)
			}
			if d, _ := c.admitTools(ctx, proj, 1, next); d.ok || d.failLevel != 0 {
				t.Fatalf("the project's 9th call this minute: %+v, want refused at the project", d)
			}
		})
	}
}

// Two handlers on one Redis (two gateway instances) hold one exact limit.
func TestToolCallLimitExactAcrossInstances(t *testing.T) {
	at, _ := startRedisStore(t)
	url := fmt.Sprintf("redis://127.0.0.1:%d", at.port)
	a, err := newRedisStore(url)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Destruct()
	b, err := newRedisStore(url)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Destruct()
	levels := toolLevels(toolTenant(40, 0, 0))
	now := time.Now()
	var mu sync.Mutex
	admitted := 0
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := toolCounter(a)
			if i%2 == 1 {
				c = b
			}
			if d, err := c.admitTools(context.Background(), levels, 1, now); err == nil && d.ok {
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if admitted != 40 {
		t.Fatalf("%d of 100 concurrent calls admitted through two instances, want exactly 40", admitted)
	}
}

// The handler answers a call over the limit with a JSON-RPC error for
// each request of the body, and lets other MCP messages through.
func TestServeMCPRefusesOverLimit(t *testing.T) {
	q := &Quota{store: newMemoryStore(), logger: zap.NewNop()}
	tenant := toolTenant(1, 0, 0)
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"tickets.search","arguments":{"q":"x"}}}`
	post := func(body string) (*httptest.ResponseRecorder, bool) {
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r = withVars(r)
		w := httptest.NewRecorder()
		return w, q.serveMCP(w, r, tenant)
	}
	if _, served := post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); served {
		t.Fatal("tools/list was answered by the quota")
	}
	if _, served := post(call); served {
		t.Fatal("the first call was refused")
	}
	w, served := post(call)
	if !served {
		t.Fatal("the second call in a minute was let through; the limit is 1")
	}
	var reply struct {
		ID    int `json:"id"`
		Error struct {
			Code    int
			Message string
			Data    struct{ Status, RetryAfter int }
		}
	}
	if err := json.Unmarshal(w.Body.Bytes(), &reply); err != nil {
		t.Fatalf("%v: %s", err, w.Body)
	}
	if reply.ID != 7 || reply.Error.Code != rpcLimitCode || !strings.Contains(reply.Error.Message, "1 tool calls per minute") ||
		w.Header().Get("Retry-After") == "" {
		t.Fatalf("refusal %s (Retry-After %q), want a JSON-RPC error for id 7 naming the limit", w.Body, w.Header().Get("Retry-After"))
	}
	if _, err := mcpwire.Read(httptest.NewRequest(http.MethodGet, "/mcp", nil)); err == nil {
		t.Fatal("a GET read as an MCP body")
	}
}

func withVars(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
}
