package llmquota

import (
	"crypto/rand"
	"encoding/hex"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// Counter keys change once a minute; building them per request would
// cost twenty strings. They are kept per node and rebuilt when the minute
// turns.
type windowSet struct {
	minute int64
	period string // the budget period its budget key is for
	// boxed holds the five counter keys (windowKeys) and the node's
	// hourly usage key as script arguments, boxed once rather than on
	// every request.
	boxed [6]any
}

func newWindowSet(prefix, node string, at time.Time, budgetPeriod string) *windowSet {
	w := &windowSet{minute: at.Unix() / 60, period: budgetPeriod}
	for i, k := range windowKeys(prefix, node, at, budgetPeriod) {
		w.boxed[i] = k
	}
	w.boxed[5] = hourKey(node, at)
	return w
}

var windows sync.Map // node → *atomic.Pointer[windowSet]

func nodeKeys(l *tenancy.Level, at time.Time) *windowSet {
	node := l.Node()
	v, ok := windows.Load(node)
	if !ok {
		v, _ = windows.LoadOrStore(node, new(atomic.Pointer[windowSet]))
	}
	p := v.(*atomic.Pointer[windowSet])
	minute := at.Unix() / 60
	if w := p.Load(); w != nil && w.minute == minute && w.period == l.Limits.BudgetPeriod {
		return w
	}
	w := newWindowSet("llmgw:", node, at, l.Limits.BudgetPeriod)
	p.Store(w)
	return w
}

// Request ids: a random prefix per process and a counter.
var (
	reqPrefix = func() string {
		var b [6]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:]) + "-"
	}()
	reqCounter atomic.Uint64
)

func newReqID() string { return reqPrefix + strconv.FormatUint(reqCounter.Add(1), 36) }

// Metric children per tenant and model, kept on the tenant (llm.Tenant's
// memo) in a map copied when a model is added, so a request finds them
// with one lookup and builds no labels.
type tenantCounters struct {
	requests, cost, input, output prometheus.Counter
}

type metersKey struct{}

type meters struct {
	mu      sync.Mutex
	byModel atomic.Pointer[map[string]*tenantCounters]
}

func countersFor(t *tenancy.Tenant, model string) *tenantCounters {
	ms := t.Memo(metersKey{}, func() any { return new(meters) }).(*meters)
	if m := ms.byModel.Load(); m != nil {
		if c := (*m)[model]; c != nil {
			return c
		}
	}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	old := ms.byModel.Load()
	if old != nil && (*old)[model] != nil {
		return (*old)[model]
	}
	l := []string{t.Org, t.Team, t.Project, t.KeyID, model}
	c := &tenantCounters{requests: metricRequests.WithLabelValues(l...), cost: metricCost.WithLabelValues(l...),
		input: metricTokens.WithLabelValues(append(l, "input")...), output: metricTokens.WithLabelValues(append(l[:5:5], "output")...)}
	m := make(map[string]*tenantCounters, 1)
	if old != nil {
		maps.Copy(m, *old)
	}
	m[model] = c
	ms.byModel.Store(&m)
	return c
}
