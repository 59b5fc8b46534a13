package tenancy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// Limits are what one node of the tenancy tree (organisation, team,
// project, key) allows. A zero field sets nothing at this node; a node's
// own limits can only narrow what its parents allow, because every
// ancestor's counters are checked too.
type Limits struct {
	// RequestsPerMinute caps requests in each clock minute.
	RequestsPerMinute int64 `json:"requests_per_minute,omitempty"`
	// TokensPerMinute caps prompt plus completion tokens in each clock
	// minute. Admission reserves an estimate; settlement replaces it with
	// the real usage.
	TokensPerMinute int64 `json:"tokens_per_minute,omitempty"`
	// TokensPerDay caps tokens in each UTC day.
	TokensPerDay int64 `json:"tokens_per_day,omitempty"`
	// Budget caps spending per BudgetPeriod, in the currency of the
	// catalog's prices. A request is admitted while the settled spending
	// is below the budget; the answer that crosses it is the last one.
	Budget float64 `json:"budget,omitempty"`
	// BudgetPeriod is "day" or "month" (UTC). Default: month.
	BudgetPeriod string `json:"budget_period,omitempty"`
	// MaxConcurrent caps requests in flight.
	MaxConcurrent int64 `json:"max_concurrent,omitempty"`
	// Models this node may use: catalog names, aliases or globs (gpt-*).
	// Others get 403. Default: every model its parent may use.
	Models []string `json:"models,omitempty"`
	// Tools this node may list and call through llm_mcp: namespaced tool
	// names (server.tool) or globs (tickets.*, *.search). Others are not
	// listed, and calling one is refused. Default: every tool its parent
	// may use.
	Tools []string `json:"tools,omitempty"`
	// ToolCallsPerMinute caps MCP tool calls in each clock minute.
	ToolCallsPerMinute int64 `json:"tool_calls_per_minute,omitempty"`
	// ToolCallsPerDay caps MCP tool calls in each UTC day.
	ToolCallsPerDay int64 `json:"tool_calls_per_day,omitempty"`
	// KBBytes caps the bytes of the files this node (and those below it)
	// keeps for knowledge bases (llm_kb); KBFiles caps their number. An
	// upload that would pass either is refused.
	KBBytes int64 `json:"kb_bytes,omitempty"`
	KBFiles int64 `json:"kb_files,omitempty"`
	// MaxOutput caps the tokens of one answer, as a model's max_output
	// does: a request asking for more gets 400 naming this level; one
	// asking nothing is sent with the smallest cap of its model, its key
	// and the key's levels as its max_tokens.
	MaxOutput int64 `json:"max_output,omitempty"`
	// JobsPerDay caps the jobs (llm_jobs: POST /v1/jobs and
	// /v1/images/generations) this node accepts in each UTC day; one past
	// it gets 429 naming this level, with Retry-After.
	JobsPerDay int64 `json:"jobs_per_day,omitempty"`
	// ConcurrentJobs caps this node's jobs running at once. A job past it
	// is not refused: it stays queued, and other tenants' jobs pass it,
	// until one of this node's jobs ends.
	ConcurrentJobs int64 `json:"concurrent_jobs,omitempty"`
	// GPUSecondsPerDay caps, in each UTC day, the seconds this node's
	// jobs ran times the GPUs of their replicas (at least 1). A job is
	// accepted while the day's use is below it (the job that crosses it
	// runs to its end); after that, 429 naming this level.
	GPUSecondsPerDay int64 `json:"gpu_seconds_per_day,omitempty"`
}

// Org is an organisation: the root of a tenancy tree.
type Org struct {
	Name   string  `json:"name"`
	Limits *Limits `json:"limits,omitempty"`
	// Capacity bounds what the models the organisation owns hold at once
	// (memory, cores, GPUs, replicas); see Capacity.
	Capacity *Capacity `json:"capacity,omitempty"`
	Teams    []*Team   `json:"teams,omitempty"`
}

// Team belongs to an organisation.
type Team struct {
	Name   string  `json:"name"`
	Limits *Limits `json:"limits,omitempty"`
	// Capacity bounds what the team's models hold; see Capacity.
	Capacity *Capacity  `json:"capacity,omitempty"`
	Projects []*Project `json:"projects,omitempty"`
}

// Project belongs to a team and holds keys.
type Project struct {
	Name   string  `json:"name"`
	Limits *Limits `json:"limits,omitempty"`
	// Capacity bounds what the project's models hold; see Capacity.
	Capacity *Capacity `json:"capacity,omitempty"`
	Keys     []*APIKey `json:"keys,omitempty"`
}

