package llmquota

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/llmgw/llmgw/modules/llm"
)

// Limit kinds, in the order they are checked at each level.
const (
	kindRequests = iota + 1
	kindTokensMinute
	kindTokensDay
	kindBudget
	kindConcurrent
)

var kindNames = map[int]string{
	kindRequests: "requests per minute", kindTokensMinute: "tokens per minute",
	kindTokensDay: "tokens per day", kindBudget: "budget", kindConcurrent: "concurrent requests",
}

// levelPlan is one level's counters and limits for one request.
type levelPlan struct {
	level *llm.Level
	// Counter keys: requests and tokens this minute, tokens today, spending
	// this budget period, requests in flight.
	keys   [5]string
	limits [5]int64 // same order; 0 = no limit; budget in micros
	// usageKey is the node's usage bucket for the admission's hour.
	usageKey string
}

// admission is one request's claim on every level of its key.
type admission struct {
	reqID  string
	now    time.Time
	est    int64 // tokens reserved
	lease  time.Duration
	levels []levelPlan
	model  string
}

// decision is the store's answer to an admission.
type decision struct {
	ok        bool
	failLevel int // index into levels, when !ok
	failKind  int
	counts    [][5]int64 // per level, after admission (or as found, when refused)
}

// settlement replaces an admission's estimate with what was used.
type settlement struct {
	adm        *admission
	prompt     int64
	completion int64
	costMicros int64
}

// store keeps the counters. memoryStore serves one instance; redisStore
// makes limits exact across instances.
type store interface {
	admit(ctx context.Context, a *admission) (decision, error)
	settle(ctx context.Context, s *settlement) error
	llm.UsageReader
}

// windowKeys names the counters of one level for the request's time.
func windowKeys(prefix, node string, t time.Time, budgetPeriod string) [5]string {
	minute := strconv.FormatInt(t.Unix()/60, 10)
	day := t.UTC().Format("20060102")
	period := t.UTC().Format("200601")
	if budgetPeriod == "day" {
		period = day
	}
	base := prefix + "q:" + node + ":"
	return [5]string{base + "r:" + minute, base + "t:" + minute, base + "d:" + day, base + "b:" + budgetPeriod + ":" + period, base + "c"}
}

// ttls are how long each kind of counter outlives its window.
func ttl(kind int, budgetPeriod string) time.Duration {
	switch kind {
	case kindRequests, kindTokensMinute:
		return 2 * time.Minute
	case kindTokensDay:
		return 49 * time.Hour
	case kindBudget:
		if budgetPeriod == "day" {
			return 49 * time.Hour
		}
		return 33 * 24 * time.Hour
	}
	return 0
}

// memoryStore keeps counters in this process. It survives reloads in a
// UsagePool.
type memoryStore struct {
	mu       sync.Mutex
	counters map[string]*counter
	leases   map[string]map[string]time.Time // concurrency key → request → lease end
	ledger   map[ledgerKey]*llm.Usage        // hourly bucket and model → totals
	done     chan struct{}
}

type ledgerKey struct{ bucket, model string }

type counter struct {
	n       int64
	expires time.Time
}

func newMemoryStore() *memoryStore {
	m := &memoryStore{counters: map[string]*counter{}, leases: map[string]map[string]time.Time{},
		ledger: map[ledgerKey]*llm.Usage{}, done: make(chan struct{})}
	go m.sweep()
	return m
}

func (m *memoryStore) Destruct() error {
	close(m.done)
	return nil
}

func (m *memoryStore) sweep() {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-t.C:
		}
		cut := now()
		m.mu.Lock()
		for k, c := range m.counters {
			if cut.After(c.expires) {
				delete(m.counters, k)
			}
		}
		for k := range m.leases {
			m.pruneLocked(k, cut)
		}
		for k := range m.ledger { // usage is kept 90 days, as in Redis
			if len(k.bucket) < 10 {
				continue
			}
			if h, err := time.Parse("2006010215", k.bucket[len(k.bucket)-10:]); err == nil && cut.Sub(h) > 90*24*time.Hour {
				delete(m.ledger, k)
			}
		}
		m.mu.Unlock()
	}
}

