package llmapi

import (
	"time"

	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/licences"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/plugins/engine"
)

// EngineStatus describes one engine plugin.
type EngineStatus struct {
	Type         string   `json:"type"`
	Version      string   `json:"version"`
	PID          int      `json:"pid"`
	Capabilities []string `json:"capabilities"`
	Formats      []string `json:"formats"`
	// Options a model may set for the engine; empty when it declares none.
	Options []engine.Option `json:"options,omitempty"`
	// ReservedArgs are the server flags a model's args must not carry.
	ReservedArgs []string `json:"reserved_args,omitempty"`
	// Example is a model of the engine, as YAML in the shape of POST
	// /llm/models.
	Example string `json:"example,omitempty"`
	// Running is false for an engine that is installed (built in, or a
	// plugin file) but whose plugin runs for no model now; Error says why
	// it could not be asked, if it could not.
	Running bool   `json:"running"`
	Error   string `json:"error,omitempty"`
}

// KeyPage is a page of GET /llm/keys?limit=…&after=…&q=…&under=…:
// the keys after the id `after`, by id, that match q and lie under a
// node of the tenancy tree. Next is the id to ask after for the next
// page, empty on the last; Total counts the matching keys on all pages.
type KeyPage struct {
	Keys  []KeyInfo `json:"keys"`
	Next  string    `json:"next"`
	Total int       `json:"total"`
}

// MirrorView is GET /llm/mirror: the stores and how far each is behind,
// the transfers under way with their rate and time left, and the node cache.
type MirrorView struct {
	Stores    []string               `json:"stores"`
	Sync      mirror.SyncStatus      `json:"sync"`
	Transfers []mirror.Progress      `json:"transfers"`
	Cache     []mirror.CachedVersion `json:"cache"`
}

// NodeInfo is what GET /llm/nodes says about one node.
type NodeInfo struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	// Version is the node's llmgw release; nodes of different versions
	// in one cluster are shown by NodesStatus.Versions.
	Version   string        `json:"version,omitempty"`
	Self      bool          `json:"self,omitempty"`
	Leader    bool          `json:"leader,omitempty"`
	Drained   bool          `json:"drained,omitempty"`
	Heartbeat time.Time     `json:"heartbeat"`
	Age       string        `json:"heartbeat_age"`
	Started   time.Time     `json:"started"`
	Capacity  Amounts       `json:"capacity"`
	Used      Amounts       `json:"used"`
	Replicas  []NodeReplica `json:"replicas"`
	// Failing names the models this node cannot start now, and why.
	Failing map[string]string `json:"failing,omitempty"`
}

// NodesStatus is the body of GET /llm/nodes.
type NodesStatus struct {
	Cluster string `json:"cluster"`
	Store   string `json:"store"`
	// StoreError is set while the store does not answer: the nodes are
	// as this node last saw them.
	StoreError string              `json:"store_error,omitempty"`
	Leader     string              `json:"leader"`
	Nodes      []NodeInfo          `json:"nodes"`
	Plan       map[string][]string `json:"plan"`
	Unplaced   map[string]string   `json:"unplaced,omitempty"`
	// Versions names the nodes of each llmgw release when the nodes run
	// more than one (an upgrade under way, or one left behind).
	Versions map[string][]string `json:"versions,omitempty"`
}

// GuardrailOverview is the guardrails' part of GET /llm/overview: the
// totals of llmgw_guardrail_checks_total and llmgw_guardrail_findings_total.
type GuardrailOverview struct {
	Checks   []GuardrailChecks   `json:"checks"`
	Findings []GuardrailFindings `json:"findings"`
}

