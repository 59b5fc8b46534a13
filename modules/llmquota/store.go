package llmquota

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
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
	level  *tenancy.Level
	limits [5]int64 // requests and tokens this minute, tokens today, budget (micros), in flight; 0 = no limit
	// Redis only: the node's counter keys for the admission's minute.
	win *windowSet
	// Memory only: the node's counters, found when admitted.
	mem *nodeCounters
}

// levelLimits are a level's limits in the order of levelPlan.limits.
func levelLimits(l *tenancy.Level) [5]int64 {
	return [5]int64{l.Limits.RequestsPerMinute, l.Limits.TokensPerMinute, l.Limits.TokensPerDay,
		int64(l.Limits.Budget * 1e6), l.Limits.MaxConcurrent}
}

// admission is one request's claim on every level of its key.
type admission struct {
	reqID     string     // Redis only
	redisArgs *redisArgs // Redis only
	now       time.Time
	est       int64 // tokens reserved
	lease     time.Duration
	levels    []levelPlan
	model     string
	// Storage for the common tenancy depth (key, project, team,
	// organisation), so one allocation holds a whole request's claim.
	levelBuf  [4]levelPlan
	countsBuf [4][5]int64
	settled   settlement
}

// newCounts returns zeroed per-level counts for a decision.
func (a *admission) newCounts() [][5]int64 {
	if len(a.levels) <= len(a.countsBuf) {
		c := a.countsBuf[:len(a.levels)]
		clear(c)
		return c
	}
	return make([][5]int64, len(a.levels))
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
	// charge is tokens spent outside a request (charge.go): counted
	// without a reservation to replace and without a lease to end.
	charge bool
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

// memoryStore keeps counters in this process, one set per tenancy node
// (found with one map lookup per level). It survives reloads in a
// UsagePool.
type memoryStore struct {
	mu    sync.Mutex
	nodes map[string]*nodeCounters
	done  chan struct{}
	memoryTools
	file         *usageFile // where usage is saved (persist.go); nil: nowhere
	usageChanged bool       // since the last save
}

// nodeCounters are one node's windows, in-flight leases and usage.
type nodeCounters struct {
	requests, tokensMinute, tokensDay, budget window
	leases                                    map[*admission]time.Time // request → lease end
	ledger                                    map[ledgerKey]*llmapi.Usage
	// The ledger entry the last settlement used: most settle into it.
	lastKey   ledgerKey
	lastUsage *llmapi.Usage
}

// ledgerKey is an hour (Unix hours) and a model.
type ledgerKey struct {
	hour  int64
	model string
}

// window counts within one window (a minute, a day, a budget period,
// numbered); a later window starts from zero.
type window struct{ id, n int64 }

func (w *window) get(id int64) int64 {
	if w.id == id {
		return w.n
	}
	return 0
}

func (w *window) add(id, n int64) {
	switch {
	case w.id == id:
		w.n += n
	case id > w.id:
		w.id, w.n = id, n
	} // an older window's change is moot
}

// windowIDs numbers the windows a time falls in: minute, UTC day and
// month (year*12+month).
type windowIDs struct{ minute, day, month int64 }

func windowsAt(t time.Time) windowIDs {
	u := t.Unix()
	w := windowIDs{minute: u / 60, day: u / 86400}
	if u < 0 && u%86400 != 0 {
		w.day--
	}
	y, m, _ := t.UTC().Date()
	w.month = int64(y)*12 + int64(m)
	return w
}

// period is the budget window: the day or the month.
func (w windowIDs) period(budgetPeriod string) int64 {
	if budgetPeriod == "day" {
		return w.day
	}
	return w.month
}

func newMemoryStore() *memoryStore {
	m := &memoryStore{nodes: map[string]*nodeCounters{}, done: make(chan struct{})}
	go m.sweep()
	return m
}

// Destruct stops the sweep and saves the usage: the last config let go
// of the store (the process stops, or the store is no longer used).
func (m *memoryStore) Destruct() error {
	close(m.done)
	m.saveUsage()
	return nil
}

// node returns a node's counters, making them on first use.
func (m *memoryStore) node(name string) *nodeCounters {
	n := m.nodes[name]
	if n == nil {
		n = &nodeCounters{}
		m.nodes[name] = n
	}
	return n
}

// sweep drops expired leases and usage older than 90 days, as in Redis.
func (m *memoryStore) sweep() {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-t.C:
		}
		m.saveUsage()
		cut := now()
		oldest := cut.Add(-90*24*time.Hour).Unix() / 3600
		m.mu.Lock()
		for _, n := range m.nodes {
			n.prune(cut)
			for k := range n.ledger {
				if k.hour < oldest {
					delete(n.ledger, k)
				}
			}
			if n.lastKey.hour < oldest {
				n.lastKey, n.lastUsage = ledgerKey{}, nil
			}
		}
		m.mu.Unlock()
	}
}

