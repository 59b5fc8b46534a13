package cluster

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"github.com/llmgw/llmgw/modules/internal/buildinfo"
	"github.com/llmgw/llmgw/modules/llm/audit"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llm/guardhist"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/place"
	"github.com/llmgw/llmgw/modules/llm/traffic"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// AddAudit appends e to the cluster's audit stream, trimmed to about max
// entries.
func (m *Member) AddAudit(ctx context.Context, e llmapi.AuditEntry, max int) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return m.rdb.XAdd(ctx, &redis.XAddArgs{Stream: m.key(auditKey), MaxLen: int64(max), Approx: true,
		Values: []any{"e", b}}).Err()
}

// ReadAudit reads the cluster's audit stream, newest first, scanning at
// most max entries.
func (m *Member) ReadAudit(ctx context.Context, q audit.Query, max int) (llmapi.AuditPage, error) {
	end, start := "+", "-"
	if !q.Until.IsZero() {
		end = strconv.FormatInt(q.Until.UnixMilli(), 10)
	}
	if q.Cursor != "" {
		end = "(" + q.Cursor
	}
	if !q.Since.IsZero() {
		start = strconv.FormatInt(q.Since.UnixMilli(), 10)
	}
	p := llmapi.AuditPage{Entries: []llmapi.AuditEntry{}, Source: "cluster"}
	for scanned := 0; scanned < max; {
		msgs, err := m.rdb.XRevRangeN(ctx, m.key(auditKey), end, start, 500).Result()
		if err != nil {
			return llmapi.AuditPage{}, err
		}
		for _, msg := range msgs {
			var e llmapi.AuditEntry
			s, _ := msg.Values["e"].(string)
			if json.Unmarshal([]byte(s), &e) != nil {
				continue
			}
			e.ID = msg.ID
			if !q.Match(e) {
				continue
			}
			if len(p.Entries) == q.Limit {
				p.Next = p.Entries[q.Limit-1].ID
				return p, nil
			}
			p.Entries = append(p.Entries, e)
		}
		scanned += len(msgs)
		if len(msgs) < 500 {
			break
		}
		end = "(" + msgs[len(msgs)-1].ID
	}
	return p, nil
}

// ClusterConfig makes this llmgw one node of a cluster: the catalog, its
// settings, stopped flags and API keys live in Redis (highly available
// through Sentinel) instead of Caddy storage; nodes heartbeat there, one
// of them (the holder of a lease) places every model's replicas across
// the nodes, and each node's router reaches replicas on other nodes
// through their llmgw (node-to-node TLS, authenticated by the cluster
// secret). Without it llmgw is one node on Caddy storage.
type ClusterConfig struct {
	// Redis is the store's URL: redis://[user:password@]host:port[/db].
	// Use it or Sentinels.
	Redis string `json:"redis,omitempty"`
	// SentinelMaster and Sentinels name the Redis primary that Sentinel
	// watches and the Sentinels' addresses (host:port). The nodes follow
	// a failover by themselves.
	SentinelMaster string   `json:"sentinel_master,omitempty"`
	Sentinels      []string `json:"sentinels,omitempty"`
	// Password (and Username) authenticate to Redis when Sentinels are
	// used; with Redis they go in the URL. SentinelPassword
	// authenticates to the Sentinels.
	Username         string `json:"username,omitempty"`
	Password         string `json:"password,omitempty"`
	SentinelPassword string `json:"sentinel_password,omitempty"`
	// Name names the cluster; its keys in Redis start with
	// "llmgw:<name>:". Default: "default".
	Name string `json:"name,omitempty"`
	// Node is this node's name, unique in the cluster. Default: the host
	// name.
	Node string `json:"node,omitempty"`
	// Advertise is the host:port other nodes reach this node at, for
	// requests to its replicas (node-to-node TLS).
	Advertise string `json:"advertise"`
	// Listen is where the node-to-node endpoint listens. Default:
	// Advertise.
	Listen string `json:"listen,omitempty"`
	// Secret is the cluster credential, the same on every node (at least
	// 32 characters): node-to-node TLS certificates are made from it, and
	// a peer without it is refused.
	Secret string `json:"secret"`
	// Heartbeat is how often the node reports itself and reads the
	// cluster. Default: 1s.
	Heartbeat caddy.Duration `json:"heartbeat,omitempty"`
	// NodeTTL is how long a node that stopped reporting counts as alive;
	// after it, its replicas are placed elsewhere. Default: 5s.
	NodeTTL caddy.Duration `json:"node_ttl,omitempty"`
	// ReleaseKeys are minisign public keys (RW…) this node also accepts
	// releases signed by when "llmgw ctl cluster upgrade" sends it one,
	// beside llmgw's own release key: for an operator's own builds.
	ReleaseKeys []string `json:"release_keys,omitempty"`
}

// Provision applies the defaults and checks the config.
func (c *ClusterConfig) Provision() error {
	repl := caddy.NewReplacer()
	for _, s := range []*string{&c.Redis, &c.Password, &c.SentinelPassword, &c.Secret, &c.Node, &c.Advertise, &c.Listen} {
		*s = repl.ReplaceKnown(*s, "")
	}
	switch {
	case c.Redis == "" && len(c.Sentinels) == 0:
		return errors.New("cluster: give the store with redis redis://host:port, or sentinel <master> host:port…")
	case c.Redis != "" && len(c.Sentinels) > 0:
		return errors.New("cluster: give redis or sentinel, not both")
	case len(c.Sentinels) > 0 && c.SentinelMaster == "":
		return errors.New("cluster: sentinel needs the primary's name, as in sentinel mymaster host:port…")
	}
	if c.Name == "" {
		c.Name = "default"
	}
	if c.Node == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("cluster: no node name given and the host name is unknown: %v", err)
		}
		c.Node = h
	}
	if err := catalog.CheckName("node", c.Node); err != nil {
		return fmt.Errorf("cluster: %v", err)
	}
	if _, err := c.TrustedKeys(); err != nil {
		return err
	}
	if c.Advertise == "" {
		return errors.New("cluster: advertise host:port is required: the address other nodes reach this node at")
	}
	if _, _, err := net.SplitHostPort(c.Advertise); err != nil {
		return fmt.Errorf("cluster: advertise %q: %v; use host:port", c.Advertise, err)
	}
	if c.Listen == "" {
		c.Listen = c.Advertise
	}
	if len(c.Secret) < 32 {
		return errors.New("cluster: secret must be at least 32 characters, the same on every node (such as {env.LLMGW_CLUSTER_SECRET}, made with openssl rand -hex 32)")
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = caddy.Duration(time.Second)
	}
	if c.NodeTTL <= 0 {
		c.NodeTTL = caddy.Duration(5 * time.Second)
	}
	if c.NodeTTL < 2*c.Heartbeat {
		return fmt.Errorf("cluster: node_ttl (%s) must be at least twice the heartbeat (%s)", time.Duration(c.NodeTTL), time.Duration(c.Heartbeat))
	}
	return nil
}

