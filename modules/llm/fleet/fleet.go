package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/place"
	"github.com/llmgw/llmgw/plugins/engine"
	"github.com/llmgw/llmgw/plugins/host"
	"go.uber.org/zap"
)

// State is a replica's state as the fleet sees it; its JSON and its
// metrics label are the string.
type State string

// Replica states as the fleet sees them.
const (
	ReplicaStarting State = "starting"
	ReplicaReady    State = "ready"
	ReplicaDraining State = "draining"
)

// Replica is one running engine server of a model.
type Replica struct {
	ID            string
	Model         string
	BaseURL       string
	Header        http.Header
	UpstreamModel string
	// Adapters are the adapters the replica loaded, each with the request
	// body members that apply it (see engine.Replica.Adapters).
	Adapters map[string]string
	PID      int64
	CPUs     []int // the cores it is pinned to, if any
	GPUs     []int // the GPU devices it holds, if any (gpus.go)
	Started  time.Time
	// Node is the cluster node the replica runs on; empty outside a
	// cluster.
	Node string
	// Profile is the model's profile the replica runs (profiles.go): its
	// index, its name ("" for a model without profiles) and why it does
	// not run an earlier one.
	ProfileIndex int
	Profile      string
	ProfileNote  string
	// plugin is the engine plugin that runs the replica (its profile's).
	plugin *host.Plugin

	// Transport is how to reach BaseURL when it is not a loopback engine:
	// a remote node's llmgw, or a peer gateway; nil means the caller's
	// default.
	Transport http.RoundTripper

	// epoch is the run of the engine plugin that supervises the replica;
	// after a plugin restart the next run adopts it (see adopt).
	epoch     atomic.Uint64
	healthURL string
	state     atomic.Value // State
	reason    atomic.Value // string: why it is failing (health.go)
	inflight  atomic.Int64
	lastUsed  atomic.Int64 // unix nanos
	// suspect (unix nanos) is until when a replica a request could not
	// reach is passed over while others are ready, until the supervisor
	// has checked it.
	suspect atomic.Int64
	// key is the alternative of the replica's keys in use (see SetHeaders).
	key atomic.Int32
	// keyTurn and keyRest spread requests over the replica's keys and
	// rest a refused one (keys.go).
	keyTurn atomic.Uint32
	keyRest atomic.Pointer[[]atomic.Int64]
	// idle is signalled when a draining replica's last request ends.
	idle chan struct{}
	// release gives back the weights the replica holds in the node cache.
	release func()
}

// UpstreamURL joins a replica's base URL and an endpoint's path, keeping
// a query the base carries (Azure OpenAI's api-version) after the path.
func UpstreamURL(base, path string) string {
	if i := strings.IndexByte(base, '?'); i >= 0 {
		return base[:i] + "/" + path + base[i:]
	}
	return base + "/" + path
}

// SetHeaders adds the replica's headers to a request's. A header with
// several values (an outside provider's keys) sends one of them: the one
// in use, until a request with it is refused (see NextKey). It returns
// which one was sent.
func (r *Replica) SetHeaders(dst http.Header) int {
	key := int(r.key.Load())
	for k, v := range r.Header {
		if len(v) > 1 {
			i := key % len(v)
			dst[k] = v[i : i+1]
			continue
		}
		dst[k] = v
	}
	return key
}

// Keys is how many alternative keys the replica has (1 when it has one,
// or none).
func (r *Replica) Keys() int {
	n := 1
	for _, v := range r.Header {
		n = max(n, len(v))
	}
	return n
}

// NextKey moves on from key, the one a provider refused (401 or 429), to
// the next; a request that already moved on is not moved again.
func (r *Replica) NextKey(key int) {
	r.key.CompareAndSwap(int32(key), int32(key+1)%int32(r.Keys()))
}

// Inflight is the number of requests the replica is serving.
func (r *Replica) Inflight() int64 { return r.inflight.Load() }

// NewStandaloneReplica returns a ready replica that belongs to no fleet:
// for exercising a policy (its tests and benchmarks) without engines.
func NewStandaloneReplica(id, model string) *Replica {
	r := &Replica{ID: id, Model: model}
	r.state.Store(ReplicaReady)
	return r
}

// Hold counts a request in flight on a standalone replica until the
// returned func is called (a fleet counts its own).
func (r *Replica) Hold() (release func()) {
	r.inflight.Add(1)
	return func() { r.inflight.Add(-1) }
}

// SetState sets a standalone replica's state (ReplicaReady, or "stopped").
func (r *Replica) SetState(s State) { r.state.Store(s) }

