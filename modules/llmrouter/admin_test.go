package llmrouter

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// TestProvidersView checks what GET /llm/providers/models/{name} shows of
// each provider after what the router learned: a 429's rest and its
// reason, failures in a row, a slow time to first byte, a spent rpm and
// the headroom a provider reported; nothing of a header's value.
func TestProvidersView(t *testing.T) {
	m := threeProviders("cost", 400*time.Millisecond)
	m.Providers[1].RPM = 2
	ps := newProviderSet(m, func(name string) bool { return name == "chat" })
	now := time.Now().UnixNano()
	room := func(string) (int, int) { return 1, 2 }
	ps.provs[2].observe(now, http.StatusTooManyRequests, "30", 0) // cheap
	ps.provs[0].observe(now, 502, "", 0)                          // dear: a failure…
	ps.provs[0].restUntil.Store(0)                                // …whose rest is over
	ps.provs[0].observe(now, 200, "", 900*time.Millisecond)       // then a slow answer
	ps.provs[0].fails.Store(1)
	ps.provs[1].record(now, 200, "", 80*time.Millisecond, http.Header{
		"X-Ratelimit-Remaining-Requests": {"25"}, "X-Ratelimit-Limit-Requests": {"100"}}, true, 12)
	ps.provs[1].record(now, 200, "", 80*time.Millisecond, nil, true, 8)

	v := ps.view(now, room)
	if v.Name != "chat" || v.Policy != "cost" || v.LatencyObjectiveMS != 400 {
		t.Errorf("got model %q policy %q objective %v, want chat, cost, 400", v.Name, v.Policy, v.LatencyObjectiveMS)
	}
	byName := map[string]llmapi.ProviderState{}
	for _, p := range v.Providers {
		byName[p.Name] = p
	}
	cheap, dear, local := byName["cheap"], byName["dear"], byName["local"]
	if cheap.State != "resting" || cheap.RestReason != "429" || cheap.TTFTMS != nil {
		t.Errorf("cheap: got %+v, want resting for 429, never measured", cheap)
	}
	if d := time.Until(cheap.RestingUntil); d < 29*time.Second || d > 31*time.Second {
		t.Errorf("cheap rests until %v, want about 30s ahead", cheap.RestingUntil)
	}
	if dear.State != "slow" || dear.FailuresInARow != 1 || dear.TTFTMS == nil || *dear.TTFTMS != 900 || !dear.RestingUntil.IsZero() || dear.RestReason != "" {
		t.Errorf("dear: got %+v, want slow, 1 failure, ttft 900ms, not resting", dear)
	}
	if local.State != "over_limits" || *local.MinuteRequests != 2 || *local.MinuteTokens != 20 || local.Headroom == nil || *local.Headroom != 0.25 {
		t.Errorf("local: got %+v, want over_limits with 2 requests, 20 tokens, headroom 0.25", local)
	}
	if !local.SelfHosted || cheap.SelfHosted || cheap.PriceRank != 0.2625 || cheap.Weight != 3 {
		t.Errorf("got cheap %+v and local %+v; want cheap outside, rank 0.2625, weight 3; local self-hosted", cheap, local)
	}
	if cheap.MinuteRequests != nil || cheap.Headroom != nil {
		t.Errorf("cheap has no rpm, tpm or rate-limit headers: got requests %v headroom %v, want them left out", cheap.MinuteRequests, cheap.Headroom)
	}
	raw, _ := json.Marshal(v)
	if strings.Contains(string(raw), "Ratelimit") || strings.Contains(string(raw), `"25"`) {
		t.Errorf("the answer carries a header: %s", raw)
	}

	// Failures in a row rest it, and say so; a new minute clears the
	// count; full when a self-hosted provider's replicas have no room.
	ps.provs[0].observe(now, 0, "", 0)
	later := now + int64(61*time.Second)
	v = ps.view(now, func(string) (int, int) { return 0, 2 })
	if p := v.Providers[0]; p.State != "resting" || p.RestReason != "failures" || p.FailuresInARow != 2 {
		t.Errorf("dear after a second failure: got %+v, want resting for failures, 2 in a row", p)
	}
	if p := ps.view(later, func(string) (int, int) { return 0, 2 }).Providers[1]; p.State != "full" || *p.MinuteRequests != 0 {
		t.Errorf("local a minute later without room: got %+v, want full, 0 requests this minute", p)
	}
}
