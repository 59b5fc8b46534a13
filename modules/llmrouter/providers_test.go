package llmrouter

import (
	"net/http"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// threeProviders is a model served by its own replicas (priced by the
// GPU-hour) and two outside providers, a cheap one and a dear one.
func threeProviders(policy string, slo time.Duration) *catalog.Model {
	return &catalog.Model{Name: "chat", Routing: &catalog.Routing{Policy: policy, LatencyObjective: caddy.Duration(slo), Explore: -1},
		Providers: []*catalog.Provider{
			{Name: "dear", Model: "chat/dear", Price: &catalog.ProviderPrice{InputPerMillion: 2.5, OutputPerMillion: 10}, Weight: 1},
			{Name: "local", Model: "chat", Price: &catalog.ProviderPrice{GPUHour: 2}, Weight: 1},
			{Name: "cheap", Model: "chat/cheap", Price: &catalog.ProviderPrice{InputPerMillion: 0.15, OutputPerMillion: 0.6}, Weight: 3},
		}}
}

func names(ps *providerSet, order []choice) []string {
	out := make([]string, len(order))
	for i, c := range order {
		out[i] = ps.model.Providers[c.idx].Name + ":" + reasonNames[c.reason]
	}
	return out[:1:1]
}

func TestCostPolicyOrder(t *testing.T) {
	selfHosted := func(name string) bool { return name == "chat" }
	now := time.Now().UnixNano()
	for _, tc := range []struct {
		name    string
		room    bool
		prepare func(ps *providerSet)
		want    string
		noReady bool // no provider has a ready replica
	}{
		{"own replicas with room first", true, nil, "local:cheapest", false},
		{"own replicas full: the cheapest outside one", false, nil, "cheap:spill_full", false},
		{"cheap one resting after a 429", false, func(ps *providerSet) {
			ps.provs[2].observe(now, http.StatusTooManyRequests, "30", 0)
		}, "dear:spill_full", false},
		{"cheap one slow", false, func(ps *providerSet) {
			ps.provs[2].observe(now, 200, "", 3*time.Second)
		}, "dear:spill_full", false},
		{"slow reading forgotten after staleAfter", false, func(ps *providerSet) {
			ps.provs[2].observe(now-int64(2*staleAfter), 200, "", 3*time.Second)
		}, "cheap:spill_full", false},
		{"no ready replica anywhere: the cheapest, as a last resort", false, nil, "local:last_resort", true},
		{"own replicas over their rpm", true, func(ps *providerSet) {
			ps.model.Providers[1].RPM = 1
			*ps = *newProviderSet(ps.model, selfHosted)
			ps.provs[1].took(now, 0)
		}, "cheap:spill_full", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := newProviderSet(threeProviders(catalog.PolicyCost, time.Second), selfHosted)
			if tc.prepare != nil {
				tc.prepare(ps)
			}
			var buf [catalog.MaxProviders]choice
			got := names(ps, ps.order(buf[:], now, 0.5, 0.5, func(string) (int, int) {
				switch {
				case tc.noReady:
					return 0, 0
				case tc.room:
					return 1, 2
				}
				return 0, 2
			}))
			if got[0] != tc.want {
				t.Errorf("got %v first, want %s", got, tc.want)
			}
		})
	}
}

func TestLatencyPolicyPrefersFastestAndExplores(t *testing.T) {
	now := time.Now().UnixNano()
	ps := newProviderSet(threeProviders(catalog.PolicyLatency, 0), func(string) bool { return false })
	ps.provs[0].observe(now, 200, "", 100*time.Millisecond)
	ps.provs[1].observe(now, 200, "", 300*time.Millisecond)
	ps.provs[2].observe(now, 200, "", 900*time.Millisecond)
	var buf [catalog.MaxProviders]choice
	if got := names(ps, ps.order(buf[:], now, 0.5, 0.5, nil)); got[0] != "dear:fastest" {
		t.Errorf("got %v, want dear:fastest", got)
	}
	ps.explore = 0.1
	got := names(ps, ps.order(buf[:], now, 0.05, 0.9, nil))
	if got[0] != "cheap:explore" {
		t.Errorf("with a draw under the explore share got %v, want cheap:explore", got)
	}
}

