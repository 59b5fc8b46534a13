package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/llmgw/llmgw/plugins/engine"
)

// Model is one catalog entry: a name clients ask for and how to serve it.
type Model struct {
	// Name clients put in the request's model field. Required; unique
	// across names and aliases.
	Name string `json:"name"`
	// Aliases are other names for the same model.
	Aliases []string `json:"aliases,omitempty"`
	// Engine is the engine type that serves the model: a first-party one
	// (sim, openai) or a plugin llmgw-engine-<type> in the plugin
	// directory. Required.
	Engine string `json:"engine"`
	// Source of the weights: a path or URL, as the engine expects it.
	Source string `json:"source,omitempty"`
	// Args are extra command-line arguments for the engine server.
	Args []string `json:"args,omitempty"`
	// Options are engine-specific settings (the sim engine's ttft, the
	// openai engine's base_url and api_key …). Values may use
	// placeholders such as {env.OPENAI_API_KEY}.
	Options map[string]string `json:"options,omitempty"`
	// ContextLength is the model's context window in tokens. Default: the
	// engine's.
	ContextLength int64 `json:"context_length,omitempty"`
	// MaxOutput is the most tokens one answer of the model may have. A
	// request asking for more (max_tokens, max_completion_tokens,
	// max_output_tokens) gets 400 naming the limit; a request asking
	// nothing is sent with it as its max_tokens. Keys and tenancy levels
	// may set a lower one (their limits' max_output); the smallest
	// applies. Changing it keeps the model's replicas. Default: no limit
	// but the context length.
	MaxOutput int64 `json:"max_output,omitempty"`
	// Scaling sets how many replicas run.
	Scaling *Scaling `json:"scaling,omitempty"`
	// Price of the model's tokens, for budgets and usage costs.
	Price *Price `json:"price,omitempty"`
	// Fallbacks are other catalog models tried, in order, when this one
	// fails before the first byte of the answer: connect error, 5xx, 429
	// or no capacity.
	Fallbacks []string `json:"fallbacks,omitempty"`
	// Resources one replica needs from the node (memory, cores, GPUs).
	// A replica starts only where it fits. Default: nothing.
	Resources *Resources `json:"resources,omitempty"`
	// Class decides who gives way when the node is full: critical,
	// standard (the default) or opportunistic. Replicas of lower classes
	// are stopped to make room for higher ones.
	Class string `json:"class,omitempty"`
	// Owner is the organisation, team or project the model belongs to,
	// for operators (org/team/project).
	Owner string `json:"owner,omitempty"`
	// CheckSource false adds the model without checking its source first
	// (that the URL answers, the registry repository and file or the
	// mirror version exist, the format is one the engine loads), for
	// sources only the nodes can reach. A model from the config file whose
	// source fails the check is served anyway, with a warning in the log.
	// Default: true.
	CheckSource *bool `json:"check_source,omitempty"`
	// UpdateCheck is how often the registry is asked whether this model's
	// tracked repository has a new commit (see App.UpdateCheck). Default:
	// the app's; -1 (off in the Caddyfile): never.
	UpdateCheck caddy.Duration `json:"update_check,omitempty"`
	// Canary sends a share of this model's requests to another catalog
	// model (a new version being tried). When the canary fails before the
	// first byte of its answer, the request goes on to this model.
	Canary *Canary `json:"canary,omitempty"`

	// Adapters are LoRA adapters the model's replicas load, each served
	// under its own name (see Adapter). The model's engine must load
	// adapters (llamacpp, vllm, ollama).
	Adapters []*Adapter `json:"adapters,omitempty"`

	// Providers serve the model together: outside providers, its own
	// replicas, or both, one picked per request by Routing's policy and
	// the others tried in turn when it fails before its answer's first
	// byte (see Provider). Default: none, the model's own replicas only.
	Providers []*Provider `json:"providers,omitempty"`
	// Routing is how a model with providers picks one. Default: weighted.
	Routing *Routing `json:"routing,omitempty"`

	// Profiles are the shapes the model's replicas can take, in order of
	// preference (a GPU profile, then a CPU one): each replica goes to the
	// first profile the node has room for, without stopping other
	// replicas, else the first it can make room for by stopping replicas
	// of lower classes. A replica on a later profile moves back to an
	// earlier one when room for it appears: the new replica starts, and
	// the old one drains. A CPU profile (one that needs no GPU) does not
	// take a replica while the node has free the GPUs one of the model's
	// GPU profiles needs, unless Prefer is cpu. The model's engine,
	// source, args, options and resources are the profiles' defaults; its
	// engine defaults to the first profile's. Default: none, the model is
	// its own one shape. Profiles are declared in the config file.
	Profiles []*Profile `json:"profiles,omitempty"`
	// Prefer cpu says that running the model on a CPU profile while GPUs
	// are free is a choice made on purpose. Default: a CPU profile waits
	// for the GPUs to be taken.
	Prefer string `json:"prefer,omitempty"`
	// profile is, for a shape of a model (see Shape), its profile's name.
	profile string
	// Licence the model is served under: each tenant's requests are
	// refused with 403 until the licence is accepted for it (see
	// Licence). Default: none.
	Licence *Licence `json:"licence,omitempty"`
	// Workflows are the ComfyUI workflows that use the model (a model
	// of an engine that speaks ComfyUI's API): a job names one and gives
	// its parameters; the Images API uses txt2img when there is one.
	Workflows []*Workflow `json:"workflows,omitempty"`
	// Preset is the preset the model was added from (llmgw ctl model add
	// --preset): removing the model declines the preset, so it is not
	// added again automatically.
	Preset string `json:"preset,omitempty"`
	// providerBlocks are the Caddyfile's provider blocks until
	// ExpandProviders makes them Providers.
	providerBlocks []*ProviderBlock

	// adapterOf is, for an adapter's catalog entry, the model it applies
	// to.
	adapterOf string
	// FileVals are the config file's values of a config model; EngineVals
	// the values its engine gets (the app resolves them).
	FileVals   *FileValues   `json:"-"`
	EngineVals *EngineValues `json:"-"`
}

