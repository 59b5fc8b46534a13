package llm

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/fleet"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

const testSecret = "test cluster secret, at least 32 bytes long"

// stubEngine is an engine server on 127.0.0.1: non-streamed requests get
// a JSON answer; streamed ones get one SSE chunk each time the test sends
// on chunks.
type stubEngine struct {
	srv      *httptest.Server
	answer   []byte
	chunks   chan struct{}
	canceled chan struct{} // a stream's request context ended early
	auth     chan string   // the Authorization header of each request
}

func newStubEngine(t testing.TB, answer []byte) *stubEngine {
	e := &stubEngine{answer: answer, chunks: make(chan struct{}), canceled: make(chan struct{}, 16), auth: make(chan string, 1024)}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *stubEngine) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	select {
	case e.auth <- r.Header.Get("Authorization"):
	default:
	}
	if r.URL.Path == "/v1/models" {
		_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
		return
	}
	if r.URL.Path != "/v1/chat/completions" {
		http.Error(w, "stub engine: unknown path "+r.URL.Path, http.StatusNotFound)
		return
	}
	if !bytes.Contains(body, []byte(`"stream":true`)) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Engine", "stub")
		_, _ = w.Write(e.answer)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	for i := 1; i <= 3; i++ {
		select {
		case <-e.chunks:
		case <-r.Context().Done():
			e.canceled <- struct{}{}
			return
		}
		fmt.Fprintf(w, "data: chunk %d\n\n", i)
		_ = rc.Flush()
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

// testNode is one node's peer endpoint and the transport other nodes use.
type testNode struct {
	peer      *peerServer
	transport *http.Transport // this node's client side, to other nodes
	clientTLS *tls.Config
	releases  atomic.Int64
	released  chan struct{}
	mu        sync.Mutex
	replicas  map[string]*fleet.Replica
}

func newTestNode(t testing.TB, secret, name, ip string, logger *zap.Logger) *testNode {
	t.Helper()
	server, client, err := newPeerTLS(secret, name, ip)
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{replicas: map[string]*fleet.Replica{}, released: make(chan struct{}, 1024)}
	n.peer, err = startPeer(ip+":0", server, name, n.lookup, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.peer.Destruct() })
	n.transport, n.clientTLS = newPeerTransport(client, zap.NewNop()), client
	t.Cleanup(n.transport.CloseIdleConnections)
	return n
}

func (n *testNode) lookup(id string) (*fleet.Replica, func(), bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	r, ok := n.replicas[id]
	if !ok {
		return nil, nil, false
	}
	return r, func() {
		n.releases.Add(1)
		select {
		case n.released <- struct{}{}:
		default:
		}
	}, true
}

func (n *testNode) add(r *fleet.Replica) {
	n.mu.Lock()
	n.replicas[r.ID] = r
	n.mu.Unlock()
}

func (n *testNode) url(id, path string) string {
	return peerURL(n.peer.Addr().String(), id) + path
}

// twoNodes starts nodes a (127.0.0.2) and b (127.0.0.3) with the same
// secret; b runs replica "org/chat-1" of the stub engine.
func twoNodes(t testing.TB, e *stubEngine, logger *zap.Logger) (a, b *testNode) {
	a = newTestNode(t, testSecret, "node-a", "127.0.0.2", logger)
	b = newTestNode(t, testSecret, "node-b", "127.0.0.3", logger)
	b.add(&fleet.Replica{ID: "org/chat-1", BaseURL: e.srv.URL + "/v1",
		Header: http.Header{"Authorization": {"Bearer sk-provider"}}})
	// Runs before the nodes stop, so they need not wait for idle
	// connections to go.
	t.Cleanup(func() { a.transport.CloseIdleConnections(); b.transport.CloseIdleConnections() })
	return a, b
}

func post(t testing.TB, ctx context.Context, rt http.RoundTripper, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// wait fails the test when ch gives nothing in a long while: a guard
// against hanging, not a timing assertion.
func wait(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
	}
}