// StoreName says which store a node uses, for messages.
func (c *ClusterConfig) StoreName() string {
	if c.Redis != "" {
		if o, err := redis.ParseURL(c.Redis); err == nil {
			return "Redis at " + o.Addr
		}
		return "Redis"
	}
	return "Redis primary " + c.SentinelMaster + " (Sentinels " + strings.Join(c.Sentinels, ", ") + ")"
}

func (c *ClusterConfig) client() (redis.UniversalClient, error) {
	timeouts := func(dial, rw *time.Duration) { *dial, *rw = time.Second, time.Second }
	if c.Redis != "" {
		o, err := redis.ParseURL(c.Redis)
		if err != nil {
			return nil, fmt.Errorf("cluster: redis %q: %w; use redis://host:port or redis://user:password@host:port/db", c.Redis, err)
		}
		timeouts(&o.DialTimeout, &o.ReadTimeout)
		o.WriteTimeout, o.MaxRetries = o.ReadTimeout, 1
		return redis.NewClient(o), nil
	}
	o := &redis.FailoverOptions{MasterName: c.SentinelMaster, SentinelAddrs: c.Sentinels,
		Username: c.Username, Password: c.Password, SentinelPassword: c.SentinelPassword, MaxRetries: 1}
	timeouts(&o.DialTimeout, &o.ReadTimeout)
	o.WriteTimeout = o.ReadTimeout
	return redis.NewFailoverClient(o), nil
}

// Redis keys, after the cluster's prefix.
const (
	kState   = "state"   // hash: runtime models, settings, stopped, keys, drained (JSON each)
	kVersion = "version" // counter, raised by every change of state
	kChanges = "changes" // channel: "state <version>", "plan", "nodes"
	kNodes   = "nodes"   // set of node names ever seen
	kNode    = "node:"   // + name: the node's heartbeat (JSON), with the node TTL
	kLeader  = "leader"  // the node that places replicas, with a TTL
	kPlan    = "plan"    // JSON: model → nodes, written by the leader
	kLock    = "lock"    // held while a change is made
)

// StoreDownError is what a change gets while the store cannot be reached.
type StoreDownError struct {
	store string
	err   error
}

func (e *StoreDownError) Error() string {
	return fmt.Sprintf("the cluster store (%s) cannot be reached (%v): changes are refused until it answers again; requests are still served with the last known state", e.store, e.err)
}

// Member is this node's membership in the cluster. It lives in a
// UsagePool, keyed by the cluster config, so reloads keep its heartbeats,
// its node-to-node endpoint and the replicas it knows on other nodes.
type Member struct {
	cfg    ClusterConfig
	rdb    redis.UniversalClient
	prefix string
	logger *zap.Logger
	proof  []byte // signs heartbeats and state (cluster_proof.go)

	peer      *peerServer
	transport *http.Transport

	kick    chan struct{} // beat now
	tell    atomic.Bool   // the next round tells every node to read the heartbeats (cluster_push.go)
	stop    chan struct{}
	stopped chan struct{}

	mu      sync.Mutex
	applied map[string]string // state field → the JSON applied
	version int64             // state version applied
	nodes   map[string]*NodeBeat
	plan    Plan
	leader  string
	down    error     // the store's last error, nil while it answers
	downAt  time.Time // since when
	remote  map[string]*fleet.Replica

	attached atomic.Pointer[localRef] // the app the loops serve (attach)

	local     StateStore // Caddy storage: a copy of the shared state
	pullMu    sync.Mutex // one pull at a time
	checkMu   sync.Mutex // one version check at a time for unknown keys
	lastCheck time.Time
	startOnce sync.Once
	planLost  bool                 // the store has no plan: the leader writes its own
	cached    []string             // weights in the node cache, as sources
	gone      map[string]time.Time // node names without a heartbeat, since when (the loop's)
	cachedAt  time.Time
	upSince   time.Time         // since when the store has answered without a break
	untrusted map[string]string // state field → a value without this secret's proof, logged
	refused   map[string]string // node name → its heartbeat without this secret's proof, logged
}

// clusterPlan is where each model's replicas run, as the leader decided.
type Plan struct {
	Models map[string][]string `json:"models"`
	Why    map[string]string   `json:"why,omitempty"`
	By     string              `json:"by"`
	At     time.Time           `json:"at"`
	// Seq numbers the plans: each leader writes the one after the plan
	// it read (clocks of nodes may differ).
	Seq int64 `json:"seq"`
}

// NodeBeat is a node's heartbeat: what it offers, what runs on it and
// how its models are used.
type NodeBeat struct {
	Name     string               `json:"name"`
	Addr     string               `json:"addr"`
	Version  string               `json:"version,omitempty"` // the node's llmgw release
	At       time.Time            `json:"at"`
	Started  time.Time            `json:"started"`
	Capacity llmapi.Amounts       `json:"capacity"`
	Used     llmapi.Amounts       `json:"used"`
	Replicas []llmapi.NodeReplica `json:"replicas"`
	Load     map[string]BeatLoad  `json:"load,omitempty"`
	Failing  map[string]string    `json:"failing,omitempty"`
	Cached   []string             `json:"cached,omitempty"`
}

