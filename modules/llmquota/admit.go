package llmquota

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/openai"
)

// admit asks the store; while it is unreachable, the policy decides.
// Outages are logged once when they start and once when they end.
func (q *Quota) admit(r *http.Request, a *admission) (store, decision, error) {
	d, err := q.store.admit(r.Context(), a)
	if err == nil {
		if q.down.Load() && q.down.CompareAndSwap(true, false) {
			q.logger.Info("quota store reachable again; counting there", zap.String("store", q.Store))
		}
		return q.store, d, nil
	}
	if r.Context().Err() != nil {
		return nil, decision{}, err
	}
	if q.down.CompareAndSwap(false, true) {
		q.logger.Error("quota store unreachable", zap.String("store", q.Store),
			zap.String("on_store_error", q.OnStoreError), zap.Error(err))
	}
	if q.fallback == nil {
		return nil, decision{}, err
	}
	d, err = q.fallback.admit(r.Context(), a)
	return q.fallback, d, err
}

// settle replaces the reservation with the usage the router recorded, even
// if the client has left.
func (q *Quota) settle(r *http.Request, st store, a *admission, m *catalog.Model, t *tenancy.Tenant) {
	u, _ := openai.GetUsage(r)
	cached := u.Cached
	if cached {
		u = openai.Usage{} // answered from the cache: no tokens, no cost
	}
	s := &a.settled
	*s = settlement{adm: a, prompt: u.PromptTokens, completion: u.CompletionTokens,
		costMicros: m.Price.CostMicros(u.PromptTokens, u.CompletionTokens)}
	if lf := openai.Log(r); lf.Provider != "" && lf.HasCost && !cached {
		// A model with providers costs what the provider that served
		// charges, when it has a token price.
		s.costMicros = lf.CostMicros
	}
	// The client may have left; settle anyway. Redis settlements are
	// queued and sent with the next admission or at once by a flusher.
	if err := st.settle(context.Background(), s); err != nil {
		q.logger.Error("settling usage", zap.String("key", a.levels[0].level.Name), zap.Error(err))
	}
	recordUsage(t, a.model, s)
}

// refuse answers 429, naming the limit.
func (q *Quota) refuse(w http.ResponseWriter, a *admission, d decision) {
	lp := a.levels[d.failLevel]
	kind := d.failKind
	limit := lp.limits[kind-1]
	retry := resetIn(a.now, kind, lp.level.Limits.BudgetPeriod)
	who := fmt.Sprintf("the %s %s", lp.level.Kind, lp.level.Name)
	e := &openai.Error{Status: http.StatusTooManyRequests, Type: "requests", Code: "rate_limit_exceeded", RetryAfter: retry}
	switch kind {
	case kindBudget:
		e.Type, e.Code = "insufficient_quota", "insufficient_quota"
		e.Message = fmt.Sprintf("%s has spent its %sly budget of %.2f; it renews in %s", who, lp.level.Limits.BudgetPeriod,
			float64(limit)/1e6, retry.Round(time.Second))
	case kindConcurrent:
		e.Message = fmt.Sprintf("%s has %d requests in flight, its limit; retry when one finishes", who, limit)
	case kindTokensMinute, kindTokensDay:
		e.Type = "tokens"
		e.Message = fmt.Sprintf("%s has reached its limit of %d %s (this request reserves %d); retry in %s", who, limit,
			kindNames[kind], a.est, retry.Round(time.Second))
	default:
		e.Message = fmt.Sprintf("%s has reached its limit of %d %s; retry in %s", who, limit, kindNames[kind], retry.Round(time.Second))
	}
	metricRejections.WithLabelValues(lp.level.Kind, kindNames[kind]).Inc()
	if c := q.logger.Check(zap.InfoLevel, "quota exceeded"); c != nil {
		c.Write(zap.String("key", a.levels[0].level.Name), zap.String("level", lp.level.Node()), zap.String("limit", kindNames[kind]))
	}
	e.Write(w)
}

// resetIn is how long until the window of a limit kind ends.
func resetIn(t time.Time, kind int, budgetPeriod string) time.Duration {
	t = t.UTC()
	switch kind {
	case kindRequests, kindTokensMinute:
		return t.Truncate(time.Minute).Add(time.Minute).Sub(t)
	case kindTokensDay:
		return time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC).Sub(t)
	case kindBudget:
		if budgetPeriod == "day" {
			return time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC).Sub(t)
		}
		return time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC).Sub(t)
	}
	return time.Second
}

// setRateHeaders sets OpenAI's x-ratelimit-* headers for the tightest
// level of requests and of tokens per minute. The values are written
// into one buffer and sliced, so the six headers cost two allocations;
// both reset headers share one value (the minute's end).
func setRateHeaders(h http.Header, a *admission, d decision) {
	var buf [96]byte
	b := buf[:0]
	var spans [6][2]int // each header's value in b
	set := 0
	for k := 0; k < 2; k++ {
		best := -1
		var limit, remaining int64
		for i, lp := range a.levels {
			if l := lp.limits[k]; l > 0 {
				rem := max(l-d.counts[i][k], 0)
				if best < 0 || rem < remaining {
					best, limit, remaining = i, l, rem
				}
			}
		}
		if best < 0 {
			continue
		}
		for j, n := range [2]int64{limit, remaining} {
			spans[3*k+j][0] = len(b)
			b = strconv.AppendInt(b, n, 10)
			spans[3*k+j][1] = len(b)
		}
		set |= 1 << k
	}
	if set == 0 {
		return
	}
	reset := [2]int{len(b), 0}
	b = appendSeconds(b, resetIn(a.now, kindRequests, "").Round(time.Millisecond))
	reset[1] = len(b)
	spans[2], spans[5] = reset, reset
	all := string(b)
	vals := make([]string, 6)
	for k := 0; k < 2; k++ {
		if set&(1<<k) == 0 {
			continue
		}
		for j, name := range rateHeaders[k] {
			i := 3*k + j
			vals[i] = all[spans[i][0]:spans[i][1]]
			h[name] = vals[i : i+1 : i+1]
		}
	}
}

// appendSeconds appends d as time.Duration's String writes it ("41.017s").
func appendSeconds(b []byte, d time.Duration) []byte {
	if d >= time.Minute || d < time.Second {
		return append(b, d.String()...)
	}
	ms := int64(d / time.Millisecond)
	b = strconv.AppendInt(b, ms/1000, 10)
	if frac := ms % 1000; frac != 0 {
		digits := []byte{'.', byte('0' + frac/100), byte('0' + frac/10%10), byte('0' + frac%10)}
		for digits[len(digits)-1] == '0' {
			digits = digits[:len(digits)-1]
		}
		b = append(b, digits...)
	}
	return append(b, 's')
}

// rateHeaders are OpenAI's header names, canonical, for requests and tokens.
var rateHeaders = [2][3]string{
	{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"},
	{"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"},
}
