package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// clusterSecret is the test clusters' credential.
const clusterSecret = "test-cluster-secret-0123456789abcdef0123456789"

// cluster is real llmgw nodes sharing one real Redis, each node on its
// own loopback address (127.0.0.2, 127.0.0.3, …) for node-to-node
// traffic.
type cluster struct {
	t      *testing.T
	redis  *redisServer
	store  string // the cluster block's store line; default: redis <c.redis>
	models string // the llm block's models and tenancy, the same on every node
	nodes  map[string]*gateway
	peer   map[string]string // node → its node-to-node address
	extra  map[string]string // node → more of its llm block (such as an engine only it has)
	quota  string            // llm_quota's block
	routes string            // more routes of every node's site
	before string            // handlers before the router on every node (after llm_quota)
	router string            // llm_router's block
	blocks map[string]string // node → its llm block, for reloads
	secret map[string]string // node → its cluster secret; default: clusterSecret
	timing string            // the cluster block's heartbeat and node_ttl; default: 250ms and 2s
}

func startCluster(t *testing.T, n int, models string) *cluster {
	t.Helper()
	return startClusterOn(t, n, models, startRedis(t), "")
}

// startClusterOn starts n nodes whose cluster block names the store with
// store (such as "sentinel mymaster 127.0.0.1:26379").
func startClusterOn(t *testing.T, n int, models string, r *redisServer, store string) *cluster {
	t.Helper()
	c := &cluster{t: t, redis: r, store: store, models: models, nodes: map[string]*gateway{}, peer: map[string]string{}}
	for i := 1; i <= n; i++ {
		c.add(fmt.Sprintf("n%d", i))
	}
	return c
}

// add starts a node named name on 127.0.0.<its number + 1>.
func (c *cluster) add(name string) *gateway {
	c.t.Helper()
	g := c.node(name)
	g.start()
	c.nodes[name] = g
	return g
}

// node writes the config of node name and returns it, not started.
func (c *cluster) node(name string) *gateway {
	t := c.t
	t.Helper()
	if _, ok := c.peer[name]; !ok {
		c.peer[name] = fmt.Sprintf("127.0.0.%d:%d", 1+len(c.peer)+1, freePort(t))
	}
	store := c.store
	if store == "" {
		store = "redis " + c.redis.url()
	}
	secret := clusterSecret
	if s, ok := c.secret[name]; ok {
		secret = s
	}
	timing := c.timing
	if timing == "" {
		timing = "heartbeat 250ms\n\t\t\tnode_ttl 2s"
	}
	block := fmt.Sprintf(`
		cluster {
			%s
			node %s
			advertise %s
			secret %s
			%s
		}
		%s
		%s`, store, name, c.peer[name], secret, timing, c.models, c.extra[name])
	if c.blocks == nil {
		c.blocks = map[string]string{}
	}
	c.blocks[name] = block
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{})}
	g.quota = &c.quota
	g.routes = c.routes
	g.before = c.before
	g.writeConfig(block, c.router)
	return g
}