// BeatLoad is what a heartbeat says about one model's use on its node.
type BeatLoad struct {
	Busy     bool      `json:"busy,omitempty"`
	LastUsed time.Time `json:"last_used"`
	Waiting  int       `json:"waiting,omitempty"`
}

// Key is the member pool's key of a cluster config.
func Key(c *ClusterConfig) string {
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return "cluster:" + hex.EncodeToString(sum[:])
}

// NewMember connects to the store and starts the node-to-node endpoint.
func NewMember(c ClusterConfig, logger *zap.Logger) (*Member, error) {
	rdb, err := c.client()
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(c.Advertise)
	srvTLS, cliTLS, err := newPeerTLS(c.Secret, c.Node, host)
	if err != nil {
		rdb.Close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	m := &Member{cfg: c, rdb: rdb, prefix: "llmgw:" + c.Name + ":", logger: logger, proof: proofKey(c.Secret),
		untrusted: map[string]string{}, refused: map[string]string{},
		transport: newPeerTransport(cliTLS, logger.Named("peer")), kick: make(chan struct{}, 1),
		stop: make(chan struct{}), stopped: make(chan struct{}),
		applied: map[string]string{}, nodes: map[string]*NodeBeat{}, remote: map[string]*fleet.Replica{}, gone: map[string]time.Time{}}
	if err := m.checkFormat(buildinfo.Get().Version); err != nil { // statefmt.go
		rdb.Close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	m.peer, err = startPeer(c.Listen, srvTLS, c.Node, lookupNone, logger.Named("peer"))
	if err != nil {
		rdb.Close()
		return nil, fmt.Errorf("cluster: node-to-node endpoint on %s: %w", c.Listen, err)
	}
	return m, nil
}

func (m *Member) key(k string) string { return m.prefix + k }

// Destruct stops heartbeats and the node-to-node endpoint. Its replicas
// are placed elsewhere once its heartbeat expires; a node that exits
// cleanly says so at once.
func (m *Member) Destruct() error {
	close(m.stop)
	m.startOnce.Do(func() { close(m.stopped) }) // the config never started
	<-m.stopped
	if caddy.Exiting() {
		// Leave first: the other nodes stop sending requests here and
		// place this node's replicas elsewhere at once, and another node
		// takes the leader lease; then the requests in flight through
		// the node-to-node endpoint finish.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = m.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, m.key(kNode+m.cfg.Node))
			p.Eval(ctx, unlockScript, []string{m.key(kLeader)}, m.cfg.Node)
			p.Publish(ctx, m.key(kChanges), "nodes")
			return nil
		})
		cancel()
		m.logger.Info("left the cluster", zap.String("node", m.cfg.Node))
	}
	_ = m.peer.Destruct()
	m.transport.CloseIdleConnections()
	return m.rdb.Close()
}

// start loads the shared state (the app's Provision reads it through
// storage) and starts the loops.
func (m *Member) start() {
	go m.loop()
	go m.subscribe()
}

// Storage is the app's state store on Redis: the keys the single-node
// llmgw keeps in Caddy storage are fields of one hash, and every write
// raises the version and tells the other nodes.
func (m *Member) Storage() StateStore { return redisState{m} }

type redisState struct{ m *Member }

// SnapshotKey carries, in a context, the state a pull is applying: the
// loads made while applying it read it, not the store again, so what is
// applied is exactly what was read.
type SnapshotKey struct{}

func (s redisState) Load(ctx context.Context, key string) ([]byte, error) {
	if snap, ok := ctx.Value(SnapshotKey{}).(map[string]string); ok {
		if v := snap[key]; v != "" {
			return []byte(v), nil
		}
		return nil, fs.ErrNotExist
	}
	s.m.mu.Lock()
	down := s.m.down != nil
	s.m.mu.Unlock()
	if !down {
		b, trusted, err := s.m.hgetTrusted(ctx, key)
		switch {
		case errors.Is(err, redis.Nil):
			return nil, fs.ErrNotExist
		case err == nil && trusted:
			return b, nil
		case err != nil:
			s.m.StoreLost(err)
		}
		// A value without this cluster's proof: what this node applied.
	}
	// The store does not answer: what this node last saw of it, kept
	// in memory and in Caddy storage (for a restart during an outage).
	s.m.mu.Lock()
	b, ok := s.m.applied[key]
	local := s.m.local
	s.m.mu.Unlock()
	switch {
	case ok && b != "":
		return []byte(b), nil
	case ok || local == nil:
		return nil, fs.ErrNotExist
	}
	return local.Load(ctx, s.m.localKey(key))
}

// localKey is where a node keeps its copy of a shared state field.
func (m *Member) localKey(key string) string { return "llmgw/cluster/" + m.cfg.Name + "/" + key }

func (s redisState) Store(ctx context.Context, key string, value []byte) error {
	var ver *redis.IntCmd
	_, err := s.m.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		s.m.signedHSet(ctx, p, key, value)
		ver = p.Incr(ctx, s.m.key(kVersion))
		return nil
	})
	if err != nil {
		return s.m.StoreErr(err)
	}
	s.m.mu.Lock()
	s.m.applied[key] = string(value)
	if v := ver.Val(); v == s.m.version+1 {
		s.m.version = v // nothing else changed meanwhile
	}
	s.m.mu.Unlock()
	s.m.rdb.Publish(ctx, s.m.key(kChanges), "state "+strconv.FormatInt(ver.Val(), 10))
	return nil
}

// StoreErr says what a store error means to an operator.
func (m *Member) StoreErr(err error) error {
	return &StoreDownError{store: m.cfg.StoreName(), err: err}
}