// APIKey is a key callers send as "Authorization: Bearer <secret>". Only
// its hash is kept: `llmgw hash-key` makes one.
type APIKey struct {
	// ID names the key in logs, usage and the admin API. Required.
	ID string `json:"id"`
	// SHA256 is the hex SHA-256 of the secret. Required.
	SHA256 string `json:"sha256"`
	// Limits for this key alone.
	Limits *Limits `json:"limits,omitempty"`

	// Set for keys created through the admin API.
	Project string     `json:"project,omitempty"`
	Created time.Time  `json:"created,omitzero"`
	Revoked *time.Time `json:"revoked,omitempty"`
}

// Level is one node on a key's path, from the key up to its organisation.
type Level struct {
	Kind   string // "key", "project", "team", "organisation"
	Name   string // the node's path, such as "acme/research/alpha"
	Limits Limits
	node   string // Node(), made once
}

// Tenant is what a valid key resolves to: the key and its path, with the
// counters each level owns.
type Tenant struct {
	KeyID   string
	Org     string
	Team    string
	Project string
	// Levels from the key up: each level's counters are checked.
	Levels []Level
	// Effective is the tightest of every level's limits.
	Effective Limits

	memo sync.Map
}

// Memo returns what a module keeps for this tenant under key, made by mk
// on first use, so that a request need not derive it again (metric
// children, say). It lives as long as the tenant: a key ring rebuilt for
// a new key or a reload starts afresh.
func (t *Tenant) Memo(key any, mk func() any) any {
	if v, ok := t.memo.Load(key); ok {
		return v
	}
	v, _ := t.memo.LoadOrStore(key, mk())
	return v
}

// Allowed reports whether the tenant may use a model, by its catalog name
// or the name the client asked for.
func (t *Tenant) Allowed(names ...string) bool {
	for _, l := range t.Levels {
		if len(l.Limits.Models) > 0 && !MatchAny(l.Limits.Models, names) {
			return false
		}
	}
	return true
}

// ToolAllowed says whether the tenant may list and call an MCP tool,
// named server.tool: every level that names tools must match it.
func (t *Tenant) ToolAllowed(name string) bool {
	for _, l := range t.Levels {
		if len(l.Limits.Tools) > 0 && !MatchAny(l.Limits.Tools, []string{name}) {
			return false
		}
	}
	return true
}

// MatchAny reports whether any of names matches any of the globs
// (path.Match patterns, as the tenancy's models and tools limits).
func MatchAny(globs, names []string) bool {
	for _, g := range globs {
		for _, n := range names {
			if ok, _ := path.Match(g, n); ok {
				return true
			}
		}
	}
	return false
}

// HashKey returns the hex SHA-256 of a key's secret, as stored.
func HashKey(secret string) string {
	var sum [2 * sha256.Size]byte
	return string(hashKeyInto(&sum, secret))
}

// hashKeyInto writes HashKey's hex digits into dst, for lookups that
// need not allocate.
func hashKeyInto(dst *[2 * sha256.Size]byte, secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	hex.Encode(dst[:], sum[:])
	return dst[:]
}

// Keyring maps key hashes to tenants.
type Keyring struct {
	byHash   map[string]*Tenant
	byID     map[string]*APIKey
	projects map[string][]Level // "org/team/project" → its levels, project first
}

