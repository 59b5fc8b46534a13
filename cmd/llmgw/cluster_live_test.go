package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// clusterContext is the context length the replica that answered a
// request through g runs with, as the sim engine reports it.
func clusterContext(t *testing.T, g *gateway, model string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", g.base+"/v1/chat/completions", strings.NewReader(`{"model":"`+model+`","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`))
	req.Header.Set("Authorization", "Bearer secret-1")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("chat through %s: %d", g.base, resp.StatusCode)
	}
	return resp.Header.Get("X-Sim-Context-Length") + "@" + resp.Header.Get("X-Llm-Replica")
}

// TestClusterLiveChange: a model's context length changed through one
// node's admin API in a cluster: every node replaces its replicas with
// ones running the new value, while requests through both nodes go on
// without an error and 32 streams open through both run to their end.
func TestClusterLiveChange(t *testing.T) {
	c := startCluster(t, 2, fmt.Sprintf(clusterModels, tenancy.HashKey("secret-1")))
	n1, n2 := c.nodes["n1"], c.nodes["n2"]
	waitFor(t, 30*time.Second, "both nodes in the cluster", func() bool { return len(n1.nodes().Nodes) == 2 && len(n2.nodes().Nodes) == 2 })
	if code, raw := n1.adminPost("/llm/models", `{"name":"d","engine":"sim","options":{"ttft":"5ms","tokens_per_second":"20"},"context_length":2048,"scaling":{"min":2,"max":2}}`); code != 201 {
		t.Fatalf("add: %d %s", code, raw)
	}
	waitFor(t, 30*time.Second, "shape on both nodes", func() bool { return slices.Equal(n2.readyOn("d"), []string{"n1", "n2"}) })
	for _, g := range []*gateway{n1, n2} {
		if got := clusterContext(t, g, "d"); !strings.HasPrefix(got, "2048@") {
			t.Fatalf("before the change: context %s", got)
		}
	}

	streams := updatesKeyStreams(t, []*gateway{n1, n2}, "secret-1", 32, drainTokens)
	l := steadyLoad(t, func() []*gateway { return []*gateway{n1, n2} }, "secret-1", "d", 8)
	code, raw := n1.adminPost("/llm/models/d/settings", `{"context_length":4096}`)
	ok, failed := l.end()
	checkStreams(t, "live change in a cluster", streams, 32, drainTokens)
	if code != 200 {
		t.Fatalf("live change in a cluster: %d %s", code, raw)
	}
	var ro llmapi.Rollout
	if err := json.Unmarshal(raw, &ro); err != nil || len(ro.Replaced) != 2 || len(ro.Started) != 2 {
		t.Fatalf("the rollout: %v %s", err, raw)
	}
	t.Logf("%d requests served during the change: %s", ok, ro.Note)
	if len(failed) > 0 {
		t.Errorf("requests failed during a live change in a cluster: %v", failed)
	}
	// Every replica, on both nodes, runs with the new context length.
	waitFor(t, 30*time.Second, "shape back on both nodes", func() bool { return slices.Equal(n2.readyOn("d"), []string{"n1", "n2"}) })
	for i := range 20 {
		g := []*gateway{n1, n2}[i%2]
		got := clusterContext(t, g, "d")
		if !strings.HasPrefix(got, "4096@") {
			t.Errorf("after the change, through %s: context@replica %s, want 4096", g.base, got)
		}
	}
	// The change is the cluster's: a node restarted later keeps it.
	n2.stop()
	n2.start()
	waitFor(t, 60*time.Second, "shape back on both nodes after n2's restart", func() bool { return slices.Equal(n1.readyOn("d"), []string{"n1", "n2"}) })
	for range 6 {
		if got := clusterContext(t, n2, "d"); !strings.HasPrefix(got, "4096@") {
			t.Errorf("after n2 restarted: %s, want 4096", got)
		}
	}
}
