package catalog

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
)

// Provider is one of the ways a model with providers is served: an
// outside provider or the model's own (self-hosted) replicas. Each
// provider is a catalog model of its own (see Model.Providers); the
// router picks among them by the model's Routing policy.
type Provider struct {
	// Name of the provider, as the llmgw-provider response header, the
	// access log and the metrics show it. Required; unique in the model.
	Name string `json:"name"`
	// Model is the catalog model that serves the provider's requests:
	// the model's own name for its own replicas, or another catalog
	// model (in the Caddyfile, a provider block with an engine becomes
	// the catalog model <model>/<provider>). Required.
	Model string `json:"model"`
	// Price is what the provider's tokens cost; the cost policy prefers
	// the cheapest. Default: free.
	Price *ProviderPrice `json:"price,omitempty"`
	// Weight is the provider's share under the weighted policy (and of
	// its keys' requests under any policy). Default: 1.
	Weight int `json:"weight,omitempty"`
	// RPM is the most requests per minute the provider is sent; above
	// it the provider is passed over as full. Default: no limit.
	RPM int `json:"rpm,omitempty"`
	// TPM is the most tokens (prompt and completion) per minute the
	// provider is sent; above it the provider is passed over as full.
	// Default: no limit.
	TPM int `json:"tpm,omitempty"`
}

// ProviderPrice is what a provider's tokens cost, per million, in the
// currency budgets are set in; self-hosted replicas may instead be priced
// by the GPU-hour.
type ProviderPrice struct {
	// InputPerMillion is the price of a million prompt tokens.
	InputPerMillion float64 `json:"input_per_million,omitempty"`
	// OutputPerMillion is the price of a million completion tokens.
	OutputPerMillion float64 `json:"output_per_million,omitempty"`
	// CachedPerMillion is the price of a million prompt tokens the
	// provider read from its prompt cache (the usage's cached_tokens),
	// for usage costs and budgets; the cost policy ranks by the input and
	// output prices. Default: the input price.
	CachedPerMillion float64 `json:"cached_per_million,omitempty"`
	// GPUHour is what one replica costs per hour whether it serves or
	// not: its tokens cost nothing more while it has room, so the cost
	// policy fills it first.
	GPUHour float64 `json:"gpu_hour,omitempty"`
}

// CostMicros is the cost of usage in millionths of the currency unit:
// cached of the prompt tokens at the cached price (when set).
func (p *ProviderPrice) CostMicros(prompt, cached, completion int64) int64 {
	if p == nil {
		return 0
	}
	in := float64(prompt) * p.InputPerMillion
	if p.CachedPerMillion > 0 && cached > 0 && cached <= prompt {
		in = float64(prompt-cached)*p.InputPerMillion + float64(cached)*p.CachedPerMillion
	}
	return int64(math.Round(in + float64(completion)*p.OutputPerMillion))
}

// Rank is the price the cost policy orders providers by: per million
// tokens at three prompt tokens to one of completion; 0 for a GPU-hour
// price, whose tokens cost nothing more while a replica has room.
func (p *ProviderPrice) Rank() float64 {
	if p == nil {
		return 0
	}
	return (3*p.InputPerMillion + p.OutputPerMillion) / 4
}

// Routing is how a model with providers picks one for a request.
type Routing struct {
	// Policy: weighted (by each provider's weight; the default), cost
	// (the cheapest provider that has room, is not resting after a 429
	// and keeps within LatencyObjective), latency (the lowest recent
	// time to first byte, with some exploration), usage (the provider
	// with the largest share of its rate limits left, as its answers'
	// x-ratelimit-* headers say), or first (in the order declared). Whichever is chosen, the others follow in the policy's
	// order when it fails before its answer's first byte.
	Policy string `json:"policy,omitempty"`
	// LatencyObjective is, under the cost policy, the recent time to
	// first byte (measured from live traffic) above which a provider is
	// passed over for the next cheapest. Default: none.
	LatencyObjective caddy.Duration `json:"latency_objective,omitempty"`
	// Explore is the share of requests (0 to 1) sent to a provider the
	// policy would not pick (cost: one passed over as slow; latency: any
	// other that can take it), to measure it again, so a provider that
	// recovered is found. -1 sends none (explore 0 in the Caddyfile).
	// Default: 0.05.
	Explore float64 `json:"explore,omitempty"`
}

