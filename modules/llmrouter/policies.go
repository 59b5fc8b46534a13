package llmrouter

import (
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/modules/llm/fleet"
)

func init() {
	caddy.RegisterModule(LeastOutstanding{})
	caddy.RegisterModule(new(RoundRobin))
}

// LeastOutstanding sends each request to the ready replica with the fewest
// requests in flight.
type LeastOutstanding struct{ fleet.LeastOutstanding }

// CaddyModule returns the Caddy module information.
func (LeastOutstanding) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.llm_router.policies.least_outstanding",
		New: func() caddy.Module { return new(LeastOutstanding) },
	}
}

// RoundRobin cycles through the ready replicas.
type RoundRobin struct{ n atomic.Uint64 }

// CaddyModule returns the Caddy module information.
func (*RoundRobin) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.llm_router.policies.round_robin",
		New: func() caddy.Module { return new(RoundRobin) },
	}
}

// Select implements fleet.Selector.
func (p *RoundRobin) Select(ready []*fleet.Replica) *fleet.Replica {
	return ready[int(p.n.Add(1)-1)%len(ready)]
}

// Interface guards
var (
	_ fleet.Selector = LeastOutstanding{}
	_ fleet.Selector = (*RoundRobin)(nil)
)