func TestPeerCADeterministic(t *testing.T) {
	ca1, _, err := peerCA(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	ca2, _, err := peerCA(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ca1.Raw, ca2.Raw) {
		t.Error("the same secret gave two different CA certificates")
	}
	other, _, err := peerCA(testSecret + "!")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(ca1.Raw, other.Raw) {
		t.Error("two secrets gave the same CA certificate")
	}
	if _, _, err := newPeerTLS("short", "node-a", "127.0.0.2"); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("got %v, want an error about the secret's length", err)
	}
}

func TestPeerStreams(t *testing.T) {
	e := newStubEngine(t, nil)
	a, b := twoNodes(t, e, zaptest.NewLogger(t))
	resp := post(t, context.Background(), a.transport, b.url("org/chat-1", "/chat/completions"), `{"stream":true}`)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Proto != "HTTP/1.1" {
		t.Fatalf("got %s %s, want 200 over HTTP/1.1", resp.Proto, resp.Status)
	}
	if got := resp.Header.Get("Content-Type"); got != "text/event-stream" {
		t.Errorf("got Content-Type %q, want text/event-stream", got)
	}
	if got := <-e.auth; got != "Bearer sk-provider" {
		t.Errorf("engine got Authorization %q, want the replica's header", got)
	}
	br := bufio.NewReader(resp.Body)
	for i := 1; i <= 3; i++ {
		// Chunk i+1 is not released before chunk i has arrived.
		e.chunks <- struct{}{}
		want := fmt.Sprintf("data: chunk %d\n", i)
		if line, err := br.ReadString('\n'); line != want {
			t.Fatalf("got %q (%v), want %q", line, err, want)
		}
		if line, _ := br.ReadString('\n'); line != "\n" {
			t.Fatalf("got %q, want the event's blank line", line)
		}
	}
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "data: [DONE]\n\n" {
		t.Errorf("got %q (%v), want the [DONE] event", rest, err)
	}
	wait(t, b.released, "release")
	if got := b.releases.Load(); got != 1 {
		t.Errorf("released %d times, want 1", got)
	}
	if a.clientTLS.NextProtos != nil {
		t.Errorf("the peer transport changed the TLS config it was given: NextProtos %v", a.clientTLS.NextProtos)
	}
}

func TestPeerAnswerIntact(t *testing.T) {
	answer := bytes.Repeat([]byte(`{"choices":[{"message":{"content":"0123456789abcdef"}}]}`), 4096)
	e := newStubEngine(t, answer)
	a, b := twoNodes(t, e, zaptest.NewLogger(t))
	resp := post(t, context.Background(), a.transport, b.url("org/chat-1", "/chat/completions"), `{}`)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, answer) {
		t.Errorf("got %s with %d bytes, want 200 with the engine's %d bytes", resp.Status, len(got), len(answer))
	}
	if resp.Header.Get("X-Engine") != "stub" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("got headers %v, want the engine's", resp.Header)
	}
	if got := <-e.auth; got != "Bearer sk-provider" {
		t.Errorf("engine got Authorization %q, want the replica's header", got)
	}
	wait(t, b.released, "release")
}

func TestPeerClientLeavesMidStream(t *testing.T) {
	e := newStubEngine(t, nil)
	a, b := twoNodes(t, e, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	resp := post(t, ctx, a.transport, b.url("org/chat-1", "/chat/completions"), `{"stream":true}`)
	defer resp.Body.Close()
	e.chunks <- struct{}{}
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); line != "data: chunk 1\n" {
		t.Fatalf("got %q (%v), want chunk 1", line, err)
	}
	cancel()
	wait(t, e.canceled, "cancellation reaching the engine")
	wait(t, b.released, "release")
	// A second release would come from the same handler returning,
	// which it has once Destruct returns.
	a.transport.CloseIdleConnections()
	_ = b.peer.Destruct()
	if got := b.releases.Load(); got != 1 {
		t.Errorf("released %d times, want 1", got)
	}
}

