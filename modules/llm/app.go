// Package llm is the "llm" Caddy app: its lifecycle across reloads, the
// Caddyfile option, the admin API (admin.api.llm), and the glue between
// the layers it is built of: the catalog (catalog), keys and tenants
// (tenancy), where replicas run (place), the replicas themselves (fleet),
// the cluster (cluster), the weights mirror (weights), the admin API's
// shapes (llmapi), the audit log (audit), the guardrails' and the answers'
// histories (guardhist, traffic). The request handlers (llm_router and the
// others) ask it for models and replicas; nothing below it imports it.
package llm

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/modules/llm/audit"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/cluster"
	"github.com/llmgw/llmgw/modules/llm/enginelist"
	"github.com/llmgw/llmgw/modules/llm/federation"
	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llm/guardhist"
	"github.com/llmgw/llmgw/modules/llm/licences"
	"github.com/llmgw/llmgw/modules/llm/place"
	"github.com/llmgw/llmgw/modules/llm/presets"
	"github.com/llmgw/llmgw/modules/llm/reqlog"
	"github.com/llmgw/llmgw/modules/llm/routeorder"
	"github.com/llmgw/llmgw/modules/llm/secrets"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/llm/traffic"
	"github.com/llmgw/llmgw/modules/llm/weights"
	"github.com/llmgw/llmgw/plugins/host"
)

func init() {
	caddy.RegisterModule(App{})
}

// firstParty are the engines linked into the llmgw binary, run as
// "llmgw engine <type>".
var firstParty = map[string]bool{"sim": true, "simimage": true, "comfyui": true, "openai": true, "anthropic": true, "llamacpp": true, "vllm": true, "ollama": true}

// Package pools: fleets outlive a config (and plugins: enginelist.Set), so a reload
// that leaves them unchanged keeps them.
var (
	fleets = caddy.NewUsagePool()
	nodes  = caddy.NewUsagePool() // the one Node of the process (fleet.go)
)

