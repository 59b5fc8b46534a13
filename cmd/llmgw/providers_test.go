package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// standinProvider is an httptest server standing in for an outside
// OpenAI-compatible provider (no paid provider is called): it answers
// chat completions after a delay the test sets (cut short when the
// gateway stops waiting), or 429 with a Retry-After while the test says
// so, and can be stopped and started again on the same address.
type standinProvider struct {
	name     string
	addr     string
	delay    atomic.Int64 // nanos before the answer's headers
	limited  atomic.Int64 // while > 0: 429 with Retry-After of this many seconds
	requests atomic.Int64 // chat completions answered 200
	received atomic.Int64 // chat completions asked, whatever the answer
	// reqLimit, while > 0, is the requests it says it allows (in
	// x-ratelimit-* headers), of which used are spent; the limit resets
	// in 2s, it says, but only the test resets it.
	reqLimit, used atomic.Int64
	refused        atomic.Int64 // chat completions answered 429
	failing        atomic.Int64 // while > 0: chat completions answered with this status
	mu             sync.Mutex
	keys           map[string]int
	srv            *httptest.Server
}

func newStandinProvider(t *testing.T, name string) *standinProvider {
	t.Helper()
	p := &standinProvider{name: name, keys: map[string]int{}}
	p.start(t)
	t.Cleanup(func() { p.stop() })
	return p
}

func (p *standinProvider) url() string { return "http://" + p.addr + "/v1" }

// start serves on p's address (a new one the first time).
func (p *standinProvider) start(t *testing.T) {
	t.Helper()
	addr := cmp.Or(p.addr, "127.0.0.1:0")
	var ln net.Listener
	var err error
	for range 50 { // the old listener's port may take a moment to free
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	p.srv.Listener = ln
	p.srv.Start()
}

func (p *standinProvider) stop() {
	if p.srv != nil {
		p.srv.CloseClientConnections()
		p.srv.Close()
		p.srv = nil
	}
}

func (p *standinProvider) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models") {
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"`+p.name+`-model","object":"model"}]}`)
		return
	}
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	p.received.Add(1)
	p.mu.Lock()
	p.keys[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]++
	p.mu.Unlock()
	if s := p.limited.Load(); s > 0 {
		p.refused.Add(1)
		w.Header().Set("Retry-After", fmt.Sprint(s))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
		return
	}
	if st := p.failing.Load(); st > 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(st))
		_, _ = io.WriteString(w, `{"error":{"message":"the server had an error","type":"server_error"}}`)
		return
	}
	select {
	case <-time.After(time.Duration(p.delay.Load())):
	case <-r.Context().Done():
		return // the gateway stopped waiting
	}
	p.requests.Add(1)
	if lim := p.reqLimit.Load(); lim > 0 {
		w.Header().Set("X-Ratelimit-Limit-Requests", fmt.Sprint(lim))
		w.Header().Set("X-Ratelimit-Remaining-Requests", fmt.Sprint(max(0, lim-p.used.Add(1))))
		w.Header().Set("X-Ratelimit-Reset-Requests", "2s")
	}
	text := "answer from " + p.name
	if req.Stream {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", req.Model, text)
		_, _ = fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3,\"total_tokens\":8}}\n\ndata: [DONE]\n\n", req.Model)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, `{"id":"c","object":"chat.completion","model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8,"prompt_tokens_details":{"cached_tokens":2}}}`, req.Model, text)
}

func (p *standinProvider) keysSeen() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range p.keys {
		out[k] = v
	}
	return out
}

// providersConfig is two models with providers: chat, served by its own
// sim replica (one, with room for two requests at once, priced by the
// GPU-hour) and the two stand-ins; ext, served by the two stand-ins only.
// Both use the cost policy.
func providersConfig(cheap, dear *standinProvider) string {
	outside := func(name, model string, p *standinProvider, price string, keys ...string) string {
		s := "\t\t\tprovider " + name + " {\n\t\t\t\tengine openai\n\t\t\t\toption base_url " + p.url() +
			"\n\t\t\t\toption probe_interval 1s\n\t\t\t\tmodel " + model + "\n\t\t\t\tprice " + price + "\n"
		for _, k := range keys {
			s += "\t\t\t\tkey " + k + "\n"
		}
		return s + "\t\t\t}\n"
	}
	return `
		model chat {
			engine sim
			option tokens_per_second 50
			min 1
			max 1
			target_concurrency 2
			policy cost
			latency_objective 400ms
			explore 0
			provider local {
				model local
				price gpu_hour 2.50
			}
` + outside("cheap", "cheap-model", cheap, "input 0.15 output 0.60 cached 0.075") +
		outside("dear", "dear-model", dear, "input 2.50 output 10") + `
		}
		model ext {
			policy cost
			latency_objective 400ms
			explore 0
` + outside("cheap", "cheap-model", cheap, "input 0.15 output 0.60", "ka1 3", "ka2") +
		outside("dear", "dear-model", dear, "input 2.50 output 10") + `
		}
		model spread {
			policy usage
` + outside("small", "cheap-model", cheap, "input 0.15 output 0.60") +
		outside("large", "dear-model", dear, "input 2.50 output 10") + `
		}`
}

