package federation

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

func TestCaddyfileErrors(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"unknown":        {"peer east {\n url https://x\n colour blue\n}", `unrecognized peer subdirective "colour"`},
		"duplicate":      {"peer east {\n url https://x\n url https://y\n}", `duplicate subdirective "url"`},
		"no url":         {"peer east {\n key k\n}", "url is required"},
		"tenant no key":  {"peer east {\n url https://x\n tenant acme\n}", "tenant takes a tenant and its key"},
		"tenant keyword": {"peer east {\n url https://x\n tenant acme secret k\n}", "tenant takes a tenant and its key"},
		"no name":        {"peer {\n url https://x\n}", "wrong argument count"},
		"bad price":      {"peer east {\n url https://x\n price cheap dear\n}", "give the input and output price"},
	} {
		t.Run(name, func(t *testing.T) {
			d := caddyfile.NewTestDispenser(tc.in)
			d.Next()
			err := new(Peer).UnmarshalCaddyfile(d)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	for name, tc := range map[string]struct {
		p    Peer
		want string
	}{
		"not a URL":      {Peer{Name: "e", URL: "gw.example.com"}, "not an http(s) URL"},
		"query":          {Peer{Name: "e", URL: "https://gw?x=1"}, "must not have a query"},
		"ca without tls": {Peer{Name: "e", URL: "http://gw", CA: "/ca.pem"}, "use https://"},
		"bad glob":       {Peer{Name: "e", URL: "https://gw", Models: []string{"[a"}}, "is not valid"},
		"tenant twice": {Peer{Name: "e", URL: "https://gw", Tenants: []*TenantKey{{Tenant: "acme", Key: "a"}, {Tenant: "acme", Key: "b"}}},
			"give each organisation"},
		"tenant too deep": {Peer{Name: "e", URL: "https://gw", Tenants: []*TenantKey{{Tenant: "a/b/c/d", Key: "a"}}}, "give each organisation"},
		"bad name":        {Peer{Name: "e e", URL: "https://gw"}, "peer name"},
		"negative price":  {Peer{Name: "e", URL: "https://gw", Price: &catalog.Price{InputPerMillion: -1}}, "must not be negative"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := tc.p.check(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
	if err := (&Peer{Name: "e", URL: "https://gw/v1"}).check(); err != nil {
		t.Errorf("a good peer: %v", err)
	}
}

// TestKeyFor: a tenant's project, else its team, else its organisation,
// else the default key.
func TestKeyFor(t *testing.T) {
	l := &live{peer: &Peer{Key: "default", Tenants: []*TenantKey{
		{Tenant: "acme", Key: "org"}, {Tenant: "acme/research", Key: "team"}, {Tenant: "acme/research/alpha", Key: "project"}}}}
	for _, tc := range []struct {
		t    *tenancy.Tenant
		want string
	}{
		{nil, "default"},
		{&tenancy.Tenant{Org: "acme", Team: "acme/research", Project: "acme/research/alpha"}, "project"},
		{&tenancy.Tenant{Org: "acme", Team: "acme/research", Project: "acme/research/beta"}, "team"},
		{&tenancy.Tenant{Org: "acme", Team: "acme/sales", Project: "acme/sales/x"}, "org"},
		{&tenancy.Tenant{Org: "other", Team: "other/t", Project: "other/t/p"}, "default"},
	} {
		if got := l.keyFor(tc.t); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.t, got, tc.want)
		}
	}
}

// fakePeer is a stand-in for another gateway: its /v1/models lists
// models, and its chat completions say which key they got.
func fakePeer(t *testing.T, models ...string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Authorization") == "Bearer refused":
			http.Error(w, `{"error":{"message":"bad key"}}`, http.StatusUnauthorized)
		case r.URL.Path == "/v1/models":
			var data []map[string]string
			for _, m := range models {
				data = append(data, map[string]string{"id": m})
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
		default:
			_, _ = io.WriteString(w, r.Header.Get("Authorization"))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestModelsAndUpstream: the models a peer lists (matching its globs)
// and those a local model names as fallbacks are catalog entries under
// the prefix; a name a local model has stays local; requests carry the
// tenant's key; a model the peer does not list, a peer that refuses the
// key, and a peer down answer with errors naming the peer.
func TestModelsAndUpstream(t *testing.T) {
	srv := fakePeer(t, "chat", "embed", "secret-model")
	s, err := New([]*Peer{{Name: "east", URL: srv.URL, Key: "k-default", Models: []string{"chat", "embed", "gone"}, Price: &catalog.Price{InputPerMillion: 1},
		Tenants: []*TenantKey{{Tenant: "acme", Key: "k-acme"}}}}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l := s.peers[0]
	l.check()
	local := []*catalog.Model{{Name: "east/embed"}, {Name: "m", Fallbacks: []string{"east/gone", "east/nope"}}}
	var names []string
	for _, m := range s.Models(local) {
		names = append(names, m.Name)
		if m.Price == nil || m.Price.InputPerMillion != 1 || m.Engine != "openai" || m.Options["model"] != strings.TrimPrefix(m.Name, "east/") {
			t.Errorf("%s: got %+v", m.Name, m)
		}
	}
	if got, want := strings.Join(names, " "), "east/chat east/gone"; got != want {
		t.Errorf("catalog entries: got %q, want %q", got, want)
	}
	chat, key := s.Upstream("east/chat")
	if chat == nil || key == "" {
		t.Fatal("no upstream for east/chat")
	}
	if up, _ := s.Upstream("m"); up != nil {
		t.Error("a local model has an upstream")
	}
	if why := chat.Down(); why != "" {
		t.Errorf("east/chat down: %s", why)
	}
	if gone, _ := s.Upstream("east/gone"); gone == nil || !strings.Contains(gone.Down(), `peer "east" does not list a model "gone"`) {
		t.Errorf("a fallback the peer does not list: got %v", gone)
	}

	ctx := context.WithValue(context.Background(), caddyhttp.VarsCtxKey, map[string]any{})
	tenancy.SetTenant(httptest.NewRequest("GET", "/", nil).WithContext(ctx), &tenancy.Tenant{Org: "acme", Team: "acme/x", Project: "acme/x/y"})
	if got := roundTrip(t, ctx, chat); got != "Bearer k-acme" {
		t.Errorf("acme's request: the peer got %q", got)
	}
	if got := roundTrip(t, context.Background(), chat); got != "Bearer k-default" {
		t.Errorf("a request of no tenant: the peer got %q", got)
	}
	l.peer.Key = "refused"
	resp := send(t, context.Background(), chat)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body(resp), `peer \"east\" refused the key`) {
		t.Errorf("a refused key: got %d", resp.StatusCode)
	}
	srv.Close()
	resp = send(t, context.Background(), chat)
	if b := body(resp); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(b, `peer \"east\"`) || !strings.Contains(b, "is down") {
		t.Errorf("the peer down: got %d %s", resp.StatusCode, b)
	}
	if st := s.Status()[0]; st.State != "down" || st.Reason == "" || !st.DefaultKey || st.Tenants[0] != "acme" {
		t.Errorf("status: got %+v", st)
	}
}

func send(t *testing.T, ctx context.Context, up Upstream) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://unused/v1/chat/completions", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer client-key-never-forwarded")
	chat := up.(*upstream)
	req.URL.Scheme, req.URL.Host = "http", strings.TrimPrefix(chat.l.peer.URL, "http://")
	resp, err := up.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func roundTrip(t *testing.T, ctx context.Context, up Upstream) string {
	return body(send(t, ctx, up))
}

func body(resp *http.Response) string {
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestWatch: a change of a peer's list calls back.
func TestWatch(t *testing.T) {
	srv := fakePeer(t, "chat")
	s, err := New([]*Peer{{Name: "west", URL: srv.URL}}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	called := make(chan struct{}, 1)
	s.Watch(ctx, func() { called <- struct{}{} })
	select {
	case <-called:
	case <-time.After(5 * time.Second):
		t.Fatal("no call after the first check listed a model")
	}
	if st := s.Status()[0]; st.State != "up" || len(st.Models) != 1 || st.Models[0] != "west/chat" {
		t.Errorf("status: got %+v", st)
	}
}

// TestCheckFallbacks: a peer's fallback must be a model of the catalog.
func TestCheckFallbacks(t *testing.T) {
	s, err := New([]*Peer{{Name: "north", URL: "https://gw.north", Fallbacks: []string{"local"}}}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CheckFallbacks([]*catalog.Model{{Name: "other", Aliases: []string{"local"}}}); err != nil {
		t.Errorf("an alias as fallback: %v", err)
	}
	err = s.CheckFallbacks([]*catalog.Model{{Name: "other"}})
	if err == nil || !strings.Contains(err.Error(), `peer "north": fallback "local" is not a model of the catalog`) {
		t.Errorf("a fallback not in the catalog: got %v", err)
	}
	if err := (*Set)(nil).CheckFallbacks(nil); err != nil {
		t.Errorf("no peers: %v", err)
	}
}