func TestPeerErrors(t *testing.T) {
	e := newStubEngine(t, nil)
	a, b := twoNodes(t, e, zaptest.NewLogger(t))
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + dead.Addr().String() + "/v1"
	dead.Close()
	b.add(&fleet.Replica{ID: "dead-1", BaseURL: deadURL})
	b.add(&fleet.Replica{ID: "remote-1", BaseURL: a.url("x", ""), Transport: b.transport})
	gone := func(id string) string {
		return "replica " + id + " is not on node node-b: it stopped or moved; the request can be retried on another replica"
	}
	tests := []struct {
		name, id string
		status   int
		code     string
		message  string
	}{
		{"unknown replica", "chat-9", http.StatusServiceUnavailable, "replica_gone", gone("chat-9")},
		{"replica on a third node", "remote-1", http.StatusServiceUnavailable, "replica_gone", gone("remote-1")},
		{"engine unreachable", "dead-1", http.StatusBadGateway, "replica_unreachable", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, context.Background(), a.transport, b.url(tt.id, "/chat/completions"), `{}`)
			defer resp.Body.Close()
			var body struct {
				Error struct{ Message, Type, Code string } `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status || body.Error.Code != tt.code || body.Error.Type != "server_error" {
				t.Errorf("got %d %+v, want %d with code %s", resp.StatusCode, body.Error, tt.status, tt.code)
			}
			if tt.message != "" && body.Error.Message != tt.message {
				t.Errorf("got message %q, want %q", body.Error.Message, tt.message)
			}
		})
	}
	if got := b.releases.Load(); got != 2 {
		t.Errorf("released %d times, want 2 (the remote and the dead replica)", got)
	}
}

func TestPeerHealth(t *testing.T) {
	e := newStubEngine(t, nil)
	a, b := twoNodes(t, e, zaptest.NewLogger(t))
	req, _ := http.NewRequest(http.MethodGet, "https://"+b.peer.Addr().String()+"/health", nil)
	resp, err := a.transport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(got) != "ok" {
		t.Errorf("got %s %q, want 200 ok", resp.Status, got)
	}
}

func TestPeerRefusesStrangers(t *testing.T) {
	e := newStubEngine(t, nil)
	_, b := twoNodes(t, e, zaptest.NewLogger(t))
	_, otherClient, err := newPeerTLS(strings.Repeat("x", 40), "node-x", "127.0.0.4")
	if err != nil {
		t.Fatal(err)
	}
	_, goodClient, err := newPeerTLS(testSecret, "node-c", "127.0.0.4")
	if err != nil {
		t.Fatal(err)
	}
	// Trusts the cluster CA, so only the server can refuse: with a
	// certificate from another secret, and with none.
	foreignCert := goodClient.Clone()
	foreignCert.Certificates = otherClient.Certificates
	noCert := goodClient.Clone()
	noCert.Certificates = nil
	tests := []struct {
		name string
		conf *tls.Config
	}{
		{"other secret", otherClient},
		{"certificate from another secret", foreignCert},
		{"no client certificate", noCert},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newPeerTransport(tt.conf, zap.NewNop())
			defer tr.CloseIdleConnections()
			req, _ := http.NewRequest(http.MethodGet, "https://"+b.peer.Addr().String()+"/health", nil)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("got %s, want a failed handshake", resp.Status)
			}
		})
	}
	t.Run("good certificate", func(t *testing.T) {
		tr := newPeerTransport(goodClient, zap.NewNop())
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest(http.MethodGet, "https://"+b.peer.Addr().String()+"/health", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	})
}

// BenchmarkPeerHop compares a non-streamed request straight to an engine
// server ("direct") with the same request through the peer hop ("hop":
// mutual TLS, HTTP/1.1, the peer's proxy), through the hop over HTTP/2
// ("hop-h2", as nodes of an earlier version send it), and through a plain
// cleartext httputil.ReverseProxy ("plain-proxy", the cost of any proxy
// hop). Allocations count every end: client, proxy and engine, all in
// this process.
func BenchmarkPeerHop(b *testing.B) {
	e := newStubEngine(b, []byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hello there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`))
	e.auth = make(chan string) // unread: the stub skips it
	a, bn := twoNodes(b, e, zap.NewNop())
	body := `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`
	direct := &http.Transport{MaxIdleConnsPerHost: 64}
	b.Cleanup(direct.CloseIdleConnections)
	once := func(rt http.RoundTripper, url string) error {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("got %s", resp.Status)
		}
		return err
	}
	h2 := h2PeerTransport(a.clientTLS)
	b.Cleanup(h2.CloseIdleConnections)
	plain := &httptest.Server{
		Listener: must(net.Listen("tcp", "127.0.0.3:0")),
		Config: &http.Server{Handler: &httputil.ReverseProxy{
			Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(must(url.Parse(e.srv.URL))) },
			FlushInterval: -1,
			Transport:     &http.Transport{MaxIdleConnsPerHost: 64},
		}},
	}
	plain.Start()
	b.Cleanup(plain.Close)
	hop := bn.url("org/chat-1", "/chat/completions")
	for _, m := range []struct {
		name string
		rt   http.RoundTripper
		url  string
	}{
		{"direct", direct, e.srv.URL + "/v1/chat/completions"},
		{"hop", a.transport, hop},
		{"hop-h2", h2, hop},
		{"plain-proxy", direct, plain.URL + "/v1/chat/completions"},
	} {
		b.Run(m.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := once(m.rt, m.url); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(m.name+"-32conc", func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(16) // 32 goroutines on 2 cores
			var failed atomic.Value
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := once(m.rt, m.url); err != nil {
						failed.Store(err)
					}
				}
			})
			if err, _ := failed.Load().(error); err != nil {
				b.Fatal(err)
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A reload that keeps the cluster settings keeps the peer server: the new
// config's lookup answers, and the server stops with the last holder.
func TestPeerPoolKeepsServer(t *testing.T) {
	server, client, err := newPeerTLS(testSecret, "node-p", "127.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	key := peerKey("127.0.0.2:0", testSecret, "node-p", "127.0.0.2") + ":" + t.Name()
	if strings.Contains(key, testSecret) {
		t.Fatalf("pool key %q holds the secret", key)
	}
	load := func(lookup peerLookup) *peerServer {
		v, _, err := peers.LoadOrNew(key, func() (caddy.Destructor, error) {
			return startPeer("127.0.0.2:0", server, "node-p", lookup, zaptest.NewLogger(t))
		})
		if err != nil {
			t.Fatal(err)
		}
		p := v.(*peerServer)
		p.setLookup(lookup)
		return p
	}
	e := newStubEngine(t, []byte(`{"ok":true}`))
	gone := func(string) (*fleet.Replica, func(), bool) { return nil, nil, false }
	here := func(id string) (*fleet.Replica, func(), bool) {
		return &fleet.Replica{ID: id, BaseURL: e.srv.URL + "/v1"}, func() {}, true
	}
	first := load(gone)
	second := load(here) // the reload
	if first != second {
		t.Fatal("a reload with the same settings started a second peer server")
	}
	tr := newPeerTransport(client, zap.NewNop())
	defer tr.CloseIdleConnections()
	_, _ = peers.Delete(key) // the old config goes
	status := func() (int, error) {
		resp, err := tr.RoundTrip(must(http.NewRequest(http.MethodPost, peerURL(first.Addr().String(), "chat-1")+"/chat/completions", strings.NewReader(`{}`))))
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := status(); code != http.StatusOK {
		t.Fatalf("after the old config left: got %d (%v), want 200 from the new config's replica", code, err)
	}
	tr.CloseIdleConnections()
	_, _ = peers.Delete(key)
	if code, err := status(); err == nil {
		t.Fatalf("after the last config left: got %d, want no server", code)
	}
}

// The supervisor's probe reaches a replica on another node through its
// Transport; without it the peer endpoint is out of reach.
func TestPeerProbe(t *testing.T) {
	e := newStubEngine(t, nil)
	a, b := twoNodes(t, e, zaptest.NewLogger(t))
	f := fleet.New(&catalog.Model{Name: "org/chat", Engine: "openai"}, nil, zap.NewNop(), fleet.Options{})
	defer f.Destruct()
	remote := &fleet.Replica{ID: "org/chat-1", BaseURL: b.url("org/chat-1", ""), Transport: a.transport}
	if !f.Reachable(remote) {
		t.Error("a replica on another node is unreachable through its transport")
	}
	if got := <-e.auth; got != "Bearer sk-provider" {
		t.Errorf("engine got Authorization %q, want the replica's header from its node", got)
	}
	remote.Transport = nil
	if f.Reachable(remote) {
		t.Error("the peer endpoint answered a probe without the cluster's certificate")
	}
}

// Many streams at once through the hop, over the peer transport and over
// HTTP/2 as earlier versions send them, each end with [DONE], and each
// releases its replica once.
func TestPeerManyStreams(t *testing.T) {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := range 20 {
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"token %d\"}}]}\n\n", i)
			_ = rc.Flush()
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(engine.Close)
	a, b := twoNodes(t, &stubEngine{srv: engine}, zaptest.NewLogger(t))
	b.add(&fleet.Replica{ID: "org/chat-1", BaseURL: engine.URL + "/v1"})
	h2 := h2PeerTransport(a.clientTLS)
	t.Cleanup(h2.CloseIdleConnections)
	for _, tt := range []struct {
		name  string
		rt    http.RoundTripper
		proto string
	}{
		{"peer transport", a.transport, "HTTP/1.1"},
		{"http2", h2, "HTTP/2.0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const workers, each = 64, 30
			released := b.releases.Load()
			var failed atomic.Int64
			var first atomic.Value
			var wg sync.WaitGroup
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range each {
						req := must(http.NewRequest(http.MethodPost, b.url("org/chat-1", "/chat/completions"), strings.NewReader(`{"stream":true}`)))
						if err := streamToDone(tt.rt, req, tt.proto); err != nil {
							failed.Add(1)
							first.CompareAndSwap(nil, err.Error())
						}
					}
				}()
			}
			wg.Wait()
			if n := failed.Load(); n > 0 {
				t.Fatalf("%d of %d streams failed, first: %v", n, workers*each, first.Load())
			}
			if got := b.releases.Load() - released; got != workers*each {
				t.Errorf("released %d times, want %d", got, workers*each)
			}
		})
	}
}

