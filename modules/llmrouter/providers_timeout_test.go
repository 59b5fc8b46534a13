package llmrouter

import (
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestAfterTimeout: after a first_byte_timeout a request goes on only
// from a provider to another provider of the model, once.
func TestAfterTimeout(t *testing.T) {
	// Candidates: a canary, the model's two providers, a fallback.
	newPlan := func() *routePlan {
		ps := newProviderSet(threeProviders("first", 0), func(string) bool { return false })
		p := &routePlan{ps: ps, first: 1}
		p.order = ps.order(p.buf[:], time.Now().UnixNano(), 0, 0, nil)[:2]
		return p
	}
	for _, tc := range []struct {
		name  string
		tries []int  // the candidates that timed out, in turn
		want  []bool // whether each went on
	}{
		{"a provider followed by another goes on", []int{1}, []bool{true}},
		{"the last provider does not go on to a fallback", []int{2}, []bool{false}},
		{"a canary does not go on", []int{0}, []bool{false}},
		{"a fallback does not go on", []int{3}, []bool{false}},
		{"once per request", []int{1, 2}, []bool{true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlan()
			for k, i := range tc.tries {
				if got := p.afterTimeout(i); got != tc.want[k] {
					t.Errorf("candidate %d timed out: went on %v, want %v", i, got, tc.want[k])
				}
			}
		})
	}
}

// TestProviderFirstByteTimeout: a provider that sends no headers within
// first_byte_timeout is passed over like a down one: the next provider
// serves (reason failover), the hung one rests and is ranked slowest, so
// the next request goes straight to the other; when both hang the client
// gets the 504, and the model's fallback is not tried.
func TestProviderFirstByteTimeout(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "streamed"}[stream], func(t *testing.T) {
			var spareHangs atomic.Bool
			stall := func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done(): // the router gave up
				case <-time.After(10 * time.Second):
				}
			}
			hung := startProvider(t, "hung", stall)
			spare := startProvider(t, "spare", func(w http.ResponseWriter, r *http.Request) {
				switch {
				case spareHangs.Load():
					stall(w, r)
				case r.Header.Get("Accept") == "text/event-stream":
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = w.Write([]byte("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"from spare\"}}]}\n\ndata: [DONE]\n\n"))
				default:
					answerWith(200, chatAnswer("spare"))(w, r)
				}
			})
			backup := startProvider(t, "backup", answerWith(200, chatAnswer("backup")))
			providers := map[string]any{
				"providers": []map[string]any{{"name": "hung", "model": "chat"}, {"name": "spare", "model": "spare"}},
				"routing":   map[string]any{"policy": "latency", "explore": -1},
			}
			base := startRouter(t, `{"first_byte_timeout":"300ms"}`,
				model{name: "chat", baseURL: hung.url, fallbacks: []string{"backup"}, more: providers},
				model{name: "spare", baseURL: spare.url}, model{name: "backup", baseURL: backup.url})
			want := func(what string, gotHits, wantHits []int) {
				t.Helper()
				if !slices.Equal(gotHits, wantHits) {
					t.Errorf("%s: requests to hung, spare, backup: got %v, want %v", what, gotHits, wantHits)
				}
			}
			hits := func() []int { return []int{hung.hits(), spare.hits(), backup.hits()} }

			resp, body := chat(t, base, "chat", stream)
			if resp.StatusCode != 200 || !strings.Contains(body, "from spare") || resp.Header.Get("Llmgw-Provider") != "spare; reason=failover" {
				t.Errorf("hung first: got %d %q %s, want 200 from spare; reason=failover", resp.StatusCode, resp.Header.Get("Llmgw-Provider"), body)
			}
			want("hung first", hits(), []int{1, 1, 0})

			resp, body = chat(t, base, "chat", stream)
			if resp.StatusCode != 200 || !strings.Contains(body, "from spare") || !strings.HasPrefix(resp.Header.Get("Llmgw-Provider"), "spare; ") {
				t.Errorf("after the timeout: got %d %q %s, want 200 from spare", resp.StatusCode, resp.Header.Get("Llmgw-Provider"), body)
			}
			want("after the timeout", hits(), []int{1, 2, 0})

			spareHangs.Store(true)
			resp, body = chat(t, base, "chat", stream)
			if resp.StatusCode != http.StatusGatewayTimeout || errorCode(body) != "upstream_timeout" {
				t.Errorf("both hang: got %d %s, want 504 upstream_timeout", resp.StatusCode, body)
			}
			want("both hang", hits(), []int{2, 3, 0})
		})
	}
}
