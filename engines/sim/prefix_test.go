package sim

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func cachedTokens(t *testing.T, out map[string]any) (prompt, cached int) {
	t.Helper()
	u := out["usage"].(map[string]any)
	d, ok := u["prompt_tokens_details"].(map[string]any)
	if !ok {
		t.Fatalf("usage %v has no prompt_tokens_details", u)
	}
	return int(u["prompt_tokens"].(float64)), int(d["cached_tokens"].(float64))
}

// The simulated prefix cache: a conversation's next turn finds its
// earlier turns cached, another conversation only the shared system
// prompt, and a small cache forgets.
func TestPrefixCacheModel(t *testing.T) {
	system := strings.Repeat("You are a careful assistant for the build team. ", 40) // 360 words
	body := func(turns ...string) string {
		msgs := []map[string]string{{"role": "system", "content": system}}
		for i, tx := range turns {
			role := "user"
			if i%2 == 1 {
				role = "assistant"
			}
			msgs = append(msgs, map[string]string{"role": role, "content": tx})
		}
		b, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 4, "messages": msgs})
		return string(b)
	}
	q1 := strings.Repeat("why does the deploy fail on node seven ", 10)
	s := NewServer(ServerConfig{Model: "m", PrefixCacheTokens: 100000})
	_, out := call(t, s, "/v1/chat/completions", body(q1))
	if p, c := cachedTokens(t, out); c != 0 || p < 420 {
		t.Fatalf("first turn: %d of %d cached, want 0", c, p)
	}
	_, out = call(t, s, "/v1/chat/completions", body(q1, "it runs out of disk", "how do I clean it"))
	p, c := cachedTokens(t, out)
	if c < 416 || c > p {
		t.Fatalf("second turn: %d of %d cached, want the first turn's prompt (about 430)", c, p)
	}
	_, out = call(t, s, "/v1/chat/completions", body("a different question about tokens"))
	if p, c := cachedTokens(t, out); c < 340 || c > 361 {
		t.Fatalf("another conversation: %d of %d cached, want the system prompt's full blocks (352)", c, p)
	}
	small := NewServer(ServerConfig{Model: "m", PrefixCacheTokens: 400})
	call(t, small, "/v1/chat/completions", body(q1))
	for i := range 3 {
		call(t, small, "/v1/chat/completions", body(fmt.Sprintf("unrelated %d ", i)+strings.Repeat("x y z ", 200)))
	}
	_, out = call(t, small, "/v1/chat/completions", body(q1, "a", "b"))
	if _, c := cachedTokens(t, out); c > 361 {
		t.Fatalf("a 400-token cache still held %d tokens of a conversation's own turn after 1,800 tokens of others; want at most the shared system prompt", c)
	}
}
