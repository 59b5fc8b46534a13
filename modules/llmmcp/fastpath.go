package llmmcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// A tools/call is the one message on the hot path. When it comes alone in
// a POST of a known Streamable HTTP session, without a progress token, the
// gateway answers it itself (a JSON response, as the transport allows)
// instead of passing it through the SDK's server side; everything else,
// including refusals, goes through the SDK.

// rpcCall is a POSTed tools/call, parsed once.
type rpcCall struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name      string                     `json:"name"`
		Arguments json.RawMessage            `json:"arguments"`
		Meta      map[string]json.RawMessage `json:"_meta"`
	} `json:"params"`
}

// session is a client session of the Streamable HTTP transport: the key
// that opened it and when it was last used.
type session struct {
	ss   *mcp.ServerSession
	key  string
	last atomic.Int64 // unix nanoseconds
}

// track remembers a session the SDK serves, until it ends.
func (g *gateway) track(ss *mcp.ServerSession, t *tenancy.Tenant) {
	id := ss.ID()
	if id == "" {
		return
	}
	if v, ok := g.sessions.Load(id); ok {
		v.(*session).last.Store(now().UnixNano())
		return
	}
	s := &session{ss: ss}
	if t != nil {
		s.key = t.KeyID
	}
	s.last.Store(now().UnixNano())
	if _, loaded := g.sessions.LoadOrStore(id, s); !loaded {
		go func() {
			_ = ss.Wait()
			g.sessions.Delete(id)
		}()
	}
}

// reap closes sessions idle longer than timeout; the SDK's own idle timer
// would not see the calls answered on the fast path.
func (g *gateway) reap(ctx context.Context, timeout time.Duration) {
	tick := time.NewTicker(min(timeout/4, time.Minute))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cut := now().Add(-timeout).UnixNano()
		g.sessions.Range(func(_, v any) bool {
			if s := v.(*session); s.last.Load() < cut {
				_ = s.ss.Close()
			}
			return true
		})
	}
}

// fastCall answers c if it can; false leaves it to the SDK.
func (g *gateway) fastCall(w http.ResponseWriter, r *http.Request, t *tenancy.Tenant, c *rpcCall) bool {
	if len(c.ID) == 0 || c.Params.Meta["progressToken"] != nil || !strings.Contains(r.Header.Get("Accept"), "application/json") {
		return false
	}
	v, ok := g.sessions.Load(r.Header.Get("Mcp-Session-Id"))
	if !ok {
		return false
	}
	s := v.(*session)
	key := ""
	if t != nil {
		key = t.KeyID
	}
	if s.key != key {
		return false
	}
	rt, ok := g.routes.Load().tools[c.Params.Name]
	if !ok || !allowed(t, rt.perm, g.sep) {
		return false
	}
	s.last.Store(now().UnixNano())
	body := g.callRaw(r.Context(), t, rt, c.Params.Arguments)
	out := make([]byte, 0, len(body)+len(c.ID)+40)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, c.ID...)
	out = append(out, `,"result":`...)
	out = append(out, body...)
	out = append(out, '}')
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
	return true
}

// callRaw is call for the fast path: the result as JSON, the upstream's
// own bytes when it could be reached with one POST.
func (g *gateway) callRaw(ctx context.Context, t *tenancy.Tenant, r route, args json.RawMessage) []byte {
	start := now()
	var raw []byte
	var s *mcp.ClientSession
	up, err := r.pickFor(t)
	if err == nil {
		s, err = up.live()
	}
	if err == nil {
		raw, err = up.rawCall(ctx, s, r.name, args)
		if errors.Is(err, errNotRaw) {
			var res *mcp.CallToolResult
			if res, err = up.callTool(ctx, r.name, args, nil); err == nil {
				raw, err = json.Marshal(res)
			}
		}
	}
	outcome := "ok"
	switch {
	case err != nil:
		outcome = "failed"
		raw, _ = json.Marshal(failure(err))
	case isToolError(raw):
		outcome = "tool_error"
	}
	g.record(t, r, outcome, now().Sub(start))
	return raw
}

func isToolError(result []byte) bool {
	if !bytes.Contains(result, []byte(`"isError"`)) {
		return false
	}
	var r struct {
		IsError bool `json:"isError"`
	}
	return json.Unmarshal(result, &r) == nil && r.IsError
}