// TestLatencyPolicyFailedLast: a provider whose last try failed comes
// after the others once its rest is over, fastest as it was before.
func TestLatencyPolicyFailedLast(t *testing.T) {
	now := time.Now().UnixNano()
	ps := newProviderSet(threeProviders(catalog.PolicyLatency, 0), func(string) bool { return false })
	ps.provs[0].observe(now, 200, "", 100*time.Millisecond)
	ps.provs[1].observe(now, 200, "", 300*time.Millisecond)
	ps.provs[2].observe(now, 200, "", 900*time.Millisecond)
	ps.provs[0].observe(now, 502, "", 0)
	later := now + int64(time.Second) // its first rest is over
	var buf [catalog.MaxProviders]choice
	if got := names(ps, ps.order(buf[:], later, 0.5, 0.5, nil)); got[0] != "local:fastest" {
		t.Errorf("after dear failed: got %v, want local:fastest", got)
	}
	ps.provs[0].observe(later, 200, "", 100*time.Millisecond)
	if got := names(ps, ps.order(buf[:], later, 0.5, 0.5, nil)); got[0] != "dear:fastest" {
		t.Errorf("after dear answered again: got %v, want dear:fastest", got)
	}
}

func TestWeightedPolicyDrawsByWeight(t *testing.T) {
	ps := newProviderSet(threeProviders(catalog.PolicyWeighted, 0), func(string) bool { return false })
	counts := map[string]int{}
	var buf [catalog.MaxProviders]choice
	for i := range 500 {
		o := ps.order(buf[:], time.Now().UnixNano(), float64(i)/500, 0.5, nil)
		counts[ps.model.Providers[o[0].idx].Name]++
	}
	if counts["dear"] != 100 || counts["local"] != 100 || counts["cheap"] != 300 {
		t.Errorf("got %v, want dear 100, local 100, cheap 300 (weights 1, 1, 3)", counts)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"", time.Second}, {"7", 7 * time.Second}, {"0.5", 500 * time.Millisecond}, {"junk", time.Second},
		{"99999", 10 * time.Minute}, {now.Add(20 * time.Second).UTC().Format(http.TimeFormat), 20 * time.Second},
	} {
		got := parseRetryAfter(tc.in, now.UnixNano())
		if got < tc.want-time.Second || got > tc.want {
			t.Errorf("Retry-After %q: got %v, want %v", tc.in, got, tc.want)
		}
	}
}

// BenchmarkProviderOrder is a policy's choice among three providers for
// one request: what a model with providers adds to the router's work.
func BenchmarkProviderOrder(b *testing.B) {
	room := func(string) (int, int) { return 1, 2 }
	for _, policy := range []string{catalog.PolicyCost, catalog.PolicyLatency, catalog.PolicyWeighted, catalog.PolicyUsage, catalog.PolicyFirst} {
		b.Run(policy, func(b *testing.B) {
			ps := newProviderSet(threeProviders(policy, time.Second), func(name string) bool { return name == "chat" })
			now := time.Now().UnixNano()
			for i := range ps.provs {
				ps.provs[i].observe(now, 200, "", time.Duration(i+1)*100*time.Millisecond)
			}
			var buf [catalog.MaxProviders]choice
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				ps.order(buf[:], now, float64(i%100)/100, float64(i%7)/7, room)
			}
		})
	}
}

// TestUsagePolicyCountsOwnLimits: a provider that sends no rate-limit
// headers but has an rpm line counts what this minute leaves of it.
func TestUsagePolicyCountsOwnLimits(t *testing.T) {
	now := time.Now().UnixNano()
	m := threeProviders(catalog.PolicyUsage, 0)
	m.Providers[2].RPM = 10 // cheap
	ps := newProviderSet(m, func(string) bool { return false })
	h := http.Header{}
	h.Set("x-ratelimit-remaining-requests", "600")
	h.Set("x-ratelimit-limit-requests", "1000")
	ps.provs[0].learn(h, now) // dear: 60% left
	ps.provs[1].learn(h, now) // local: 60% left
	var buf [catalog.MaxProviders]choice
	if got := names(ps, ps.order(buf[:], now, 0.5, 0.5, nil)); got[0] != "cheap:most_headroom" {
		t.Errorf("cheap with its minute unused: got %v, want cheap:most_headroom", got)
	}
	for range 5 {
		ps.provs[2].took(now, 0)
	}
	if got := names(ps, ps.order(buf[:], now, 0.5, 0.5, nil)); got[0] == "cheap:most_headroom" {
		t.Errorf("cheap with half of its rpm used (50%% left against 60%%): got %v first", got)
	}
}