// askProvider sends one short chat completion and returns the status and the
// llmgw-provider header.
func askProvider(t *testing.T, g *gateway, model string) (int, string) {
	t.Helper()
	resp, body := post(t, g.base+"/v1/chat/completions", `{"model":"`+model+`","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 {
		t.Logf("%s: %d %s", model, resp.StatusCode, body)
	}
	return resp.StatusCode, resp.Header.Get("Llmgw-Provider")
}

// TestModelProviders: one model served by several providers under the
// cost policy, with the real binary, a sim replica and two stand-in
// outside providers. The model's own replica serves while it has room and
// the rest spills to the cheapest outside provider; among outside
// providers the cheapest serves until it breaks the latency objective; a
// provider answering 429 rests for its Retry-After, the request going on
// to the next without the client seeing it; the choice is in the
// llmgw-provider header, the access log and the metrics.
func TestModelProviders(t *testing.T) {
	cheap, dear := newStandinProvider(t, "cheap"), newStandinProvider(t, "dear")
	g := startGateway(t, providersConfig(cheap, dear), "")
	g.readyReplicas("chat", 1)

	t.Run("own replicas first while they have room", func(t *testing.T) {
		for range 3 {
			if code, prov := askProvider(t, g, "chat"); code != 200 || prov != "local; reason=cheapest" {
				t.Errorf("got %d %q, want 200 from local; reason=cheapest", code, prov)
			}
		}
	})

	t.Run("spills to the cheapest outside provider when the replicas are full", func(t *testing.T) {
		const n = 8 // the replica takes 2 at once; each holds it for about 0.3s
		before := cheap.requests.Load()
		var wg sync.WaitGroup
		got := make([]string, n)
		for i := range n {
			wg.Add(1)
			time.Sleep(20 * time.Millisecond) // so that the replica's room is counted between them
			go func() {
				defer wg.Done()
				resp, body := post(t, g.base+"/v1/chat/completions", `{"model":"chat","stream":true,"max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`)
				got[i] = fmt.Sprint(resp.StatusCode, " ", resp.Header.Get("Llmgw-Provider"))
				if resp.StatusCode != 200 {
					t.Errorf("request %d: %d %s", i, resp.StatusCode, body)
				}
			}()
		}
		wg.Wait()
		joined := strings.Join(got, "\n")
		if !strings.Contains(joined, "200 local; reason=cheapest") || !strings.Contains(joined, "200 cheap; reason=spill_full") {
			t.Errorf("want some answers from local and some spilled to cheap; got\n%s", joined)
		}
		if strings.Contains(joined, "dear") || cheap.requests.Load() == before {
			t.Errorf("the dear provider served, or the cheap one did not; got\n%s", joined)
		}
	})

	t.Run("the cheapest until it breaks its latency objective", func(t *testing.T) {
		for range 3 {
			if code, prov := askProvider(t, g, "ext"); code != 200 || prov != "cheap; reason=cheapest" {
				t.Fatalf("got %d %q, want cheap; reason=cheapest", code, prov)
			}
		}
		cheap.delay.Store(int64(1500 * time.Millisecond))
		defer cheap.delay.Store(0)
		// The slow answers bring its recent time to first byte over
		// 400ms within a few requests (a moving average).
		var prov string
		for i := 0; i < 5 && !strings.HasPrefix(prov, "dear"); i++ {
			_, prov = askProvider(t, g, "ext")
		}
		if prov != "dear; reason=spill_slow" {
			t.Fatalf("after slow answers got %q, want dear; reason=spill_slow", prov)
		}
		slow := cheap.requests.Load()
		for range 3 {
			if code, prov := askProvider(t, g, "ext"); code != 200 || prov != "dear; reason=spill_slow" {
				t.Errorf("got %d %q, want dear; reason=spill_slow", code, prov)
			}
		}
		if cheap.requests.Load() != slow {
			t.Error("the slow provider was still sent requests")
		}
	})

	t.Run("a 429 rests the provider for its Retry-After", func(t *testing.T) {
		// Both models share the stand-ins: ext's cheap provider is slow
		// from the previous case; chat's is not. Fill chat's replica
		// with a long request so that chat spills to cheap.
		cheap.limited.Store(5)
		refused := cheap.refused.Load()
		limitedAt := time.Now()
		code, prov := askSpilled(t, g)
		if code != 200 || prov != "dear; reason=failover" {
			t.Fatalf("the request the cheap provider refused: got %d %q, want 200 from dear; reason=failover", code, prov)
		}
		if cheap.refused.Load() != refused+1 {
			t.Fatalf("the cheap provider refused %d requests, want 1", cheap.refused.Load()-refused)
		}
		for range 2 { // each about 1s, within the 5s it rests
			if code, prov := askSpilled(t, g); code != 200 || prov != "dear; reason=spill_full" {
				t.Errorf("while cheap rests: got %d %q, want 200 from dear; reason=spill_full (local is full, cheap rests)", code, prov)
			}
		}
		if cheap.refused.Load() != refused+1 {
			t.Errorf("the resting provider was asked again: %d refusals", cheap.refused.Load()-refused)
		}
		cheap.limited.Store(0)
		time.Sleep(time.Until(limitedAt.Add(5100 * time.Millisecond)))
		if code, prov := askSpilled(t, g); code != 200 || prov != "cheap; reason=spill_full" {
			t.Errorf("after its Retry-After: got %d %q, want cheap again", code, prov)
		}
	})

	t.Run("a 5xx goes on to the next provider", func(t *testing.T) {
		cheap.failing.Store(http.StatusBadGateway)
		code, prov := askSpilled(t, g)
		cheap.failing.Store(0)
		if code != 200 || prov != "dear; reason=failover" {
			t.Errorf("got %d %q, want 200 from dear; reason=failover", code, prov)
		}
	})

	t.Run("usage spreads by the rate limits providers report", func(t *testing.T) {
		cheap.reqLimit.Store(10) // small
		dear.reqLimit.Store(100) // large
		defer cheap.reqLimit.Store(0)
		defer dear.reqLimit.Store(0)
		got := map[string]int{}
		for range 22 {
			code, prov := askProvider(t, g, "spread")
			if code != 200 || !strings.HasSuffix(prov, "; reason=most_headroom") {
				t.Fatalf("got %d %q, want 200 with reason=most_headroom", code, prov)
			}
			got[strings.Split(prov, ";")[0]]++
		}
		// Each goes while it has the larger share left: about one
		// request to small for each 10 to large.
		if got["small"] < 1 || got["small"] > 4 || got["large"] < 18 {
			t.Errorf("requests by provider: got %v, want small 1 to 4 and large the rest", got)
		}
		// small spends its limit: it says 0 remaining, and rests until
		// the reset it names (2s) while large serves.
		cheap.used.Store(9)
		dear.used.Store(95) // large has less left than small (1 of 10)
		var prov string
		for i := 0; i < 2 && !strings.HasPrefix(prov, "small"); i++ {
			_, prov = askProvider(t, g, "spread") // large first when it said it had more left
		}
		if !strings.HasPrefix(prov, "small") {
			t.Fatalf("got %q, want small once large said it had 5 of 100 left", prov)
		}
		before := cheap.requests.Load()
		for range 3 {
			if _, prov := askProvider(t, g, "spread"); !strings.HasPrefix(prov, "large") {
				t.Errorf("while small's limit is spent: got %q, want large", prov)
			}
		}
		if cheap.requests.Load() != before {
			t.Error("small was sent requests after saying its limit was spent")
		}
	})

	t.Run("decisions in the access log and the metrics", func(t *testing.T) {
		logs := g.logs.String()
		for _, want := range []string{`"llm_provider":"local","llm_provider_reason":"cheapest"`, `"llm_provider":"dear","llm_provider_reason":"failover"`} {
			if !strings.Contains(logs, want) {
				t.Errorf("the access log has no %s", want)
			}
		}
		st := g.models()["chat"]
		if len(st.Providers) != 3 || st.Providers[1].Model != "chat/cheap" || st.Routing.PolicyName() != "cost" {
			t.Errorf("GET /llm/models shows chat's providers %+v and routing %+v; want local, cheap (chat/cheap), dear under cost", st.Providers, st.Routing)
		}
		_, metrics := adminDo(t, g, "GET", "/metrics", "")
		for _, want := range []string{`llmgw_provider_requests_total{model="chat",outcome="429",provider="cheap"} 1`,
			`llmgw_provider_time_to_first_byte_seconds_count{model="ext",provider="dear"}`} {
			if !strings.Contains(string(metrics), want) {
				t.Errorf("the metrics have no %s", want)
			}
		}
	})

	t.Run("keys spread by weight", func(t *testing.T) {
		k := cheap.keysSeen()
		if k["ka1"] == 0 || k["ka2"] == 0 || k["ka1"] < 2*k["ka2"] {
			t.Errorf("keys the cheap provider saw for ext (weights 3 and 1): %v", k)
		}
	})
}