// ModelOverview is one model's line of GET /llm/overview.
type ModelOverview struct {
	Model            string  `json:"model"`
	State            string  `json:"state"`
	Ready            int     `json:"ready"`
	Requests         int64   `json:"requests"`
	Errors           int64   `json:"errors"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	TTFTMillis       float64 `json:"ttft_ms"`
	TTFTP50Millis    float64 `json:"ttft_p50_ms"`
	TokensPerSecond  float64 `json:"tokens_per_second"`
}

// TenantLevel is what the admin API shows of one level of the tenancy
// tree: an organisation, a team or a project.
type TenantLevel struct {
	Kind string `json:"kind"` // org, team or project
	Path string `json:"path"` // acme, acme/research or acme/research/alpha
	Name string `json:"name"`
	// Source is config (declared in the config file), runtime (created
	// through the admin API) or config+runtime (declared in the file, its
	// limits and capacity changed through the API: the change is laid
	// over the file at every start and reload).
	Source   string            `json:"source"`
	Limits   *tenancy.Limits   `json:"limits,omitempty"`
	Capacity *tenancy.Capacity `json:"capacity,omitempty"`
	// Used is what the replicas of the models it owns (itself and the
	// levels under it) hold on this node.
	Used OwnerUse `json:"used"`
	// Models are the catalog models it owns, itself or a level under it.
	Models []string `json:"models,omitempty"`
	// Keys counts the keys (not revoked) of its projects.
	Keys int `json:"keys"`
	// Children are the paths of the levels right under it.
	Children []string `json:"children,omitempty"`
}

// AuditEntry is one change made through the admin API.
type AuditEntry struct {
	// ID orders entries and is the cursor of GET /llm/audit.
	ID     string         `json:"id"`
	Time   time.Time      `json:"time"`
	Actor  string         `json:"actor"`
	Action string         `json:"action"`
	Node   string         `json:"node,omitempty"`
	Fields map[string]any `json:"fields,omitempty"`
}

// AuditPage is the answer of GET /llm/audit: entries newest first, and
// the cursor of the next page when there may be one.
type AuditPage struct {
	Entries []AuditEntry `json:"entries"`
	Next    string       `json:"next,omitempty"`
	// Source is where the entries were read: "cluster" (the Redis
	// stream every node writes to) or "storage" (this node's).
	Source  string `json:"source"`
	Warning string `json:"warning,omitempty"`
}

// NodeReplica is a replica as its node's heartbeat describes it.
type NodeReplica struct {
	ID       string `json:"id"`
	Model    string `json:"model"`
	Upstream string `json:"upstream,omitempty"`
	// Adapters the replica loaded, with their request members.
	Adapters map[string]string `json:"adapters,omitempty"`
	State    string            `json:"state"`
	Inflight int64             `json:"inflight"`
	Started  time.Time         `json:"started"`
	GPUs     []int             `json:"gpus,omitempty"` // the devices it holds on its node
	// Reason is why a failing replica fails.
	Reason string `json:"reason,omitempty"`
	// Profile is the model's profile it runs, for a model with profiles.
	Profile string `json:"profile,omitempty"`
}

// DeviceUse lists a node's GPU devices and those no replica holds.
type DeviceUse struct {
	All  []int `json:"all"`
	Free []int `json:"free"`
}

// GuardHistory is the answer of GET /llm/guardrails/history.
type GuardHistory struct {
	From        time.Time     `json:"from"`
	To          time.Time     `json:"to"`
	StepSeconds int64         `json:"step_seconds"`
	Series      []GuardSeries `json:"series"`
}

// GuardSeries is one check's outcome at one stage over time.
type GuardSeries struct {
	Check   string  `json:"check"`
	Stage   string  `json:"stage"`
	Outcome string  `json:"outcome"`
	Counts  []int64 `json:"counts"`
}

// Traffic is the answer of GET /llm/traffic: the router's answers over
// time, overall and per model, one point per step.
type Traffic struct {
	From        time.Time       `json:"from"`
	To          time.Time       `json:"to"`
	StepSeconds int64           `json:"step_seconds"`
	Overall     TrafficSeries   `json:"overall"`
	Models      []TrafficSeries `json:"models"`
}

// TrafficSeries is one model's points (Model empty: every model's).
type TrafficSeries struct {
	Model  string         `json:"model,omitempty"`
	Points []TrafficPoint `json:"points"`
}

// TrafficPoint is one step. Errors are answers with status 500 or above
// and 429 (the gateway failed or was out of capacity); client errors are
// the other answers of 400 or above (among them requests the guardrails
// blocked). Quantiles are null in a step without an answer; replicas
// ready is null in a step no node sampled.
type TrafficPoint struct {
	At                    time.Time `json:"at"`
	Requests              int64     `json:"requests"`
	RequestsPerSecond     float64   `json:"requests_per_second"`
	Errors                int64     `json:"errors"`
	ErrorsPerSecond       float64   `json:"errors_per_second"`
	ClientErrors          int64     `json:"client_errors"`
	ClientErrorsPerSecond float64   `json:"client_errors_per_second"`
	LatencyP50Millis      *float64  `json:"latency_p50_ms"`
	LatencyP95Millis      *float64  `json:"latency_p95_ms"`
	TTFTP50Millis         *float64  `json:"ttft_p50_ms"`
	TTFTP95Millis         *float64  `json:"ttft_p95_ms"`
	CompletionTokens      int64     `json:"completion_tokens"`
	TokensPerSecond       float64   `json:"tokens_per_second"`
	ReplicasReady         *int64    `json:"replicas_ready"`
}

// KeyInfo is what the admin API shows of a key: never its secret.
type KeyInfo struct {
	ID        string          `json:"id"`
	Project   string          `json:"project"`
	Source    string          `json:"source"` // "config" or "runtime"
	Created   time.Time       `json:"created,omitzero"`
	Revoked   *time.Time      `json:"revoked,omitempty"`
	Limits    *tenancy.Limits `json:"limits,omitempty"`
	Levels    []tenancy.Level `json:"levels,omitempty"`
	Effective *tenancy.Limits `json:"effective,omitempty"`
	Secret    string          `json:"secret,omitempty"` // only when created or rotated
}

// Rollout is the answer of a live change or a restart: the model's status
// once the new replicas are ready, and what was replaced.
type Rollout struct {
	ModelStatus
	// Replaced are the replicas that drain (and stop once their requests end).
	Replaced []string `json:"replaced"`
	// Started are the replicas that took their place.
	Started []string `json:"started"`
	// OneAtATime is true when the node had no room for a new replica
	// beside the old one: each old replica drained before its
	// replacement started, and requests waited (or got 503) meanwhile.
	OneAtATime bool `json:"one_at_a_time,omitempty"`
	// Note says what else to know, such as that the config file still
	// holds the old value.
	Note string `json:"note,omitempty"`
}

// OwnerUse is what the replicas of the models an owner holds (itself and
// the levels under it) use on this node.
type OwnerUse struct {
	Memory   int64 `json:"memory"`
	Cores    int   `json:"cores"`
	GPUs     int   `json:"gpus"`
	Replicas int   `json:"replicas"`
}

// Add counts one more replica that needs r.
func (u *OwnerUse) Add(r catalog.Resources) {
	u.Memory += r.Memory
	u.Cores += r.Cores
	u.GPUs += r.GPUs
	u.Replicas++
}

// NodeStatus is the node's capacity and what its replicas use.
type NodeStatus struct {
	Capacity Amounts `json:"capacity"`
	Used     Amounts `json:"used"`
	Free     Amounts `json:"free"`
	// GPUDevices are the node's GPU devices and those free (gpus.go).
	GPUDevices *DeviceUse `json:"gpu_devices,omitempty"`
}

// Amounts are resources with every kind shown, zero or not.
type Amounts struct {
	Memory int64 `json:"memory"`
	Cores  int   `json:"cores"`
	GPUs   int   `json:"gpus"`
}

// Plan is the answer of POST /llm/plan: where a model's replicas would
// go, what would be stopped to make room, and what is missing.
type Plan struct {
	Model string `json:"model"`
	// Fits is true when every replica the model starts with would be placed.
	Fits bool `json:"fits"`
	// Replicas is where each replica would go, in start order.
	Replicas []PlannedReplica `json:"replicas"`
	// Evict lists the replicas of lower classes that would be stopped.
	Evict []PlannedEviction `json:"evict"`
	// Missing is what the node lacks for the first replica that does not
	// fit, even after stopping every lower-class replica; Reason says it.
	Missing *Amounts `json:"missing,omitempty"`
	Reason  string   `json:"reason,omitempty"`
	// Note explains a plan made for a model that starts on demand (min 0).
	Note string `json:"note,omitempty"`
	// Node is the node's capacity and use now.
	Node        NodeStatus   `json:"node"`
	SourceCheck *SourceCheck `json:"source_check,omitempty"`
	// SourceError is why the source check failed: a real add is refused.
	SourceError string `json:"source_error,omitempty"`
}

// PlannedReplica is one replica in a plan.
type PlannedReplica struct {
	Node      string  `json:"node"`
	Resources Amounts `json:"resources"`
	// GPUs are the devices it would be given (gpus.go).
	GPUs []int `json:"gpus,omitempty"`
	// Profile is the model's profile it would run on, for a model with
	// profiles; Note why the earlier profiles would not take it.
	Profile string `json:"profile,omitempty"`
	Note    string `json:"note,omitempty"`
}

// PlannedEviction is one replica a plan would stop.
type PlannedEviction struct {
	Model     string  `json:"model"`
	Replica   string  `json:"replica"`
	Class     string  `json:"class"`
	Resources Amounts `json:"resources"`
}

// ModelStatus is what the catalog and fleet say about one model.
type ModelStatus struct {
	Name      string             `json:"name"`
	Aliases   []string           `json:"aliases,omitempty"`
	Engine    string             `json:"engine"`
	Source    string             `json:"source,omitempty"`
	State     string             `json:"state"`
	Reason    string             `json:"reason,omitempty"`
	Min       int                `json:"min"`
	Max       int                `json:"max"`
	Runtime   bool               `json:"runtime,omitempty"` // added through the admin API
	Class     string             `json:"class"`
	Owner     string             `json:"owner,omitempty"`
	Resources *catalog.Resources `json:"resources,omitempty"`
	Fallbacks []string           `json:"fallbacks,omitempty"`
	Canary    *catalog.Canary    `json:"canary,omitempty"`
	Adapters  []*catalog.Adapter `json:"adapters,omitempty"`
	// ContextLength is the model's context window in tokens, when it
	// declares one; MaxOutput the most tokens one answer may have (keys
	// and tenancy levels may set less).
	ContextLength int64 `json:"context_length,omitempty"`
	MaxOutput     int64 `json:"max_output,omitempty"`
	// Providers and Routing are, for a model served by several
	// providers, which catalog model serves each and the policy that
	// picks one.
	Providers []*catalog.Provider `json:"providers,omitempty"`
	Routing   *catalog.Routing    `json:"routing,omitempty"`
	// Profiles are the shapes the model's replicas can take, in order;
	// Prefer is cpu when a CPU profile may run while GPUs are free.
	Profiles []ProfileStatus `json:"profiles,omitempty"`
	Prefer   string          `json:"prefer,omitempty"`
	Replicas []ReplicaStatus `json:"replicas"`
}

// Scaled is the answer of POST /llm/models/{name}/scale: the model's
// status, and a note when the scale started a stopped model.
type Scaled struct {
	ModelStatus
	// Note says that the model was stopped and the scale started it.
	Note string `json:"note,omitempty"`
}

// Retried is the answer of POST /llm/models/{name}/retry: the model's
// status once its start began again (starting, on this node), and in a
// cluster the nodes that retried it.
type Retried struct {
	ModelStatus
	// Nodes are the nodes of a cluster whose failed start was retried.
	Nodes []string `json:"nodes,omitempty"`
}

// ProfileStatus is one of a model's profiles as the admin API shows it:
// its engine and what a replica of it needs (its options and args, which
// may hold credentials, are not shown).
type ProfileStatus struct {
	Name          string             `json:"name"`
	Engine        string             `json:"engine"`
	ContextLength int64              `json:"context_length,omitempty"`
	Resources     *catalog.Resources `json:"resources,omitempty"`
}

// LicenceStatus is a model's licence and for whom it was accepted.
type LicenceStatus struct {
	Model    string                `json:"model"`
	Licence  catalog.Licence       `json:"licence"`
	Accepted []licences.Acceptance `json:"accepted"`
}

// ReplicaStatus describes one replica.
type ReplicaStatus struct {
	ID       string    `json:"id"`
	State    string    `json:"state"`
	URL      string    `json:"url"`
	Node     string    `json:"node,omitempty"` // in a cluster, the node it runs on
	PID      int64     `json:"pid,omitempty"`
	CPUs     []int     `json:"cpus,omitempty"`
	GPUs     []int     `json:"gpus,omitempty"` // the GPU devices it holds
	Inflight int64     `json:"inflight"`
	Started  time.Time `json:"started"`
	// Reason says why a failing replica (an outside provider that does
	// not answer, refuses its key or fails) gets no request.
	Reason string `json:"reason,omitempty"`
	// Profile is the model's profile the replica runs on, for a model
	// with profiles; ProfileNote why it does not run on an earlier one.
	Profile     string `json:"profile,omitempty"`
	ProfileNote string `json:"profile_note,omitempty"`
}

// ModelTest is the answer of POST /llm/models/{name}/test: what probing
// each of the model's replicas on this node found. OK is true when one of
// them serves; Reason says why none does.
type ModelTest struct {
	Model    string        `json:"model"`
	OK       bool          `json:"ok"`
	Reason   string        `json:"reason,omitempty"`
	Replicas []ReplicaTest `json:"replicas"`
}

// ReplicaTest is one probe of a replica: GET <base URL>/models with its key.
type ReplicaTest struct {
	Replica string `json:"replica"`
	URL     string `json:"url"`              // what was tried (no key in it)
	Status  int    `json:"status,omitempty"` // the HTTP status; 0: no answer
	// LatencyMS is how long the answer took, in milliseconds.
	LatencyMS float64 `json:"latency_ms"`
	State     string  `json:"state"` // ready or failing
	Reason    string  `json:"reason,omitempty"`
}

// AddedModel is the answer of POST /llm/models: the model's status and
// what the check of its source found.
type AddedModel struct {
	ModelStatus
	SourceCheck *SourceCheck `json:"source_check,omitempty"`
}

// SourceCheck is what checking a model's source before it is added found.
type SourceCheck struct {
	// Kind is local, url, registry, mirror or none (the engine loads no
	// weight files, or the source is the engine's own kind of name).
	Kind string `json:"kind"`
	// Source is the source as checked, without a URL's query or user info.
	Source string `json:"source,omitempty"`
	// Checked is false when the check was skipped (check_source false) or
	// there was nothing to check; Note says why.
	Checked bool `json:"checked"`
	// Size of the weights in bytes, when the source tells it.
	Size int64 `json:"size,omitempty"`
	// Format of the weights: gguf, safetensors, or "" when not known.
	Format string `json:"format,omitempty"`
	// Files the source holds (a registry repository, a mirror version).
	Files int    `json:"files,omitempty"`
	Note  string `json:"note,omitempty"`
}

// ModelUpdates is what GET /llm/models/<name>/updates answers: the
// model's current version, the revision the registry has now, and when it
// was last asked.
type ModelUpdates struct {
	Model string `json:"model"`
	// Source is the catalog model's source; Repository the registry
	// source its mirror model follows.
	Source     string `json:"source"`
	Repository string `json:"repository,omitempty"`
	// MirrorModel is the model's name in the mirror.
	MirrorModel string `json:"mirror_model"`
	// Current is the mirror version new replicas start on, CurrentCommit
	// the registry commit it was fetched from; Previous is the version a
	// rollback returns to.
	Current       string `json:"current,omitempty"`
	CurrentCommit string `json:"current_commit,omitempty"`
	Previous      string `json:"previous,omitempty"`
	// Available is the commit the repository's revision points at now,
	// as of the last check; UpdateAvailable says it is not the current.
	Available       string `json:"available,omitempty"`
	UpdateAvailable bool   `json:"update_available"`
	// CheckedAt is when the registry was last asked (successfully or
	// not); NextCheck when it will be next, absent when checks are off.
	CheckedAt *time.Time `json:"checked_at,omitempty"`
	NextCheck *time.Time `json:"next_check,omitempty"`
	// Every is the model's update_check: a duration, or "off".
	Every string `json:"update_check"`
	// Error is why the last check failed.
	Error string `json:"error,omitempty"`
}

// VersionRollout is the answer of an update or a rollback: the rollout
// of the model's replicas and the versions it went from and to.
type VersionRollout struct {
	Rollout
	From       string `json:"from"`
	To         string `json:"to"`
	FromCommit string `json:"from_commit,omitempty"`
	ToCommit   string `json:"to_commit,omitempty"`
}

// Usage is what a tenancy node used of one model in a time range.
type Usage struct {
	Requests     int64 `json:"requests"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	CostMicros   int64 `json:"cost_micros"`
}