func (m *memoryStore) pruneLocked(key string, t time.Time) int64 {
	ls := m.leases[key]
	for id, end := range ls {
		if t.After(end) {
			delete(ls, id)
		}
	}
	if len(ls) == 0 {
		delete(m.leases, key)
	}
	return int64(len(ls))
}

func (m *memoryStore) get(key string, t time.Time) int64 {
	if c, ok := m.counters[key]; ok && !t.After(c.expires) {
		return c.n
	}
	return 0
}

func (m *memoryStore) add(key string, n int64, t time.Time, life time.Duration) {
	c, ok := m.counters[key]
	if !ok || t.After(c.expires) {
		c = &counter{expires: t.Add(life)}
		m.counters[key] = c
	}
	c.n += n
}

func (m *memoryStore) admit(_ context.Context, a *admission) (decision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := decision{ok: true, counts: make([][5]int64, len(a.levels))}
	for i, lp := range a.levels {
		c := &d.counts[i]
		for k := 0; k < 4; k++ {
			c[k] = m.get(lp.keys[k], a.now)
		}
		c[4] = m.pruneLocked(lp.keys[4], a.now)
		if d.ok {
			if kind := exceeded(lp.limits, *c, a.est); kind != 0 {
				d.ok, d.failLevel, d.failKind = false, i, kind
			}
		}
	}
	if !d.ok {
		return d, nil
	}
	for i, lp := range a.levels {
		period := lp.level.Limits.BudgetPeriod
		m.add(lp.keys[0], 1, a.now, ttl(kindRequests, period))
		m.add(lp.keys[1], a.est, a.now, ttl(kindTokensMinute, period))
		m.add(lp.keys[2], a.est, a.now, ttl(kindTokensDay, period))
		d.counts[i][0]++
		d.counts[i][1] += a.est
		d.counts[i][2] += a.est
		if lp.limits[4] > 0 {
			if m.leases[lp.keys[4]] == nil {
				m.leases[lp.keys[4]] = map[string]time.Time{}
			}
			m.leases[lp.keys[4]][a.reqID] = a.now.Add(a.lease)
			d.counts[i][4]++
		}
	}
	return d, nil
}

// exceeded returns the first limit the admission would break, or 0.
func exceeded(l, c [5]int64, est int64) int {
	switch {
	case l[0] > 0 && c[0]+1 > l[0]:
		return kindRequests
	case l[1] > 0 && c[1]+est > l[1]:
		return kindTokensMinute
	case l[2] > 0 && c[2]+est > l[2]:
		return kindTokensDay
	case l[3] > 0 && c[3] >= l[3]:
		return kindBudget
	case l[4] > 0 && c[4]+1 > l[4]:
		return kindConcurrent
	}
	return 0
}

func (m *memoryStore) settle(_ context.Context, s *settlement) error {
	a := s.adm
	delta := s.prompt + s.completion - a.est
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, lp := range a.levels {
		for _, k := range []string{lp.keys[1], lp.keys[2]} {
			if c, ok := m.counters[k]; ok {
				c.n += delta
			}
		}
		if s.costMicros > 0 {
			m.add(lp.keys[3], s.costMicros, a.now, ttl(kindBudget, lp.level.Limits.BudgetPeriod))
		}
		if ls := m.leases[lp.keys[4]]; ls != nil {
			delete(ls, a.reqID)
		}
		uk := ledgerKey{lp.usageKey, a.model}
		u := m.ledger[uk]
		if u == nil {
			u = &llm.Usage{}
			m.ledger[uk] = u
		}
		u.Requests++
		u.InputTokens += s.prompt
		u.OutputTokens += s.completion
		u.CostMicros += s.costMicros
	}
	return nil
}

// ReadUsage implements llm.UsageReader.
func (m *memoryStore) ReadUsage(node string, from, to time.Time) (map[string]*llm.Usage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]*llm.Usage{}
	for h := from.UTC().Truncate(time.Hour); !h.After(to); h = h.Add(time.Hour) {
		bucket := hourKey(node, h)
		for k, u := range m.ledger {
			if k.bucket == bucket {
				if out[k.model] == nil {
					out[k.model] = &llm.Usage{}
				}
				out[k.model].Add(*u)
			}
		}
	}
	return out, nil
}