// Canary is a share of a model's requests served by another model.
type Canary struct {
	// Model is the catalog model that takes the share.
	Model string `json:"model"`
	// Share of requests, from 0 to 1 (0.1 is 10%).
	Share float64 `json:"share"`
}

// Price is what a model's tokens cost, per million, in the currency
// budgets are set in.
type Price struct {
	InputPerMillion  float64 `json:"input_per_million,omitempty"`
	OutputPerMillion float64 `json:"output_per_million,omitempty"`
}

// CostMicros is the cost of usage in millionths of the currency unit.
func (p *Price) CostMicros(prompt, completion int64) int64 {
	if p == nil {
		return 0
	}
	return int64(math.Round(float64(prompt)*p.InputPerMillion + float64(completion)*p.OutputPerMillion))
}

// Validate checks the price is not negative.
func (p *Price) Validate(model string) error {
	if p != nil && (p.InputPerMillion < 0 || p.OutputPerMillion < 0) {
		return fmt.Errorf("model %q: prices must not be negative", model)
	}
	return nil
}

// Scaling says how many replicas of a model run.
type Scaling struct {
	// Min replicas kept running. 0 starts the model on its first request
	// (which waits for it) and stops it after IdleTimeout. Default: 1, or
	// 0 when Max is 0.
	Min *int `json:"min,omitempty"`
	// Max replicas. Load above TargetConcurrency per replica starts
	// another, up to Max. 0 keeps the model in the catalog without
	// running it: it is never started, its replicas drain, and requests
	// for it get 503 saying so until it is scaled up. Default: Min, or 1
	// when Min is 0.
	Max *int `json:"max,omitempty"`
	// IdleTimeout stops replicas above Min that served nothing for this
	// long. Default: 10m.
	IdleTimeout caddy.Duration `json:"idle_timeout,omitempty"`
	// TargetConcurrency is the number of requests one replica should serve
	// at once before another is started. Default: 16.
	TargetConcurrency int `json:"target_concurrency,omitempty"`
}

// MinReplicas is the fewest replicas kept running (Min, or its default).
func (s *Scaling) MinReplicas() int {
	switch {
	case s == nil:
		return 1
	case s.Min != nil:
		return *s.Min
	case s.Max != nil && *s.Max == 0:
		return 0
	}
	return 1
}

// MaxReplicas is the most replicas started (Max, or its default).
func (s *Scaling) MaxReplicas() int {
	if s == nil || s.Max == nil {
		return max(s.MinReplicas(), 1)
	}
	return *s.Max
}

// Kept reports whether the model is kept in the catalog without running:
// max 0.
func (s *Scaling) Kept() bool { return s.MaxReplicas() == 0 }

// Idle is how long an unused replica above the minimum stays up.
func (s *Scaling) Idle() caddy.Duration {
	if s == nil || s.IdleTimeout == 0 {
		return caddy.Duration(DefaultIdle)
	}
	return s.IdleTimeout
}

// Target is the requests in flight per replica above which another starts.
func (s *Scaling) Target() int {
	if s == nil || s.TargetConcurrency == 0 {
		return 16
	}
	return s.TargetConcurrency
}

