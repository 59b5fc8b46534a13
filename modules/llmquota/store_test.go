package llmquota

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

func testAdmission(est int64, levels ...tenancy.Level) *admission {
	at := time.Date(2026, 5, 1, 12, 30, 10, 0, time.UTC)
	a := &admission{reqID: newReqID(), now: at, est: est, lease: time.Minute, model: "m"}
	for i := range levels {
		l := &levels[i]
		if l.Limits.BudgetPeriod == "" {
			l.Limits.BudgetPeriod = "month"
		}
		a.levels = append(a.levels, levelPlan{level: l, win: newWindowSet("t:", l.Node(), at, l.Limits.BudgetPeriod), limits: levelLimits(l)})
	}
	a.redisArgs = redisArgsOf(&tenancy.Tenant{Levels: levels})
	return a
}

func TestMemoryStoreAdmitAndSettle(t *testing.T) {
	m := newMemoryStore()
	defer m.Destruct()
	key := tenancy.Level{Kind: "key", Name: "k"}
	team := tenancy.Level{Kind: "team", Name: "o/t", Limits: tenancy.Limits{TokensPerMinute: 50, MaxConcurrent: 2}}
	// Two in flight fill the concurrency limit.
	a1, a2 := testAdmission(20, key, team), testAdmission(20, key, team)
	for _, a := range []*admission{a1, a2} {
		if d, _ := m.admit(t.Context(), a); !d.ok {
			t.Fatalf("refused: %+v", d)
		}
	}
	d, _ := m.admit(t.Context(), testAdmission(1, key, team))
	if d.ok || d.failLevel != 1 || d.failKind != kindConcurrent {
		t.Fatalf("third in flight: got %+v, want refused by the team's concurrency", d)
	}
	// Settling one at 5 tokens frees its slot and 15 of its 20 tokens.
	if err := m.settle(t.Context(), &settlement{adm: a1, prompt: 2, completion: 3}); err != nil {
		t.Fatal(err)
	}
	d, _ = m.admit(t.Context(), testAdmission(25, key, team))
	if !d.ok || d.counts[1][1] != 50 {
		t.Fatalf("after settling: got %+v, want admitted with 50 tokens counted", d)
	}
	d, _ = m.admit(t.Context(), testAdmission(1, key, team))
	if d.ok || d.failKind != kindTokensMinute && d.failKind != kindConcurrent {
		t.Fatalf("over the limit: got %+v", d)
	}
	at := a1.now
	u, _ := m.ReadUsage(key.Node(), at.Add(-time.Hour), at.Add(time.Hour))
	if got := u["m"]; got == nil || got.Requests != 1 || got.InputTokens != 2 || got.OutputTokens != 3 {
		t.Errorf("usage: got %+v", got)
	}
}

func TestBudgetCountsSettledCostOnly(t *testing.T) {
	m := newMemoryStore()
	defer m.Destruct()
	org := tenancy.Level{Kind: "organisation", Name: "o", Limits: tenancy.Limits{Budget: 1}} // 1e6 micros
	for i := range 3 {
		a := testAdmission(1000, org)
		if d, _ := m.admit(t.Context(), a); !d.ok {
			t.Fatalf("request %d refused with %d spent", i+1, i*400_000)
		}
		_ = m.settle(t.Context(), &settlement{adm: a, costMicros: 400_000})
	}
	if d, _ := m.admit(t.Context(), testAdmission(1, org)); d.ok || d.failKind != kindBudget {
		t.Errorf("after spending 1.2 of 1: got %+v, want refused by the budget", d)
	}
}

func TestResetIn(t *testing.T) {
	at := time.Date(2026, 2, 28, 23, 59, 30, 0, time.UTC)
	for _, tc := range []struct {
		kind   int
		period string
		want   time.Duration
	}{
		{kindRequests, "", 30 * time.Second},
		{kindTokensDay, "", 30 * time.Second},
		{kindBudget, "month", 30 * time.Second},
		{kindBudget, "day", 30 * time.Second},
	} {
		if got := resetIn(at, tc.kind, tc.period); got != tc.want {
			t.Errorf("kind %d %s: got %s, want %s", tc.kind, tc.period, got, tc.want)
		}
	}
	if got := resetIn(time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC), kindBudget, "month"); got != 22*24*time.Hour {
		t.Errorf("month reset: got %s", got)
	}
}