// StateStore is where the app keeps what the admin API changes: Caddy
// storage on one node, Redis in a cluster.
type StateStore interface {
	Load(ctx context.Context, key string) ([]byte, error)
	Store(ctx context.Context, key string, value []byte) error
}

// unlockScript deletes a lock (the change lock, the leader lease) only if
// this node still holds it.
const unlockScript = `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`

// Change runs fn while holding the cluster's change lock, after bringing
// this node's state up to date, so two administrators on two nodes
// cannot overwrite each other's changes.
func (m *Member) Change(ctx context.Context, l Local, fn func() error) error {
	token := m.cfg.Node + ":" + fleet.RandID()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, err := m.rdb.SetNX(ctx, m.key(kLock), token, 15*time.Second).Result()
		if err != nil {
			return &UnavailableError{m.StoreErr(err)}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			return &UnavailableError{errors.New("another change to the cluster has been under way for 10s; retry")}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	defer m.rdb.Eval(context.WithoutCancel(ctx), unlockScript, []string{m.key(kLock)}, token)
	if err := m.Sync(ctx, l); err != nil {
		return &UnavailableError{err}
	}
	err := fn()
	if m.IsLeader() {
		// The other nodes' leader is told by the change message; this
		// one places its own change now, not at its next heartbeat.
		m.BeatNow()
	}
	return err
}

// Sync applies the shared state if another node changed it. A pull
// under way (started by a change message) is waited for first: it marks
// its version applied before it has applied it.
func (m *Member) Sync(ctx context.Context, l Local) error {
	m.pullMu.Lock()
	m.pullMu.Unlock() //nolint:staticcheck // only waits for the pull under way
	ver, err := m.rdb.Get(ctx, m.key(kVersion)).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return m.StoreErr(err)
	}
	m.mu.Lock()
	same := ver == m.version && err == nil
	m.mu.Unlock()
	if same {
		return nil
	}
	return m.Pull(ctx, l)
}

// Pull reads the whole shared state and applies what changed.
func (m *Member) Pull(ctx context.Context, l Local) error {
	m.pullMu.Lock() // one at a time, so an older read is never applied after a newer one
	defer m.pullMu.Unlock()
	var all *redis.MapStringStringCmd
	var ver *redis.StringCmd
	read := func() error {
		_, err := m.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			all = p.HGetAll(ctx, m.key(kState))
			ver = p.Get(ctx, m.key(kVersion))
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return m.StoreErr(err)
		}
		return nil
	}
	if err := read(); err != nil {
		return err
	}
	if errors.Is(ver.Err(), redis.Nil) {
		// The store has no state: new, or restarted without its data.
		// What this node knows goes back first, never the emptiness
		// over it.
		if m.reseed(ctx) {
			if err := read(); err != nil {
				return err
			}
		}
	}
	v, _ := ver.Int64()
	m.mu.Lock()
	fields := m.trustedState(all.Val(), m.applied)
	changed := map[string]bool{}
	// Every field of the state counts: the member knows none of the
	// app's keys. A field gone from the store reads as empty.
	for k, v := range fields {
		if v != m.applied[k] {
			changed[k] = true
		}
	}
	for k, v := range m.applied {
		if _, ok := fields[k]; !ok && v != "" {
			changed[k] = true
		}
	}
	// What is applied is this snapshot (a Load while the store is
	// marked down reads it from here).
	for k := range changed {
		m.applied[k] = fields[k]
	}
	m.version = v
	local := m.local
	m.mu.Unlock()
	if len(changed) > 0 && l != nil {
		if err := l.ApplyShared(context.WithValue(ctx, SnapshotKey{}, fields), changed); err != nil {
			m.logger.Error("applying the cluster's shared state", zap.Error(err))
			return err
		}
	}
	if local != nil {
		for k := range changed {
			if err := local.Store(ctx, m.localKey(k), []byte(fields[k])); err != nil {
				m.logger.Warn("keeping a local copy of the cluster state", zap.Error(err))
			}
		}
	}
	return nil
}

// RefreshKeys is called for a key this node does not know: it may have
// been minted on another node a moment ago. It reports whether the
// caller should look the key up again (refresh).
func (m *Member) RefreshKeys(l Local) bool { return m.Refresh(l) }

// Refresh is called for a key or a model name this node does not know:
// it may have been made on another node a moment ago, before its change
// reached this one. It waits for a change being applied, checks the
// store's version and applies a newer state; callers that arrive while a
// check is under way wait for the next one, which one of them makes for
// all. While the store is known to be down (the heartbeat found it so,
// or the last check did) it returns at once: the unknown key or model
// is answered without waiting for dials that fail; the heartbeat round
// probes the store meanwhile. It reports whether the caller should look
// the name up again.
func (m *Member) Refresh(l Local) bool {
	if m.StoreDown() != nil {
		return false
	}
	arrived := time.Now()
	m.checkMu.Lock()
	defer m.checkMu.Unlock()
	if m.lastCheck.After(arrived) {
		return true // a check that began after this call did the work: look again
	}
	if m.StoreDown() != nil {
		return false // the check this call waited for found the store down
	}
	m.lastCheck = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := m.Sync(ctx, l)
	var down *StoreDownError
	if errors.As(err, &down) {
		m.StoreLost(down.err)
	}
	return err == nil
}