// Routing policies of a model with providers.
const (
	PolicyWeighted = "weighted"
	PolicyCost     = "cost"
	PolicyLatency  = "latency"
	PolicyFirst    = "first"
	PolicyUsage    = "usage"
)

// PolicyName is the routing policy (weighted when none is set).
func (r *Routing) PolicyName() string {
	if r == nil || r.Policy == "" {
		return PolicyWeighted
	}
	return r.Policy
}

// ExploreShare is the share of requests sent to explore.
func (r *Routing) ExploreShare() float64 {
	switch {
	case r == nil || r.Explore == 0:
		return 0.05
	case r.Explore < 0:
		return 0
	}
	return r.Explore
}

// checkProviders checks a model's providers against the catalog c: each
// names a catalog model that has no providers of its own, once.
func (c *Catalog) checkProviders(m *Model) error {
	if len(m.Providers) == 0 {
		if m.Routing != nil {
			return fmt.Errorf("model %q: a routing policy needs providers (provider <name> { … } in the model)", m.Name)
		}
		return nil
	}
	switch m.Routing.PolicyName() {
	case PolicyWeighted, PolicyCost, PolicyLatency, PolicyFirst, PolicyUsage:
	default:
		return fmt.Errorf("model %q: policy %s: use weighted, cost, latency, usage or first", m.Name, Bounded(m.Routing.Policy))
	}
	if r := m.Routing; r != nil && (r.LatencyObjective < 0 || r.Explore > 1) {
		return fmt.Errorf("model %q: latency_objective must not be negative and explore is a share from 0 to 1", m.Name)
	}
	if len(m.Providers) > MaxProviders {
		return fmt.Errorf("model %q: %d providers; at most %d", m.Name, len(m.Providers), MaxProviders)
	}
	seen := map[string]bool{}
	for _, p := range m.Providers {
		if err := p.check(m.Name); err != nil {
			return err
		}
		if seen[p.Name] {
			return fmt.Errorf("model %q: provider %q is declared twice", m.Name, p.Name)
		}
		seen[p.Name] = true
		target, ok := c.ByName[p.Model]
		switch {
		case !ok:
			return fmt.Errorf("model %q: provider %q: model %s is not in the catalog", m.Name, p.Name, Bounded(p.Model))
		case target != m && len(target.Providers) > 0:
			return fmt.Errorf("model %q: provider %q: model %q has providers of its own; name one of them instead", m.Name, p.Name, target.Name)
		}
	}
	return nil
}

// MaxProviders bounds a model's providers.
const MaxProviders = 16

func (p *Provider) check(model string) error {
	if err := CheckName(fmt.Sprintf("model %q: provider name", model), p.Name); err != nil {
		return err
	}
	if p.Model == "" {
		return fmt.Errorf("model %q: provider %q: model is required (the catalog model that serves it)", model, p.Name)
	}
	if p.Weight < 0 || p.RPM < 0 || p.TPM < 0 {
		return fmt.Errorf("model %q: provider %q: weight, rpm and tpm must not be negative", model, p.Name)
	}
	if pr := p.Price; pr != nil && (pr.InputPerMillion < 0 || pr.OutputPerMillion < 0 || pr.CachedPerMillion < 0 || pr.GPUHour < 0) {
		return fmt.Errorf("model %q: provider %q: prices must not be negative", model, p.Name)
	}
	return nil
}

// ProviderOf finds the provider of m whose catalog model is name.
func (m *Model) ProviderOf(name string) (int, bool) {
	for i, p := range m.Providers {
		if p.Model == name {
			return i, true
		}
	}
	return 0, false
}

// ProviderBlock is one provider block of a model in the Caddyfile before
// it becomes a Provider (and, with an engine, a catalog model).
type ProviderBlock struct {
	Provider
	engine  string
	source  string
	options map[string]string
	keys    []string
	local   bool
}

