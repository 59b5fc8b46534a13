package llmquota

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// charger counts the tokens modules spend for a tenant outside a
// request (a knowledge base's embeddings) in the handler's store: into
// tokens per minute, tokens per day, the budget (at the model's price)
// and the usage the admin API reports, at every level of the key, as a
// request's usage is settled; without a reservation, and without
// counting a request against requests per minute or a slot against
// max_concurrent. In the usage each charge counts as a request of the
// model (a call to the embedder).
type charger struct{ q *Quota }

// registerCharger hands the app's charges to this handler's store. The
// id is the store's, so handlers sharing a store charge it once.
func (q *Quota) registerCharger() func() {
	return q.app.RegisterCharger("llm_quota:"+q.poolKeys[0], &charger{q: q})
}

// chargeStore is what a store does for charges.
type chargeStore interface {
	// charge counts a settlement made without an admission.
	charge(ctx context.Context, s *settlement) error
	// peek returns each level's tokens today and budget spent.
	peek(ctx context.Context, a *admission) ([][2]int64, error)
}

// Charge implements llm.Charger.
func (c *charger) Charge(ctx context.Context, t *tenancy.Tenant, m *catalog.Model, promptTokens int64) error {
	a := c.q.chargeAdmission(t, m.Name)
	s := &settlement{adm: a, prompt: promptTokens, costMicros: m.Price.CostMicros(promptTokens, 0), charge: true}
	if err := c.q.store.(chargeStore).charge(ctx, s); err != nil {
		return fmt.Errorf("charging %d tokens of %s to key %s: %w", promptTokens, m.Name, t.KeyID, err)
	}
	recordUsage(t, a.model, s)
	return nil
}

// Room implements llm.Charger: a *llm.LimitError for the first level
// that has used up its tokens per day or its budget.
func (c *charger) Room(ctx context.Context, t *tenancy.Tenant) error {
	a := c.q.chargeAdmission(t, "")
	used, err := c.q.store.(chargeStore).peek(ctx, a)
	if err != nil {
		return fmt.Errorf("reading the limits of key %s: %w", t.KeyID, err)
	}
	for i, lp := range a.levels {
		kind := 0
		switch {
		case lp.limits[2] > 0 && used[i][0] >= lp.limits[2]:
			kind = kindTokensDay
		case lp.limits[3] > 0 && used[i][1] >= lp.limits[3]:
			kind = kindBudget
		default:
			continue
		}
		return limitError(a.now, lp, kind)
	}
	return nil
}

// limitError names a level's used-up limit as llm_quota's 429 does.
func limitError(at time.Time, lp levelPlan, kind int) *tenancy.LimitError {
	retry := resetIn(at, kind, lp.level.Limits.BudgetPeriod)
	who := fmt.Sprintf("the %s %s", lp.level.Kind, lp.level.Name)
	if kind == kindBudget {
		return &tenancy.LimitError{Code: "insufficient_quota", RetryAfter: retry, Message: fmt.Sprintf("%s has spent its %sly budget of %.2f; it renews in %s",
			who, lp.level.Limits.BudgetPeriod, float64(lp.limits[3])/1e6, retry.Round(time.Second))}
	}
	return &tenancy.LimitError{Code: "rate_limit_exceeded", RetryAfter: retry, Message: fmt.Sprintf("%s has reached its limit of %d %s; it renews in %s",
		who, lp.limits[2], kindNames[kind], retry.Round(time.Second))}
}

// chargeAdmission is the claim a charge settles: the tenant's levels at
// this moment, with nothing reserved.
func (q *Quota) chargeAdmission(t *tenancy.Tenant, model string) *admission {
	at := now()
	a := &admission{now: at, model: model, levels: make([]levelPlan, len(t.Levels))}
	_, redis := q.store.(*redisStore)
	if redis {
		a.reqID, a.redisArgs = newReqID(), redisArgsOf(t)
	}
	for i := range t.Levels {
		l := &t.Levels[i]
		a.levels[i] = levelPlan{level: l, limits: levelLimits(l)}
		if redis {
			a.levels[i].win = nodeKeys(l, at)
		}
	}
	return a
}

