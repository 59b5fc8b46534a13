package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Caddyfile.example writes an access log: a JSON line per request on
// stdout, with the llm_* fields, and neither the key nor the prompt.
func TestExampleAccessLog(t *testing.T) {
	g := startExample(t)
	chatWith(t, keyClient(g, "sk-llmgw-example-key-change-me"), "sim-small", "a prompt that stays private")
	var entry map[string]any
	waitFor(t, 10*time.Second, "the request's access log line", func() bool {
		for _, line := range strings.Split(g.logs.String(), "\n") {
			if !strings.Contains(line, `"http.log.access`) || !strings.Contains(line, "/v1/chat/completions") {
				continue
			}
			entry = nil
			if json.Unmarshal([]byte(line), &entry) == nil {
				return true
			}
		}
		return false
	})
	for field, want := range map[string]any{"llm_model": "sim-small", "llm_key": "example", "llm_engine": "sim", "status": float64(200)} {
		if entry[field] != want {
			t.Errorf("access log %s: got %v, want %v in %v", field, entry[field], want, entry)
		}
	}
	if _, ok := entry["llm_completion_tokens"]; !ok {
		t.Errorf("the access log has no llm_completion_tokens: %v", entry)
	}
	if l := g.logs.String(); strings.Contains(l, "sk-llmgw-example-key-change-me") || strings.Contains(l, "stays private") {
		t.Error("the logs show the key or the prompt")
	}
}
