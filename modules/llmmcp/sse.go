package llmmcp

import (
	"crypto/rand"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// sseSession is one legacy SSE client, bound to the key that opened it.
type sseSession struct {
	transport *mcp.SSEServerTransport
	key       string
}

// serveSSE is the 2024-11-05 HTTP+SSE transport: GET opens a session's
// event stream, POST ?sessionid= delivers a message to it.
func (g *gateway) serveSSE(w http.ResponseWriter, r *http.Request, t *tenancy.Tenant) {
	key := ""
	if t != nil {
		key = t.KeyID
	}
	switch r.Method {
	case http.MethodPost:
		v, ok := g.sse.Load(r.URL.Query().Get("sessionid"))
		if !ok {
			http.Error(w, "mcp session not found; open a new one with GET", http.StatusNotFound)
			return
		}
		s := v.(*sseSession)
		if s.key != key {
			http.Error(w, "this mcp session belongs to another key", http.StatusForbidden)
			return
		}
		s.transport.ServeHTTP(w, r)
	case http.MethodGet:
		id := rand.Text()
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		path := r.URL.Path
		if orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok {
			path = orig.URL.Path
		}
		tr := &mcp.SSEServerTransport{Endpoint: path + "?sessionid=" + id, Response: w}
		g.sse.Store(id, &sseSession{transport: tr, key: key})
		defer g.sse.Delete(id)
		ss, err := g.server.Connect(r.Context(), tr, nil)
		if err != nil {
			http.Error(w, "mcp session failed to start", http.StatusInternalServerError)
			return
		}
		if t != nil {
			g.sseTenants.Store(ss, t)
			defer g.sseTenants.Delete(ss)
		}
		defer ss.Close()
		done := make(chan struct{})
		go func() { _ = ss.Wait(); close(done) }()
		select {
		case <-r.Context().Done():
		case <-done:
		}
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "use GET to open an mcp sse session, POST to send to it", http.StatusMethodNotAllowed)
	}
}