// subscribe follows the changes channel: a change of state is applied at
// once, a new plan or heartbeat is read at once. Messages lost while
// disconnected are made up by the heartbeat's version check.
func (m *Member) subscribe() {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-m.stop; cancel() }()
	for ctx.Err() == nil {
		ps := m.rdb.Subscribe(ctx, m.key(kChanges))
		ch := ps.Channel(redis.WithChannelHealthCheckInterval(5 * time.Second))
		for msg := range ch {
			kind, ver, _ := strings.Cut(msg.Payload, " ")
			l := m.app()
			if l == nil {
				continue
			}
			switch kind {
			case "state":
				v, _ := strconv.ParseInt(ver, 10, 64)
				m.mu.Lock()
				known := v != 0 && v <= m.version
				m.mu.Unlock()
				if !known {
					sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
					_ = m.Pull(sctx, l)
					scancel()
					if m.IsLeader() {
						m.BeatNow() // place what changed now
					}
				}
			case "plan":
				// Only the plan: the heartbeats this node holds are
				// fresh enough to apply it with.
				sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
				m.refreshPlan(sctx, l)
				scancel()
			default:
				m.BeatNow()
			}
		}
		_ = ps.Close()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// BeatNow asks the loop for a heartbeat round now.
func (m *Member) BeatNow() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// loop heartbeats, reads the cluster (nodes, plan, version) and, while it
// holds the leader lease, places replicas.
func (m *Member) loop() {
	defer close(m.stopped)
	t := time.NewTicker(time.Duration(m.cfg.Heartbeat))
	defer t.Stop()
	started := now()
	for {
		if l := m.app(); l != nil {
			m.round(l, started)
		}
		select {
		case <-m.stop:
			return
		case <-t.C:
		case <-m.kick:
		}
	}
}

const renewScript = `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) end return 0`

// writePlanScript writes a plan only while the writer holds the lease:
// a leader that lost it (paused, cut off) cannot overwrite its
// successor's plan.
const writePlanScript = `if redis.call("GET", KEYS[1]) ~= ARGV[1] then return 0 end
redis.call("SET", KEYS[2], ARGV[2])
redis.call("PUBLISH", KEYS[3], "plan")
return 1`

func (m *Member) round(l Local, started time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), max(time.Duration(m.cfg.Heartbeat), 2*time.Second))
	defer cancel()
	beat := l.Beat(m, started)
	rd, err := m.publishBeat(ctx, beat)
	if err != nil {
		m.StoreLost(err)
		return
	}
	names := rd.members.Val()
	beats, err := m.readMembers(ctx, names)
	if err != nil {
		m.StoreLost(err)
		return
	}
	m.storeBack(l)
	nodes := m.readBeats(ctx, names, beats, beat)
	nodes[m.cfg.Node] = beat
	p, stale := m.adopt(nodes, rd)
	if stale {
		_ = m.Pull(ctx, l)
	}
	l.ApplyPlan(m, p, nodes)
	if rd.leader.Val() == m.cfg.Node {
		m.lead(ctx, l, nodes, p)
	}
}

// roundRead is what a heartbeat round reads back from the store.
type roundRead struct {
	members               *redis.StringSliceCmd
	version, plan, leader *redis.StringCmd
}

// publishBeat writes this node's signed heartbeat (telling every node to
// read the heartbeats when a replica became ready), claims or renews the
// leader lease, and reads the members, the state's version, the plan and
// the leader, in one round trip.
func (m *Member) publishBeat(ctx context.Context, beat *NodeBeat) (roundRead, error) {
	b, _ := json.Marshal(beat)
	b = signBeat(m.proof, b)
	tell := m.tell.Swap(false)
	ttl := time.Duration(m.cfg.NodeTTL)
	var rd roundRead
	_, err := m.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.SAdd(ctx, m.key(kNodes), m.cfg.Node)
		p.Set(ctx, m.key(kNode+m.cfg.Node), b, ttl)
		if tell {
			p.Publish(ctx, m.key(kChanges), "nodes")
		}
		p.SetNX(ctx, m.key(kLeader), m.cfg.Node, ttl)
		p.Eval(ctx, renewScript, []string{m.key(kLeader)}, m.cfg.Node, ttl.Milliseconds())
		rd.members = p.SMembers(ctx, m.key(kNodes))
		rd.version = p.Get(ctx, m.key(kVersion))
		rd.plan = p.Get(ctx, m.key(kPlan))
		rd.leader = p.Get(ctx, m.key(kLeader))
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return rd, err
	}
	return rd, nil
}

// readMembers reads the heartbeats of the nodes names.
func (m *Member) readMembers(ctx context.Context, names []string) ([]any, error) {
	if len(names) == 0 {
		return nil, nil
	}
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = m.key(kNode + n)
	}
	return m.rdb.MGet(ctx, keys...).Result()
}

// adopt takes the round's view of the cluster as this node's: the nodes,
// the plan (the store's, else the one this node knows, which the leader
// writes back; never an older one than it holds) and the leader. stale
// says the shared state changed since this node applied it.
func (m *Member) adopt(nodes map[string]*NodeBeat, rd roundRead) (Plan, bool) {
	var p Plan
	m.planLost = rd.plan.Val() == ""
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := rd.plan.Val(); s != "" {
		_ = json.Unmarshal([]byte(s), &p)
	} else {
		// No plan in the store (a new cluster, or a store restarted
		// without its data): keep the one this node knows.
		p = m.plan
	}
	if p.Seq < m.plan.Seq {
		p = m.plan // a newer one arrived since this round read it
	}
	v, err := rd.version.Int64()
	m.nodes, m.plan, m.leader = nodes, p, rd.leader.Val()
	// A store without a version has lost the state this node has seen
	// (pull writes it back); a cluster never changed has none to lose.
	stale := v != m.version || errors.Is(err, redis.Nil) && m.version > 0
	return p, stale
}

