package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm"
)

// clusterSecret is the test clusters' credential.
const clusterSecret = "test-cluster-secret-0123456789abcdef0123456789"

// cluster is real llmgw nodes sharing one real Redis, each node on its
// own loopback address (127.0.0.2, 127.0.0.3, …) for node-to-node
// traffic.
type cluster struct {
	t      *testing.T
	redis  *redisServer
	models string // the llm block's models and tenancy, the same on every node
	nodes  map[string]*gateway
	peer   map[string]string // node → its node-to-node address
}

func startCluster(t *testing.T, n int, models string) *cluster {
	t.Helper()
	c := &cluster{t: t, redis: startRedis(t), models: models, nodes: map[string]*gateway{}, peer: map[string]string{}}
	for i := 1; i <= n; i++ {
		c.add(fmt.Sprintf("n%d", i))
	}
	return c
}

// add starts a node named name on 127.0.0.<its number + 1>.
func (c *cluster) add(name string) *gateway {
	t := c.t
	t.Helper()
	ip := fmt.Sprintf("127.0.0.%d", 1+len(c.peer)+1)
	if addr, ok := c.peer[name]; ok {
		ip = strings.Split(addr, ":")[0]
	} else {
		c.peer[name] = fmt.Sprintf("%s:%d", ip, freePort(t))
	}
	block := fmt.Sprintf(`
		cluster {
			redis %s
			node %s
			advertise %s
			secret %s
			heartbeat 250ms
			node_ttl 2s
		}
		%s`, c.redis.url(), name, c.peer[name], clusterSecret, c.models)
	quota := ""
	g := startQuotaGateway(t, block, quota)
	c.nodes[name] = g
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

func (g *gateway) nodes() llm.NodesStatus {
	var st llm.NodesStatus
	g.adminGet("/llm/nodes", &st)
	return st
}

// readyOn returns, for a model, the nodes of its ready replicas as g
// sees them.
func (g *gateway) readyOn(model string) []string {
	var on []string
	for _, r := range g.models()[model].Replicas {
		if r.State == llm.ReplicaReady {
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
		t.Fatal(err)
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
	c := startCluster(t, 3, fmt.Sprintf(clusterModels, llm.HashKey("secret-1")))
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

	// kill -9 of a node: no request that had not reached its first byte
	// fails, and its replica runs on another node within the node TTL
	// plus the start time.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var mu sync.Mutex
	failed := map[string]int{}
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				code, _, body := ask(t, n1, "secret-1", "chat")
				if code != 200 {
					mu.Lock()
					failed[fmt.Sprintf("%d %s", code, body)]++
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	killed := time.Now()
	_ = n2.cmd.Process.Kill()
	<-n2.exited
	waitFor(t, 30*time.Second, "chat to have three ready replicas again without n2", func() bool {
		on := n1.readyOn("chat")
		return len(on) == 3 && !slices.Contains(on, "n2")
	})
	t.Logf("n2 killed: its replica ran again on another node after %s (node_ttl 2s)", time.Since(killed).Round(10*time.Millisecond))
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	if len(failed) > 0 {
		t.Errorf("requests failed while a node was killed: %v", failed)
	}
}