func TestAppendSeconds(t *testing.T) {
	for _, d := range []time.Duration{time.Second, 41017 * time.Millisecond, 41020 * time.Millisecond, 41100 * time.Millisecond,
		5 * time.Millisecond, 59999 * time.Millisecond, time.Minute, 0} {
		if got, want := string(appendSeconds(nil, d)), d.String(); got != want {
			t.Errorf("appendSeconds(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestRateHeaders(t *testing.T) {
	a := &admission{now: time.Date(2026, 11, 30, 10, 0, 18, 983e6, time.UTC)}
	a.levels = a.levelBuf[:2]
	a.levels[0].limits = [5]int64{100, 0}
	a.levels[1].limits = [5]int64{50, 90000}
	d := decision{ok: true, counts: [][5]int64{{10, 0}, {45, 1234}}}
	h := http.Header{}
	setRateHeaders(h, a, d)
	want := http.Header{"X-Ratelimit-Limit-Requests": {"50"}, "X-Ratelimit-Remaining-Requests": {"5"}, "X-Ratelimit-Reset-Requests": {"41.017s"},
		"X-Ratelimit-Limit-Tokens": {"90000"}, "X-Ratelimit-Remaining-Tokens": {"88766"}, "X-Ratelimit-Reset-Tokens": {"41.017s"}}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("headers %v, want %v", h, want)
	}
	a.levels[1].limits = [5]int64{0, 90000}
	h = http.Header{}
	setRateHeaders(h, a, d)
	if h.Get("X-Ratelimit-Limit-Requests") != "100" || h.Get("X-Ratelimit-Remaining-Requests") != "90" || h.Get("X-Ratelimit-Remaining-Tokens") != "88766" {
		t.Errorf("headers %v", h)
	}
	a.levels = a.levelBuf[:1]
	a.levels[0].limits = [5]int64{0, 7}
	h = http.Header{}
	setRateHeaders(h, a, decision{counts: [][5]int64{{0, 9}}})
	want = http.Header{"X-Ratelimit-Limit-Tokens": {"7"}, "X-Ratelimit-Remaining-Tokens": {"0"}, "X-Ratelimit-Reset-Tokens": {"41.017s"}}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("tokens only: headers %v, want %v", h, want)
	}
}

// Settlements land in the ledger of their model and hour, also when the
// model or the hour changes between them (a node keeps the last entry it
// used at hand).
func TestUsageLedgerByModelAndHour(t *testing.T) {
	m := newMemoryStore()
	defer m.Destruct()
	key := tenancy.Level{Kind: "key", Name: "k"}
	settle := func(model string, at time.Time, prompt int64) {
		a := testAdmission(1, key)
		a.model, a.now = model, at
		if d, _ := m.admit(t.Context(), a); !d.ok {
			t.Fatalf("refused: %+v", d)
		}
		_ = m.settle(t.Context(), &settlement{adm: a, prompt: prompt, completion: 1})
	}
	h1 := time.Date(2026, 5, 1, 12, 30, 0, 0, time.UTC)
	h2 := h1.Add(time.Hour)
	settle("a", h1, 1)
	settle("b", h1, 10)
	settle("a", h1, 100)
	settle("a", h2, 1000)
	settle("b", h1, 10000)
	u, _ := m.ReadUsage(key.Node(), h1, h1)
	if u["a"] == nil || u["a"].Requests != 2 || u["a"].InputTokens != 101 || u["b"] == nil || u["b"].InputTokens != 10010 {
		t.Errorf("hour 1: a %+v, b %+v", u["a"], u["b"])
	}
	u, _ = m.ReadUsage(key.Node(), h2, h2)
	if u["a"] == nil || u["a"].InputTokens != 1000 || u["b"] != nil {
		t.Errorf("hour 2: a %+v, b %+v", u["a"], u["b"])
	}
}

// Each model a tenant uses gets its own metric children, found again
// without building labels; another tenant gets its own.
func TestCountersForModels(t *testing.T) {
	t1 := &tenancy.Tenant{KeyID: "k1", Org: "o", Team: "o/t", Project: "o/t/p"}
	t2 := &tenancy.Tenant{KeyID: "k2", Org: "o", Team: "o/t", Project: "o/t/p"}
	a, b := countersFor(t1, "model-a"), countersFor(t1, "model-b")
	if a == b || countersFor(t1, "model-a") != a || countersFor(t1, "model-b") != b {
		t.Fatal("a tenant's counters per model are not kept apart, or not found again")
	}
	if countersFor(t2, "model-a") == a {
		t.Fatal("two tenants share counters")
	}
	if b.requests != metricRequests.WithLabelValues("o", "o/t", "o/t/p", "k1", "model-b") ||
		b.output != metricTokens.WithLabelValues("o", "o/t", "o/t/p", "k1", "model-b", "output") {
		t.Error("model-b's counters are not the children labelled with its tenant and model")
	}
}

// A node's keys are kept for the minute, but not across a change of its
// budget period (a reload can make a monthly budget daily).
func TestNodeKeysFollowBudgetPeriod(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 30, 10, 0, time.UTC)
	month := tenancy.NewLevel("organisation", "o-period", tenancy.Limits{Budget: 1, BudgetPeriod: "month"})
	day := tenancy.NewLevel("organisation", "o-period", tenancy.Limits{Budget: 1, BudgetPeriod: "day"})
	if w := nodeKeys(&month, at); nodeKeys(&month, at.Add(time.Second)) != w {
		t.Error("keys made again within the minute")
	}
	if got, want := nodeKeys(&day, at).boxed[3], "llmgw:q:o:o-period:b:day:20260501"; got != want {
		t.Errorf("budget key after the period changed: %v, want %s", got, want)
	}
}

func TestStoreLabelHasNoCredentials(t *testing.T) {
	for _, tc := range []struct{ name, store, want string }{
		{"default", "", "memory"},
		{"memory", "memory", "memory"},
		{"redis", "redis://127.0.0.1:6379", "redis://127.0.0.1:6379"},
		{"password and database", "redis://:hunter2@redis.internal:6379/2", "redis://redis.internal:6379/2"},
		{"user and password", "rediss://llmgw:hunter2@redis.internal:6380", "rediss://redis.internal:6380"},
		{"sentinel", "redis://u:hunter2@s1:26379?master_name=mymaster&addr=s2:26379", "redis://s1:26379"},
	} {
		if got := storeLabel(tc.store); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