// readBeats decodes the heartbeats read for names. A heartbeat whose
// proof is not this cluster's is not a member: it is left out (and logged
// once), so it is not listed, gets no replicas and its replicas get no
// requests.
func (m *Member) readBeats(ctx context.Context, names []string, beats []any, own *NodeBeat) map[string]*NodeBeat {
	nodes := map[string]*NodeBeat{}
	for i, v := range beats {
		s, ok := v.(string)
		if !ok {
			m.forget(ctx, names[i]) // expired: the node is gone
			continue
		}
		delete(m.gone, names[i])
		b, ok := openBeat(m.proof, s)
		switch {
		case !ok && hasBeatProof(s):
			m.refuse(names[i], s)
			continue
		case !ok:
			b = []byte(s) // a node of an earlier version signs nothing: kept, so a rolling upgrade works
		}
		delete(m.refused, names[i])
		var nb NodeBeat
		if json.Unmarshal(b, &nb) == nil && nb.Name != "" {
			nodes[nb.Name] = &nb
			if nb.Name == m.cfg.Node && (nb.Addr != own.Addr || !nb.Started.Equal(own.Started)) {
				// Written between this round's SET and MGET by another
				// process with this node's name.
				m.logger.Error("another llmgw uses this node's name in the cluster; give each node its own (cluster { node … })",
					zap.String("node", m.cfg.Node), zap.String("other_address", nb.Addr), zap.String("address", own.Addr))
			}
		}
	}
	return nodes
}

// refuse logs, once per node start, a heartbeat that does not prove the
// cluster secret.
func (m *Member) refuse(name, beat string) {
	var nb struct {
		Addr    string    `json:"addr"`
		Started time.Time `json:"started"`
	}
	_ = json.Unmarshal([]byte(beat), &nb)
	seen := nb.Addr + " " + nb.Started.String()
	if m.refused[name] == seen {
		return
	}
	m.refused[name] = seen
	m.logger.Error("a node's heartbeat does not prove the cluster secret: it is not a member (not listed, given no replicas); its cluster secret differs from this node's",
		zap.String("node", name), zap.String("address", nb.Addr))
}

// reseedScript writes a node's last known state into a store that has
// none (a Redis restarted without its data), once: the first node wins.
const reseedScript = `if redis.call("EXISTS", KEYS[1]) == 1 then return 0 end
for i = 2, #ARGV, 2 do redis.call("HSET", KEYS[2], ARGV[i], ARGV[i+1]) end
redis.call("SET", KEYS[1], ARGV[1])
redis.call("PUBLISH", KEYS[3], "state " .. ARGV[1])
return 1`

// reseed gives a store that lost the cluster's state (restarted empty)
// what this node last saw of it, so nothing an administrator changed is
// lost. It reports whether it had anything to write and the store
// answered (then the version may have changed).
func (m *Member) reseed(ctx context.Context) bool {
	m.mu.Lock()
	if m.version == 0 {
		m.mu.Unlock()
		return false
	}
	args := []any{m.version}
	for k, v := range m.applied {
		if v != "" {
			args = append(args, k, v, proofField(k), fieldProof(m.proof, k, v))
		}
	}
	m.mu.Unlock()
	n, err := m.rdb.Eval(ctx, reseedScript, []string{m.key(kVersion), m.key(kState), m.key(kChanges)}, args...).Int()
	if err == nil && n == 1 {
		m.logger.Warn("the cluster store had lost its state (restarted without its data); wrote back what this node last saw",
			zap.Int("fields", len(args)/4))
	}
	return err == nil
}

// forget removes from the set of node names one whose heartbeat has
// been gone for ten node TTLs, so the heartbeats read each round are
// those of the nodes that may still be there.
func (m *Member) forget(ctx context.Context, name string) {
	since, ok := m.gone[name]
	switch {
	case !ok:
		m.gone[name] = now()
	case now().Sub(since) > 10*time.Duration(m.cfg.NodeTTL) && m.IsLeader():
		m.rdb.SRem(ctx, m.key(kNodes), name)
		delete(m.gone, name)
	}
}

// IsLeader tells whether this node holds the leader lease.
func (m *Member) IsLeader() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leader == m.cfg.Node
}

// refreshPlan reads the plan alone and applies it.
func (m *Member) refreshPlan(ctx context.Context, l Local) {
	b, err := m.rdb.Get(ctx, m.key(kPlan)).Bytes()
	if err != nil {
		return // the next round reads it
	}
	var p Plan
	if json.Unmarshal(b, &p) != nil {
		return
	}
	m.mu.Lock()
	if p.Seq < m.plan.Seq {
		m.mu.Unlock()
		return
	}
	m.plan = p
	nodes := m.nodes
	m.mu.Unlock()
	l.ApplyPlan(m, p, nodes)
}

// StoreLost notes that the store does not answer. Nothing is stopped:
// local replicas keep serving and remote ones stay known.
func (m *Member) StoreLost(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down == nil {
		m.downAt = now()
		m.logger.Error("cluster store unreachable; serving with the last known state, refusing changes",
			zap.String("store", m.cfg.StoreName()), zap.Error(err))
	}
	m.down = err
}

func (m *Member) storeBack(l Local) {
	m.mu.Lock()
	was, since := m.down, m.downAt
	m.down = nil
	if was != nil || m.upSince.IsZero() {
		m.upSince = now()
	}
	m.mu.Unlock()
	if was != nil {
		m.logger.Info("cluster store reachable again; reconciling", zap.String("store", m.cfg.StoreName()),
			zap.Duration("down_for", now().Sub(since)))
	}
}

// lead places replicas: the leader's round. For a node TTL after this
// node (re)gained the store, a plan that has entries is left alone: the
// other nodes' heartbeats may have expired while the store was away (or
// before this node knew them), and they must have a chance to report
// before their replicas are taken for lost.
func (m *Member) lead(ctx context.Context, l Local, nodes map[string]*NodeBeat, cur Plan) {
	m.mu.Lock()
	settling := now().Sub(m.upSince) < time.Duration(m.cfg.NodeTTL)
	m.mu.Unlock()
	if settling && len(cur.Models) > 0 {
		for _, on := range cur.Models {
			for _, n := range on {
				if _, ok := nodes[n]; !ok {
					return
				}
			}
		}
	}
	in := l.PlanInputs(nodes)
	next, why := place.Plan(in.Nodes, in.Models, cur.Models, in.Load, in.Stopped, now(), in.Owners)
	if maps.EqualFunc(next, cur.Models, slices.Equal) && maps.Equal(why, cur.Why) && cur.By != "" && !m.planLost {
		return
	}
	np := Plan{Models: next, Why: why, By: m.cfg.Node, At: now(), Seq: cur.Seq + 1}
	b, _ := json.Marshal(np)
	ok, err := m.rdb.Eval(ctx, writePlanScript, []string{m.key(kLeader), m.key(kPlan), m.key(kChanges)}, m.cfg.Node, b).Int()
	if err != nil || ok != 1 {
		return
	}
	m.mu.Lock()
	m.plan = np
	m.mu.Unlock()
	l.ApplyPlan(m, np, nodes)
}

