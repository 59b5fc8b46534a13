package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestCacheEmbedderModel runs semantic matching with a catalog embedding
// model through the real binary: concurrent misses share embedding
// requests, the embedder's own threshold applies, the verifier refuses
// near vectors for other questions, and a purge empties the index. The
// sim engine's embeddings hash words (a simulator, not a model: texts
// that share words are close), so its threshold is low.
func TestCacheEmbedderModel(t *testing.T) {
	models := cacheModels + `
		model sim-embed {
			engine sim
			option embedding_dims 384
		}`
	// semantic's own threshold (0.95) is left for the built-in matcher;
	// sim-embed's vectors are held to 0.6.
	g := startGatewayBefore(t, models, "\t\tllm_cache {\n\t\t\tsemantic 0.95 {\n\t\t\t\tembedder sim-embed 0.6\n\t\t\t}\n\t\t}")
	c := g.client()

	// 32 different questions at once: their embeddings share requests.
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			var raw *http.Response
			_, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
				Model:    "sim-chat",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage(fmt.Sprintf("How tall is mountain number %d?", i))},
			}, option.WithResponseInto(&raw))
			if err == nil && raw.Header.Get("X-Llmgw-Cache") != "miss" {
				err = fmt.Errorf("question %d: x-llmgw-cache %q, want miss", i, raw.Header.Get("X-Llmgw-Cache"))
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rep := g.readyReplicas("sim-embed", 1)[0]
	calls := simStats(t, rep.URL)["requests"]
	if calls >= n {
		t.Errorf("%d concurrent questions took %d embedding requests, want fewer (batched)", n, calls)
	}
	t.Logf("%d concurrent questions: %d embedding requests", n, calls)

	chatWith(t, c, "sim-chat", "What is the capital of France?")
	// The sim embedder scores this paraphrase about 0.67: a hit at the
	// embedder's threshold, which semantic's 0.95 would refuse.
	_, raw := chatWith(t, c, "sim-chat", "Tell me the capital of France.")
	if got := raw.Header.Get("X-Llmgw-Cache"); !strings.HasPrefix(got, "hit-semantic;similarity=0.6") {
		t.Errorf("paraphrase: %q, want hit-semantic at about 0.67", got)
	}
	// Near vectors, other questions: the verifier refuses them.
	for _, q := range []string{
		"What is the capital of France in 1900?", // a number more
		"What is not the capital of France?",     // a negation
		"What is the capital of Germany?",        // another name
	} {
		if _, raw := chatWith(t, c, "sim-chat", q); raw.Header.Get("X-Llmgw-Cache") != "miss" {
			t.Errorf("%q: %q, want miss", q, raw.Header.Get("X-Llmgw-Cache"))
		}
	}
	// A purge takes the entries out of the index.
	if code, _ := adminDo(t, g, "POST", "/llm/cache/purge", `{"model":"sim-chat"}`); code != 200 {
		t.Fatalf("purge: %d", code)
	}
	if _, raw := chatWith(t, c, "sim-chat", "Tell me the capital of France!"); raw.Header.Get("X-Llmgw-Cache") != "miss" {
		t.Errorf("after a purge: %q, want miss", raw.Header.Get("X-Llmgw-Cache"))
	}
}

// TestCacheEmbedderOllama uses the tiny test model served by Ollama as
// the embedder: its vectors mean nothing (random weights), so this checks
// the plumbing only: questions are embedded (in batches, through
// Ollama's /v1/embeddings) and indexed, nothing falls back to exact-only
// matching, and the verifier still refuses other questions whatever
// their cosine.
func TestCacheEmbedderOllama(t *testing.T) {
	src := tinyModel(t)
	models := cacheModels + ollamaModels(t, `model tiny {
			engine ollama
			source `+src+`
			context_length 256
			min 1
		}`)
	g := startGatewayBefore(t, models, "\t\tllm_cache {\n\t\t\tsemantic {\n\t\t\t\tembedder tiny 0.01\n\t\t\t}\n\t\t}")
	g.readyReplicas("tiny", 1)
	c := g.client()
	const n = 8
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, _ = c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
				Model:    "sim-chat",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage(fmt.Sprintf("How deep is lake number %d?", i))},
			})
		})
	}
	wg.Wait()
	chatWith(t, c, "sim-chat", "What is the capital of France?")
	for _, q := range []string{"What is the capital of France in 1900?", "What is not the capital of France?"} {
		if _, raw := chatWith(t, c, "sim-chat", q); raw.Header.Get("X-Llmgw-Cache") != "miss" {
			t.Errorf("%q: %q, want miss", q, raw.Header.Get("X-Llmgw-Cache"))
		}
	}
	if strings.Contains(g.logs.String(), "embedding a question") {
		t.Errorf("an embedding call failed:\n%s", g.logs.String())
	}
	var stats []map[string]int64
	g.adminGet("/llm/cache", &stats)
	if len(stats) != 1 || stats[0]["entries"] != n+3 {
		t.Errorf("GET /llm/cache: %+v, want %d entries", stats, n+3)
	}
}
