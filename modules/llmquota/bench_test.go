package llmquota

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/openai"
)

// BenchmarkInProcess is llm_quota's own work per request with in-process
// counters (key, project, team and organisation levels): plan, admit,
// rate headers, settle and usage metrics. Authentication (one SHA-256)
// and the request parse the router needs anyway are not included.
func BenchmarkInProcess(b *testing.B) {
	q := &Quota{DefaultMaxTokens: 1024, Lease: caddy.Duration(15 * time.Minute), store: newMemoryStore()}
	t := &llm.Tenant{KeyID: "k", Org: "o", Team: "t", Project: "p", Levels: []llm.Level{
		llm.NewLevel("key", "o/t/p/k", llm.Limits{}),
		llm.NewLevel("project", "o/t/p", llm.Limits{}),
		llm.NewLevel("team", "o/t", llm.Limits{TokensPerMinute: 1 << 50}),
		llm.NewLevel("organisation", "o", llm.Limits{RequestsPerMinute: 1 << 50, Budget: 1e9, BudgetPeriod: "month"}),
	}}
	req, err := openai.Parse(openai.ChatCompletions, []byte(`{"model":"m","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		b.Fatal(err)
	}
	m := &llm.Model{Name: "m"}
	h := http.Header{}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		a := q.plan(t, req, m)
		d, err := q.store.admit(ctx, a)
		if err != nil || !d.ok {
			b.Fatal(err, d)
		}
		setRateHeaders(h, a, d)
		s := &settlement{adm: a, prompt: 10, completion: 20, costMicros: 5}
		_ = q.store.settle(ctx, s)
		recordUsage(t, a.model, s)
	}
}