// names are the nodes' names, sorted.
func (c *cluster) names() []string {
	var out []string
	for n := range c.nodes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (g *gateway) nodes() llmapi.NodesStatus {
	var st llmapi.NodesStatus
	g.adminGet("/llm/nodes", &st)
	return st
}

// readyOn returns, for a model, the nodes of its ready replicas as g
// sees them.
func (g *gateway) readyOn(model string) []string {
	var on []string
	for _, r := range g.models()[model].Replicas {
		if r.State == string(fleet.ReplicaReady) {
			on = append(on, r.Node)
		}
	}
	sort.Strings(on)
	return on
}

// ask sends one chat request with key and returns the status and the
// replica that answered.
func ask(t *testing.T, g *gateway, key, model string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", g.base+"/v1/chat/completions",
		strings.NewReader(`{"model":"`+model+`","max_tokens":3,"messages":[{"role":"user","content":"hello"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1, "", err.Error() // the node is down: the caller decides
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Llm-Replica"), string(b)
}

const clusterModels = `
		model chat {
			engine sim
			option ttft 5ms
			min 3
			max 3
		}
		org acme {
			team research {
				project alpha {
					key k1 ` + "%s" + `
				}
			}
		}`

func TestClusterOfThreeNodes(t *testing.T) {
	c := startCluster(t, 3, fmt.Sprintf(clusterModels, tenancy.HashKey("secret-1"))+`
		model slow {
			engine sim
			option tokens_per_second 50
		}
		model ondemand {
			engine sim
			min 0
		}`)
	n1, n2, n3 := c.nodes["n1"], c.nodes["n2"], c.nodes["n3"]

	// min 3 lands on three different nodes, and every node sees them.
	for _, g := range []*gateway{n1, n2, n3} {
		waitFor(t, 30*time.Second, "three replicas of chat on three nodes", func() bool {
			return slices.Equal(g.readyOn("chat"), []string{"n1", "n2", "n3"})
		})
	}
	st := n2.nodes()
	if len(st.Nodes) != 3 || st.Leader == "" {
		t.Fatalf("GET /llm/nodes on n2: %+v; want three nodes and a leader", st)
	}
	out, err := exec.Command(binary, "ctl", "--admin", fmt.Sprintf("127.0.0.1:%d", n3.admin), "nodes").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "n1") || !strings.Contains(string(out), "leader") ||
		!strings.Contains(string(out), c.peer["n2"]) {
		t.Errorf("llmgw ctl nodes: %v\n%s", err, out)
	}

	// Requests through every node's front end are served by all three
	// replicas: local ones directly, the others through their node. (The
	// least-outstanding policy prefers the local replica on a tie, so it
	// takes concurrent requests to reach the others.)
	for _, name := range c.names() {
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					code, rep, body := ask(t, c.nodes[name], "secret-1", "chat")
					if code != 200 {
						t.Errorf("request through %s: %d %s", name, code, body)
						return
					}
					mu.Lock()
					seen[rep]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(seen) != 3 {
			t.Errorf("80 concurrent requests through %s reached replicas %v; want all three", name, seen)
		}
	}

	// A model added on n1 is served through n3.
	code, body := adminDo(t, n1, "POST", "/llm/models", `{"name":"added","engine":"sim","scaling":{"min":1}}`)
	if code != 201 {
		t.Fatalf("adding a model on n1: %d %s", code, body)
	}
	waitFor(t, 20*time.Second, "the added model to be served through n3", func() bool {
		code, _, _ := ask(t, n3, "secret-1", "added")
		return code == 200
	})

	// A key minted on n1 works on n3 at once.
	code, body = adminDo(t, n1, "POST", "/llm/keys", `{"project":"acme/research/alpha","id":"minted"}`)
	if code != 200 && code != 201 {
		t.Fatalf("minting a key on n1: %d %s", code, body)
	}
	var minted struct {
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal(body, &minted); err != nil || minted.Secret == "" {
		t.Fatalf("minting a key: %s", body)
	}
	if code, _, body := ask(t, n3, minted.Secret, "chat"); code != 200 {
		t.Fatalf("the key minted on n1 on n3's very next request: %d %s", code, body)
	}

	// A reload of a node with its config unchanged keeps its replicas,
	// its membership and the requests in flight.
	before := n2.models()["chat"].Replicas
	rl := steadyLoad(t, func() []*gateway { return []*gateway{n2} }, "secret-1", "chat", 4)
	n2.reload(c.blocks["n2"], "")
	time.Sleep(500 * time.Millisecond)
	if ok, failed := rl.end(); len(failed) > 0 {
		t.Errorf("requests failed during a reload (%d served): %v", ok, failed)
	}
	after := n2.models()["chat"].Replicas
	if len(after) != len(before) || len(n1.nodes().Nodes) != 3 {
		t.Errorf("after a reload of n2: replicas %+v (were %+v), %d nodes", after, before, len(n1.nodes().Nodes))
	}
	for i := range before {
		if i < len(after) && after[i].ID != before[i].ID {
			t.Errorf("a reload of n2 changed replica %s to %s", before[i].ID, after[i].ID)
		}
	}

	// A model with min 0 starts on its first request, wherever the
	// leader places it, and answers it.
	if code, _, body := ask(t, n3, "secret-1", "ondemand"); code != 200 {
		t.Fatalf("the first request for an on-demand model through n3: %d %s", code, body)
	}

	// Draining a node under load: its replicas start elsewhere first,
	// then stop there; no request fails; undrained, it takes its share
	// again.
	dl := steadyLoad(t, func() []*gateway { return []*gateway{n1, n2} }, "secret-1", "chat", 4)
	if code, body := adminDo(t, n1, "POST", "/llm/nodes/n3/drain", ""); code != 200 {
		t.Fatalf("draining n3: %d %s", code, body)
	}
	waitFor(t, 30*time.Second, "chat's replicas to leave n3", func() bool {
		on := n2.readyOn("chat")
		return len(on) == 3 && !slices.Contains(on, "n3")
	})
	if code, body := adminDo(t, n2, "POST", "/llm/nodes/n3/undrain", ""); code != 200 {
		t.Fatalf("undraining n3: %d %s", code, body)
	}
	waitFor(t, 30*time.Second, "chat back on three nodes", func() bool {
		return slices.Equal(n1.readyOn("chat"), []string{"n1", "n2", "n3"})
	})
	if ok, failed := dl.end(); len(failed) > 0 {
		t.Errorf("requests failed during a drain (%d served): %v", ok, failed)
	}

	// kill -9 of a node under load: no request that had not reached its
	// first byte fails, a stream it was serving through another node
	// ends with an SSE error event, and its replicas run on other nodes
	// within the node TTL plus the start time.
	var victim, front *gateway
	var victimName string
	waitFor(t, 20*time.Second, "the slow model's replica", func() bool { return len(n1.readyOn("slow")) == 1 })
	victimName = n1.readyOn("slow")[0]
	victim = c.nodes[victimName]
	for _, n := range c.names() {
		if n != victimName {
			front = c.nodes[n]
			break
		}
	}
	l := steadyLoad(t, func() []*gateway { return []*gateway{front} }, "secret-1", "chat", 4)
	req, _ := http.NewRequest("POST", front.base+"/v1/chat/completions",
		strings.NewReader(`{"model":"slow","stream":true,"max_tokens":400,"messages":[{"role":"user","content":"tell me a long story"}]}`))
	req.Header.Set("Authorization", "Bearer secret-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a stream through %s to the replica on %s: %v %v", front.base, victimName, err, resp)
	}
	defer resp.Body.Close()
	first := make([]byte, 256)
	if _, err := io.ReadAtLeast(resp.Body, first, 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	killed := time.Now()
	_ = victim.cmd.Process.Kill()
	<-victim.exited
	rest, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(rest), `"error"`) || strings.Contains(string(rest), "[DONE]") {
		t.Errorf("the stream whose node was killed ended with %q; want an SSE error event and no [DONE]", tail(string(rest), 300))
	}
	waitFor(t, 30*time.Second, "chat to have three ready replicas again without "+victimName, func() bool {
		on := front.readyOn("chat")
		return len(on) == 3 && !slices.Contains(on, victimName)
	})
	t.Logf("%s killed: its replicas ran again on other nodes after %s (node_ttl 2s)", victimName, time.Since(killed).Round(10*time.Millisecond))
	waitFor(t, 30*time.Second, "the slow model on another node", func() bool {
		code, _, _ := ask(t, front, "secret-1", "slow")
		return code == 200
	})
	time.Sleep(300 * time.Millisecond)
	if ok, failed := l.end(); len(failed) > 0 {
		t.Errorf("requests failed while a node was killed (%d served): %v", ok, failed)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// load sends requests for model through the given nodes' front ends
// from conc clients until stopped, and counts what failed.
type load struct {
	stop     chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	ok       int
	failed   map[string]int
	inflight map[*gateway]int
}

func steadyLoad(t *testing.T, through func() []*gateway, key, model string, conc int) *load {
	l := &load{stop: make(chan struct{}), failed: map[string]int{}, inflight: map[*gateway]int{}}
	t.Cleanup(func() { l.end() }) // before the nodes stop, when the test ends early
	for i := range conc {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for n := i; ; n++ {
				select {
				case <-l.stop:
					return
				default:
				}
				// A node is picked and counted in one step, so that
				// drain sees every request sent to it.
				l.mu.Lock()
				gs := through()
				g := gs[n%len(gs)]
				l.inflight[g]++
				l.mu.Unlock()
				code, _, body := ask(t, g, key, model)
				l.mu.Lock()
				l.inflight[g]--
				if code == 200 {
					l.ok++
				} else {
					l.failed[fmt.Sprintf("%d %.200s", code, body)]++
				}
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// drain waits until no request is in flight to g, once through has
// stopped returning it: a load balancer takes a node out of rotation
// and lets its connections finish before the node is stopped.
func (l *load) drain(g *gateway) {
	for {
		l.mu.Lock()
		n := l.inflight[g]
		l.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// end stops the load and returns how many requests succeeded and what
// failed.
func (l *load) end() (int, map[string]int) {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ok, l.failed
}

func TestClusterStoreOutage(t *testing.T) {
	c := startCluster(t, 2, fmt.Sprintf(clusterModels, tenancy.HashKey("secret-1")))
	n1, n2 := c.nodes["n1"], c.nodes["n2"]
	code, body := adminDo(t, n1, "POST", "/llm/models", `{"name":"before","engine":"sim","scaling":{"min":1}}`)
	if code != 201 {
		t.Fatalf("adding a model: %d %s", code, body)
	}
	waitFor(t, 30*time.Second, "chat on both nodes and the added model", func() bool {
		return len(n2.readyOn("chat")) == 3 && len(n1.readyOn("before")) == 1 && len(n2.readyOn("before")) == 1
	})
	l := steadyLoad(t, func() []*gateway { return []*gateway{n1, n2} }, "secret-1", "chat", 8)

	// Redis goes away for 30s: requests to running replicas go on,
	// changes are refused with the reason.
	c.redis.stop()
	down := time.Now()
	waitFor(t, 10*time.Second, "n1 to notice the store is gone", func() bool {
		return n1.nodes().StoreError != ""
	})
	code, body = adminDo(t, n2, "POST", "/llm/models", `{"name":"during","engine":"sim"}`)
	if code != 503 || !strings.Contains(string(body), "cannot be reached") {
		t.Errorf("a change while the store is down: %d %s; want 503 saying the store cannot be reached", code, body)
	}
	if code, _, body := ask(t, n2, "secret-1", "before"); code != 200 {
		t.Errorf("a request to the model added before the outage, through the other node: %d %s", code, body)
	}
	time.Sleep(time.Until(down.Add(30 * time.Second)))

	// Redis comes back empty (no persistence): the nodes write back what
	// they knew, and changes work again.
	c.redis.start()
	waitFor(t, 20*time.Second, "changes to be accepted again", func() bool {
		code, _ := adminDo(t, n2, "POST", "/llm/models", `{"name":"after","engine":"sim","scaling":{"min":1}}`)
		return code == 201
	})
	waitFor(t, 20*time.Second, "both models to be served through n1", func() bool {
		a, _, _ := ask(t, n1, "secret-1", "after")
		b, _, _ := ask(t, n1, "secret-1", "before")
		return a == 200 && b == 200
	})
	ok, failed := l.end()
	t.Logf("%d requests served during and after a 30s store outage", ok)
	if len(failed) > 0 {
		t.Errorf("requests failed: %v", failed)
	}
}

// sentinelSet is a Redis primary, its replica and a Sentinel watching
// them, all real, on loopback.
type sentinelSet struct {
	primary, replica *redisServer
	sentinel         *exec.Cmd
	port             int
}

func startSentinel(t *testing.T) *sentinelSet {
	t.Helper()
	s := &sentinelSet{primary: startRedis(t)}
	s.replica = &redisServer{t: t, port: freePort(t), dir: t.TempDir()}
	s.replica.cmd = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", fmt.Sprint(s.replica.port),
		"--save", "", "--appendonly", "no", "--dir", s.replica.dir, "--replicaof", "127.0.0.1", fmt.Sprint(s.primary.port))
	if err := s.replica.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.replica.stop)
	s.port = freePort(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`port %d
bind 127.0.0.1
dir %s
sentinel monitor mymaster 127.0.0.1 %d 1
sentinel down-after-milliseconds mymaster 1000
sentinel failover-timeout mymaster 10000
`, s.port, dir, s.primary.port)), 0o600); err != nil {
		t.Fatal(err)
	}
	s.sentinel = exec.Command("redis-server", conf, "--sentinel")
	if err := s.sentinel.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.sentinel.Process.Kill(); _ = s.sentinel.Wait() })
	rdb := redis.NewSentinelClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.port)})
	defer rdb.Close()
	waitFor(t, 20*time.Second, "the Sentinel to see the replica", func() bool {
		rs, err := rdb.Replicas(bg, "mymaster").Result()
		return err == nil && len(rs) > 0
	})
	return s
}

// primaryPort asks the Sentinel which port the primary is on.
func (s *sentinelSet) primaryPort(t *testing.T) string {
	rdb := redis.NewSentinelClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", s.port)})
	defer rdb.Close()
	addr, err := rdb.GetMasterAddrByName(bg, "mymaster").Result()
	if err != nil || len(addr) != 2 {
		return ""
	}
	return addr[1]
}

func TestClusterSentinelFailover(t *testing.T) {
	s := startSentinel(t)
	// llm_quota counts in the same Sentinel-watched Redis; while the
	// primary is switched, admissions follow on_store_error (allow).
	c := &cluster{t: t, redis: s.primary, store: fmt.Sprintf("sentinel mymaster 127.0.0.1:%d", s.port),
		models: `
		model chat {
			engine sim
			option ttft 5ms
			min 3
			max 3
		}` + tenancyBlock("", "", "requests_per_minute 1000000", ""),
		quota: fmt.Sprintf("store redis://127.0.0.1:%d?master_name=mymaster\n\t\t\ton_store_error allow", s.port),
		nodes: map[string]*gateway{}, peer: map[string]string{}}
	n1, n2 := c.add("n1"), c.add("n2")
	waitFor(t, 30*time.Second, "chat's three replicas", func() bool { return len(n2.readyOn("chat")) == 3 })
	l := steadyLoad(t, func() []*gateway { return []*gateway{n1, n2} }, "secret-1", "chat", 8)

	// kill -9 of the primary: Sentinel promotes the replica, the nodes
	// follow, and changes work again.
	old := s.primaryPort(t)
	_ = s.primary.cmd.Process.Kill()
	_ = s.primary.cmd.Wait()
	s.primary.cmd = nil
	killed := time.Now()
	waitFor(t, 60*time.Second, "Sentinel to promote the replica", func() bool {
		p := s.primaryPort(t)
		return p != "" && p != old
	})
	promoted := time.Since(killed)
	waitFor(t, 30*time.Second, "a change to be accepted after the failover", func() bool {
		code, _ := adminDo(t, n1, "POST", "/llm/models", `{"name":"after-failover","engine":"sim","scaling":{"min":1}}`)
		return code == 201
	})
	waitFor(t, 20*time.Second, "the model added after the failover to be served through n2", func() bool {
		code, _, _ := ask(t, n2, "secret-1", "after-failover")
		return code == 200
	})
	t.Logf("primary killed: promoted after %s, changes accepted again after %s", promoted.Round(10*time.Millisecond),
		time.Since(killed).Round(10*time.Millisecond))
	// The quota counters live on: the new primary has this minute's
	// (once llm_quota's store has found it: it probes once a second).
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "mymaster", SentinelAddrs: []string{fmt.Sprintf("127.0.0.1:%d", s.port)}})
	defer rdb.Close()
	var keys []string
	var err error
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		keys, err = rdb.Keys(bg, "*").Result()
		if err == nil && slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(k, "acme") }) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the promoted primary holds no quota counters (%v): %v", err, keys)
			break
		}
	}
	ok, failed := l.end()
	if len(failed) > 0 {
		t.Errorf("requests failed during the failover (%d served): %v", ok, failed)
	}
}

func TestClusterRollingRestart(t *testing.T) {
	c := startCluster(t, 3, fmt.Sprintf(clusterModels, tenancy.HashKey("secret-1")))
	for _, g := range c.nodes {
		waitFor(t, 30*time.Second, "three replicas of chat on three nodes", func() bool {
			return slices.Equal(g.readyOn("chat"), []string{"n1", "n2", "n3"})
		})
	}
	// The load goes through the nodes that are up, as a load balancer
	// with health checks would send it.
	var mu sync.Mutex
	up := map[string]bool{"n1": true, "n2": true, "n3": true}
	through := func() []*gateway {
		mu.Lock()
		defer mu.Unlock()
		var gs []*gateway
		for _, n := range c.names() {
			if up[n] {
				gs = append(gs, c.nodes[n])
			}
		}
		return gs
	}
	l := steadyLoad(t, through, "secret-1", "chat", 64)
	for _, name := range c.names() {
		mu.Lock()
		up[name] = false
		mu.Unlock()
		g := c.nodes[name]
		l.drain(g) // the balancer's health check notices; its requests finish
		g.stop()
		g.start()
		// The client's pool may hold connections the stopped node closed;
		// a load balancer would not reuse them either.
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		mu.Lock()
		up[name] = true
		mu.Unlock()
		waitFor(t, 30*time.Second, "chat back on three nodes", func() bool {
			return slices.Equal(g.readyOn("chat"), []string{"n1", "n2", "n3"})
		})
	}
	ok, failed := l.end()
	t.Logf("%d requests served during a rolling restart of three nodes", ok)
	if len(failed) > 0 {
		t.Errorf("requests failed during the rolling restart: %v", failed)
	}
}

// Ollama is installed on one node only: the model lands there (the other
// node cannot start it and says so in its heartbeat), and requests
// through the other node reach it through the node-to-node hop, streams
// included.
func TestClusterOllamaOnOneNode(t *testing.T) {
	src := tinyModel(t)
	c := &cluster{t: t, redis: startRedis(t), nodes: map[string]*gateway{}, peer: map[string]string{},
		models: fmt.Sprintf(clusterModels, tenancy.HashKey("secret-1")) + `
		model tiny {
			engine ollama
			source ` + src + `
			context_length 512
			min 1
		}`,
		extra: map[string]string{
			"n1": "engine ollama {\n\t\t\toption bin " + filepath.Join(t.TempDir(), "no-ollama-here") + "\n\t\t}",
			"n2": "engine ollama {\n\t\t\toption bin " + ollamaBin(t) + "\n\t\t}",
		}}
	n1 := c.add("n1")
	c.add("n2")
	waitFor(t, 90*time.Second, "tiny ready on n2, as n1 sees it", func() bool {
		return slices.Equal(n1.readyOn("tiny"), []string{"n2"})
	})
	req, _ := http.NewRequest("POST", n1.base+"/v1/chat/completions",
		strings.NewReader(`{"model":"tiny","stream":true,"max_tokens":12,"temperature":0,"messages":[{"role":"user","content":"tell me about the sea"}]}`))
	req.Header.Set("Authorization", "Bearer secret-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "data: [DONE]") || strings.Count(string(body), `"content"`) < 2 {
		t.Fatalf("a stream through n1 to Ollama on n2: %d %s", resp.StatusCode, tail(string(body), 400))
	}
	code, rep, b := ask(t, n1, "secret-1", "tiny")
	if code != 200 || !strings.HasPrefix(rep, "tiny-") {
		t.Fatalf("a whole answer through n1: %d %s %s", code, rep, b)
	}
	var st llmapi.NodesStatus
	n1.adminGet("/llm/nodes", &st)
	for _, n := range st.Nodes {
		if n.Name == "n1" && n.Failing["tiny"] == "" {
			t.Errorf("n1's heartbeat does not say why it cannot run tiny: %+v", n)
		}
	}
}
