package llmrouter

import (
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/openai"
)

// routePlan is, for a model with providers, the order its providers are
// tried in for one request and why.
type routePlan struct {
	ps    *providerSet
	first int // the candidates' index of the first provider
	buf   [catalog.MaxProviders]choice
	order []choice
	// failed says a provider of the plan failed this request: those
	// after it are there by failover.
	failed bool
	// timedOut says a provider of the plan sent no headers within
	// first_byte_timeout for this request.
	timedOut bool
}

// at is the plan's choice for the candidates' index i, or false when
// that candidate is not one of the model's providers.
func (p *routePlan) at(i int) (choice, bool) {
	if p.ps == nil || i < p.first || i >= p.first+len(p.order) {
		return choice{}, false
	}
	return p.order[i-p.first], true
}

// afterTimeout reports whether a request whose candidate i sent no
// headers within first_byte_timeout goes on to the next candidate: when
// both are providers of the model, and no provider timed out before for
// this request. Each try waits a whole first_byte_timeout (for an answer
// sent whole, its generation), so a client waits at most twice that for
// headers before its 504. A plain fallback is never tried after a
// timeout.
func (p *routePlan) afterTimeout(i int) bool {
	if _, ok := p.at(i); !ok || p.timedOut {
		return false
	}
	if _, ok := p.at(i + 1); !ok {
		return false
	}
	p.timedOut = true
	return true
}

// providersOf readies m's plan and appends its providers, in the order
// its policy tries them, to out.
func (rt *Router) providersOf(m *catalog.Model, plan *routePlan, out []string) []string {
	plan.ps = rt.providerSet(m)
	plan.first = len(out)
	plan.order = plan.ps.order(plan.buf[:], time.Now().UnixNano(), rand.Float64(), rand.Float64(), rt.room)
	for _, c := range plan.order {
		out = append(out, plan.ps.provs[c.idx].name)
	}
	return out
}

// providerSet is what the router learned of m's providers.
func (rt *Router) providerSet(m *catalog.Model) *providerSet {
	if v, ok := rt.provs.Load(m); ok {
		return v.(*providerSet)
	}
	v, _ := rt.provs.LoadOrStore(m, newProviderSet(m, rt.selfHosted))
	return v.(*providerSet)
}

// selfHosted reports whether a catalog model runs replicas (whose room
// the policies consider) rather than calling an outside provider.
func (rt *Router) selfHosted(name string) bool {
	m, err := rt.app.Lookup(name)
	if err != nil {
		return false
	}
	switch m.Engine {
	case "openai", "anthropic":
		return false
	}
	return true
}

// room is a provider's free and total replica slots (roomFunc).
func (rt *Router) room(name string) (free, total int) { return rt.app.Slots(name) }

// beforeTry marks a provider's try: its name and reason in the access
// log and the llmgw-provider header.
func (p *routePlan) beforeTry(w http.ResponseWriter, r *http.Request, c choice) {
	reason := c.reason
	if p.failed {
		reason = reasonFailover
	}
	lf := openai.Log(r)
	lf.Provider, lf.ProviderReason = p.ps.model.Providers[c.idx].Name, reasonNames[reason]
	w.Header()["Llmgw-Provider"] = p.ps.header[c.idx][reason]
}

// afterTry records a provider's try.
func (p *routePlan) afterTry(r *http.Request, c choice, a attempt) {
	if !a.tried || r.Context().Err() != nil {
		return // not sent, or the client left: nothing learned
	}
	var u openai.Usage
	var ok bool
	var tokens int64
	if a.served {
		if u, ok = openai.GetUsage(r); ok {
			tokens = u.TotalTokens
		}
	}
	p.ps.provs[c.idx].record(time.Now().UnixNano(), a.status, a.retryAfter, a.ttfb, a.header, a.served, tokens)
	if a.served {
		if pr := p.ps.model.Providers[c.idx].Price; ok && pr != nil && pr.CachedPerMillion > 0 && u.CachedTokens > 0 {
			// Cached prompt tokens at the provider's cached price.
			lf := openai.Log(r)
			lf.CostMicros, lf.HasCost = pr.CostMicros(u.PromptTokens, u.CachedTokens, u.CompletionTokens), true
		}
		return
	}
	p.failed = true
}