// An engine that dies in the middle of a stream breaks the stream on the
// sending node too: it must not end there as if it were whole.
func TestPeerEngineBreaksOff(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream %t", stream), func(t *testing.T) {
			engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if stream {
					w.Header().Set("Content-Type", "text/event-stream")
				} else {
					w.Header().Set("Content-Length", "1000")
				}
				_, _ = io.WriteString(w, "data: chunk 1\n\n")
				_ = http.NewResponseController(w).Flush()
				panic(http.ErrAbortHandler) // the engine process dies
			}))
			t.Cleanup(engine.Close)
			engine.Config.ErrorLog = log.New(io.Discard, "", 0)
			a, b := twoNodes(t, &stubEngine{srv: engine}, zaptest.NewLogger(t))
			b.add(&fleet.Replica{ID: "org/chat-1", BaseURL: engine.URL + "/v1"})
			req := must(http.NewRequest(http.MethodPost, b.url("org/chat-1", "/chat/completions"), strings.NewReader(`{"stream":true}`)))
			// A whole answer is sent once whole: its break may come before
			// the status.
			if resp, err := a.transport.RoundTrip(req); err == nil {
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil {
					t.Errorf("got %s %q and a clean end, want the answer broken", resp.Status, got)
				}
			}
			wait(t, b.released, "release")
			a.transport.CloseIdleConnections()
			_ = b.peer.Destruct()
			if got := b.releases.Load(); got != 1 {
				t.Errorf("released %d times, want 1", got)
			}
		})
	}
}