// Add adds o to u.
func (u *Usage) Add(o Usage) {
	u.Requests += o.Requests
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.CostMicros += o.CostMicros
}

// WeightsEntry is a version (or a stray file) in a node's weights
// directory, the mirror's node cache.
type WeightsEntry struct {
	mirror.CacheEntry
	// UsedBy names the catalog models whose weights these are; stopped
	// models and models kept with max 0 count.
	UsedBy []string `json:"used_by,omitempty"`
	// Why says why an entry counts as used without a catalog model: a
	// replica holds it, a fetch is bringing it in, or which version a
	// model uses could not be told.
	Why string `json:"why,omitempty"`
}

// NodeWeights is GET /llm/weights for one node: the files of its
// weights directory, split into those the catalog uses and the others.
type NodeWeights struct {
	Node        string         `json:"node"`
	Dir         string         `json:"dir,omitempty"`
	Used        []WeightsEntry `json:"used"`
	Unused      []WeightsEntry `json:"unused"`
	UsedBytes   int64          `json:"used_bytes"`
	UnusedBytes int64          `json:"unused_bytes"`
	Note        string         `json:"note,omitempty"`
	// Error says why the node could not be asked (in a cluster).
	Error string `json:"error,omitempty"`
}

// WeightsPruned is the answer of POST /llm/weights/prune.
type WeightsPruned struct {
	Node    string              `json:"node"`
	DryRun  bool                `json:"dry_run"`
	Removed []mirror.CacheEntry `json:"removed"`
	Freed   int64               `json:"freed"`
	Note    string              `json:"note,omitempty"`
	Error   string              `json:"error,omitempty"`
}