// askSpilled asks chat while its replica is full, so that it spills to
// the outside providers.
func askSpilled(t *testing.T, g *gateway) (int, string) {
	t.Helper()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { // the replica's two slots, for about 1s
			defer wg.Done()
			// Streamed: its time to first token is short, however long
			// the answer.
			post(t, g.base+"/v1/chat/completions", `{"model":"chat","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`)
		}()
	}
	defer wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if g.models()["chat"].Replicas[0].Inflight >= 2 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return askProvider(t, g, "chat")
}

// TestModelProvidersOutage: 64 clients ask a model served by two
// stand-in providers while the cheaper one is stopped and started again:
// no client sees a failure, and the cheaper one serves again once back.
func TestModelProvidersOutage(t *testing.T) {
	cheap, dear := newStandinProvider(t, "cheap"), newStandinProvider(t, "dear")
	g := startGateway(t, providersConfig(cheap, dear), "")
	g.readyReplicas("ext", 1)
	g.readyReplicas("ext/dear", 1)
	const clients = 64
	var failed, served atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				resp, err := client.Post(g.base+"/v1/chat/completions", "application/json",
					strings.NewReader(`{"model":"ext","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`))
				if err != nil {
					failed.Add(1)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					if failed.Add(1) < 5 {
						t.Errorf("a client got %d %s", resp.StatusCode, b)
					}
					continue
				}
				served.Add(1)
			}
		}()
	}
	time.Sleep(time.Second)
	if c, d := cheap.requests.Load(), dear.requests.Load(); c < 10*d {
		t.Errorf("before the outage the cheap provider served %d and the dear one %d; want nearly all to the cheap one", c, d)
	}
	cheap.stop()
	time.Sleep(2 * time.Second)
	during := dear.requests.Load()
	cheap.start(t)
	back := cheap.requests.Load()
	waitFor(t, 30*time.Second, "the cheap provider to serve again", func() bool { return cheap.requests.Load() > back+10 })
	stop.Store(true)
	wg.Wait()
	if failed.Load() != 0 {
		t.Errorf("%d of %d requests failed", failed.Load(), failed.Load()+served.Load())
	}
	if during == 0 {
		t.Error("the dear provider served nothing while the cheap one was down")
	}
	t.Logf("%d requests served; the dear provider served %d", served.Load(), dear.requests.Load())
}

