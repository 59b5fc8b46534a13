package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// TestClusterExposeReplica turns on llm_router's expose_replica: every
// answer says which replica and which node served it, local or remote.
func TestClusterExposeReplica(t *testing.T) {
	c := &cluster{t: t, redis: startRedis(t), models: fmt.Sprintf(clusterModels, tenancy.HashKey("secret-1")),
		nodes: map[string]*gateway{}, peer: map[string]string{}, router: "expose_replica"}
	n1 := c.add("n1")
	c.add("n2")
	waitFor(t, 30*time.Second, "three replicas of chat, on both nodes, as n1 sees them", func() bool {
		on := n1.readyOn("chat")
		return len(on) == 3 && strings.Contains(strings.Join(on, ","), "n2")
	})
	nodeOf := map[string]string{}
	for _, r := range n1.models()["chat"].Replicas {
		nodeOf[r.ID] = r.Node
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 6 {
				rep, node, err := servedBy(n1)
				if err != nil {
					t.Error(err)
					return
				}
				if want := nodeOf[rep]; rep == "" || node != want {
					t.Errorf("answer says replica %q on node %q; n1 lists that replica on %q", rep, node, want)
				}
				mu.Lock()
				seen[node] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if !seen["n1"] || !seen["n2"] {
		t.Errorf("48 concurrent requests through n1 name the nodes %v; want n1 and n2", seen)
	}
}

// servedBy asks g once and returns the replica and node its answer names.
func servedBy(g *gateway) (string, string, error) {
	req, _ := http.NewRequest("POST", g.base+"/v1/chat/completions",
		strings.NewReader(`{"model":"chat","max_tokens":3,"messages":[{"role":"user","content":"hello"}]}`))
	req.Header.Set("Authorization", "Bearer secret-1")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", "", err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return "", "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp.Header.Get("X-Llmgw-Replica"), resp.Header.Get("X-Llmgw-Node"), nil
}
