package llmquota

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/openai"
)

// BenchmarkInProcess is llm_quota's own work per request with in-process
// counters (key, project, team and organisation levels): plan, admit,
// rate headers, settle and usage metrics. Authentication (one SHA-256)
// and the request parse the router needs anyway are not included.
func BenchmarkInProcess(b *testing.B) {
	q := &Quota{DefaultMaxTokens: 1024, Lease: caddy.Duration(15 * time.Minute), store: newMemoryStore()}
	t := &tenancy.Tenant{KeyID: "k", Org: "o", Team: "t", Project: "p", Levels: []tenancy.Level{
		tenancy.NewLevel("key", "o/t/p/k", tenancy.Limits{}),
		tenancy.NewLevel("project", "o/t/p", tenancy.Limits{}),
		tenancy.NewLevel("team", "o/t", tenancy.Limits{TokensPerMinute: 1 << 50}),
		tenancy.NewLevel("organisation", "o", tenancy.Limits{RequestsPerMinute: 1 << 50, Budget: 1e9, BudgetPeriod: "month"}),
	}}
	req, err := openai.Parse(openai.ChatCompletions, []byte(`{"model":"m","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		b.Fatal(err)
	}
	m := &catalog.Model{Name: "m"}
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

// BenchmarkRedisDown is an admission's latency while Redis is down, with
// on_store_error deny and allow: "refusing" is a port nothing listens on,
// "stopped" a redis-server that answered one admission and was killed.
// Each iteration is one request through Quota.admit, the policy applied;
// first-ms is the admission that found Redis gone.
func BenchmarkRedisDown(b *testing.B) {
	for _, where := range []string{"refusing", "stopped"} {
		for _, policy := range []string{"deny", "allow"} {
			b.Run(where+"/"+policy, func(b *testing.B) {
				var url string
				var srv *redisAt
				if where == "refusing" {
					ln, err := net.Listen("tcp", "127.0.0.1:0")
					if err != nil {
						b.Fatal(err)
					}
					url = "redis://" + ln.Addr().String()
					ln.Close()
				} else {
					srv = startRedisServer(b, 0)
					url = fmt.Sprintf("redis://127.0.0.1:%d", srv.port)
				}
				s, err := newRedisStore(url)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Destruct()
				q := &Quota{OnStoreError: policy, store: s, down: new(atomic.Bool), logger: zap.NewNop()}
				if policy == "allow" {
					q.fallback = newMemoryStore()
					defer q.fallback.Destruct()
				}
				lvl := tenancy.Level{Kind: "key", Name: "k-down-" + where + policy, Limits: tenancy.Limits{RequestsPerMinute: 1 << 40}}
				r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
				if where == "stopped" {
					if _, err := s.admit(r.Context(), testAdmission(1, lvl)); err != nil {
						b.Fatal(err)
					}
					srv.stop()
				}
				// The first admission finds Redis gone; the figure per
				// operation is every admission after it.
				start := time.Now()
				_, _, _ = q.admit(r, testAdmission(1, lvl))
				first := time.Since(start)
				b.ResetTimer()
				for b.Loop() {
					_, _, err := q.admit(r, testAdmission(1, lvl))
					if (err == nil) != (policy == "allow") {
						b.Fatalf("policy %s: admission error %v", policy, err)
					}
				}
				b.ReportMetric(float64(first)/1e6, "first-ms")
			})
		}
	}
}
