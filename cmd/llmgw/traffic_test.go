package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// trafficModels are a model that answers (its time to first token 5ms)
// and one whose engine fails every request with a 500.
const trafficModels = `
		model chat {
			engine sim
			option ttft 5ms
			option max_tokens 10
		}
		model broken {
			engine sim
			option fail_status 500
		}`

// readTraffic reads GET /llm/traffic from g's admin endpoint.
func readTraffic(t *testing.T, g *gateway, query string) (int, llmapi.Traffic, string) {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/llm/traffic%s", g.admin, query))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var h llmapi.Traffic
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(raw, &h); err != nil {
			t.Fatalf("traffic: %v: %s", err, raw)
		}
	}
	return resp.StatusCode, h, string(raw)
}

// trafficAsk sends one chat request to g as key k1 (secret-1), streamed
// or not, and reads the whole answer.
func trafficAsk(t *testing.T, g *gateway, model, prompt string, stream bool) int {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":%q}]}`, model, stream, prompt)
	req, _ := http.NewRequest("POST", g.base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer secret-1")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// trafficSum adds up a series' points.
type trafficSum struct {
	requests, errors, clientErrors, tokens int64
	latencyP50, ttftP50                    bool // some point has one
	lastReady                              *int64
}

func sumTraffic(s llmapi.TrafficSeries) trafficSum {
	var out trafficSum
	for _, p := range s.Points {
		out.requests += p.Requests
		out.errors += p.Errors
		out.clientErrors += p.ClientErrors
		out.tokens += p.CompletionTokens
		out.latencyP50 = out.latencyP50 || p.LatencyP50Millis != nil && *p.LatencyP50Millis > 0
		out.ttftP50 = out.ttftP50 || p.TTFTP50Millis != nil && *p.TTFTP50Millis > 0
	}
	if n := len(s.Points); n > 0 {
		out.lastReady = s.Points[n-1].ReplicasReady
	}
	return out
}

func modelSeries(h llmapi.Traffic, model string) llmapi.TrafficSeries {
	for _, s := range h.Models {
		if s.Model == model {
			return s
		}
	}
	return llmapi.TrafficSeries{}
}

func ready(n *int64) any {
	if n == nil {
		return nil
	}
	return *n
}

// TestTraffic: the answers over time on one node, from the gateway's own
// history: answered, failed and blocked requests, latency and time to
// first token, tokens and replicas ready, overall and per model.
func TestTraffic(t *testing.T) {
	quota := ""
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, quota: &quota, before: guardBlock}
	g.writeConfig(trafficModels+tenancyBlock("", "", "", ""), "")
	g.start()
	waitFor(t, 60*time.Second, "chat and broken ready", func() bool {
		return len(g.readyReplicas("chat", 1)) == 1 && len(g.readyReplicas("broken", 1)) == 1
	})
	for i := range 4 {
		if code := trafficAsk(t, g, "chat", "hello", i%2 == 1); code != 200 {
			t.Fatalf("chat: %d", code)
		}
	}
	for range 3 {
		if code := trafficAsk(t, g, "broken", "hello", false); code < 500 {
			t.Fatalf("broken: %d, want a 5xx", code)
		}
	}
	if code := trafficAsk(t, g, "chat", "all about project zeus", false); code != 400 {
		t.Fatalf("blocked prompt: %d", code)
	}

	code, h, body := readTraffic(t, g, "?window=1h&step=1m")
	if code != 200 || h.StepSeconds != 60 || len(h.Overall.Points) != 60 {
		t.Fatalf("traffic: %d, want 60 points of a minute: %s", code, body)
	}
	if all := sumTraffic(h.Overall); all.requests != 8 || all.errors != 3 || all.clientErrors != 1 {
		t.Errorf("overall: %+v, want 8 requests, 3 errors, 1 client error (the blocked prompt)\n%s", all, body)
	}
	chat := sumTraffic(modelSeries(h, "chat"))
	if chat.requests != 5 || chat.tokens == 0 || !chat.latencyP50 || !chat.ttftP50 || chat.lastReady == nil || *chat.lastReady != 1 {
		t.Errorf("chat: %+v (ready %v), want 5 requests, tokens, latency and TTFT quantiles, 1 ready\n%s", chat, ready(chat.lastReady), body)
	}
	last := h.Overall.Points[len(h.Overall.Points)-1]
	if last.RequestsPerSecond <= 0 || last.ErrorsPerSecond <= 0 {
		t.Errorf("the last minute's rates: %+v", last)
	}

	// One model; a day in hours; reading again counts nothing twice.
	_, one, body := readTraffic(t, g, "?window=24h&step=1h&model=broken")
	if len(one.Models) != 1 || len(one.Overall.Points) != 24 {
		t.Fatalf("model=broken over a day: %s", body)
	}
	if b := sumTraffic(one.Overall); b.requests != 3 || b.errors != 3 {
		t.Errorf("broken: %+v, want 3 requests, all errors\n%s", b, body)
	}
	// After a reload, one more answer: counted once, what came before
	// not again.
	out, err := exec.Command(binary, "reload", "--force", "--config", filepath.Join(g.dir, "Caddyfile"),
		"--address", fmt.Sprintf("127.0.0.1:%d", g.admin)).CombinedOutput()
	if err != nil {
		t.Fatalf("reload: %v\n%s", err, out)
	}
	if code := trafficAsk(t, g, "chat", "hello", false); code != 200 {
		t.Fatalf("chat after a reload: %d", code)
	}
	if _, h, body = readTraffic(t, g, "?window=1h&step=5m"); sumTraffic(h.Overall).requests != 9 {
		t.Errorf("after a reload and one more request: %+v, want 9 requests\n%s", sumTraffic(h.Overall), body)
	}
	for _, q := range []string{"?window=48h", "?step=30s", "?window=1h&step=2h"} {
		if code, _, body := readTraffic(t, g, q); code != 400 || !strings.Contains(body, "error") {
			t.Errorf("traffic%s: got %d %s, want 400 with the reason", q, code, body)
		}
	}

	// The Overview and the Usage count the same requests: the blocked
	// prompt is one of chat's, an error, in both.
	var ov struct {
		Models []llmapi.ModelOverview `json:"models"`
	}
	g.adminGet("/llm/overview", &ov)
	var u struct {
		Models map[string]llmapi.Usage `json:"models"`
	}
	g.adminGet("/llm/usage?org=acme", &u)
	for _, m := range ov.Models {
		if m.Requests != u.Models[m.Model].Requests {
			t.Errorf("%s: the overview counts %d requests, the usage %d", m.Model, m.Requests, u.Models[m.Model].Requests)
		}
		if m.Model == "chat" && m.Errors != 1 {
			t.Errorf("chat: the overview counts %d errors, want 1 (the blocked prompt)", m.Errors)
		}
	}
}

// TestTrafficCluster: two nodes sharing a real Redis keep one history:
// each node's answers and its own ready replicas, summed.
func TestTrafficCluster(t *testing.T) {
	c := startClusterOn(t, 0, fmt.Sprintf(clusterModels, tenancy.HashKey("secret-1"))+`
		model broken {
			engine sim
			option fail_status 500
		}`, startRedis(t), "")
	n1, n2 := c.add("n1"), c.add("n2")
	for _, g := range []*gateway{n1, n2} {
		waitFor(t, 60*time.Second, "chat's three replicas and broken's ready", func() bool {
			return len(g.readyOn("chat")) == 3 && len(g.readyOn("broken")) == 1
		})
	}
	for _, ask := range []struct {
		g     *gateway
		model string
		n     int
	}{{n1, "chat", 2}, {n2, "chat", 3}, {n1, "broken", 1}, {n2, "broken", 1}} {
		for range ask.n {
			trafficAsk(t, ask.g, ask.model, "hello", false)
		}
	}
	// Reading on a node adds that node's latest counts: n2 first, then n1
	// sees both.
	if code, _, body := readTraffic(t, n2, "?window=1h&step=5m"); code != 200 {
		t.Fatalf("traffic on n2: %d %s", code, body)
	}
	code, h, body := readTraffic(t, n1, "?window=1h&step=5m")
	if code != 200 {
		t.Fatalf("traffic on n1: %d %s", code, body)
	}
	if all := sumTraffic(h.Overall); all.requests != 7 || all.errors != 2 {
		t.Errorf("overall: %+v, want 7 requests (5 chat, 2 broken), 2 errors\n%s", all, body)
	}
	// Each node counts its own replicas: chat's three once, not each
	// node all three.
	if chat := sumTraffic(modelSeries(h, "chat")); chat.requests != 5 || chat.lastReady == nil || *chat.lastReady != 3 {
		t.Errorf("chat: %+v (ready %v), want 5 requests and 3 ready\n%s", chat, ready(chat.lastReady), body)
	}
	if all := sumTraffic(h.Overall); all.lastReady == nil || *all.lastReady != 4 {
		t.Errorf("replicas ready overall: %v, want 4\n%s", ready(all.lastReady), body)
	}
}

// TestUsageSurvivesRestart: on a single node the usage llm_quota records
// is kept in Caddy storage; a gateway stopped gracefully and started again
// on the same data shows the same usage.
func TestUsageSurvivesRestart(t *testing.T) {
	g := startQuotaGateway(t, quotaModels+tenancyBlock("", "", "", ""), "")
	c := keyClient(g, "secret-1")
	for i := range 3 {
		if _, e := chatErr(c, "sim-chat"); e != nil {
			t.Fatalf("request %d: %v", i+1, e)
		}
	}
	type usage struct {
		Total  llmapi.Usage            `json:"total"`
		Models map[string]llmapi.Usage `json:"models"`
	}
	var before, after usage
	g.adminGet("/llm/usage?project=acme/research/alpha", &before)
	if before.Total.Requests != 3 || before.Total.OutputTokens == 0 {
		t.Fatalf("usage before the restart: %+v, want 3 requests with tokens", before.Total)
	}
	g.stop()
	g.start()
	g.adminGet("/llm/usage?project=acme/research/alpha", &after)
	if after.Total != before.Total || after.Models["sim-chat"] != before.Models["sim-chat"] {
		t.Errorf("usage after a restart: %+v, want %+v as before", after, before)
	}
	// It goes on counting from there.
	if _, e := chatErr(c, "sim-chat"); e != nil {
		t.Fatal(e)
	}
	g.adminGet("/llm/usage?project=acme/research/alpha", &after)
	if after.Total.Requests != 4 {
		t.Errorf("usage after one more request: %+v, want 4 requests", after.Total)
	}
}