// App is the llm app. It holds the catalog of models, runs their replicas
// through engine plugins, and answers the request handlers' questions.
//
// A model with scaling min 0 starts on its first request, which waits for
// it (bounded by hold_timeout) and stops after its idle timeout. Requests
// that find no ready replica get 503 with Retry-After.
type App struct {
	// PluginDir is where third-party engine plugins live, as executables
	// named llmgw-engine-<type>. Default: "plugins" under Caddy's data
	// directory.
	PluginDir string `json:"plugin_dir,omitempty"`
	// Node is what this machine offers replicas (memory, cores, GPUs).
	// Default: detected (total memory, CPUs, NVIDIA GPUs); declared values
	// replace detected ones.
	Node *catalog.Resources `json:"node,omitempty"`
	// PinCores gives each replica of a model that says how many cores it
	// needs cores of its own: its engine's processes run only on them
	// (the highest-numbered free ones; core 0, where the kernel handles
	// most interrupts, goes last), and no other pinned replica gets them.
	// The kernel then leaves a CPU engine's compute threads on their cores
	// and runs the gateway's work on the others while they have room, so
	// requests relayed through llmgw do not slow the engine down.
	PinCores bool `json:"pin_cores,omitempty"`
	// GPUDevices names the node's GPUs the gateway hands out, by index as
	// CUDA_VISIBLE_DEVICES counts them (0,2,3), when they are not simply
	// all of them. Each replica of a model that needs N GPUs gets N of
	// them that no other replica holds, and its engine runs with
	// CUDA_VISIBLE_DEVICES set to them. Default: the devices this process
	// sees (CUDA_VISIBLE_DEVICES when it is set to indexes, else 0 to the
	// node's GPUs minus one). Setting it sets the node's GPUs too.
	GPUDevices []int `json:"gpu_devices,omitempty"`
	// Engines pins or overrides engine plugins by type.
	Engines map[string]*EngineConfig `json:"engines,omitempty"`
	// Models is the catalog.
	Models []*catalog.Model `json:"models,omitempty"`
	// HoldTimeout is how long a request waits for a replica to become
	// ready (an on-demand start, a restart) before it gets 503.
	// Default: 60s.
	HoldTimeout caddy.Duration `json:"hold_timeout,omitempty"`
	// MaxWaiting bounds the requests held per model. Default: 1024.
	MaxWaiting int `json:"max_waiting,omitempty"`
	// StartTimeout bounds one replica's start. Default: 5m.
	StartTimeout caddy.Duration `json:"start_timeout,omitempty"`
	// DrainTimeout bounds how long a replica that is being replaced or
	// stopped (a reload that changes its model, a model stop or removal,
	// a replica restart) keeps serving the requests it already has: it
	// receives nothing new and is stopped when its last request ends or
	// this much time has passed, whichever comes first. Default: 5m.
	DrainTimeout caddy.Duration `json:"drain_timeout,omitempty"`
	// Orgs is the tenancy tree: organisations, their teams,
	// projects and API keys, each with limits. llm_quota enforces them.
	Orgs []*tenancy.Org `json:"orgs,omitempty"`
	// Mirror keeps model weights in one or two stores and fetches them to
	// this node; see MirrorConfig. Default: used only when a model's source
	// is mirror:// or hf://, with one directory store in Caddy's data
	// directory.
	Mirror *weights.MirrorConfig `json:"mirror,omitempty"`
	// Cluster makes this llmgw a node of a cluster that shares one
	// catalog through Redis; see ClusterConfig.
	Cluster *cluster.ClusterConfig `json:"cluster,omitempty"`
	// Audit bounds the audit log of changes made through the admin API;
	// see audit.Config. Default: 30 days, at most 100000 entries.
	Audit *audit.Config `json:"audit,omitempty"`
	// UpdateCheck is how often the registry is asked whether a model
	// served from a tracked repository (an hf:// source, or mirror://<model>
	// of a mirror model added with --track) has a new commit; the answer
	// is shown at GET /llm/models/<name>/updates, and POST …/update applies
	// it. A model's own update_check overrides it. Default: 6h; -1 (off
	// in the Caddyfile): never.
	UpdateCheck caddy.Duration `json:"update_check,omitempty"`
	// RequestLog keeps every request the llm handlers answer; see
	// reqlog.Config. Default: on, 7 days, at most 1,000,000 records, no
	// bodies.
	RequestLog *reqlog.Config `json:"request_log,omitempty"`
	// Secrets are values the config file names, so that what is given at
	// run time through the admin API can use them without holding them:
	// a value "secret:<name>" stands for the secret. Values may use
	// placeholders ({env.NAME}, {file.path}), resolved when the config
	// loads. Placeholders in values given at run time are refused.
	Secrets map[string]string `json:"secrets,omitempty"`
	// RuntimeHosts are the hosts (names, addresses or CIDR ranges) that
	// URLs set at run time through the admin API (a model's base_url or
	// source, an MCP server's url) may reach besides public addresses:
	// loopback, link-local, unspecified and multicast addresses and this
	// machine's own addresses are refused unless listed here. They are
	// checked after DNS resolution and on every redirect. URLs in the
	// config file are not limited. Default: none.
	RuntimeHosts []string `json:"runtime_hosts,omitempty"`
	// Peers are other gateways whose models this one lists, under a
	// prefix, and serves by forwarding requests to them; see
	// federation.Peer. GET /llm/peers shows their health.
	Peers []*federation.Peer `json:"peers,omitempty"`
	// Presets are the operator's presets, beside those that ship with
	// llmgw (one of the same name replaces a shipped one); see
	// presets.Preset. GET /llm/presets lists them all.
	Presets []*presets.Preset `json:"presets,omitempty"`

	view      *atomic.Pointer[view] // catalog and fleets, swapped whole on runtime changes
	mu        *sync.Mutex           // serializes runtime model changes; guards the fields below
	fkeys     map[string]string     // model name → its fleet's pool key
	engines   *enginelist.Set       // the engine plugins it runs
	licences  *atomic.Pointer[licences.Table]
	presets   *presets.Service
	described *enginelist.Cache // what engines not running said of themselves (GET /llm/engines)
	logger    *zap.Logger
	ctx       context.Context // the config's: done when it is unloaded
	cctx      caddy.Context   // the same, to find the other apps at Start

	storage       cluster.StateStore // Caddy storage, or Redis in a cluster
	local         certmagic.Storage
	cluster       *cluster.Member
	clusterKey    string
	declared      []*catalog.Model // the config's models, before settings changed at runtime
	mirror        *mirror.Mirror
	node          *fleet.Node // what the process's fleets share (fleet.go)
	shared        *procShared // what the process's apps share (shared.go)
	nodeReleased  bool        // Cleanup gave node and shared back
	mirrorKey     string
	keys          *atomic.Pointer[tenancy.Keyring]
	runtimeKeys   []*tenancy.APIKey
	tenants       *atomic.Pointer[tenancy.Tree] // the tenancy tree in force (tenancy.go)
	lockKey       string                        // the data directory's lock, once Start took it
	secrets       *secrets.Set                  // Secrets, resolved, and what URLs set at run time may reach
	auditLog      *audit.Log                    // the audit log (audit.go)
	guardHist     *guardhist.History            // the guardrails' history (guardhist.go)
	reqLog        *reqlog.Log                   // the request log (requests.go); nil when off
	reqLogRelease func()
	traffic       *traffic.History // the answers' history (traffic.go)
	peers         *federation.Set  // the peers' running side (peers.go)
}