// State is the replica's state.
func (r *Replica) State() State { s, _ := r.state.Load().(State); return s }

// Fleet runs the replicas of one model. It lives in a UsagePool, keyed by
// the model's config, so reloads that leave the model alone keep it.
type Fleet struct {
	// model is the catalog entry; runtime changes (scale, settings) store
	// a changed copy, so readers need no lock.
	model  atomic.Pointer[catalog.Model]
	plugin *host.Plugin
	logger *zap.Logger
	opts   Options

	mu        sync.Mutex
	replicas  []*Replica
	starting  int
	waiting   int
	changed   chan struct{} // closed and replaced on every change
	lastErr   error
	backoff   time.Duration
	retryAt   time.Time
	lastUsed  time.Time
	created   time.Time
	stopped   bool   // by an administrator
	waitFor   string // why no replica can start now: the node is full
	startOnce sync.Once
	retiring  sync.WaitGroup // replicas draining, until each is stopped
	// rekeyed counts the keys of the fleet pool the fleet was moved from
	// by a live change (live.go): their Destruct leaves it running.
	rekeyed atomic.Int32
	rolling sync.Mutex // one rolling replacement at a time (live.go)

	// In a cluster the node runs what the cluster's plan gives it, and
	// requests also go to the ready replicas of other nodes.
	clustered bool
	node      string     // this node's name
	assigned  int        // replicas the plan puts on this node
	remote    []*Replica // ready replicas on other nodes
	planWhy   string     // why the plan could not place them all
	announce  func()     // tells the cluster at once that a replica is ready (cluster_push.go)
	wantMore  bool       // a request found every replica busy, or none

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	kick   chan struct{}
}

// Options are how a fleet runs its replicas; the app sets them.
type Options struct {
	StartTimeout time.Duration // bound on one replica start
	HoldTimeout  time.Duration // how long a request waits for a replica
	MaxWaiting   int
	StopGrace    time.Duration
	Interval     time.Duration // supervision tick
	DrainTimeout time.Duration // bound on a retired replica's last requests
	// Clustered fleets run only what the cluster's plan gives this node.
	Clustered bool
	// Unavailable says why this node cannot run the model (its engine
	// plugin did not load here); other nodes of the cluster run it.
	Unavailable error
	// Node is what the process's fleets share (default: a node of the
	// fleet's own).
	Node *Node
	// Upstream, for a model another gateway serves (a peer), is how its
	// replicas reach it and whether it serves now; nil otherwise.
	Upstream Upstream
	// Plugins are, for a model with profiles, each profile's engine
	// plugin, in the profiles' order; nil runs every replica with the
	// fleet's plugin.
	Plugins []*host.Plugin
}

// Upstream is how a model's replicas reach the peer gateway that serves
// it (its CA, the key of each request's tenant).
type Upstream interface {
	http.RoundTripper
	// Down is why the peer cannot serve the model now, or "": a replica
	// is failing, with this reason, while it is not "".
	Down() string
}

// New returns a fleet of model m run through plugin p; Run starts it.
func New(m *catalog.Model, p *host.Plugin, logger *zap.Logger, o Options) *Fleet {
	if o.Node == nil {
		o.Node = NewNode()
	}
	f := &Fleet{plugin: p, opts: o, changed: make(chan struct{}),
		logger: logger.With(zap.String("model", m.Name)), lastUsed: now(), created: now(),
		done: make(chan struct{}), kick: make(chan struct{}, 1)}
	f.model.Store(m)
	initMetrics(m.Name)
	f.clustered = o.Clustered
	f.ctx, f.cancel = context.WithCancel(context.Background())
	return f
}

// m is the fleet's model as it is now (place.Holder).
func (f *Fleet) Model() *catalog.Model { return f.model.Load() }

// Run starts supervision once; later calls (from reloads) do nothing.
func (f *Fleet) Run() {
	f.startOnce.Do(func() { go f.supervise() })
}

// Notify wakes waiters; f.mu must be held.
func (f *Fleet) Notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// NoCapacityError says why no replica could take a request.
type NoCapacityError struct {
	Model      string
	Reason     string
	RetryAfter time.Duration
}

func (e *NoCapacityError) Error() string {
	return fmt.Sprintf("model %q has no ready replica: %s", e.Model, e.Reason)
}

