package llmquota

import (
	"math"
	"testing"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/openai"
)

// The reservation counts the prompt once and the completion once per
// choice (n).
func TestPlanEstimateCountsChoices(t *testing.T) {
	q := &Quota{DefaultMaxTokens: 1000, store: newMemoryStore()}
	defer q.store.(*memoryStore).Destruct()
	tenant := &tenancy.Tenant{KeyID: "k", Levels: []tenancy.Level{tenancy.NewLevel("key", "o/t/p/k-plan", tenancy.Limits{})}}
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	prompt := func(body string) int64 {
		req, err := openai.Parse(openai.ChatCompletions, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return req.PromptTokensEstimate()
	}
	for _, tc := range []struct {
		name    string
		body    string
		context int64
		want    func(p int64) int64
	}{
		{"max_tokens, n unset", `{"model":"m","max_tokens":100,` + msgs + `}`, 0, func(p int64) int64 { return p + 100 }},
		{"max_tokens, n=1", `{"model":"m","n":1,"max_tokens":100,` + msgs + `}`, 0, func(p int64) int64 { return p + 100 }},
		{"max_tokens, n=4", `{"model":"m","n":4,"max_tokens":100,` + msgs + `}`, 0, func(p int64) int64 { return p + 400 }},
		{"max_completion_tokens, n=3", `{"model":"m","n":3,"max_completion_tokens":50,` + msgs + `}`, 0, func(p int64) int64 { return p + 150 }},
		{"default, n=4", `{"model":"m","n":4,` + msgs + `}`, 0, func(p int64) int64 { return p + 4000 }},
		{"context length, n=2", `{"model":"m","n":2,` + msgs + `}`, 512, func(p int64) int64 { return p + 2*(512-p) }},
		{"huge max_tokens saturates", `{"model":"m","n":128,"max_tokens":9223372036854775807,` + msgs + `}`, 0, func(int64) int64 { return math.MaxInt64 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := openai.Parse(openai.ChatCompletions, []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			a := q.plan(tenant, req, &catalog.Model{Name: "m", ContextLength: tc.context})
			if want := tc.want(prompt(tc.body)); a.est != want {
				t.Errorf("reserved %d tokens, want %d", a.est, want)
			}
		})
	}
}
