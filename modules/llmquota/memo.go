package llmquota

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmgw/llmgw/modules/llm"
)

// Counter keys change once a minute; building them per request would
// cost twenty strings. They are kept per node and rebuilt when the minute
// turns.
type windowSet struct {
	minute int64
	keys   [5]string
	usage  string // the node's hourly usage key
}

var windows sync.Map // node → *atomic.Pointer[windowSet]

func nodeKeys(l *llm.Level, at time.Time) *windowSet {
	node := l.Node()
	v, ok := windows.Load(node)
	if !ok {
		v, _ = windows.LoadOrStore(node, new(atomic.Pointer[windowSet]))
	}
	p := v.(*atomic.Pointer[windowSet])
	minute := at.Unix() / 60
	if w := p.Load(); w != nil && w.minute == minute {
		return w
	}
	w := &windowSet{minute: minute, keys: windowKeys("llmgw:", node, at, l.Limits.BudgetPeriod),
		usage: hourKey(node, at)}
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

// Metric children per tenant and model, looked up without building label
// maps on every request.
type counterKey struct{ org, team, project, key, model string }

type tenantCounters struct {
	requests, cost, input, output prometheus.Counter
}

var counters sync.Map // counterKey → *tenantCounters

func countersFor(t *llm.Tenant, model string) *tenantCounters {
	k := counterKey{t.Org, t.Team, t.Project, t.KeyID, model}
	if v, ok := counters.Load(k); ok {
		return v.(*tenantCounters)
	}
	l := []string{t.Org, t.Team, t.Project, t.KeyID, model}
	c := &tenantCounters{requests: metricRequests.WithLabelValues(l...), cost: metricCost.WithLabelValues(l...),
		input: metricTokens.WithLabelValues(append(l, "input")...), output: metricTokens.WithLabelValues(append(l[:5:5], "output")...)}
	v, _ := counters.LoadOrStore(k, c)
	return v.(*tenantCounters)
}