// prune drops expired leases and returns how many are left.
func (n *nodeCounters) prune(t time.Time) int64 {
	for id, end := range n.leases {
		if t.After(end) {
			delete(n.leases, id)
		}
	}
	return int64(len(n.leases))
}

func (m *memoryStore) admit(_ context.Context, a *admission) (decision, error) {
	d := decision{ok: true, counts: a.newCounts()}
	w := windowsAt(a.now)
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range a.levels {
		lp := &a.levels[i]
		n := m.node(lp.level.Node())
		lp.mem = n
		c := &d.counts[i]
		c[0], c[1], c[2] = n.requests.get(w.minute), n.tokensMinute.get(w.minute), n.tokensDay.get(w.day)
		c[3] = n.budget.get(w.period(lp.level.Limits.BudgetPeriod))
		if n.leases != nil {
			c[4] = n.prune(a.now)
		}
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
		n := lp.mem
		n.requests.add(w.minute, 1)
		n.tokensMinute.add(w.minute, a.est)
		n.tokensDay.add(w.day, a.est)
		d.counts[i][0]++
		d.counts[i][1] += a.est
		d.counts[i][2] += a.est
		if lp.limits[4] > 0 {
			if n.leases == nil {
				n.leases = map[*admission]time.Time{}
			}
			n.leases[a] = a.now.Add(a.lease)
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
	uk := ledgerKey{a.now.Unix() / 3600, a.model}
	w := windowsAt(a.now)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.usageChanged = true
	for _, lp := range a.levels {
		n := lp.mem
		if n.tokensMinute.id == w.minute {
			n.tokensMinute.n += delta
		}
		if n.tokensDay.id == w.day {
			n.tokensDay.n += delta
		}
		if s.costMicros > 0 {
			n.budget.add(w.period(lp.level.Limits.BudgetPeriod), s.costMicros)
		}
		if n.leases != nil {
			delete(n.leases, a)
		}
		n.record(uk, s)
	}
	return nil
}

// record adds a settlement to the node's usage of its hour and model.
func (n *nodeCounters) record(uk ledgerKey, s *settlement) {
	u := n.lastUsage
	if u == nil || n.lastKey != uk {
		if n.ledger == nil {
			n.ledger = map[ledgerKey]*llmapi.Usage{}
		}
		if u = n.ledger[uk]; u == nil {
			u = &llmapi.Usage{}
			n.ledger[uk] = u
		}
		n.lastKey, n.lastUsage = uk, u
	}
	u.Requests++
	u.InputTokens += s.prompt
	u.OutputTokens += s.completion
	u.CostMicros += s.costMicros
}

// ReadUsage implements llm.UsageReader.
func (m *memoryStore) ReadUsage(node string, from, to time.Time) (map[string]*llmapi.Usage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]*llmapi.Usage{}
	n := m.nodes[node]
	if n == nil {
		return out, nil
	}
	first, last := from.Unix()/3600, to.Unix()/3600
	for k, u := range n.ledger {
		if k.hour < first || k.hour > last {
			continue
		}
		if out[k.model] == nil {
			out[k.model] = &llmapi.Usage{}
		}
		out[k.model].Add(*u)
	}
	return out, nil
}
