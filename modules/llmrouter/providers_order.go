package llmrouter

import (
	"net/http"
	"time"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// ProviderOrder is a model's routing policy outside a router: the
// ordering the router calls for each request of a model with providers,
// fed the outcomes the router records, on a clock the caller keeps. It
// lets a tool replay a day of traffic against the real policies
// (llmgw-bench providers).
type ProviderOrder struct {
	ps *providerSet
}

// NewProviderOrder readies m's providers (m.Providers and m.Routing, as
// the catalog holds them) for its policy; selfHosted reports whether a
// provider's catalog model runs replicas whose room counts (see Order).
func NewProviderOrder(m *catalog.Model, selfHosted func(model string) bool) *ProviderOrder {
	return &ProviderOrder{ps: newProviderSet(m, selfHosted)}
}

// Order writes into dst (at least as long as the providers) the indexes
// of the model's providers in the order the policy tries them at now
// (unix nanoseconds), and returns it with why the first was chosen (the
// reason the llmgw-provider header names). rnd and rnd2 are numbers in
// [0, 1), drawn afresh for each request (the weighted draw and the
// explore share). room reports a provider's catalog model's free and
// total replica slots, as the router's replicas do (nil: always room).
// It allocates nothing.
func (o *ProviderOrder) Order(dst []int, now int64, rnd, rnd2 float64, room func(model string) (free, total int)) ([]int, string) {
	var buf [catalog.MaxProviders]choice
	order := o.ps.order(buf[:], now, rnd, rnd2, room)
	dst = dst[:len(order)]
	for i, c := range order {
		dst[i] = int(c.idx)
	}
	return dst, reasonNames[order[0].reason]
}

// Record is what the router records of a try of provider i that ended at
// now: its status (0: not reached), Retry-After, time to first byte, the
// answer's headers (its x-ratelimit-*) and, when it served, the tokens it
// used (prompt and completion).
func (o *ProviderOrder) Record(i int, now int64, status int, retryAfter string, ttfb time.Duration, h http.Header, served bool, tokens int64) {
	o.ps.provs[i].record(now, status, retryAfter, ttfb, h, served, tokens)
}

// record is what a try teaches: its outcome, the provider's rate limits
// and, when it served, its share of the provider's minute.
func (st *providerStats) record(now int64, status int, retryAfter string, ttfb time.Duration, h http.Header, served bool, tokens int64) {
	st.observe(now, status, retryAfter, ttfb)
	st.learn(h, now)
	if served {
		st.took(now, 0)
		if tokens > 0 {
			st.took(now, tokens)
		}
	}
}