// parseProvider reads one provider block of model m:
//
//	provider <name> {
//		model    <the provider's name for the model> | local
//		engine   <openai|anthropic|…>
//		source   <source>
//		option   <name> <value>
//		key      <api key> [<weight>]
//		price    input <p> output <p> [cached <p>] | gpu_hour <p>
//		weight   <n>
//		rpm      <n>
//		tpm      <n>
//		use      <catalog model>
//	}
func parseProvider(d *caddyfile.Dispenser, m *Model) error {
	b := &ProviderBlock{}
	if !d.Args(&b.Name) || d.NextArg() {
		return d.ArgErr()
	}
	for _, o := range m.providerBlocks {
		if o.Name == b.Name {
			return d.Errf("model %q: provider %q is declared twice", m.Name, b.Name)
		}
	}
	var upstream, use string
	err := caddyfileutil.EachSubdirective(d, func(dir string) error {
		switch dir {
		case "model":
			return caddyfileutil.OneArg(d, &upstream)
		case "use":
			return caddyfileutil.OneArg(d, &use)
		case "engine":
			return caddyfileutil.OneArg(d, &b.engine)
		case "source":
			return caddyfileutil.OneArg(d, &b.source)
		case "option":
			return parseProviderOption(d, b)
		case "key":
			return parseProviderKey(d, b)
		case "price":
			return parseProviderPrice(d, b)
		case "weight":
			return caddyfileutil.IntArg(d, &b.Weight, 1)
		case "rpm":
			return caddyfileutil.IntArg(d, &b.RPM, 1)
		case "tpm":
			return caddyfileutil.IntArg(d, &b.TPM, 1)
		}
		return d.Errf("unrecognized provider subdirective %q; use model, engine, source, option, key, price, weight, rpm, tpm or use", dir)
	}, "option", "key")
	if err != nil {
		return err
	}
	return b.finish(d, m, upstream, use)
}

// finish decides which catalog model serves the block: the model's own
// replicas (model local), another catalog model (use), or a catalog model
// of its own made of the block's engine and options.
func (b *ProviderBlock) finish(d *caddyfile.Dispenser, m *Model, upstream, use string) error {
	switch {
	case upstream == "local":
		if b.engine != "" || use != "" || len(b.keys) > 0 || len(b.options) > 0 {
			return d.Errf("model %q: provider %q: model local is the model's own replicas; set their engine and options in the model, not the provider", m.Name, b.Name)
		}
		b.local = true
		b.Model = m.Name
	case use != "":
		if b.engine != "" || upstream != "" || len(b.keys) > 0 || len(b.options) > 0 {
			return d.Errf("model %q: provider %q: use names a catalog model that serves it; give it no engine, model, key or option", m.Name, b.Name)
		}
		b.Model = use
	case b.engine == "":
		return d.Errf("model %q: provider %q: give an engine (such as openai), model local (the model's own replicas) or use <catalog model>", m.Name, b.Name)
	default:
		if upstream != "" {
			b.setOption(d, "model", upstream)
		}
		if len(b.keys) > 0 {
			b.setOption(d, "api_key", strings.Join(b.keys, ","))
		}
	}
	m.providerBlocks = append(m.providerBlocks, b)
	return nil
}

func (b *ProviderBlock) setOption(d *caddyfile.Dispenser, k, v string) {
	if b.options == nil {
		b.options = map[string]string{}
	}
	b.options[k] = v
}

func parseProviderOption(d *caddyfile.Dispenser, b *ProviderBlock) error {
	var k, v string
	if !d.Args(&k, &v) || d.NextArg() {
		return d.ArgErr()
	}
	if _, dup := b.options[k]; dup || (k == "api_key" && len(b.keys) > 0) {
		return d.Errf("provider %q: option %q is set twice", b.Name, k)
	}
	b.setOption(d, k, v)
	return nil
}

// parseProviderKey reads key <value> [<weight>]: a key of weight n is
// used n times as often as one of weight 1.
func parseProviderKey(d *caddyfile.Dispenser, b *ProviderBlock) error {
	args := d.RemainingArgs()
	if len(args) < 1 || len(args) > 2 {
		return d.ArgErr()
	}
	if strings.Contains(args[0], ",") {
		return d.Errf("provider %q: a key has no commas; give each key its own key line", b.Name)
	}
	w := 1
	if len(args) == 2 {
		n, err := strconv.Atoi(args[1])
		if err != nil || n < 1 || n > 16 {
			return d.Errf("provider %q: key weight %q is not a whole number from 1 to 16", b.Name, args[1])
		}
		w = n
	}
	for range w {
		b.keys = append(b.keys, args[0])
	}
	return nil
}