func (m *memoryStore) charge(_ context.Context, s *settlement) error {
	a := s.adm
	uk := ledgerKey{a.now.Unix() / 3600, a.model}
	w := windowsAt(a.now)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.usageChanged = true
	for _, lp := range a.levels {
		n := m.node(lp.level.Node())
		n.tokensMinute.add(w.minute, s.prompt)
		n.tokensDay.add(w.day, s.prompt)
		if s.costMicros > 0 {
			n.budget.add(w.period(lp.level.Limits.BudgetPeriod), s.costMicros)
		}
		n.record(uk, s)
	}
	return nil
}

func (m *memoryStore) peek(_ context.Context, a *admission) ([][2]int64, error) {
	w := windowsAt(a.now)
	out := make([][2]int64, len(a.levels))
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, lp := range a.levels {
		if n := m.nodes[lp.level.Node()]; n != nil {
			out[i] = [2]int64{n.tokensDay.get(w.day), n.budget.get(w.period(lp.level.Limits.BudgetPeriod))}
		}
	}
	return out, nil
}

// charge queues the charge with the settlements: the sender sends it
// (chargeCmd) with the next pipeline, and keeps it through outages.
func (s *redisStore) charge(ctx context.Context, st *settlement) error {
	return s.settle(ctx, st)
}

func (s *redisStore) peek(ctx context.Context, a *admission) ([][2]int64, error) {
	if err := s.isDown(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.flush(ctx); err != nil { // the charges queued so far count
		return nil, err
	}
	keys := make([]string, 0, 2*len(a.levels))
	for _, lp := range a.levels {
		keys = append(keys, lp.win.boxed[2].(string), lp.win.boxed[3].(string))
	}
	vals, err := s.client.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, err
	}
	out := make([][2]int64, len(a.levels))
	for i, v := range vals {
		if str, ok := v.(string); ok {
			out[i/2][i%2], _ = strconv.ParseInt(str, 10, 64)
		}
	}
	return out, nil
}

// chargeScript counts tokens and cost at every level without a
// reservation, once per charge id: it starts the minute's, day's and
// budget's counters when no request has yet, and records the usage by
// hour. KEYS: 4 per level (tokens minute, tokens day, budget, usage
// hash), then the charge's marker. ARGV: tokens, cost (micros), model,
// minute TTL, day TTL (s), then the budget TTL (s) per level.
var chargeScript = redis.NewScript(`
if not redis.call('SET', KEYS[#KEYS], 1, 'NX', 'EX', 86400) then return 0 end
local tokens, cost, model = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local n = (#KEYS - 1) / 4
for i = 0, n - 1 do
  local k = i * 4
  for j = 1, 2 do
    redis.call('SET', KEYS[k + j], 0, 'EX', ARGV[3 + j], 'NX')
    redis.call('INCRBY', KEYS[k + j], tokens)
  end
  if cost > 0 then
    redis.call('SET', KEYS[k + 3], 0, 'EX', ARGV[6 + i], 'NX')
    redis.call('INCRBY', KEYS[k + 3], cost)
  end
  local u = KEYS[k + 4]
  redis.call('HINCRBY', u, model .. '|requests', 1)
  redis.call('HINCRBY', u, model .. '|input', tokens)
  redis.call('HINCRBY', u, model .. '|cost', cost)
  redis.call('EXPIRE', u, 7776000)
end
return 1
`)

// chargeCmd is the charge's script call.
func chargeCmd(ctx context.Context, st *settlement) *redis.Cmd {
	a := st.adm
	args := make([]any, 0, 3+4*len(a.levels)+1+5+len(a.levels))
	args = append(args, "evalsha", chargeScript.Hash(), 4*len(a.levels)+1)
	for _, lp := range a.levels {
		args = append(args, lp.win.boxed[1], lp.win.boxed[2], lp.win.boxed[3], lp.win.boxed[5])
	}
	args = append(args, "llmgw:settled:"+a.reqID)
	args = append(args, st.prompt, st.costMicros, a.model,
		int64(ttl(kindTokensMinute, "")/time.Second), int64(ttl(kindTokensDay, "")/time.Second))
	args = append(args, a.redisArgs.budgetTTL...)
	return redis.NewCmd(ctx, args...)
}

// Interface guards
var (
	_ tenancy.Charger = (*charger)(nil)
	_ chargeStore     = (*memoryStore)(nil)
	_ chargeStore     = (*redisStore)(nil)
)