// StoreDown returns the store's error while it does not answer.
func (m *Member) StoreDown() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down == nil {
		return nil
	}
	return m.StoreErr(m.down)
}

// Local is this node's app as the member sees it: the member asks it for
// the heartbeat and the planner's inputs, and hands it the shared state
// and the plan it read. The app attaches itself when it starts and
// detaches when it stops; a reload attaches the new config's.
type Local interface {
	Beat(m *Member, started time.Time) *NodeBeat
	ApplyShared(ctx context.Context, changed map[string]bool) error
	ApplyPlan(m *Member, p Plan, nodes map[string]*NodeBeat)
	PlanInputs(nodes map[string]*NodeBeat) PlanInputs
}

// PlanInputs are what the planner needs of the app besides the
// heartbeats and the current plan.
type PlanInputs struct {
	Nodes   []place.Node
	Models  []*catalog.Model
	Load    map[string]place.Load
	Stopped map[string]bool
	Owners  *place.OwnerTable
}

type localRef struct{ l Local }

// Attach makes l the app the member's loops serve.
func (m *Member) Attach(l Local) { m.attached.Store(&localRef{l}) }

// Detach forgets l, unless another app attached since.
func (m *Member) Detach(l Local) {
	if r := m.attached.Load(); r != nil && r.l == l {
		m.attached.CompareAndSwap(r, nil)
	}
}

// app is the attached app, or nil.
func (m *Member) app() Local {
	if r := m.attached.Load(); r != nil {
		return r.l
	}
	return nil
}

// Begin starts the member's loops once; later calls do nothing.
func (m *Member) Begin() { m.startOnce.Do(m.start) }

// NodeName is this node's name in the cluster.
func (m *Member) NodeName() string { return m.cfg.Node }

// Advertise is the address other nodes reach this node's endpoint at.
func (m *Member) Advertise() string { return m.cfg.Advertise }

// SetLocalStore keeps a copy of the shared state in s (Caddy storage).
func (m *Member) SetLocalStore(s StateStore) {
	m.mu.Lock()
	m.local = s
	m.mu.Unlock()
}

// Knows tells whether a node of that name has a heartbeat.
func (m *Member) Knows(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.nodes[name]
	return ok
}

// NodeCount is how many nodes the cluster has, this one included.
func (m *Member) NodeCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.nodes) + 1
}

// PeerTarget is another node as the node-to-node calls reach it.
type PeerTarget struct{ Name, Addr string }

// LiveNodes are the other nodes whose heartbeat is fresh.
func (m *Member) LiveNodes() []PeerTarget {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []PeerTarget
	for _, nb := range m.nodes {
		if nb.Name != m.cfg.Node && now().Sub(nb.At) < time.Duration(m.cfg.NodeTTL) {
			out = append(out, PeerTarget{nb.Name, nb.Addr})
		}
	}
	return out
}

// Snapshot is the heartbeats and the plan as this node last read them.
func (m *Member) Snapshot() (map[string]*NodeBeat, Plan) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.nodes), m.plan
}

// AppliedValue is the JSON of the shared state's field key as applied.
func (m *Member) AppliedValue(key string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.applied[key]
}

// Status is the body of GET /llm/nodes; drained names the drained nodes.
func (m *Member) Status(drained map[string]bool) llmapi.NodesStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := llmapi.NodesStatus{Cluster: m.cfg.Name, Store: m.cfg.StoreName(), Leader: m.leader, Plan: m.plan.Models, Unplaced: m.plan.Why, Nodes: []llmapi.NodeInfo{}}
	if m.down != nil {
		st.StoreError = m.StoreErr(m.down).Error()
	}
	for _, nb := range m.nodes {
		st.Nodes = append(st.Nodes, llmapi.NodeInfo{Name: nb.Name, Address: nb.Addr, Version: nb.Version, Self: nb.Name == m.cfg.Node,
			Leader: nb.Name == m.leader, Drained: drained[nb.Name], Heartbeat: nb.At,
			Age: now().Sub(nb.At).Round(time.Millisecond).String(), Started: nb.Started,
			Capacity: nb.Capacity, Used: nb.Used, Replicas: nb.Replicas, Failing: nb.Failing})
	}
	st.Versions = mixedVersions(st.Nodes)
	return st
}

// mixedVersions names the nodes of each llmgw release when the nodes run
// more than one; nil when they all run the same.
func mixedVersions(nodes []llmapi.NodeInfo) map[string][]string {
	by := map[string][]string{}
	for _, n := range nodes {
		v := cmp.Or(n.Version, "unknown (before v0.16)")
		by[v] = append(by[v], n.Name)
	}
	if len(by) < 2 {
		return nil
	}
	for _, names := range by {
		slices.Sort(names)
	}
	return by
}

// RemoteUnready are the replicas other nodes run that are not ready
// (starting, draining, failing with why), by model, from their
// heartbeats: for the models' status, never for requests.
func (m *Member) RemoteUnready() map[string][]llmapi.ReplicaStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]llmapi.ReplicaStatus{}
	for _, nb := range m.nodes {
		for _, br := range nb.Replicas {
			if nb.Name != m.cfg.Node && fleet.State(br.State) != fleet.ReplicaReady {
				out[br.Model] = append(out[br.Model], llmapi.ReplicaStatus{ID: br.ID, State: br.State, Node: nb.Name,
					GPUs: br.GPUs, Inflight: br.Inflight, Started: br.Started, Reason: br.Reason, Profile: br.Profile})
			}
		}
	}
	return out
}