// TestModelProvidersChargeTheServingProvider: with llm_quota in front,
// a request to a model with providers costs what the provider that
// served it charges.
func TestModelProvidersChargeTheServingProvider(t *testing.T) {
	first, second := newStandinProvider(t, "first"), newStandinProvider(t, "second")
	first.limited.Store(30) // every request to it is refused: the second serves
	g := startQuotaGateway(t, `
		model priced {
			policy first
			provider first {
				engine openai
				option base_url `+first.url()+`
				price input 0 output 1000000
			}
			provider second {
				engine openai
				option base_url `+second.url()+`
				price input 1000000 output 10000000 cached 500000
			}
		}`+tenancyBlock("", "", "", ""), "")
	_, e := chatErr(keyClient(g, "secret-1"), "priced")
	if e != nil {
		t.Fatal(e)
	}
	var u struct {
		Total llmapi.Usage `json:"total"`
	}
	g.adminGet("/llm/usage?org=acme", &u)
	// The stand-in answers 5 prompt tokens (2 of them cached) and 3
	// completion tokens: 3×1 + 2×0.5 + 3×10.
	if u.Total.Requests != 1 || u.Total.CostMicros != 34_000_000 {
		t.Errorf("usage: got %+v, want 1 request costing 34 (the second provider's prices)", u.Total)
	}
}