// EngineConfig says how to run one engine type's plugin.
type EngineConfig struct {
	// Path to the plugin executable. Default: the first-party engine
	// built into llmgw, else llmgw-engine-<type> in the plugin directory.
	Path string `json:"path,omitempty"`
	// SHA256 pins the executable: it must hash to this hex digest or it
	// is not run.
	SHA256 string `json:"sha256,omitempty"`
	// Options configure the engine plugin itself (such as bin, the engine
	// server's binary). The plugin gets each as the environment variable
	// LLMGW_ENGINE_<NAME>.
	Options map[string]string `json:"options,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "llm",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision builds the catalog and loads (or reuses) plugins and fleets.
func (a *App) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	a.ctx, a.cctx = ctx, ctx
	a.node = acquireNode()
	a.shared = acquireShared()
	a.node.Ledger.SetCapacity(a.Node, a.PinCores)
	if err := a.node.Ledger.SetGPUDevices(a.Node, a.GPUDevices); err != nil { // gpus.go
		return err
	}
	if a.PluginDir == "" {
		a.PluginDir = filepath.Join(caddy.AppDataDir(), "plugins")
	}
	if a.HoldTimeout == 0 {
		a.HoldTimeout = caddy.Duration(60 * time.Second)
	}
	if a.MaxWaiting == 0 {
		a.MaxWaiting = 1024
	}
	if a.StartTimeout == 0 {
		a.StartTimeout = caddy.Duration(5 * time.Minute)
	}
	if a.DrainTimeout == 0 {
		a.DrainTimeout = caddy.Duration(5 * time.Minute)
	}
	a.storage, a.local = ctx.Storage(), ctx.Storage()
	if a.Cluster != nil {
		if err := a.joinCluster(ctx); err != nil {
			return err
		}
	}
	a.openAudit()                              // audit.go
	if err := a.openRequestLog(); err != nil { // requests.go
		return err
	}
	a.declared = a.Models
	markFileValues(a.Models)
	if err := a.provisionSecrets(); err != nil {
		return err
	}
	if err := a.provisionMirror(); err != nil {
		return err
	}
	peers, err := federation.New(a.Peers, a.logger.Named("peers"))
	if err != nil {
		return err
	}
	a.peers = peers
	a.keys = new(atomic.Pointer[tenancy.Keyring])
	a.view = new(atomic.Pointer[view])
	a.licences = new(atomic.Pointer[licences.Table])
	if a.presets, err = presets.NewService(a.Presets, presetHost{a}, a.logger.Named("presets")); err != nil {
		return err
	}
	a.mu = new(sync.Mutex)
	a.fkeys = map[string]string{}
	a.engines, a.described = enginelist.NewSet(), &enginelist.Cache{}
	a.tenants = new(atomic.Pointer[tenancy.Tree])
	if err := a.loadTenants(ctx); err != nil { // before the keys: runtime projects hold keys
		return err
	}
	runtime, err := a.loadRuntimeKeys(ctx)
	if err != nil {
		return err
	}
	if err := a.rebuildKeys(runtime); err != nil {
		return err
	}
	added, err := a.loadRuntimeModels(ctx)
	if err != nil {
		return err
	}
	if err := a.applySettings(ctx); err != nil {
		return err
	}
	if err := a.peers.CheckFallbacks(append(slices.Clone(a.Models), added...)); err != nil {
		return err
	}
	v, err := a.buildView(append(append([]*catalog.Model{}, a.Models...), added...), added)
	if err != nil {
		return err
	}
	a.view.Store(v)
	a.warnUnmatchedGlobs(v) // globs.go
	if err := a.loadStopped(ctx); err != nil {
		return fmt.Errorf("loading stopped models from storage: %w", err)
	}
	if err := a.loadLicences(ctx); err != nil { // licences.go
		return err
	}
	return a.registerMetrics(ctx.GetMetricsRegistry())
}

// view is the catalog and its fleets as request handlers see them.
type view struct {
	cat     *catalog.Catalog
	models  []*catalog.Model // config models first, then runtime ones
	fleets  map[string]*fleet.Fleet
	runtime map[string]bool // models added through the admin API
}

func (a *App) v() *view { return a.view.Load() }

// buildView validates models as one catalog and loads (or reuses) their
// fleets; runtime are those added through the admin API.
func (a *App) buildView(models, runtime []*catalog.Model) (*view, error) {
	models = append(models, a.peers.Models(models)...) // peers.go
	repl := caddy.NewReplacer()
	for _, m := range models {
		if err := a.resolveModel(repl, m); err != nil {
			return nil, err
		}
		if err := m.Price.Validate(m.Name); err != nil {
			return nil, err
		}
	}
	cat, err := catalog.NewCatalog(models)
	if err != nil {
		return nil, err
	}
	v := &view{cat: cat, models: models, fleets: map[string]*fleet.Fleet{}, runtime: map[string]bool{}}
	for _, m := range runtime {
		v.runtime[m.Name] = true
	}
	for _, m := range models {
		if f, ok := a.currentFleet(m.Name); ok && a.fkeys[m.Name] != "" {
			v.fleets[m.Name] = f
			continue
		}
		f, err := a.provisionModel(m)
		if err != nil {
			return nil, err
		}
		v.fleets[m.Name] = f
	}
	return v, nil
}

func (a *App) currentFleet(name string) (*fleet.Fleet, bool) {
	cur := a.view.Load()
	if cur == nil {
		return nil, false
	}
	f, ok := cur.fleets[name]
	return f, ok
}

func (a *App) provisionModel(m *catalog.Model) (*fleet.Fleet, error) {
	ps, pkey, err := a.loadShapes(m)
	var unavailable error
	switch {
	case err != nil && a.cluster != nil:
		// In a cluster the nodes need not all have every engine: this
		// one cannot run the model, says so in its heartbeat, and the
		// others run it.
		unavailable = fmt.Errorf("engine %q cannot run on node %s: %w", m.Engine, a.Cluster.Node, err)
		a.logger.Warn("model cannot run on this node; other nodes of the cluster will run it",
			zap.String("model", m.Name), zap.Error(err))
		pkey, ps = "unavailable:"+err.Error(), make([]*host.Plugin, 1)
	case err != nil:
		return nil, fmt.Errorf("model %q: %w", m.Name, err)
	}
	for i, p := range ps {
		if p == nil { // unavailable here
			break
		}
		if err := catalog.CheckShape(m.Shape(i), p.Info()); err != nil {
			return nil, err
		}
	}
	p := ps[0]
	up, upKey := a.peers.Upstream(m.Name) // a peer's model: its settings shape the fleet too
	key := m.Key(pkey + upKey)
	v, _, err := fleets.LoadOrNew(key, func() (caddy.Destructor, error) {
		return fleet.New(m, p, a.logger.Named("fleet"), fleet.Options{
			StartTimeout: time.Duration(a.StartTimeout), HoldTimeout: time.Duration(a.HoldTimeout),
			MaxWaiting: a.MaxWaiting, StopGrace: 5 * time.Second, Interval: 500 * time.Millisecond,
			DrainTimeout: time.Duration(a.DrainTimeout), Clustered: a.cluster != nil && up == nil, Unavailable: unavailable,
			Node: a.node, Upstream: up, Plugins: ps,
		}), nil
	})
	if err != nil {
		return nil, err
	}
	// A fleet kept from the previous config takes this config's entry,
	// whose routing fields may differ.
	v.(*fleet.Fleet).SetModel(m)
	a.fkeys[m.Name] = key
	return v.(*fleet.Fleet), nil
}

// loadShapes starts (or reuses) the engine plugin of each shape of m (its
// profiles, or itself): the plugins and their pool keys as one.
func (a *App) loadShapes(m *catalog.Model) ([]*host.Plugin, string, error) {
	ps, keys := make([]*host.Plugin, m.Shapes()), make([]string, m.Shapes())
	for i := range ps {
		var err error
		if ps[i], keys[i], err = a.loadEngine(m.Shape(i).Engine); err != nil {
			return nil, "", err
		}
	}
	return ps, strings.Join(keys, "\x00"), nil
}

// loadEngine returns the supervised plugin for an engine type, starting it
// unless a previous config already runs the same one.
func (a *App) loadEngine(typ string) (*host.Plugin, string, error) {
	argv, sum, err := a.engineCommand(typ)
	if err != nil {
		return nil, "", err
	}
	var env []string
	if ec := a.Engines[typ]; ec != nil {
		for k, v := range ec.Options {
			env = append(env, "LLMGW_ENGINE_"+strings.ToUpper(k)+"="+v)
		}
		sort.Strings(env)
	}
	key := "engine:" + typ + ":" + strings.Join(argv, "\x00") + ":" + sum + ":" + strings.Join(env, "\x00")
	p, err := a.engines.LoadOnce(typ, key, func() (caddy.Destructor, error) {
		return host.Launch(host.Config{Type: typ, Argv: argv, SHA256: sum, Env: env}, a.logger.Named("engine"))
	})
	if err != nil {
		return nil, "", err
	}
	return p, key, nil
}

func (a *App) engineCommand(typ string) ([]string, string, error) {
	var ec EngineConfig
	if c := a.Engines[typ]; c != nil {
		ec = *c
	}
	return enginelist.Command(typ, ec.Path, ec.SHA256, a.PluginDir, firstParty[typ])
}

// Validate checks nothing beyond what Provision did.
func (a *App) Validate() error { return nil }

// Start starts the fleets' supervision; fleets kept from a previous config
// are already running.
func (a *App) Start() error {
	if err := routeorder.Check(a.cctx); err != nil {
		return err
	}
	if err := a.lockDataDir(); err != nil { // lock.go
		return err
	}
	a.node.SetHooks(a.hooks())
	a.node.Ledger.SetOwners(place.NewOwnerTable(a.Tenancy())) // the capacities the ledger checks (owners.go)
	v := a.v()
	for _, f := range v.fleets {
		f.Run()
	}
	a.shared.running.Store(a)
	if a.cluster != nil {
		a.cluster.Attach(a.clusterSide())
		a.cluster.ServeApp(a.lookupLocal, http.HandlerFunc(a.servePeerLocal))
	}
	go a.warnSources(a.ctx, a.Models, a.engineFormats())
	go a.checkUpdatesEvery(a.ctx) // updates.go
	go a.presets.Run(a.ctx, 5*time.Second, 10*time.Minute)
	a.useResponseStore()
	a.startGuardHist() // guardhist.go
	a.startTraffic()   // traffic.go
	a.peers.Watch(a.ctx, a.refreshPeers)
	if a.cluster != nil {
		a.cluster.Begin()
		a.cluster.BeatNow()
	}
	a.logger.Info("llm app started", zap.Int("models", len(v.models)), zap.Int("engines", len(a.engines.PoolKeys())))
	return nil
}

// Stop does nothing: shared state is released in Cleanup, after the next
// config (if any) has taken what it keeps.
func (a *App) Stop() error {
	a.shared.running.CompareAndSwap(a, nil)
	if a.cluster != nil {
		a.cluster.Detach(a.clusterSide())
	}
	return nil
}

// Cleanup releases this config's hold on fleets and plugins, the audit
// log's segment and the guardrails' and answers' histories; those no
// config uses any more are stopped or forgotten.
func (a *App) Cleanup() error {
	if a.node != nil {
		// a.node stays set: goroutines of this config may still read it.
		if !a.nodeReleased {
			a.nodeReleased = true
			_, _ = nodes.Delete(nodeKey)
			releaseShared()
		}
	}
	a.auditLog.Close()
	a.guardHist.Close()
	if a.reqLogRelease != nil {
		a.reqLogRelease() // before the cluster member it may write to
	}
	a.traffic.Close()
	a.peers.Close()
	if a.mu == nil {
		return nil // Provision never ran
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	// The node leaves its cluster before its replicas stop.
	if a.clusterKey != "" {
		_, _ = members.Delete(a.clusterKey)
	}
	for _, k := range a.fkeys {
		_, _ = fleets.Delete(k)
	}
	if a.engines != nil {
		a.engines.Release()
	}
	if a.mirrorKey != "" {
		weights.Close(a.mirrorKey)
	}
	a.unlockDataDir()
	return nil
}

// Interface guards
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.Validator    = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
	_ caddy.Destructor   = (*fleet.Fleet)(nil)
	_ caddy.Destructor   = (*host.Plugin)(nil)
)

// nodeKey is the key of the process's one Node in its pool.
const nodeKey = "node"

// acquireNode takes the process's Node (what its fleets share), making it
// on first use; Cleanup gives it back.
func acquireNode() *fleet.Node {
	v, _, _ := nodes.LoadOrNew(nodeKey, func() (caddy.Destructor, error) { return fleet.NewNode(), nil })
	return v.(*fleet.Node)
}

// hooks are what the fleets ask of this app while it runs.
func (a *App) hooks() *fleet.Hooks {
	h := &fleet.Hooks{Mirror: a.mirror}
	if c := a.cluster; c != nil {
		h.WantMore = c.BeatNow
		h.StoreDown = c.StoreDown
	}
	return h
}

// now is the clock; tests may replace it.
var now = time.Now
