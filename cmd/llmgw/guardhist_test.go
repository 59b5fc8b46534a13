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

// guardHistory reads GET /llm/guardrails/history from g's admin endpoint.
func guardHistory(t *testing.T, g *gateway, query string) (int, llmapi.GuardHistory, string) {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/llm/guardrails/history%s", g.admin, query))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var h llmapi.GuardHistory
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(raw, &h); err != nil {
			t.Fatalf("history: %v: %s", err, raw)
		}
	}
	return resp.StatusCode, h, string(raw)
}

// outcomes sums a series of the history.
func outcomes(h llmapi.GuardHistory, check, stage, outcome string) int64 {
	var n int64
	for _, s := range h.Series {
		if s.Check == check && s.Stage == stage && s.Outcome == outcome {
			for _, c := range s.Counts {
				n += c
			}
		}
	}
	return n
}

// guardAsk sends one chat request with prompt to g as key k1's secret.
func guardAsk(t *testing.T, g *gateway, prompt string) int {
	t.Helper()
	body := fmt.Sprintf(`{"model":"chat","messages":[{"role":"user","content":%q}]}`, prompt)
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

// TestGuardrailHistory: the guardrails' outcomes over time, kept by the
// gateway (not only while a console page polls), summed over a cluster's
// nodes through Redis.
func TestGuardrailHistory(t *testing.T) {
	c := startClusterOn(t, 0, fmt.Sprintf(clusterModels, tenancy.HashKey("secret-1")), startRedis(t), "")
	c.before = guardBlock
	n1, n2 := c.add("n1"), c.add("n2")
	for _, g := range []*gateway{n1, n2} {
		waitFor(t, 60*time.Second, "chat ready", func() bool { return len(g.readyOn("chat")) > 0 })
	}

	// Two redacted prompts and one blocked on n1, one blocked on n2.
	for _, p := range []string{"mail ana@example.com please", "and bob@example.org too"} {
		if code := guardAsk(t, n1, p); code != 200 {
			t.Fatalf("redacted prompt: %d", code)
		}
	}
	if code := guardAsk(t, n1, "all about Project Zeus"); code != 400 {
		t.Fatalf("blocked prompt on n1: %d", code)
	}
	if code := guardAsk(t, n2, "tell me of project zeus"); code != 400 {
		t.Fatalf("blocked prompt on n2: %d", code)
	}

	// Reading the history on a node adds that node's latest counts; n2
	// first, then n1 sees both.
	if code, _, body := guardHistory(t, n2, "?window=1h&step=1m"); code != 200 {
		t.Fatalf("history on n2: %d %s", code, body)
	}
	code, h, body := guardHistory(t, n1, "?window=1h&step=1m")
	if code != 200 {
		t.Fatalf("history on n1: %d %s", code, body)
	}
	if h.StepSeconds != 60 || h.To.Sub(h.From).Minutes() != 60 {
		t.Errorf("window and step: %+v", h)
	}
	for _, s := range h.Series {
		if len(s.Counts) != 60 {
			t.Errorf("series %s/%s/%s has %d steps, want 60", s.Check, s.Stage, s.Outcome, len(s.Counts))
		}
	}
	if got := outcomes(h, "topics", "input", "blocked"); got != 2 {
		t.Errorf("topics blocked over the cluster: %d, want 2 (1 per node)\n%s", got, body)
	}
	if got := outcomes(h, "pii", "input", "redacted"); got != 2 {
		t.Errorf("pii redacted: %d, want 2\n%s", got, body)
	}
	// The default: a day in hours, the same totals; reading again does
	// not count twice.
	_, day, body := guardHistory(t, n2, "")
	if day.StepSeconds != 3600 || len(day.Series) == 0 || len(day.Series[0].Counts) != 24 {
		t.Errorf("default window: %s", body)
	}
	if got := outcomes(day, "topics", "input", "blocked"); got != 2 {
		t.Errorf("topics blocked over a day: %d, want 2\n%s", got, body)
	}

	// More on n2 after a reload of n2: counted once more, not twice.
	out, err := exec.Command(binary, "reload", "--force", "--config", filepath.Join(n2.dir, "Caddyfile"),
		"--address", fmt.Sprintf("127.0.0.1:%d", n2.admin)).CombinedOutput()
	if err != nil {
		t.Fatalf("reload: %v\n%s", err, out)
	}
	if code := guardAsk(t, n2, "project zeus again"); code != 400 {
		t.Fatalf("blocked prompt after reload: %d", code)
	}
	guardHistory(t, n2, "?window=10m&step=5m")
	if _, h, body = guardHistory(t, n1, "?window=10m&step=5m"); outcomes(h, "topics", "input", "blocked") != 3 {
		t.Errorf("after a reload and one more block: %s", body)
	}

	for _, q := range []string{"?window=48h", "?step=30s", "?window=1h&step=2h", "?window=soon"} {
		if code, _, body := guardHistory(t, n1, q); code != 400 || !strings.Contains(body, "error") {
			t.Errorf("history%s: got %d %s, want 400 with the reason", q, code, body)
		}
	}
}
