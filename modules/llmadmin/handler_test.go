package llmadmin

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// testHandler is a provisioned llm_admin without a running llm app: the
// admin routes answer 404 "not running", which is enough to see what
// llm_admin itself lets through.
func testHandler(t testing.TB) *Handler {
	t.Helper()
	h := &Handler{MaxFailures: 3, logger: zap.NewNop(), limiter: newLimiter(3, 60e9), warned: new(atomic.Bool)}
	mux, err := collectRoutes(caddy.Context{})
	if err != nil {
		t.Fatal(err)
	}
	h.routes = mux
	h.sessions = &sessionStore{storage: &certmagic.FileStorage{Path: t.TempDir()}, ttl: 8 * time.Hour, idle: time.Hour, logger: zap.NewNop()}
	for _, tok := range []Token{{ID: "root", SHA256: tenancy.HashKey("root-token"), Role: "admin"},
		{ID: "watcher", SHA256: tenancy.HashKey("watcher-token"), Role: "viewer"}} {
		id, err := h.identity(tok, caddy.NewReplacer())
		if err != nil {
			t.Fatal(err)
		}
		h.ids = append(h.ids, id)
	}
	return h
}

func TestServeHTTP(t *testing.T) {
	h := testHandler(t)
	for _, tc := range []struct {
		name, token, method, target string
		code                        int
		body                        string
	}{
		{"no token", "", "GET", "/llm/models", 401, "needs a token"},
		{"basic auth", "", "GET", "/llm/models", 401, "needs a token"},
		{"viewer reads", "watcher-token", "GET", "/llm/models", 404, "llm app is not running"},
		{"viewer changes", "watcher-token", "POST", "/llm/models/m/stop", 403, "needs the operator role"},
		{"viewer, unknown route", "watcher-token", "GET", "/llm/secrets", 403, "needs the admin role"},
		{"admin, unknown route", "root-token", "GET", "/llm/secrets", 404, "no admin route"},
		{"encoded slash", "root-token", "DELETE", "/llm/keys/a%2Fb", 400, "must be plain"},
		{"dot segments", "root-token", "GET", "/llm/models/../keys", 400, "must be plain"},
		{"escape in a name", "root-token", "DELETE", "/llm/mcp/servers/a%1B%5B2Jb", 400, "has a control character; no id or name has one"},
		{"NUL in an id", "root-token", "GET", "/llm/replicas/r%00/restart", 400, "has a control character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.target, nil)
			if tc.token != "" {
				r.Header.Set("Authorization", "Bearer "+tc.token)
			}
			if tc.name == "basic auth" {
				r.SetBasicAuth("root", "root-token")
			}
			w := httptest.NewRecorder()
			if err := h.ServeHTTP(w, r, nil); err != nil {
				t.Fatal(err)
			}
			if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.body) || w.Header().Get("Content-Type") != "application/json" {
				t.Errorf("got %d %s, want %d with %q", w.Code, w.Body, tc.code, tc.body)
			}
			if tc.code == 401 && w.Header().Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
}

func TestServeHTTPActorAndLimit(t *testing.T) {
	h := testHandler(t)
	var actor string
	h.routes = http.NewServeMux()
	h.routes.HandleFunc("/llm/models", func(w http.ResponseWriter, r *http.Request) { actor = r.Header.Get(ActorHeader) })
	r := httptest.NewRequest("GET", "/llm/models", nil)
	r.Header.Set("Authorization", "Bearer watcher-token")
	r.Header.Set(ActorHeader, "someone-else")
	_ = h.ServeHTTP(httptest.NewRecorder(), r, nil)
	if actor != "token:watcher" {
		t.Errorf("the route saw actor %q, want token:watcher", actor)
	}
	for i := range 3 {
		r := httptest.NewRequest("GET", "/llm/models", nil)
		r.Header.Set("Authorization", "Bearer wrong")
		w := httptest.NewRecorder()
		_ = h.ServeHTTP(w, r, nil)
		if w.Code != 401 {
			t.Fatalf("wrong token %d: got %d", i+1, w.Code)
		}
	}
	r = httptest.NewRequest("GET", "/llm/models", nil)
	r.Header.Set("Authorization", "Bearer watcher-token")
	w := httptest.NewRecorder()
	_ = h.ServeHTTP(w, r, nil)
	if w.Code != 429 || w.Header().Get("Retry-After") != "60" {
		t.Errorf("after 3 wrong tokens: got %d Retry-After %q, want 429 and 60", w.Code, w.Header().Get("Retry-After"))
	}
}

// BenchmarkServeHTTP is what llm_admin adds to an admin request: the
// token's hash, the identity, the rule and the actor header.
func BenchmarkServeHTTP(b *testing.B) {
	h := testHandler(b)
	h.routes = http.NewServeMux()
	h.routes.HandleFunc("/llm/models", func(http.ResponseWriter, *http.Request) {})
	r := httptest.NewRequest("GET", "/llm/models", nil)
	r.Header.Set("Authorization", "Bearer watcher-token")
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		_ = h.ServeHTTP(w, r, nil)
	}
}