// GuardrailChecks counts one check's outcomes at one stage.
type GuardrailChecks struct {
	Check    string           `json:"check"`
	Stage    string           `json:"stage"`
	Outcomes map[string]int64 `json:"outcomes"`
}

// GuardrailFindings counts what one check found of one kind and did.
type GuardrailFindings struct {
	Check  string `json:"check"`
	Kind   string `json:"kind"`
	Action string `json:"action"`
	Count  int64  `json:"count"`
}

// PeerStatus is one peer gateway (GET /llm/peers) as its last check
// found it. Its keys are never shown: only whether a default key is set
// and which local tenants have one of their own.
type PeerStatus struct {
	Name   string `json:"name"`
	URL    string `json:"url"`
	CA     string `json:"ca,omitempty"` // the CA file trusted for it
	Prefix string `json:"prefix"`       // before its models' names here
	// Globs are the models globs that choose which of its models are
	// listed; none: all of them.
	Globs     []string `json:"globs,omitempty"`
	Fallbacks []string `json:"fallbacks,omitempty"`
	// State is up, down or unknown (not checked yet); Reason says why
	// it is down.
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// Models are the catalog names of its models its last good check
	// listed.
	Models     []string  `json:"models"`
	Tenants    []string  `json:"tenants,omitempty"` // local tenants with a key of their own
	DefaultKey bool      `json:"default_key"`
	Checked    time.Time `json:"checked,omitzero"` // its last check
	Since      time.Time `json:"since,omitzero"`   // when State began
}