// streamToDone sends req and reads its stream to the end: an error
// unless it is a 200 whose last event is [DONE].
func streamToDone(rt http.RoundTripper, req *http.Request, proto string) error {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.Proto != proto {
		return fmt.Errorf("got %s, want %s", resp.Proto, proto)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("reading the stream after %d bytes: %w", len(body), err)
	}
	if resp.StatusCode != http.StatusOK || !bytes.HasSuffix(body, []byte("data: [DONE]\n\n")) {
		return fmt.Errorf("got %s ending %q, want 200 ending with [DONE]", resp.Status, body[max(0, len(body)-80):])
	}
	return nil
}

// h2PeerTransport is the peer transport of earlier versions, which spoke
// HTTP/2 to other nodes.
func h2PeerTransport(client *tls.Config) *http.Transport {
	return &http.Transport{
		TLSClientConfig:     client.Clone(),
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 256,
		DisableCompression:  true,
	}
}

// The hop is full duplex: an engine may start its answer before it has
// read all of the request, and the rest of the request still reaches it
// while the answer streams back.
func TestPeerFullDuplex(t *testing.T) {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.EnableFullDuplex()
		br := bufio.NewReader(r.Body)
		first, _ := br.ReadString('\n')
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: got %s\n", first)
		_ = rc.Flush()
		rest, _ := io.ReadAll(br)
		fmt.Fprintf(w, "data: got %s\n\ndata: [DONE]\n\n", rest)
	}))
	t.Cleanup(engine.Close)
	a, b := twoNodes(t, &stubEngine{srv: engine}, zaptest.NewLogger(t))
	b.add(&fleet.Replica{ID: "org/chat-1", BaseURL: engine.URL + "/v1"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	defer pw.Close()
	req := must(http.NewRequestWithContext(ctx, http.MethodPost, b.url("org/chat-1", "/chat/completions"), pr))
	go func() { _, _ = io.WriteString(pw, "part 1\n") }()
	resp, err := a.transport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); line != "data: got part 1\n" {
		t.Fatalf("got %q (%v), want the answer to the first part", line, err)
	}
	go func() { _, _ = io.WriteString(pw, "part 2"); _ = pw.Close() }()
	rest, err := io.ReadAll(br)
	if want := "\ndata: got part 2\n\ndata: [DONE]\n\n"; err != nil || string(rest) != want {
		t.Errorf("got %q (%v), want %q", rest, err, want)
	}
}

