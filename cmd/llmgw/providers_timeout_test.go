package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// hungProvidersConfig is chat (and chat-stream, the same, so that each
// starts with what the router learned of neither) served by two stand-ins
// under the cost policy, the cheaper first, with a fallback model.
func hungProvidersConfig(slow, spare, backup *standinProvider) string {
	outside := func(name string, p *standinProvider, price string) string {
		return "\t\t\tprovider " + name + " {\n\t\t\t\tengine openai\n\t\t\t\toption base_url " + p.url() +
			"\n\t\t\t\toption probe_interval 1s\n\t\t\t\tmodel " + name + "-model\n\t\t\t\tprice " + price + "\n\t\t\t}\n"
	}
	model := func(name string) string {
		return "\t\tmodel " + name + " {\n\t\t\tpolicy cost\n\t\t\texplore 0\n\t\t\tfallback backup\n" +
			outside("slow", slow, "input 0.15 output 0.60") + outside("spare", spare, "input 2.50 output 10") + "\t\t}\n"
	}
	return model("chat") + model("chat-stream") + `
		model backup {
			engine openai
			option base_url ` + backup.url() + `
			option probe_interval 1s
		}`
}

// TestModelProvidersHung: a provider that sends no response headers
// within first_byte_timeout is passed over like a down one. The stand-ins
// (httptest servers, no paid provider is called) are a cheap provider
// that stalls 30s before its headers, a dearer one that answers, and a
// fallback model's. The client gets the dearer one's answer, whole or
// streamed, with llmgw-provider naming it (reason=failover); the hung one
// rests, so the next request goes straight to the other; the access log
// and the metrics say so; and with both hung the client gets the 504 in
// OpenAI's error format, the fallback model not being tried.
func TestModelProvidersHung(t *testing.T) {
	slow, spare, backup := newStandinProvider(t, "slow"), newStandinProvider(t, "spare"), newStandinProvider(t, "backup")
	slow.delay.Store(int64(30 * time.Second))
	g := startGateway(t, hungProvidersConfig(slow, spare, backup), "first_byte_timeout 1s")
	for _, m := range []string{"chat", "chat/spare", "chat-stream", "chat-stream/spare", "backup"} {
		g.readyReplicas(m, 1)
	}
	ask := func(model string, stream bool) (int, string, string) {
		t.Helper()
		resp, body := post(t, g.base+"/v1/chat/completions",
			`{"model":"`+model+`","stream":`+map[bool]string{false: "false", true: "true"}[stream]+`,"max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`)
		return resp.StatusCode, resp.Header.Get("Llmgw-Provider"), string(body)
	}

	t.Run("the next provider answers", func(t *testing.T) {
		code, prov, body := ask("chat", false)
		answered := time.Now()
		if code != 200 || prov != "spare; reason=failover" || !strings.Contains(body, "answer from spare") {
			t.Fatalf("got %d %q %s, want 200 from spare; reason=failover", code, prov, body)
		}
		if slow.received.Load() != 1 || spare.requests.Load() != 1 {
			t.Errorf("slow was asked %d times and spare answered %d; want 1 each", slow.received.Load(), spare.requests.Load())
		}
		// The hung one rests (0.5s after a first failure): the next
		// request goes to spare without asking it.
		code, prov, _ = ask("chat", false)
		if since := time.Since(answered); since > 400*time.Millisecond {
			t.Logf("the next request took %v: slow's rest may have ended", since)
		} else if code != 200 || prov != "spare; reason=spill_resting" || slow.received.Load() != 1 {
			t.Errorf("next: got %d %q with slow asked %d times, want 200 from spare; reason=spill_resting, slow not asked again",
				code, prov, slow.received.Load())
		}
	})

	t.Run("streamed", func(t *testing.T) {
		before := slow.received.Load()
		code, prov, body := ask("chat-stream", true)
		if code != 200 || prov != "spare; reason=failover" || !strings.Contains(body, "answer from spare") || !strings.Contains(body, "data: [DONE]") {
			t.Errorf("got %d %q %s, want 200 streamed from spare; reason=failover", code, prov, body)
		}
		if slow.received.Load() != before+1 {
			t.Errorf("slow was asked %d times, want once", slow.received.Load()-before)
		}
	})

	t.Run("the access log and the metrics", func(t *testing.T) {
		if want := `"llm_provider":"spare","llm_provider_reason":"failover"`; !strings.Contains(g.logs.String(), want) {
			t.Errorf("the access log has no %s", want)
		}
		_, metrics := adminDo(t, g, "GET", "/metrics", "")
		for _, want := range []string{`llmgw_provider_requests_total{model="chat",outcome="error",provider="slow"} 1`,
			`llmgw_provider_requests_total{model="chat-stream",outcome="error",provider="slow"} 1`,
			`llmgw_provider_requests_total{model="chat",outcome="ok",provider="spare"} 2`} {
			if !strings.Contains(string(metrics), want) {
				t.Errorf("the metrics have no %s", want)
			}
		}
	})

	t.Run("both hung: a 504, no fallback", func(t *testing.T) {
		spare.delay.Store(int64(30 * time.Second))
		s, p := slow.received.Load(), spare.received.Load()
		code, _, body := ask("chat", false)
		var e struct {
			Error struct{ Message, Type, Code string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || code != 504 || e.Error.Code != "upstream_timeout" ||
			e.Error.Type != "server_error" || !strings.Contains(e.Error.Message, "first_byte_timeout") {
			t.Errorf("got %d %s, want 504 upstream_timeout naming first_byte_timeout", code, body)
		}
		if slow.received.Load() != s+1 || spare.received.Load() != p+1 || backup.received.Load() != 0 {
			t.Errorf("asked: slow %d, spare %d, backup %d; want each provider once, the fallback never",
				slow.received.Load()-s, spare.received.Load()-p, backup.received.Load())
		}
	})
}
