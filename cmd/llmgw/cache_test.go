package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

const cacheModels = `
		model sim-chat {
			engine sim
			option max_tokens 8
		}
		model broken {
			engine sim
			option fail_status 500
		}`

func chatWith(t *testing.T, c openai.Client, model, question string, opts ...option.RequestOption) (*openai.ChatCompletion, *http.Response) {
	t.Helper()
	var raw *http.Response
	resp, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage(question)},
	}, append(opts, option.WithResponseInto(&raw))...)
	if err != nil {
		t.Fatalf("%s: %v", question, err)
	}
	return resp, raw
}

func TestCacheExactAndStreams(t *testing.T) {
	g := startGatewayBefore(t, cacheModels, "\t\tllm_cache {\n\t\t\tttl 2s\n\t\t}")
	c := g.client()
	first, raw := chatWith(t, c, "sim-chat", "tell me about rivers")
	if got := raw.Header.Get("X-Llmgw-Cache"); got != "miss" {
		t.Fatalf("first: x-llmgw-cache %q, want miss", got)
	}
	second, raw := chatWith(t, c, "sim-chat", "tell me about rivers")
	if got := raw.Header.Get("X-Llmgw-Cache"); got != "hit-exact" {
		t.Fatalf("second: x-llmgw-cache %q, want hit-exact", got)
	}
	if second.Choices[0].Message.Content != first.Choices[0].Message.Content {
		t.Errorf("hit %q differs from the answer %q", second.Choices[0].Message.Content, first.Choices[0].Message.Content)
	}
	if second.Usage.PromptTokensDetails.CachedTokens != first.Usage.PromptTokens {
		t.Errorf("hit usage does not mark the prompt cached: %+v", second.Usage)
	}

	// The same question streamed is replayed as a proper stream.
	stream := c.Chat.Completions.NewStreaming(bg, openai.ChatCompletionNewParams{
		Model:         "sim-chat",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("tell me about rivers")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}, option.WithResponseInto(&raw))
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if raw.Header.Get("X-Llmgw-Cache") != "hit-exact" || acc.Choices[0].Message.Content != first.Choices[0].Message.Content {
		t.Errorf("streamed hit: %q %q", raw.Header.Get("X-Llmgw-Cache"), acc.Choices[0].Message.Content)
	}
	if chunks < 10 || acc.Usage.CompletionTokens != first.Usage.CompletionTokens || acc.Choices[0].FinishReason != "stop" {
		t.Errorf("streamed hit: %d chunks, usage %+v, finish %q", chunks, acc.Usage, acc.Choices[0].FinishReason)
	}

	// A streamed miss is stored and answers a whole request.
	stream = c.Chat.Completions.NewStreaming(bg, openai.ChatCompletionNewParams{
		Model:    "sim-chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("and lakes?")},
	})
	var streamed openai.ChatCompletionAccumulator
	for stream.Next() {
		streamed.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	whole, raw := chatWith(t, c, "sim-chat", "and lakes?")
	if raw.Header.Get("X-Llmgw-Cache") != "hit-exact" || whole.Choices[0].Message.Content != streamed.Choices[0].Message.Content {
		t.Errorf("after a streamed miss: %q %q, want a hit with %q", raw.Header.Get("X-Llmgw-Cache"),
			whole.Choices[0].Message.Content, streamed.Choices[0].Message.Content)
	}

	// Cache-Control.
	_, raw = chatWith(t, c, "sim-chat", "tell me about rivers", option.WithHeader("Cache-Control", "no-cache"))
	if got := raw.Header.Get("X-Llmgw-Cache"); got != "bypass" {
		t.Errorf("no-cache: %q, want bypass", got)
	}
	chatWith(t, c, "sim-chat", "oceans", option.WithHeader("Cache-Control", "no-store"))
	if _, raw = chatWith(t, c, "sim-chat", "oceans"); raw.Header.Get("X-Llmgw-Cache") != "miss" {
		t.Errorf("no-store was stored: %q", raw.Header.Get("X-Llmgw-Cache"))
	}

	// TTL.
	waitFor(t, 10*time.Second, "the entry to expire", func() bool {
		_, raw := chatWith(t, c, "sim-chat", "tell me about rivers", option.WithHeader("Cache-Control", "no-store"))
		return raw.Header.Get("X-Llmgw-Cache") == "miss"
	})

	// Stats and purge through the admin API.
	var stats []map[string]int64
	g.adminGet("/llm/cache", &stats)
	if len(stats) != 1 || stats[0]["hits_exact"] < 3 || stats[0]["misses"] < 3 || stats[0]["entries"] < 1 {
		t.Errorf("cache stats: %+v", stats)
	}
	chatWith(t, c, "sim-chat", "and lakes?")
	if code, body := adminDo(t, g, "POST", "/llm/cache/purge", `{"model":"sim-chat"}`); code != 200 || !strings.Contains(string(body), `"purged":`) {
		t.Errorf("purge: %d %s", code, body)
	}
	if _, raw := chatWith(t, c, "sim-chat", "and lakes?"); raw.Header.Get("X-Llmgw-Cache") != "miss" {
		t.Errorf("after a purge: %q, want miss", raw.Header.Get("X-Llmgw-Cache"))
	}

	// Errors are not stored.
	for range 2 {
		r, body := post(t, g.base+"/v1/chat/completions", `{"model":"broken","messages":[{"role":"user","content":"x"}]}`)
		if r.StatusCode != 500 || r.Header.Get("X-Llmgw-Cache") != "miss" {
			t.Errorf("error answer: %d %q %s", r.StatusCode, r.Header.Get("X-Llmgw-Cache"), body)
		}
	}
}

func TestCacheScopedPerTenantAndSemantic(t *testing.T) {
	org := strings.Replace(tenancyBlock("", "", "", ""), "\t\t\t\tproject alpha {", "\t\t\t\tproject beta {\n\t\t\t\t\tkey b1 "+
		hashOf("secret-b")+"\n\t\t\t\t}\n\t\t\t\tproject alpha {", 1)
	g := startQuotaGateway(t, cacheModels+org, "")
	g.stop()
	g.before = "\t\tllm_cache {\n\t\t\tsemantic 0.8\n\t\t}"
	g.writeConfig(cacheModels+org, "")
	g.start()
	alpha, alpha2, beta := keyClient(g, "secret-1"), keyClient(g, "secret-2"), keyClient(g, "secret-b")
	chatWith(t, alpha, "sim-chat", "What is the capital of France?")
	if _, raw := chatWith(t, alpha2, "sim-chat", "What is the capital of France?"); raw.Header.Get("X-Llmgw-Cache") != "hit-exact" {
		t.Errorf("same project, other key: %q, want hit-exact", raw.Header.Get("X-Llmgw-Cache"))
	}
	if _, raw := chatWith(t, beta, "sim-chat", "What is the capital of France?"); raw.Header.Get("X-Llmgw-Cache") != "miss" {
		t.Errorf("other project: %q, want miss", raw.Header.Get("X-Llmgw-Cache"))
	}
	_, raw := chatWith(t, alpha, "sim-chat", "Tell me the capital of France.")
	if got := raw.Header.Get("X-Llmgw-Cache"); !strings.HasPrefix(got, "hit-semantic;similarity=") {
		t.Errorf("paraphrase: %q, want hit-semantic", got)
	}
	if _, raw := chatWith(t, alpha, "sim-chat", "What is the capital of Germany?"); raw.Header.Get("X-Llmgw-Cache") != "miss" {
		t.Errorf("another country: %q, want miss", raw.Header.Get("X-Llmgw-Cache"))
	}
}

func hashOf(secret string) string { return tenancy.HashKey(secret) }

func TestCacheSharedThroughRedis(t *testing.T) {
	redis := startRedis(t)
	before := "\t\tllm_cache {\n\t\t\tredis " + redis.url() + "\n\t\t}"
	g1 := startGatewayBefore(t, cacheModels, before)
	g2 := startGatewayBefore(t, cacheModels, before)
	first, _ := chatWith(t, g1.client(), "sim-chat", "shared question")
	var got *openai.ChatCompletion
	waitFor(t, 10*time.Second, "the entry to reach the other instance", func() bool {
		resp, raw := chatWith(t, g2.client(), "sim-chat", "shared question", option.WithHeader("Cache-Control", "no-store"))
		got = resp
		return raw.Header.Get("X-Llmgw-Cache") == "hit-exact"
	})
	if got.Choices[0].Message.Content != first.Choices[0].Message.Content {
		t.Errorf("the other instance answered %q, want %q", got.Choices[0].Message.Content, first.Choices[0].Message.Content)
	}
	// A starting instance warms from Redis.
	g3 := startGatewayBefore(t, cacheModels, before)
	waitFor(t, 10*time.Second, "a new instance to warm", func() bool {
		_, raw := chatWith(t, g3.client(), "sim-chat", "shared question", option.WithHeader("Cache-Control", "no-store"))
		return raw.Header.Get("X-Llmgw-Cache") == "hit-exact"
	})
	// A purge on one instance reaches the others.
	if code, _ := adminDo(t, g1, "POST", "/llm/cache/purge", `{}`); code != 200 {
		t.Fatalf("purge: %d", code)
	}
	waitFor(t, 10*time.Second, "the purge to reach the other instance", func() bool {
		_, raw := chatWith(t, g2.client(), "sim-chat", "shared question", option.WithHeader("Cache-Control", "no-store"))
		return raw.Header.Get("X-Llmgw-Cache") == "miss"
	})
}

func TestCacheSemanticWithCatalogEmbedder(t *testing.T) {
	// The sim engine's embeddings hash words (a simulator, not a model), so
	// the threshold is lower than the built-in embedder's.
	models := cacheModels + `
		model sim-embed {
			engine sim
		}`
	g := startGatewayBefore(t, models, "\t\tllm_cache {\n\t\t\tsemantic 0.6 {\n\t\t\t\tembedder sim-embed\n\t\t\t}\n\t\t}")
	c := g.client()
	chatWith(t, c, "sim-chat", "What is the capital of France?")
	if _, raw := chatWith(t, c, "sim-chat", "Tell me the capital of France."); !strings.HasPrefix(raw.Header.Get("X-Llmgw-Cache"), "hit-semantic") {
		t.Errorf("paraphrase: %q, want hit-semantic", raw.Header.Get("X-Llmgw-Cache"))
	}
	if _, raw := chatWith(t, c, "sim-chat", "What is the capital of Germany?"); raw.Header.Get("X-Llmgw-Cache") != "miss" {
		t.Errorf("another country: %q, want miss", raw.Header.Get("X-Llmgw-Cache"))
	}
	rep := g.readyReplicas("sim-embed", 1)[0]
	if n := simStats(t, rep.URL)["requests"]; n != 3 {
		t.Errorf("the embedding model saw %d requests, want one per question (3)", n)
	}
}

func TestCacheSurvivesReload(t *testing.T) {
	before := "\t\tllm_cache {\n\t\t\tsemantic\n\t\t}"
	g := startGatewayBefore(t, cacheModels, before)
	c := g.client()
	chatWith(t, c, "sim-chat", "What is the capital of Peru?")
	g.reload(cacheModels, "")
	if _, raw := chatWith(t, c, "sim-chat", "What is the capital of Peru?"); raw.Header.Get("X-Llmgw-Cache") != "hit-exact" {
		t.Errorf("after a reload: %q, want hit-exact", raw.Header.Get("X-Llmgw-Cache"))
	}
	if _, raw := chatWith(t, c, "sim-chat", "Tell me the capital of Peru."); !strings.HasPrefix(raw.Header.Get("X-Llmgw-Cache"), "hit-semantic") {
		t.Errorf("the semantic index after a reload: %q, want hit-semantic", raw.Header.Get("X-Llmgw-Cache"))
	}
}

// After a reload the store the new handlers use is still inspectable and
// purgeable: the old handlers' cleanup must not unregister it.
func TestCacheAdminAcrossReload(t *testing.T) {
	g := startGatewayBefore(t, cacheModels, "\t\tllm_cache {\n\t\t\tsemantic\n\t\t}")
	c := g.client()
	chatWith(t, c, "sim-chat", "What is the capital of Peru?")
	for i, ttl := range []string{"2h", "3h"} { // two reloads: the store passes through three configs
		g.before = "\t\tllm_cache {\n\t\t\tttl " + ttl + "\n\t\t\tsemantic\n\t\t}"
		g.reload(cacheModels, "")
		if _, raw := chatWith(t, c, "sim-chat", "What is the capital of Peru?"); raw.Header.Get("X-Llmgw-Cache") != "hit-exact" {
			t.Fatalf("after reload %d: %q, want hit-exact", i+1, raw.Header.Get("X-Llmgw-Cache"))
		}
	}
	var stats []map[string]int64
	g.adminGet("/llm/cache", &stats)
	if len(stats) != 1 || stats[0]["entries"] != 1 || stats[0]["hits_exact"] != 2 {
		t.Errorf("GET /llm/cache after reloads: %+v, want one store with 1 entry and 2 exact hits", stats)
	}
	if out, err := ctlRun(t, g, "cache"); err != nil || strings.Count(strings.TrimSpace(out), "\n") != 1 {
		t.Errorf("ctl cache after reloads: %v\n%s", err, out)
	}
	out, err := ctlRun(t, g, "cache", "purge", "--model", "sim-chat")
	if err != nil || !strings.Contains(out, "purged 1 entries") {
		t.Errorf("ctl cache purge after reloads: %v\n%s", err, out)
	}
	if _, raw := chatWith(t, c, "sim-chat", "What is the capital of Peru?"); raw.Header.Get("X-Llmgw-Cache") != "miss" {
		t.Errorf("after a purge: %q, want miss", raw.Header.Get("X-Llmgw-Cache"))
	}
}

// A full cache keeps a new answer only when its question is asked more
// often than the entry it would evict (admission frequency, the default):
// a question asked once is not kept, asked twice it is. With admission
// all, every answer is kept and the first repeat is a hit.
func TestCacheAdmission(t *testing.T) {
	fill := []string{
		"What is the capital of Peru?", "How many moons does Jupiter have?", "Who wrote Pride and Prejudice?",
		"How do I reset my router to factory settings?", "What's the difference between a virus and bacteria?",
		"Can you explain how compound interest works?", "why is the sky blue", "Best way to learn Spanish quickly?",
		"How tall is Mount Kilimanjaro?", "What does HTTP 404 mean?", "how do vaccines train the immune system",
		"What year did the Berlin Wall fall?", "Is coffee bad for your heart?", "How do I convert Celsius to Fahrenheit?",
		"What causes the northern lights?", "Which planet has the longest day?", "how many bones are in the human body",
		"What is a Roth IRA?", "How do solar panels make electricity?", "Who painted the Mona Lisa?",
		"What is the speed of sound in water?", "How do I unclog a kitchen sink without chemicals?",
		"what's a good stretching routine for lower back pain", "Why do cats purr?", "How does a bill become law in the US?",
	}
	q := "How long should I boil an egg for a runny yolk?"
	for _, tc := range []struct {
		admission   string
		secondAsk   string // X-Llmgw-Cache of the second ask
		notAdmitted bool
	}{
		{"", "miss", true}, // the default: frequency
		{"all", "hit-exact", false},
	} {
		t.Run("admission "+tc.admission, func(t *testing.T) {
			block := "\t\tllm_cache {\n\t\t\tmax_memory 12KiB\n\t\t\tsemantic\n"
			if tc.admission != "" {
				block += "\t\t\tadmission " + tc.admission + "\n"
			}
			g := startGatewayBefore(t, cacheModels, block+"\t\t}")
			defer g.stop()
			c := g.client()
			for _, f := range fill {
				chatWith(t, c, "sim-chat", f)
			}
			var stats []map[string]int64
			g.adminGet("/llm/cache", &stats)
			if len(stats) != 1 || stats[0]["bytes"] < 8<<10 || stats[0]["entries"] >= int64(len(fill)) {
				t.Fatalf("after %d questions: %+v, want a full store of 12KiB", len(fill), stats)
			}
			if _, raw := chatWith(t, c, "sim-chat", q); raw.Header.Get("X-Llmgw-Cache") != "miss" {
				t.Fatalf("first ask: %q, want miss", raw.Header.Get("X-Llmgw-Cache"))
			}
			if _, raw := chatWith(t, c, "sim-chat", q); raw.Header.Get("X-Llmgw-Cache") != tc.secondAsk {
				t.Fatalf("second ask: %q, want %s", raw.Header.Get("X-Llmgw-Cache"), tc.secondAsk)
			}
			if _, raw := chatWith(t, c, "sim-chat", q); raw.Header.Get("X-Llmgw-Cache") != "hit-exact" {
				t.Errorf("third ask: %q, want hit-exact", raw.Header.Get("X-Llmgw-Cache"))
			}
			g.adminGet("/llm/cache", &stats)
			if got := stats[0]["not_admitted"] > 0; got != tc.notAdmitted {
				t.Errorf("not_admitted %d, want > 0: %v", stats[0]["not_admitted"], tc.notAdmitted)
			}
		})
	}
}