// parseProviderPrice reads price input <p> output <p> [cached <p>] or
// price gpu_hour <p>.
func parseProviderPrice(d *caddyfile.Dispenser, b *ProviderBlock) error {
	args := d.RemainingArgs()
	if len(args) == 0 || len(args)%2 != 0 {
		return d.Errf("provider %q: price takes pairs such as input 0.15 output 0.60 cached 0.075 (per million tokens), or gpu_hour 2.50", b.Name)
	}
	p := &ProviderPrice{}
	for i := 0; i < len(args); i += 2 {
		f, err := strconv.ParseFloat(args[i+1], 64)
		if err != nil || f < 0 {
			return d.Errf("provider %q: price %s %q is not a number of at least 0", b.Name, args[i], args[i+1])
		}
		switch args[i] {
		case "input":
			p.InputPerMillion = f
		case "output":
			p.OutputPerMillion = f
		case "cached":
			p.CachedPerMillion = f
		case "gpu_hour":
			p.GPUHour = f
		default:
			return d.Errf("provider %q: price %q: use input, output, cached or gpu_hour", b.Name, args[i])
		}
	}
	if p.GPUHour > 0 && (p.InputPerMillion > 0 || p.OutputPerMillion > 0 || p.CachedPerMillion > 0) {
		return d.Errf("provider %q: price by the token or by the GPU-hour, not both", b.Name)
	}
	b.Price = p
	return nil
}

// parseRouting reads policy <name> and latency_objective <duration> and
// explore <share> of a model.
func parseRouting(d *caddyfile.Dispenser, m *Model, dir string) error {
	if m.Routing == nil {
		m.Routing = new(Routing)
	}
	switch dir {
	case "policy":
		return caddyfileutil.OneArg(d, &m.Routing.Policy)
	case "latency_objective":
		return caddyfileutil.DurationArg(d, &m.Routing.LatencyObjective)
	}
	var s string
	if err := caddyfileutil.OneArg(d, &s); err != nil {
		return err
	}
	f, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if strings.HasSuffix(s, "%") {
		f /= 100
	}
	if err != nil || f < 0 || f > 1 {
		return d.Errf("model %q: explore %q is a share such as 5%% or 0.05", m.Name, s)
	}
	if m.Routing.Explore = f; f == 0 {
		m.Routing.Explore = -1
	}
	return nil
}

// ExpandProviders turns m's provider blocks (from the Caddyfile) into its
// Providers and returns the catalog models they need: one per provider
// with an engine, named <model>/<provider>. A model without an engine of
// its own takes the first such provider's engine and options: its own
// replicas are that provider's. A provider with model local in a model
// without an engine is an error.
func ExpandProviders(m *Model) ([]*Model, error) {
	if m.Engine == "" && m.hasLocal() {
		return nil, fmt.Errorf("model %q: a provider with model local serves the model's own replicas: give the model an engine", m.Name)
	}
	var out []*Model
	for _, b := range m.providerBlocks {
		p := b.Provider
		if p.Model == "" {
			own := m.Engine == "" && !m.hasLocal()
			target := m
			if !own {
				target = &Model{Name: m.Name + "/" + p.Name}
				out = append(out, target)
			}
			target.Engine, target.Source, target.Options = b.engine, b.source, b.options
			target.Price = p.Price.tokenPrice()
			if own {
				p.Model = m.Name
			} else {
				p.Model = target.Name
				target.Owner, target.Class = m.Owner, m.Class
			}
		} else if b.local && m.Price == nil {
			m.Price = p.Price.tokenPrice()
		}
		m.Providers = append(m.Providers, &p)
	}
	m.providerBlocks = nil
	return out, nil
}

func (m *Model) hasLocal() bool {
	for _, b := range m.providerBlocks {
		if b.local {
			return true
		}
	}
	return false
}

// tokenPrice is the Price usage costs are counted in (none for a GPU-hour
// price).
func (p *ProviderPrice) tokenPrice() *Price {
	if p == nil || p.GPUHour > 0 {
		return nil
	}
	return &Price{InputPerMillion: p.InputPerMillion, OutputPerMillion: p.OutputPerMillion}
}