// Key is a hash of everything that shapes a model's replicas, so a reload
// that leaves them unchanged keeps its replicas.
// Fields that only steer routing or placement (aliases, fallbacks,
// canary, owner, class) or adding it (check_source) are left out: changing them keeps the model's
// replicas.
func (m *Model) Key(engineKey string) string {
	k := *m
	k.Aliases, k.Fallbacks, k.Canary, k.Owner, k.Class, k.CheckSource = nil, nil, nil, "", "", nil
	k.Providers, k.Routing = nil, nil // they steer routing only
	k.UpdateCheck = 0                 // when the registry is asked shapes no replica
	k.MaxOutput = 0                   // a bound on requests, checked by the gateway
	k.Licence = nil                   // who may use it, checked by the gateway
	b, _ := json.Marshal(struct {
		M *Model
		E string
	}{&k, engineKey})
	sum := sha256.Sum256(b)
	return "model:" + m.Name + ":" + hex.EncodeToString(sum[:12])
}

// Validate checks the model on its own: its name, engine, sizes,
// scaling, price and adapters.
func (m *Model) Validate() error {
	if err := CheckName("model name", m.Name); err != nil {
		return err
	}
	for _, al := range m.Aliases {
		if err := CheckName(fmt.Sprintf("model %q: alias", m.Name), al); err != nil {
			return err
		}
	}
	if m.Engine == "" && len(m.Profiles) > 0 {
		m.Engine = m.Profiles[0].Engine // the first profile's is the model's
	}
	if m.Engine == "" {
		return fmt.Errorf("model %q: engine is required (sim, openai, or a plugin's type)", m.Name)
	}
	if err := CheckEngineType(m.Name, m.Engine); err != nil {
		return err
	}
	if err := m.CheckSizes(); err != nil {
		return err
	}
	s := m.Scaling
	if s.MinReplicas() < 0 || s.MaxReplicas() < 0 {
		return fmt.Errorf("model %q: scaling min and max must be 0 or more", m.Name)
	}
	if s.MaxReplicas() < s.MinReplicas() {
		return fmt.Errorf("model %q: scaling max (%d) is below min (%d)", m.Name, s.MaxReplicas(), s.MinReplicas())
	}
	if s != nil && (s.TargetConcurrency < 0 || s.IdleTimeout < 0) {
		return fmt.Errorf("model %q: scaling values must not be negative", m.Name)
	}
	switch m.Class {
	case "", ClassCritical, ClassStandard, ClassOpportunistic:
	default:
		return fmt.Errorf("model %q: class %q: use critical, standard or opportunistic", m.Name, m.Class)
	}
	if r := m.Resources; r != nil && (r.Memory < 0 || r.Cores < 0 || r.GPUs < 0) {
		return fmt.Errorf("model %q: resources must not be negative", m.Name)
	}
	if err := m.CheckMaxOutput(); err != nil {
		return err
	}
	if err := m.checkProfiles(); err != nil { // profiles.go
		return err
	}
	if err := m.checkWorkflows(); err != nil { // workflow.go
		return err
	}
	if err := m.checkLicence(); err != nil { // licence.go
		return err
	}
	return m.ValidateAdapters()
}

// CheckMaxOutput checks max_output is not negative and fits in the
// context window.
func (m *Model) CheckMaxOutput() error {
	switch {
	case m.MaxOutput < 0:
		return fmt.Errorf("model %q: max_output %d must not be negative (leave it out for no limit)", m.Name, m.MaxOutput)
	case m.ContextLength > 0 && m.MaxOutput > m.ContextLength:
		return fmt.Errorf("model %q: max_output %d is above its context_length %d; an answer cannot be longer than the context window", m.Name, m.MaxOutput, m.ContextLength)
	}
	return nil
}

// Bounds on what a model hands its engine (much of it becomes a command
// line, which the kernel limits).
const (
	maxArgs        = 256
	maxArgLen      = 4096
	maxOptionName  = 128
	maxOptionValue = 64 << 10
	maxSourceLen   = 4096
	maxOwnerLen    = 256
)

// CheckSizes bounds the model's args, options, source and owner.
func (m *Model) CheckSizes() error {
	if len(m.Args) > maxArgs {
		return fmt.Errorf("model %q: %d args; at most %d", m.Name, len(m.Args), maxArgs)
	}
	for _, a := range m.Args {
		if len(a) > maxArgLen {
			return fmt.Errorf("model %q: arg %s is %d bytes long; at most %d", m.Name, Bounded(a), len(a), maxArgLen)
		}
	}
	for k, v := range m.Options {
		if len(k) > maxOptionName || len(v) > maxOptionValue {
			return fmt.Errorf("model %q: option %s: names are at most %d bytes and values %d", m.Name, Bounded(k), maxOptionName, maxOptionValue)
		}
	}
	if len(m.Source) > maxSourceLen {
		return fmt.Errorf("model %q: source %s is %d bytes long; at most %d", m.Name, Bounded(m.Source), len(m.Source), maxSourceLen)
	}
	if len(m.Owner) > maxOwnerLen {
		return fmt.Errorf("model %q: owner %s is %d bytes long; at most %d", m.Name, Bounded(m.Owner), len(m.Owner), maxOwnerLen)
	}
	return nil
}

