package llmquota

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/openai"
)

// Tokens charged outside a request (a knowledge base's embeddings) count
// into tokens per day and the budget at every level, as a request's
// usage does, take no request slot, show in the usage, and leave no room
// once a level has used its day's tokens or its budget; in memory and in
// Redis.
func TestChargeCountsIntoLimitsAndUsage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) store
	}{
		{"memory", func(t *testing.T) store {
			m := newMemoryStore()
			t.Cleanup(func() { _ = m.Destruct() })
			return m
		}},
		{"redis", func(t *testing.T) store {
			_, s := startRedisStore(t)
			return s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &Quota{DefaultMaxTokens: 10, store: tc.store(t)}
			c := &charger{q: q}
			key := tenancy.NewLevel("key", "k-charge-"+tc.name, tenancy.Limits{MaxConcurrent: 1})
			project := tenancy.NewLevel("project", "o/t/p-charge-"+tc.name, tenancy.Limits{TokensPerDay: 100})
			team := tenancy.NewLevel("team", "o/t-charge-"+tc.name, tenancy.Limits{Budget: 1})
			tenant := &tenancy.Tenant{KeyID: key.Name, Levels: []tenancy.Level{key, project, team}}
			embed := &catalog.Model{Name: "embed", Price: &catalog.Price{InputPerMillion: 10_000}} // 0.01 a token
			chat := &catalog.Model{Name: "chat"}
			req, err := openai.Parse(openai.ChatCompletions, []byte(`{"model":"chat","messages":[{"role":"user","content":"hi"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			admit := func(est int64) (*admission, decision) {
				t.Helper()
				a := q.plan(tenant, req, chat)
				a.est = est
				d, err := q.store.admit(t.Context(), a)
				if err != nil {
					t.Fatal(err)
				}
				return a, d
			}

			// A Redis store sends settlements and charges in the
			// background: wait until they are in Redis.
			settled := func() {
				t.Helper()
				if rs, ok := q.store.(*redisStore); ok {
					for deadline := time.Now().Add(10 * time.Second); rs.pending() > 0 && time.Now().Before(deadline); {
						time.Sleep(5 * time.Millisecond)
					}
				}
			}
			if err := c.Charge(t.Context(), tenant, embed, 60); err != nil {
				t.Fatal(err)
			}
			settled()
			if _, d := admit(50); d.ok || d.failLevel != 1 || d.failKind != kindTokensDay {
				t.Fatalf("a request of 50 tokens after 60 charged against 100 a day: got %+v, want refused by the project's tokens per day", d)
			}
			// The charge took no slot (the key allows one in flight) and
			// reserved nothing: 40 more fit exactly.
			a, d := admit(40)
			if !d.ok {
				t.Fatalf("a request of 40 tokens after 60 charged: got %+v, want admitted", d)
			}
			if err := q.store.settle(t.Context(), &settlement{adm: a}); err != nil {
				t.Fatal(err)
			}
			settled()
			if err := c.Room(t.Context(), tenant); err != nil {
				t.Fatalf("room after 60 of 100 tokens and 0.60 of 1.00: %v", err)
			}
			if err := c.Charge(t.Context(), tenant, embed, 50); err != nil {
				t.Fatal(err)
			}
			settled()
			var le *tenancy.LimitError
			err = c.Room(t.Context(), tenant)
			if !errors.As(err, &le) || le.Code != "rate_limit_exceeded" || !strings.Contains(le.Message, "project "+project.Name+" has reached its limit of 100 tokens per day") {
				t.Fatalf("room after 110 of 100 tokens: got %v, want the project's tokens per day named", err)
			}
			err = c.Room(t.Context(), &tenancy.Tenant{KeyID: key.Name, Levels: []tenancy.Level{team}})
			if !errors.As(err, &le) || le.Code != "insufficient_quota" || !strings.Contains(le.Message, "team "+team.Name+" has spent its monthly budget of 1.00") {
				t.Fatalf("room after 1.10 of a budget of 1.00: got %v, want the team's budget named", err)
			}
			u, err := q.store.ReadUsage(team.Node(), a.now.Add(-time.Hour), a.now.Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			if got := u["embed"]; got == nil || got.Requests != 2 || got.InputTokens != 110 || got.OutputTokens != 0 || got.CostMicros != 1_100_000 {
				t.Errorf("the team's usage of the embedder: got %+v, want 2 calls, 110 input tokens, 1.10", got)
			}
		})
	}
}