// PresetStatus is a preset (GET /llm/presets): what it adds, and whether
// this cluster can run it and why not.
type PresetStatus struct {
	Name        string             `json:"name"`
	Description string             `json:"description,omitempty"`
	Kind        string             `json:"kind,omitempty"`
	Engine      string             `json:"engine"`
	Source      string             `json:"source,omitempty"`
	Resources   *catalog.Resources `json:"resources,omitempty"`
	Licence     *catalog.Licence   `json:"licence,omitempty"`
	Workflows   []PresetWorkflow   `json:"workflows"`
	// Automatic presets add themselves when the cluster can run them.
	Automatic bool `json:"automatic"`
	// Shipped is true for a preset that ships with llmgw, false for the
	// config's.
	Shipped bool `json:"shipped"`
	// State is added (Model is in the catalog), declined (an operator
	// removed it: not added again by itself), available (the cluster
	// can run it) or unavailable (WhyNot says why).
	State string `json:"state"`
	// Model is the catalog model added from the preset, when added.
	Model  string   `json:"model,omitempty"`
	WhyNot []string `json:"why_not,omitempty"`
	// DeclinedBy and DeclinedAt say who removed it, for a declined one.
	DeclinedBy string     `json:"declined_by,omitempty"`
	DeclinedAt *time.Time `json:"declined_at,omitempty"`
}

// PresetWorkflow is a workflow of a preset's model: a job names it with
// its parameters.
type PresetWorkflow struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Parameters  []string `json:"parameters"`
}