// CheckEngineSettings refuses options the model's engine does not declare
// and args that would move its replicas off loopback.
func CheckEngineSettings(m *Model, info engine.Info) error {
	if err := info.CheckOptions(m.Options); err != nil {
		return fmt.Errorf("model %q: %w", m.Name, err)
	}
	if err := info.CheckArgs(m.Args); err != nil {
		return fmt.Errorf("model %q: %w", m.Name, err)
	}
	return CheckAdapterEngine(m, info)
}

// Catalog indexes models by name and alias.
type Catalog struct {
	ByName map[string]*Model
	Names  []string // every name, alias and adapter, sorted
	// Adapters are the adapters' entries, by name (see addAdapters).
	Adapters map[string]*Model
}

// NewCatalog validates models and indexes them by name, alias and adapter.
func NewCatalog(models []*Model) (*Catalog, error) {
	c := &Catalog{ByName: make(map[string]*Model)}
	for _, m := range models {
		if err := m.Validate(); err != nil {
			return nil, err
		}
		for _, n := range append([]string{m.Name}, m.Aliases...) {
			if prev, dup := c.ByName[n]; dup {
				return nil, fmt.Errorf("model name %q is used twice (by %q and %q)", n, prev.Name, m.Name)
			}
			c.ByName[n] = m
			c.Names = append(c.Names, n)
		}
	}
	if err := c.AddAdapters(models); err != nil {
		return nil, err
	}
	for _, m := range models {
		for _, fb := range m.Fallbacks {
			if _, ok := c.ByName[fb]; !ok {
				return nil, fmt.Errorf("model %q: fallback %s is not in the catalog", m.Name, Bounded(fb))
			}
			if c.ByName[fb] == m {
				return nil, fmt.Errorf("model %q: a model cannot be its own fallback", m.Name)
			}
		}
		if err := c.checkProviders(m); err != nil {
			return nil, err
		}
		if cn := m.Canary; cn != nil {
			switch target, ok := c.ByName[cn.Model]; {
			case !ok:
				return nil, fmt.Errorf("model %q: canary %s is not in the catalog", m.Name, Bounded(cn.Model))
			case target == m:
				return nil, fmt.Errorf("model %q: a model cannot be its own canary", m.Name)
			case cn.Share < 0 || cn.Share > 1:
				return nil, fmt.Errorf("model %q: canary share %g must be between 0 and 1 (0.1 is 10%%)", m.Name, cn.Share)
			}
		}
	}
	sort.Strings(c.Names)
	return c, nil
}

// Closest returns up to n catalog names nearest to name.
func (c *Catalog) Closest(name string, n int) []string {
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	lname := strings.ToLower(name)
	for _, x := range c.Names {
		d := levenshtein(lname, strings.ToLower(x))
		if strings.Contains(strings.ToLower(x), lname) {
			d = min(d, 1)
		}
		if d <= max(3, len(name)/2) {
			cs = append(cs, cand{x, d})
		}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].d < cs[j].d })
	out := make([]string, 0, n)
	for i := 0; i < len(cs) && i < n; i++ {
		out = append(out, cs[i].name)
	}
	return out
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// DefaultIdle is how long a replica of a model that scales to zero stays
// up without requests.
const DefaultIdle = 10 * time.Minute

// CloneOptions copies a model's options before they are changed.
func CloneOptions(o map[string]string) map[string]string {
	if o == nil {
		return map[string]string{}
	}
	return maps.Clone(o)
}

// ClassName is the class as shown (standard when empty).
func ClassName(c string) string {
	if c == "" {
		return ClassStandard
	}
	return c
}

// UnknownModelError is returned for a model name not in the catalog.
type UnknownModelError struct {
	Name    string
	Similar []string
}

func (e *UnknownModelError) Error() string {
	msg := fmt.Sprintf("the model %s does not exist", Bounded(e.Name))
	if len(e.Similar) > 0 {
		msg += "; did you mean " + QuoteJoin(e.Similar) + "?"
	}
	return msg + " (GET /v1/models lists the models you can use)"
}

// QuoteJoin quotes each of s and joins them with commas.
func QuoteJoin(s []string) string {
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}