func TestUsagePolicyFollowsRateLimitHeaders(t *testing.T) {
	now := time.Now().UnixNano()
	ps := newProviderSet(threeProviders(catalog.PolicyUsage, 0), func(string) bool { return false })
	limits := func(remReq, limReq, remTok, limTok, reset string) http.Header {
		h := http.Header{}
		h.Set("x-ratelimit-remaining-requests", remReq)
		h.Set("x-ratelimit-limit-requests", limReq)
		h.Set("x-ratelimit-remaining-tokens", remTok)
		h.Set("x-ratelimit-limit-tokens", limTok)
		h.Set("x-ratelimit-reset-requests", reset)
		return h
	}
	ps.provs[0].learn(limits("100", "1000", "90000", "100000", "6s"), now) // dear: 10% of its requests left
	ps.provs[1].learn(limits("500", "1000", "20000", "100000", "6s"), now) // local: 20% of its tokens left
	var buf [catalog.MaxProviders]choice
	// cheap never said: it counts as having all its limits left.
	if got := names(ps, ps.order(buf[:], now, 0.5, 0.5, nil)); got[0] != "cheap:most_headroom" {
		t.Errorf("got %v, want cheap:most_headroom", got)
	}
	ps.provs[2].learn(limits("0", "1000", "50000", "100000", "6m0s"), now) // cheap: out of requests for 6 minutes
	if got := names(ps, ps.order(buf[:], now, 0.5, 0.5, nil)); got[0] != "local:most_headroom" {
		t.Errorf("with cheap spent: got %v, want local:most_headroom", got)
	}
	if got := ps.provs[2].state(now+int64(5*time.Minute), 0, nil); got != stateResting {
		t.Errorf("cheap 5 minutes later: state %d, want resting until its reset", got)
	}
	if got := ps.provs[2].state(now+int64(7*time.Minute), 0, nil); got != stateOK {
		t.Errorf("cheap after its reset: state %d, want ok", got)
	}
	h := http.Header{}
	h.Set("anthropic-ratelimit-requests-remaining", "0")
	h.Set("anthropic-ratelimit-requests-limit", "50")
	h.Set("anthropic-ratelimit-requests-reset", time.Unix(0, now).Add(30*time.Second).UTC().Format(time.RFC3339))
	if room, until, ok := learnLimits(h, now); !ok || room != 0 || until < now+int64(29*time.Second) || until > now+int64(31*time.Second) {
		t.Errorf("Anthropic's headers: got %d %d %v, want no headroom until 30s on", room, until, ok)
	}
}

// BenchmarkProxyProviders is BenchmarkProxy's whole request to a model
// served by two providers under the cost policy: the router's work per
// request with a provider chosen, the header and the access log fields
// set, and the outcome recorded.
func BenchmarkProxyProviders(b *testing.B) {
	p := benchProvider(b)
	providers := map[string]any{
		"providers": []map[string]any{
			{"name": "cheap", "model": "m", "price": map[string]float64{"input_per_million": 0.15, "output_per_million": 0.6}},
			{"name": "dear", "model": "m2", "price": map[string]float64{"input_per_million": 2.5, "output_per_million": 10}},
		},
		"routing": map[string]any{"policy": "cost", "latency_objective": "2s"},
	}
	startRouter(b, "", model{name: "m", baseURL: p.url, more: providers}, model{name: "m2", baseURL: p.url})
	rt := new(Router)
	if err := rt.Provision(caddy.ActiveContext()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rt.Cleanup() })
	benchRequests(b, rt, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
}