// Acquire returns a ready replica chosen by sel, starting one if none runs,
// and holding the caller (bounded) until one is ready. A request that
// could not reach avoid (when set) is not sent to it again while the
// supervisor has not cleared it: it waits for another replica instead,
// such as the one replacing avoid. The caller must call release.
func (f *Fleet) Acquire(ctx context.Context, sel Selector, avoid *Replica) (*Replica, error) {
	var deadline <-chan time.Time
	for {
		f.mu.Lock()
		f.lastUsed = now()
		if r := f.pickLocked(sel, avoid); r != nil {
			f.mu.Unlock()
			return r, nil
		}
		if err := f.unavailableLocked(); err != nil {
			f.mu.Unlock()
			return nil, err
		}
		if deadline == nil {
			waitStart := now()
			defer func() { MetricQueueWait.WithLabelValues(f.Model().Name).Observe(now().Sub(waitStart).Seconds()) }()
		}
		if f.waiting >= f.opts.MaxWaiting {
			f.mu.Unlock()
			return nil, &NoCapacityError{Model: f.Model().Name, RetryAfter: time.Second,
				Reason: fmt.Sprintf("%d requests are already waiting for it to start", f.waiting)}
		}
		f.waiting++
		ch := f.changed
		f.mu.Unlock()
		if deadline == nil {
			t := time.NewTimer(f.opts.HoldTimeout)
			defer t.Stop()
			deadline = t.C
		}
		var err error
		select {
		case <-ch:
		case <-ctx.Done():
			err = ctx.Err()
		case <-deadline:
			err = &NoCapacityError{Model: f.Model().Name, RetryAfter: 5 * time.Second,
				Reason: fmt.Sprintf("no replica became ready within %s", f.opts.HoldTimeout)}
		}
		f.mu.Lock()
		f.waiting--
		f.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
}

func (f *Fleet) pickLocked(sel Selector, avoid *Replica) *Replica {
	if f.stopped {
		return nil
	}
	ready := make([]*Replica, 0, len(f.replicas)+len(f.remote))
	busy := true
	target := int64(f.Model().Scaling.Target())
	t := now().UnixNano()
	var suspects []*Replica
	for _, rs := range [2][]*Replica{f.replicas, f.remote} {
		for _, r := range rs {
			if r.State() == ReplicaReady {
				if r.suspect.Load() > t {
					if r != avoid {
						suspects = append(suspects, r)
					}
					continue
				}
				ready = append(ready, r)
				if r.inflight.Load() < target {
					busy = false
				}
			}
		}
	}
	switch {
	case busy && f.clustered:
		// The cluster's leader decides where another replica runs.
		if !f.wantMore {
			f.wantMore = true
			f.opts.Node.wantMore()
		}
	case busy && len(f.replicas)+f.starting < f.Model().Scaling.MaxReplicas() && f.canStartLocked() && f.failingLocked() == "":
		// (A provider known failing gets no second replica of itself.)
		f.startLocked()
	}
	if len(ready) == 0 {
		ready = suspects // better a suspect than nothing
	}
	if len(ready) == 0 {
		return nil
	}
	r := sel.Select(ready)
	if r == nil {
		return nil // none fits (an adapter no ready replica loaded yet)
	}
	r.inflight.Add(1)
	r.lastUsed.Store(now().UnixNano())
	return r
}

// unavailableLocked returns an error when waiting makes no sense: the
// model is failing to start and is backing off.
func (f *Fleet) unavailableLocked() error {
	if f.stopped {
		return &NoCapacityError{Model: f.Model().Name, RetryAfter: time.Minute,
			Reason: "an administrator stopped it (POST /llm/models/" + f.Model().Name + "/start, or llmgw ctl, starts it again)"}
	}
	if f.Model().Scaling.Kept() {
		return &NoCapacityError{Model: f.Model().Name, RetryAfter: time.Minute, Reason: keptReason(f.Model().Name)}
	}
	if f.ctx.Err() != nil {
		return &NoCapacityError{Model: f.Model().Name, Reason: "it is being removed", RetryAfter: time.Second}
	}
	if f.clustered && f.starting == 0 && len(f.replicas) == 0 && len(f.remote) == 0 {
		if err := f.opts.Node.storeDown(); err != nil {
			return &NoCapacityError{Model: f.Model().Name, RetryAfter: 5 * time.Second,
				Reason: "no replica of it is known and none can be placed: " + err.Error()}
		}
		if f.planWhy != "" {
			return &NoCapacityError{Model: f.Model().Name, Reason: f.planWhy, RetryAfter: 10 * time.Second}
		}
	}
	if why := f.failingLocked(); why != "" {
		return &NoCapacityError{Model: f.Model().Name, Reason: "its provider is failing: " + why, RetryAfter: 10 * time.Second}
	}
	if !f.clustered && f.waitFor != "" && f.starting == 0 && len(f.replicas) == 0 {
		return &NoCapacityError{Model: f.Model().Name, Reason: f.waitFor, RetryAfter: 10 * time.Second}
	}
	if f.starting == 0 && f.lastErr != nil && now().Before(f.retryAt) {
		wait := f.retryAt.Sub(now())
		return &NoCapacityError{Model: f.Model().Name, RetryAfter: wait,
			Reason: fmt.Sprintf("its last start failed (%v); retrying in %s", f.lastErr, wait.Round(time.Millisecond))}
	}
	return nil
}

// Release ends a request on r.
func (f *Fleet) Release(r *Replica) {
	r.lastUsed.Store(now().UnixNano())
	if r.inflight.Add(-1) == 0 && r.State() == ReplicaDraining {
		select {
		case r.idle <- struct{}{}:
		default:
		}
	}
}

// ReportFailure tells the fleet a request could not reach r, so it checks
// the replica (and its plugin) now rather than at the next tick.
func (f *Fleet) ReportFailure(r *Replica) {
	r.suspect.Store(now().Add(5 * time.Second).UnixNano())
	if r.Transport != nil {
		f.mu.Lock()
		f.Notify() // those waiting for another replica look again
		f.mu.Unlock()
		return // another node's: its own node checks it
	}
	r.pluginOr(f.plugin).Check()
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

func (f *Fleet) canStartLocked() bool {
	return !f.stopped && f.ctx.Err() == nil && (f.lastErr == nil || !now().Before(f.retryAt))
}

// SetStopped stops (or starts again) a model by an administrator's word:
// stopped, its replicas drain and requests get 503 saying so.
func (f *Fleet) SetStopped(stopped bool) {
	f.mu.Lock()
	f.stopped = stopped
	var rs []*Replica
	if stopped {
		rs, f.replicas = f.replicas, nil
	}
	f.Notify()
	f.mu.Unlock()
	for _, r := range rs {
		f.retire(r, "its model was stopped by an administrator")
	}
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// Retry ends the wait after a failed start: a replica starts now instead
// of at the end of the backoff. It reports false, and starts nothing,
// when the model is not failed: its last start did not fail, a start is
// under way, it runs the replicas it wants, an administrator stopped it,
// or this node cannot run it. A retry that fails again backs off as
// before.
func (f *Fleet) Retry() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.failedLocked() {
		return false
	}
	f.retryAt = now()
	f.logger.Info("start retried now", zap.NamedError("last_error", f.lastErr))
	if len(f.replicas) < f.wantLocked() {
		f.startLocked()
	}
	f.Notify()
	select {
	case f.kick <- struct{}{}:
	default:
	}
	return true
}

// wantLocked is how many replicas the fleet wants running on this node
// now: the cluster's plan's share, else the minimum (one for a model
// started on demand), within the maximum.
func (f *Fleet) wantLocked() int {
	m := f.Model()
	if f.clustered {
		return min(f.assigned, m.Scaling.MaxReplicas())
	}
	return min(max(1, m.Scaling.MinReplicas()), m.Scaling.MaxReplicas())
}

// failedLocked tells whether the fleet's last start failed and it waits
// to start again: it has fewer replicas than it wants and none starting.
// In a cluster a node whose start failed is also failed while the plan,
// told so by its heartbeat, gives it none.
func (f *Fleet) failedLocked() bool {
	if f.lastErr == nil || f.starting > 0 || f.stopped || f.ctx.Err() != nil || f.opts.Unavailable != nil || f.Model().Scaling.Kept() {
		return false
	}
	if f.clustered && f.assigned == 0 {
		return now().Before(f.retryAt)
	}
	return len(f.replicas) < f.wantLocked()
}

// Restart replaces one replica: it drains, and a new one starts.
func (f *Fleet) Restart(id string) bool {
	f.mu.Lock()
	var victim *Replica
	for _, r := range f.replicas {
		if r.ID == id {
			victim = r
		}
	}
	if victim != nil && f.canStartLocked() {
		f.startLocked()
	}
	f.mu.Unlock()
	if victim == nil {
		return false
	}
	f.retire(victim, "restarted by an administrator")
	return true
}

// startLocked starts a replica if the node has room for it (stopping
// replicas of lower classes to make some), and reports whether it did.
func (f *Fleet) startLocked() bool {
	p, victims, why := f.opts.Node.Ledger.Reserve(f)
	if p == nil {
		if f.waitFor != why {
			f.waitFor = why
			f.logger.Info("replica cannot start", zap.String("reason", why))
			f.Notify()
		}
		return false
	}
	f.waitFor = ""
	for _, v := range victims {
		go v.Evict(f.Model().Name)
	}
	f.launchLocked(p, len(victims) > 0, nil)
	return true
}

// launchLocked starts, in the background, a replica in the room p
// reserved; evicted says replicas were stopped for it. When the replica
// is ready, replaces (when set) leaves the serving set and drains.
func (f *Fleet) launchLocked(p *place.Placement, evicted bool, replaces *Replica) {
	f.starting++
	go func() {
		defer func() {
			if r := recover(); r != nil {
				f.logger.Error("replica start panicked", zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
			}
		}()
		if evicted && len(p.GPUs) > 0 { // gpus.go
			f.opts.Node.Ledger.AwaitGPUs(f.ctx, p, f.opts.StopGrace+5*time.Second)
		}
		r, err := f.startReplica(p)
		if err == nil {
			f.opts.Node.Ledger.Bind(p, r)
		} else {
			f.opts.Node.Ledger.Release(p)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.starting--
		if err != nil {
			f.startFailedLocked(err)
			return
		}
		if f.ctx.Err() != nil {
			go f.stopReplica(r)
			return
		}
		f.startedLocked(r, replaces)
	}()
}

// startFailedLocked records a failed start: the next waits a growing
// backoff.
func (f *Fleet) startFailedLocked(err error) {
	MetricStarts.WithLabelValues(f.Model().Name, "failed").Inc()
	if f.ctx.Err() == nil {
		f.backoff = min(max(2*f.backoff, 250*time.Millisecond), 30*time.Second)
		f.lastErr, f.retryAt = err, now().Add(f.backoff)
		f.logger.Error("starting replica", zap.Error(err), zap.Duration("retry_in", f.backoff))
	}
	f.Notify()
}

// startedLocked puts r, a replica that started, in the serving set, in
// place of replaces when set (which then drains).
func (f *Fleet) startedLocked(r, replaces *Replica) {
	MetricStarts.WithLabelValues(f.Model().Name, "ok").Inc()
	f.lastErr, f.backoff = nil, 0
	f.replicas = append(f.replicas, r)
	if replaces != nil && slices.Contains(f.replicas, replaces) {
		f.removeLocked(replaces)
		go f.retire(replaces, "replica "+r.ID+" took its place on profile "+r.Profile+", which had room again")
	}
	f.Notify()
	if f.announce != nil {
		f.announce()
	}
	f.logger.Info("replica ready", zap.String("replica", r.ID), zap.String("url", r.BaseURL), zap.Int64("pid", r.PID),
		zap.String("profile", r.Profile))
}

// evict stops a replica to make room for a model of a higher class.
func (f *Fleet) evict(r *Replica, forModel string) {
	f.drop(r, "stopped to make room for "+forModel+", a model of a higher class")
}

// startReplica starts a replica in the room p reserved, on its profile.
func (f *Fleet) startReplica(p *place.Placement) (*Replica, error) {
	if f.opts.Unavailable != nil {
		return nil, f.opts.Unavailable
	}
	shape, plugin := f.Model().Shape(p.Profile), f.pluginOf(p.Profile)
	eng, epoch, err := plugin.Engine()
	if err != nil {
		return nil, err
	}
	id := shape.Name + "-" + RandID()
	// Weights from the mirror may take long to arrive: that is not part
	// of the start timeout.
	source, release, err := f.fetchWeights(f.ctx, shape, plugin)
	if err != nil {
		return nil, err
	}
	adapters, releaseAdapters, err := f.fetchAdapters(f.ctx)
	if err != nil {
		release()
		return nil, err
	}
	release = func(weights func()) func() { return func() { weights(); releaseAdapters() } }(release)
	ctx, cancel := context.WithTimeout(f.ctx, f.opts.StartTimeout)
	defer cancel()
	need := shape.Needs()
	rep, err := eng.Start(ctx, engine.ReplicaSpec{
		Model: shape.Name, ReplicaID: id, Source: source, Args: shape.Args,
		Options: shape.EngineOptions(), ContextLength: shape.ContextLength,
		Concurrency: int64(shape.Scaling.Target()), Memory: need.Memory, Cores: need.Cores, GPUs: need.GPUs,
		CPUs: p.CPUs, Adapters: adapters, GPUDevices: p.GPUs,
	})
	if err != nil {
		release()
		plugin.Check()
		return nil, profileErr(shape, err)
	}
	r := &Replica{ID: rep.ID, Model: shape.Name, BaseURL: rep.BaseURL, PID: rep.PID, CPUs: p.CPUs, GPUs: p.GPUs,
		UpstreamModel: rep.UpstreamModel, Adapters: rep.Adapters, Started: now(), healthURL: rep.HealthURL, Header: make(http.Header),
		idle: make(chan struct{}, 1), release: release,
		ProfileIndex: p.Profile, Profile: shape.ProfileName(), ProfileNote: p.Note, plugin: plugin}
	if f.opts.Upstream != nil {
		r.Transport = f.opts.Upstream
	}
	r.epoch.Store(epoch)
	for k, v := range rep.Headers {
		// Several values, one per line, are alternatives (an outside
		// provider's keys): one is sent at a time (see SetHeaders).
		r.Header[http.CanonicalHeaderKey(k)] = strings.Split(v, "\n")
	}
	r.state.Store(ReplicaReady)
	r.lastUsed.Store(now().UnixNano())
	return r, nil
}

// RandID is a short random id (hex).
func RandID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (f *Fleet) stopReplica(r *Replica) {
	defer f.opts.Node.Ledger.ReleaseReplica(r)
	if r.release != nil {
		defer r.release()
	}
	r.state.Store(ReplicaDraining)
	eng, err := f.supervisor(r)
	if err != nil {
		f.logger.Warn("stopping replica without its engine plugin", zap.String("replica", r.ID), zap.Error(err))
		stopOrphan(r, f.opts.StopGrace)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.StopGrace+5*time.Second)
	defer cancel()
	if err := eng.Stop(ctx, r.ID, f.opts.StopGrace); err != nil && !errors.Is(err, engine.ErrUnknownReplica) {
		f.logger.Warn("stopping replica", zap.String("replica", r.ID), zap.Error(err))
	}
}

// Destruct stops supervision. On a reload or a removal its replicas
// drain in the background: they take no new request and stop when their
// last one ends (or the drain timeout passes), so a reload that changes a
// model cuts no stream. When the process exits, Caddy's servers have
// already finished their requests, and the replicas are stopped at once.
func (f *Fleet) Destruct() error {
	if f.rekeyed.Add(-1) >= 0 {
		return nil // a key it was moved from: it runs on under its new one
	}
	f.rekeyed.Add(1)
	f.cancel()
	f.mu.Lock()
	started := f.done
	rs := f.replicas
	f.replicas = nil
	f.Notify()
	f.mu.Unlock()
	f.startOnce.Do(func() { close(started) }) // never ran
	<-started
	if !caddy.Exiting() {
		for _, r := range rs {
			f.retire(r, "its model changed or was removed")
		}
		return nil
	}
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Add(1)
		go func() { defer wg.Done(); f.stopReplica(r) }()
	}
	wg.Wait()
	f.logger.Info("model stopped", zap.Int("replicas", len(rs)))
	return nil
}

// retire takes r out of service: it receives no new request, keeps
// serving those it has, and is stopped when the last one ends or the
// drain timeout passes. f.mu must not be held.
func (f *Fleet) retire(r *Replica, reason string) {
	f.mu.Lock()
	f.removeLocked(r)
	r.state.Store(ReplicaDraining)
	f.opts.Node.draining.add(r)
	f.Notify()
	f.mu.Unlock()
	f.logger.Info("replica draining", zap.String("replica", r.ID), zap.String("reason", reason),
		zap.Int64("inflight", r.inflight.Load()), zap.Duration("drain_timeout", f.opts.DrainTimeout))
	f.retiring.Add(1)
	go func() {
		defer f.retiring.Done()
		defer func() {
			if v := recover(); v != nil {
				f.logger.Error("replica drain panicked", zap.Any("panic", v), zap.ByteString("stack", debug.Stack()))
			}
		}()
		timeout := time.NewTimer(f.opts.DrainTimeout)
		defer timeout.Stop()
	wait:
		for r.inflight.Load() > 0 {
			select {
			case <-r.idle:
			case <-timeout.C:
				f.logger.Warn("drain timeout passed; stopping replica with requests in flight",
					zap.String("replica", r.ID), zap.Int64("inflight", r.inflight.Load()))
				break wait
			}
		}
		f.stopReplica(r)
		f.opts.Node.draining.remove(r)
		f.logger.Info("replica drained and stopped", zap.String("replica", r.ID))
	}()
}

// drainSet holds the replicas finishing their last requests, by model
// name: a fleet replaced by a reload drains its replicas after it is gone,
// and the model's new fleet still shows them.
type drainSet struct {
	mu      sync.Mutex
	byModel map[string][]*Replica
}

func (d *drainSet) add(r *Replica) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.byModel[r.Model] = append(d.byModel[r.Model], r)
}

func (d *drainSet) remove(r *Replica) {
	d.mu.Lock()
	defer d.mu.Unlock()
	rs := slices.DeleteFunc(slices.Clone(d.byModel[r.Model]), func(x *Replica) bool { return x == r })
	if len(rs) == 0 {
		delete(d.byModel, r.Model)
		return
	}
	d.byModel[r.Model] = rs
}

func (d *drainSet) of(model string) []*Replica {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.byModel[model]
}

// WaitDrained waits until the replicas the fleet retired have stopped
// (each within the drain timeout), or ctx ends.
func (f *Fleet) WaitDrained(ctx context.Context) {
	done := make(chan struct{})
	go func() { f.retiring.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// removeLocked takes r out of the serving set; f.mu must be held.
func (f *Fleet) removeLocked(r *Replica) {
	f.replicas = slices.DeleteFunc(slices.Clone(f.replicas), func(x *Replica) bool { return x == r })
}

// SetCluster gives the fleet its share of the cluster's plan: n replicas
// on this node, and the ready replicas of other nodes.
func (f *Fleet) SetCluster(nodeName string, n int, remote []*Replica, why string, announce func()) {
	f.mu.Lock()
	changed := !f.clustered || f.assigned != n || f.planWhy != why || !slices.Equal(f.remote, remote)
	f.clustered, f.node, f.assigned, f.remote, f.planWhy, f.announce = true, nodeName, n, remote, why, announce
	if changed {
		f.Notify()
	}
	f.mu.Unlock()
	if changed {
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
}

// keptReason says why a model with max 0 does not run, and how to start it.
func keptReason(model string) string {
	return "it is kept in the catalog with max 0 and never started; scale it to start it (POST /llm/models/" + model +
		"/scale with a max of 1 or more, or llmgw ctl model scale " + model + " --max 1; a model declared in the config file: raise its max there and reload)"
}

// trimToAssigned drains the replicas above what the cluster's plan puts
// on this node, the least busy first.
func (f *Fleet) trimToAssigned() {
	f.mu.Lock()
	n := f.assigned
	f.mu.Unlock()
	f.trimTo(n, "the cluster's plan moved it or scaled its model down")
}

// trimTo drains the replicas above n, the least busy first.
func (f *Fleet) trimTo(n int, reason string) {
	f.mu.Lock()
	extra := len(f.replicas) - n
	var victims []*Replica
	if extra > 0 {
		rs := slices.Clone(f.replicas)
		slices.SortFunc(rs, func(a, b *Replica) int {
			if d := a.inflight.Load() - b.inflight.Load(); d != 0 {
				return int(d)
			}
			return int(a.lastUsed.Load() - b.lastUsed.Load())
		})
		victims = rs[:extra]
	}
	f.mu.Unlock()
	for _, r := range victims {
		f.retire(r, reason)
	}
}

// Evict stops r, a replica of this fleet, for a replica of model by
// (place.Holder).
func (f *Fleet) Evict(r place.Running, by string) { f.evict(r.(*Replica), by) }

// ReplicaID is the replica's id (place.Running).
func (r *Replica) ReplicaID() string { return r.ID }

// StartedAt is when the replica started (place.Running).
func (r *Replica) StartedAt() time.Time { return r.Started }

// Hooks are what a fleet asks of the app that runs it now. Fleets outlive
// a config, so each app that starts sets its own (Node.SetHooks).
type Hooks struct {
	// WantMore tells the cluster at once that a request found every
	// replica busy, or none (nil on one node).
	WantMore func()
	// StoreDown says why the cluster's store cannot be reached (nil on
	// one node).
	StoreDown func() error
	// Mirror is the running config's weights mirror (nil when none).
	Mirror *mirror.Mirror
}

// NewNode returns an empty node: no placements, nothing draining.
func NewNode() *Node {
	return &Node{Ledger: &place.Ledger{}, draining: &drainSet{byModel: map[string][]*Replica{}}}
}

// Report is what a node's heartbeat says about one fleet.
type Report struct {
	// Replicas are the fleet's replicas on this node.
	Replicas []llmapi.NodeReplica
	// Used is true when the model was used since the fleet began; only
	// then do Busy, LastUsed and Waiting count.
	Used bool
	// Busy while requests wait for a replica, and after a request found
	// every replica at its target concurrency.
	Busy     bool
	LastUsed time.Time
	Waiting  int
	// Failing says why the node cannot start a replica now ("" when it
	// can).
	Failing string
}

// TakeReport describes the fleet for the heartbeat and forgets that a
// request wanted more replicas (the heartbeat has said it).
func (f *Fleet) TakeReport() Report {
	f.mu.Lock()
	defer f.mu.Unlock()
	var rp Report
	for _, r := range f.replicas {
		rp.Replicas = append(rp.Replicas, llmapi.NodeReplica{ID: r.ID, Model: r.Model, Upstream: r.UpstreamModel, Adapters: r.Adapters,
			State: string(r.State()), Inflight: r.inflight.Load(), Started: r.Started, GPUs: r.GPUs, Reason: r.Reason(), Profile: r.Profile})
	}
	rp.Used = f.wantMore || f.waiting > 0 || f.lastUsed.After(f.created)
	rp.Busy, rp.LastUsed, rp.Waiting = f.wantMore || f.waiting > 0, f.lastUsed, f.waiting
	f.wantMore = false
	switch {
	case f.opts.Unavailable != nil:
		rp.Failing = f.opts.Unavailable.Error()
	case f.lastErr != nil && now().Before(f.retryAt) && len(f.replicas) == 0:
		rp.Failing = f.lastErr.Error()
	case f.waitFor != "" && len(f.replicas) == 0:
		rp.Failing = f.waitFor
	}
	return rp
}

// Stopped tells whether an administrator stopped the model.
func (f *Fleet) Stopped() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stopped
}

// ReplicaCount is how many replicas the fleet runs, starting ones aside.
func (f *Fleet) ReplicaCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.replicas)
}

// Short tells whether the fleet runs and starts fewer than n replicas.
func (f *Fleet) Short(n int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return n > len(f.replicas)+f.starting
}

// ReadyCount is how many of its replicas are ready.
func (f *Fleet) ReadyCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.replicas {
		if r.State() == ReplicaReady {
			n++
		}
	}
	return n
}

// Slots reports the requests its ready replicas (here and on other
// nodes) may still take before each reaches the scaling target, and the
// target summed over them: the free and total slots of the model.
func (f *Fleet) Slots() (free, total int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	target := int64(f.Model().Scaling.Target())
	for _, rs := range [2][]*Replica{f.replicas, f.remote} {
		for _, r := range rs {
			if r.State() != ReplicaReady {
				continue
			}
			total += int(target)
			free += int(max(0, target-r.inflight.Load()))
		}
	}
	return free, total
}

// LeastBusy is its ready replica with the fewest requests in flight, or
// nil.
func (f *Fleet) LeastBusy() *Replica {
	f.mu.Lock()
	defer f.mu.Unlock()
	var best *Replica
	for _, r := range f.replicas {
		if r.State() == ReplicaReady && (best == nil || r.inflight.Load() < best.inflight.Load()) {
			best = r
		}
	}
	return best
}

// SetModel replaces the fleet's model with a changed copy (its settings
// or scaling) and has supervision look at it.
func (f *Fleet) SetModel(m *catalog.Model) {
	f.model.Store(m)
}

// now is the clock; tests may replace it.
var now = time.Now

// NewAdapterSelector selects, with sel, among the replicas that loaded the
// adapter name.
func NewAdapterSelector(sel Selector, name string) AdapterSelector {
	return AdapterSelector{sel: sel, name: name}
}

// NewRemote readies r, a replica of another node as its heartbeat
// describes it, to take requests from this node.
func NewRemote(r *Replica) *Replica {
	r.idle = make(chan struct{}, 1)
	r.state.Store(ReplicaReady)
	r.lastUsed.Store(now().UnixNano())
	return r
}

// Planned tells whether the cluster's plan decides where the fleet's
// replicas run (a fleet of a cluster's node, not of a peer's model).
func (f *Fleet) Planned() bool { return f.opts.Clustered }

// Kick has supervision look at the fleet now (its model changed).
func (f *Fleet) Kick() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// MarkRekeyed notes that the fleet was filed under a new pool key by a
// live change: the Destruct of the key it leaves keeps it running.
func (f *Fleet) MarkRekeyed() { f.rekeyed.Add(1) }

// Hold takes a ready replica of the fleet that match selects, counting a
// request in flight on it until the returned release.
func (f *Fleet) Hold(match func(*Replica) bool) (*Replica, func(), bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.replicas {
		if match(r) && r.State() == ReplicaReady {
			r.inflight.Add(1)
			r.lastUsed.Store(now().UnixNano())
			f.lastUsed = now()
			return r, func() { f.Release(r) }, true
		}
	}
	return nil, nil, false
}

// ClientFor is c, or a copy of c that reaches rep through rep.Transport
// when it has one (a replica on another node).
func ClientFor(c *http.Client, rep *Replica) *http.Client {
	if rep.Transport == nil {
		return c
	}
	cc := *c
	cc.Transport = rep.Transport
	return &cc
}