// RemoteReady are the ready replicas other nodes run, by model, from
// their heartbeats: the member keeps one Replica per remote id, so a
// replica's requests in flight are counted across plans.
func (m *Member) RemoteReady(nodes map[string]*NodeBeat) map[string][]*fleet.Replica {
	remote := map[string][]*fleet.Replica{}
	seen := map[string]bool{}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, nb := range nodes {
		if nb.Name == m.cfg.Node {
			continue
		}
		for _, br := range nb.Replicas {
			if fleet.State(br.State) != fleet.ReplicaReady {
				continue
			}
			r := m.remote[br.ID]
			if url := peerURL(nb.Addr, br.ID); r == nil || r.BaseURL != url {
				r = fleet.NewRemote(&fleet.Replica{ID: br.ID, Model: br.Model, BaseURL: url,
					UpstreamModel: br.Upstream, Adapters: br.Adapters, Header: http.Header{}, Started: br.Started, Node: nb.Name, GPUs: br.GPUs,
					Transport: m.transport, Profile: br.Profile})
				m.remote[br.ID] = r
			}
			seen[br.ID] = true
			remote[br.Model] = append(remote[br.Model], r)
		}
	}
	for id := range m.remote {
		if !seen[id] {
			delete(m.remote, id)
		}
	}
	return remote
}

// lookupNone finds no replica: the peer endpoint's lookup until an app
// attaches.
func lookupNone(string) (*fleet.Replica, func(), bool) { return nil, nil, false }

// ServeApp has the peer endpoint find replicas with lookup and send the
// app's own routes to h (the app that starts calls it).
func (m *Member) ServeApp(lookup PeerLookup, h http.Handler) {
	m.peer.setLookup(lookup)
	m.peer.setLocal(h)
}

// SharedStorage is Caddy storage kept in the cluster's Redis.
func (m *Member) SharedStorage() certmagic.Storage {
	return &redisStorage{m: m, locks: map[string]string{}}
}

// AddMinute adds a minute's increase to the cluster's history.
func (m *Member) AddMinute(ctx context.Context, minute int64, delta map[string]int64) error {
	key := m.key("guardhist:" + strconv.FormatInt(minute, 10))
	p := m.rdb.TxPipeline()
	for k, d := range delta {
		p.HIncrBy(ctx, key, k, d)
	}
	p.Expire(ctx, key, guardhist.TTL)
	_, err := p.Exec(ctx)
	return err
}

// ReadMinutes adds the cluster's minutes in [from, to).
func (m *Member) ReadMinutes(ctx context.Context, from, to int64, add func(minute int64, key string, n int64)) error {
	p := m.rdb.Pipeline()
	for min := from; min < to; min++ {
		p.HGetAll(ctx, m.key("guardhist:"+strconv.FormatInt(min, 10)))
	}
	cmds, err := p.Exec(ctx)
	if err != nil {
		return err
	}
	for i, c := range cmds {
		for k, v := range c.(*redis.MapStringStringCmd).Val() {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				add(from+int64(i), k, n)
			}
		}
	}
	return nil
}

// AddTraffic adds a minute's increase to the cluster's traffic history
// (llmgw:<cluster>:traffic:<minute>) and sets this node's gauges of the
// minute (…:traffic:g:<minute>, a field per node and key).
func (m *Member) AddTraffic(ctx context.Context, minute int64, delta, gauges map[string]int64) error {
	at := strconv.FormatInt(minute, 10)
	key, gkey := m.key("traffic:"+at), m.key("traffic:g:"+at)
	p := m.rdb.TxPipeline()
	for k, d := range delta {
		p.HIncrBy(ctx, key, k, d)
	}
	for k, n := range gauges {
		p.HSet(ctx, gkey, m.cfg.Node+"\x1e"+k, n)
	}
	p.Expire(ctx, key, traffic.TTL)
	p.Expire(ctx, gkey, traffic.TTL)
	_, err := p.Exec(ctx)
	return err
}

// ReadTraffic adds the cluster's traffic minutes in [from, to): the
// counts, then each node's gauges.
func (m *Member) ReadTraffic(ctx context.Context, from, to int64, add func(minute int64, node, key string, n int64)) error {
	p := m.rdb.Pipeline()
	for min := from; min < to; min++ {
		at := strconv.FormatInt(min, 10)
		p.HGetAll(ctx, m.key("traffic:"+at))
		p.HGetAll(ctx, m.key("traffic:g:"+at))
	}
	cmds, err := p.Exec(ctx)
	if err != nil {
		return err
	}
	for i, c := range cmds {
		for k, v := range c.(*redis.MapStringStringCmd).Val() {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				continue
			}
			node := ""
			if i%2 == 1 {
				if node, k, _ = strings.Cut(k, "\x1e"); k == "" {
					continue
				}
			}
			add(from+int64(i/2), node, k, n)
		}
	}
	return nil
}

// ResponseStore keeps stored Responses in the cluster's Redis.
func (m *Member) ResponseStore() redisResponses { return redisResponses{m} }

// UnavailableError is Change's answer when the cluster cannot take a
// change now (the store does not answer, another change holds the lock):
// the admin API says 503.
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string { return e.Err.Error() }

func (e *UnavailableError) Unwrap() error { return e.Err }

// Interface guards
var (
	_ caddy.Destructor  = (*Member)(nil)
	_ certmagic.Storage = (*redisStorage)(nil)
)

var _ http.Handler = (*peerServer)(nil)

const auditKey = "audit"

// now is the clock; tests may replace it.
var now = time.Now

// AnnounceReady is called by a fleet when one of its replicas becomes
// ready: the node heartbeats now and tells every node to read the
// heartbeats (the changes channel's "nodes"), which they do at once.
func (m *Member) AnnounceReady() {
	m.tell.Store(true)
	m.BeatNow()
}