// NewKeyring indexes the keys the config declares, checking names and
// hashes.
func NewKeyring(orgs []*Org) (*Keyring, error) {
	kr := &Keyring{byHash: map[string]*Tenant{}, byID: map[string]*APIKey{}, projects: map[string][]Level{}}
	seen := map[string]bool{}
	for _, o := range orgs {
		if err := CheckLevelName("organisation", o.Name, seen, o.Name); err != nil {
			return nil, err
		}
		for _, t := range o.Teams {
			tp := o.Name + "/" + t.Name
			if err := CheckLevelName("team", t.Name, seen, tp); err != nil {
				return nil, err
			}
			for _, p := range t.Projects {
				pp := tp + "/" + p.Name
				if err := CheckLevelName("project", p.Name, seen, pp); err != nil {
					return nil, err
				}
				levels := []Level{level("project", pp, p.Limits), level("team", tp, t.Limits), level("organisation", o.Name, o.Limits)}
				kr.projects[pp] = levels
				for _, k := range p.Keys {
					if err := catalog.CheckID("key id", k.ID); err != nil {
						return nil, fmt.Errorf("project %s: %w", pp, err)
					}
					if err := kr.Add(k, pp); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	return kr, nil
}

// NewLevel returns a tenancy level with defaults applied.
func NewLevel(kind, name string, l Limits) Level { return level(kind, name, &l) }

func level(kind, name string, l *Limits) Level {
	lv := Level{Kind: kind, Name: name, node: kind[:1] + ":" + name}
	if l != nil {
		lv.Limits = *l
	}
	if lv.Limits.BudgetPeriod == "" {
		lv.Limits.BudgetPeriod = "month"
	}
	return lv
}

// Add indexes a key under a project path.
func (kr *Keyring) Add(k *APIKey, project string) error {
	levels, ok := kr.projects[project]
	if !ok {
		return fmt.Errorf("key %q: project %q is not declared; use organisation/team/project", k.ID, project)
	}
	if k.ID == "" || strings.ContainsAny(k.ID, "/ \t\n:") {
		return fmt.Errorf("a key id %q must be non-empty, without '/', ':' or spaces", k.ID)
	}
	if _, dup := kr.byID[k.ID]; dup {
		return fmt.Errorf("key id %q is used twice", k.ID)
	}
	if b, err := hex.DecodeString(k.SHA256); err != nil || len(b) != sha256.Size {
		return fmt.Errorf("key %q: sha256 must be 64 hex digits; make one with `llmgw hash-key`", k.ID)
	}
	for _, l := range append([]*Limits{k.Limits}, LimitsOf(levels)...) {
		if err := l.Validate(); err != nil {
			return fmt.Errorf("key %q: %w", k.ID, err)
		}
	}
	if k.Revoked != nil {
		kr.byID[k.ID] = k
		return nil
	}
	hash := strings.ToLower(k.SHA256)
	if other, dup := kr.byHash[hash]; dup {
		return fmt.Errorf("keys %q (project %s) and %q (project %s) have the same sha256, so one secret would be both; give each key its own secret (`llmgw hash-key --new` makes one)",
			other.KeyID, other.Project, k.ID, project)
	}
	kr.byID[k.ID] = k
	parts := strings.SplitN(project, "/", 3)
	t := &Tenant{KeyID: k.ID, Org: parts[0], Team: parts[0] + "/" + parts[1], Project: project,
		Levels: append([]Level{level("key", k.ID, k.Limits)}, levels...)}
	t.Effective = Effective(t.Levels)
	kr.byHash[hash] = t
	return nil
}

// LimitsOf are the limits of levels, project first.
func LimitsOf(levels []Level) []*Limits {
	out := make([]*Limits, len(levels))
	for i := range levels {
		out[i] = &levels[i].Limits
	}
	return out
}

// Validate checks the limits are not negative and name known periods.
func (l *Limits) Validate() error {
	if l == nil {
		return nil
	}
	if l.RequestsPerMinute < 0 || l.TokensPerMinute < 0 || l.TokensPerDay < 0 || l.Budget < 0 || l.MaxConcurrent < 0 || l.MaxOutput < 0 ||
		l.JobsPerDay < 0 || l.ConcurrentJobs < 0 || l.GPUSecondsPerDay < 0 {
		return fmt.Errorf("limits must not be negative")
	}
	switch l.BudgetPeriod {
	case "", "day", "month":
	default:
		return fmt.Errorf("budget_period %q: use day or month", l.BudgetPeriod)
	}
	return nil
}

// Effective folds the levels into the tightest limits.
func Effective(levels []Level) Limits {
	var e Limits
	tight := func(cur *int64, v int64) {
		if v > 0 && (*cur == 0 || v < *cur) {
			*cur = v
		}
	}
	for _, l := range levels {
		tight(&e.RequestsPerMinute, l.Limits.RequestsPerMinute)
		tight(&e.TokensPerMinute, l.Limits.TokensPerMinute)
		tight(&e.TokensPerDay, l.Limits.TokensPerDay)
		tight(&e.MaxConcurrent, l.Limits.MaxConcurrent)
		tight(&e.ToolCallsPerMinute, l.Limits.ToolCallsPerMinute)
		tight(&e.ToolCallsPerDay, l.Limits.ToolCallsPerDay)
		tight(&e.MaxOutput, l.Limits.MaxOutput)
		tight(&e.JobsPerDay, l.Limits.JobsPerDay)
		tight(&e.ConcurrentJobs, l.Limits.ConcurrentJobs)
		tight(&e.GPUSecondsPerDay, l.Limits.GPUSecondsPerDay)
		if b := l.Limits.Budget; b > 0 && (e.Budget == 0 || b < e.Budget) {
			e.Budget, e.BudgetPeriod = b, l.Limits.BudgetPeriod
		}
		if len(l.Limits.Models) > 0 && len(e.Models) == 0 {
			e.Models = l.Limits.Models // the nearest level that names models
		}
		if len(l.Limits.Tools) > 0 && len(e.Tools) == 0 {
			e.Tools = l.Limits.Tools
		}
	}
	return e
}

const tenantVar = "llm.tenant"

// SetTenant records the caller's tenant on the request (llm_quota does),
// for the handlers after it and for /v1/models.
func SetTenant(r *http.Request, t *Tenant) { caddyhttp.SetVar(r.Context(), tenantVar, t) }

// TenantOf returns the tenant llm_quota resolved, if it ran.
func TenantOf(r *http.Request) (*Tenant, bool) { return TenantIn(r.Context()) }

// ProjectOf is the project path of the caller's key ("" when llm_quota
// did not run).
func ProjectOf(r *http.Request) string {
	if t, ok := TenantOf(r); ok {
		return t.Project
	}
	return ""
}

// TenantIn is TenantOf for code that has only the request's context.
func TenantIn(ctx context.Context) (*Tenant, bool) {
	t, ok := caddyhttp.GetVar(ctx, tenantVar).(*Tenant)
	return t, ok
}

// HasProject tells whether the project at path ("org/team/project") is
// declared.
func (kr *Keyring) HasProject(path string) bool {
	_, ok := kr.projects[path]
	return ok
}

// Spender is the tenant that tokens spent for a key outside a request
// (see llm.App.Charge) count at: the key's, or, for a key revoked or
// deleted since, its project's levels, the project being the revoked
// key's or, for a deleted key, the one given ("org/team/project").
func (kr *Keyring) Spender(keyID, project string) (*Tenant, bool) {
	k, known := kr.byID[keyID]
	if known && k.Revoked == nil {
		if t, ok := kr.byHash[strings.ToLower(k.SHA256)]; ok {
			return t, true
		}
	}
	if known && k.Project != "" {
		project = k.Project
	}
	levels, ok := kr.projects[project]
	if !ok {
		return nil, false
	}
	parts := strings.SplitN(project, "/", 3)
	t := &Tenant{KeyID: keyID, Org: parts[0], Team: parts[0] + "/" + parts[1], Project: project, Levels: slices.Clone(levels)}
	t.Effective = Effective(t.Levels)
	return t, true
}

// NodeTenant is the tenant a console session acts as (the playground):
// keyID names it ("console:<actor>"), node (org, org/team or
// org/team/project) gives the levels whose limits it counts at; "" is a
// session of the gateway's own staff, with no limits. A node that holds
// no project (so no known levels) is not found.
func (kr *Keyring) NodeTenant(keyID, node string) (*Tenant, bool) {
	if node == "" {
		return &Tenant{KeyID: keyID}, true
	}
	parts := strings.Split(node, "/")
	for project, levels := range kr.projects {
		if project != node && !strings.HasPrefix(project, node+"/") {
			continue
		}
		keep := levels[len(levels)-len(parts):] // project first, org last
		t := &Tenant{KeyID: keyID, Org: parts[0], Levels: slices.Clone(keep)}
		if len(parts) > 1 {
			t.Team = parts[0] + "/" + parts[1]
		}
		if len(parts) > 2 {
			t.Project = node
		}
		t.Effective = Effective(t.Levels)
		return t, true
	}
	return nil, false
}

// Key is the key with the given id.
func (kr *Keyring) Key(id string) (*APIKey, bool) {
	k, ok := kr.byID[id]
	return k, ok
}

// Keys are the keys by id; the caller must not change the map.
func (kr *Keyring) Keys() map[string]*APIKey { return kr.byID }

// ByHash is the tenant of the key whose hex SHA-256 is hash.
func (kr *Keyring) ByHash(hash string) (*Tenant, bool) {
	t, ok := kr.byHash[hash]
	return t, ok
}

// Lookup is the tenant of the key secret, hashed without allocating.
func (kr *Keyring) Lookup(secret string) (*Tenant, bool) {
	var sum [2 * sha256.Size]byte
	t, ok := kr.byHash[string(hashKeyInto(&sum, secret))] // no copy: the lookup converts in place
	return t, ok
}
