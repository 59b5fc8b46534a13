package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// TestKnowledgeBaseChargesEmbeddings imports files into a project with
// 150 tokens a day: the embedder's tokens count against it (and at the
// embedder's price into the usage the admin API reports, at the key and
// the project), a query embedded for a search is charged and a cached
// one is not, and once the import has used the day's tokens, the key's
// next chat request is refused with the quota's 429 and a file added
// then fails naming the limit; with the counters in memory and in Redis.
func TestKnowledgeBaseChargesEmbeddings(t *testing.T) {
	t.Run("memory", func(t *testing.T) { kbCheckCharges(t, "default_max_tokens 5") })
	t.Run("redis", func(t *testing.T) { kbCheckCharges(t, "default_max_tokens 5\n\t\t\tstore "+startRedis(t).url()) })
}

func kbCheckCharges(t *testing.T, quota string) {
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{})}
	g.quota = &quota
	g.before = "\t\tllm_kb {\n\t\t\tembedder sim-embed\n\t\t}\n"
	models := strings.Replace(kbModels, "option embedding_dims 256", "option embedding_dims 256\n\t\t\tprice 1 0", 1)
	g.writeConfig(models+fmt.Sprintf(`
		org acme {
			team research {
				project alpha {
					tokens_per_day 150
					key ka %s
				}
			}
		}`, tenancy.HashKey("alpha-key")), "")
	g.start()
	c := keyClient(g, "alpha-key")
	if _, e := chatErr(c, "sim-chat"); e != nil {
		t.Fatalf("a chat request before the import: %v", e)
	}

	travel := kbUpload(t, c, "travel-policy.md", nil)
	vs, err := c.VectorStores.New(bg, openai.VectorStoreNewParams{Name: openai.String("handbook"), FileIDs: []string{travel.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if got := kbWaitStore(t, c, vs.ID); got.FileCounts.Completed != 1 {
		t.Fatalf("the first file: %+v", got.FileCounts)
	}
	first := kbEmbedUsage(g, "project=acme/research/alpha")
	if first.InputTokens == 0 || first.CostMicros != first.InputTokens {
		t.Fatalf("the project's usage of the embedder after one file: %+v, want its tokens at 1 per million", first)
	}
	kbSearch(t, c, vs.ID, "hotel limit in London", nil)
	kbSearch(t, c, vs.ID, "hotel limit in London", nil) // the query's vector is cached
	if got := kbEmbedUsage(g, "project=acme/research/alpha"); got.InputTokens != first.InputTokens+4 || got.Requests != first.Requests+1 {
		t.Fatalf("after two searches with one query: %+v, want one embedding of its 4 tokens more than %+v", got, first)
	}

	security := kbUpload(t, c, "security.html", nil)
	if sf, err := c.VectorStores.Files.NewAndPoll(bg, vs.ID, openai.VectorStoreFileNewParams{FileID: security.ID}, 100); err != nil || sf.Status != "completed" {
		t.Fatalf("the second file (before the day's tokens are used): %v %+v", err, sf)
	}
	embed := kbEmbedUsage(g, "project=acme/research/alpha")
	if key := kbEmbedUsage(g, "key=ka"); key != embed || embed.InputTokens < 150 {
		t.Fatalf("the embedder's usage: key %+v, project %+v; want the same at both, at least the day's 150 tokens", key, embed)
	}
	_, e := chatErr(c, "sim-chat")
	if e == nil || e.StatusCode != 429 || e.Code != "rate_limit_exceeded" || !strings.Contains(e.Message, "project acme/research/alpha has reached its limit of 150 tokens per day") {
		t.Fatalf("a chat request after the import used %d tokens: got %+v, want 429 naming the project's tokens per day", embed.InputTokens, e)
	}

	onboarding := kbUpload(t, c, "onboarding.txt", nil)
	sf, err := c.VectorStores.Files.NewAndPoll(bg, vs.ID, openai.VectorStoreFileNewParams{FileID: onboarding.ID}, 100)
	if err != nil || sf.Status != "failed" || sf.LastError.Code != "rate_limit_exceeded" ||
		!strings.Contains(sf.LastError.Message, "(ka)") || !strings.Contains(sf.LastError.Message, "limit of 150 tokens per day") {
		t.Fatalf("a file added after the day's tokens are used: %v %+v", err, sf)
	}
	if got := kbEmbedUsage(g, "project=acme/research/alpha"); got != embed {
		t.Errorf("the failed file was embedded: usage %+v, was %+v", got, embed)
	}
}

// kbEmbedUsage is the usage of the embedder sim-embed the admin API
// reports for a node (?project=…, ?key=…).
func kbEmbedUsage(g *gateway, node string) llmapi.Usage {
	g.t.Helper()
	var u struct {
		Models map[string]llmapi.Usage `json:"models"`
	}
	g.adminGet("/llm/usage?"+node, &u)
	return u.Models["sim-embed"]
}