// TestPeerHandshakeFailuresWarn checks that a node with another secret
// is logged at warn on both ends, saying the secrets may differ (it was
// at debug only, so a misconfigured node failed silently).
func TestPeerHandshakeFailuresWarn(t *testing.T) {
	serverCore, serverLogs := observer.New(zapcore.WarnLevel)
	b := newTestNode(t, testSecret, "node-b", "127.0.0.3", zap.New(serverCore))
	_, otherClient, err := newPeerTLS(strings.Repeat("x", 40), "node-x", "127.0.0.4")
	if err != nil {
		t.Fatal(err)
	}
	clientCore, clientLogs := observer.New(zapcore.WarnLevel)
	tr := newPeerTransport(otherClient, zap.New(clientCore))
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, "https://"+b.peer.Addr().String()+"/health", nil)
	if resp, err := tr.RoundTrip(req); err == nil {
		resp.Body.Close()
		t.Fatalf("got %s, want a failed handshake", resp.Status)
	}
	if n := clientLogs.FilterMessageSnippet("cluster secret may differ").Len(); n != 1 {
		t.Errorf("the sending node logged %d warnings about the handshake, want 1: %v", n, clientLogs.All())
	}
	deadline := time.Now().Add(5 * time.Second)
	for serverLogs.FilterMessageSnippet("cluster secret may differ").Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if serverLogs.FilterMessageSnippet("cluster secret may differ").Len() == 0 {
		t.Errorf("the receiving node logged no warning about the handshake: %v", serverLogs.All())
	}
}
