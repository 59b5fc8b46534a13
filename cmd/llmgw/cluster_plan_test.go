package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// TestClusterPlan: POST /llm/plan in a cluster says which nodes a model's
// replicas would go to, the same nodes a real add then gives them, and
// why a model that fits nowhere would wait; nothing changes.
func TestClusterPlan(t *testing.T) {
	c := startCluster(t, 2, fmt.Sprintf(clusterModels, tenancy.HashKey("secret-1")))
	n1, n2 := c.nodes["n1"], c.nodes["n2"]
	waitFor(t, 30*time.Second, "both nodes in the cluster", func() bool { return len(n1.nodes().Nodes) == 2 && len(n2.nodes().Nodes) == 2 })

	const body = `{"name":"planned","engine":"sim","scaling":{"min":2,"max":2}}`
	code, raw := n2.adminPost("/llm/plan", body)
	var pl llmapi.Plan
	if code != 200 || json.Unmarshal(raw, &pl) != nil {
		t.Fatalf("plan in a cluster: %d %s", code, raw)
	}
	var planned []string
	for _, r := range pl.Replicas {
		planned = append(planned, r.Node)
	}
	slices.Sort(planned)
	if !pl.Fits || len(planned) != 2 {
		t.Fatalf("plan: %s", raw)
	}
	if _, ok := n1.models()["planned"]; ok {
		t.Fatal("a plan added the model")
	}
	// The real add, through the other node, does what the plan said.
	if code, raw := n1.adminPost("/llm/models", body); code != 201 {
		t.Fatalf("add: %d %s", code, raw)
	}
	waitFor(t, 30*time.Second, "planned's two replicas ready", func() bool { return len(n2.readyOn("planned")) == 2 })
	if got := n2.readyOn("planned"); !slices.Equal(got, planned) {
		t.Errorf("the add placed planned on %v; the plan said %v", got, planned)
	}

	// A model no node can hold: the plan says why, as the model's state would.
	code, raw = n1.adminPost("/llm/plan", `{"name":"huge","engine":"sim","resources":{"memory":1099511627776000},"scaling":{"min":1}}`)
	if code != 200 || json.Unmarshal(raw, &pl) != nil || pl.Fits || len(pl.Replicas) != 0 || !strings.Contains(pl.Reason, "memory") {
		t.Errorf("plan of a model too big for every node: %d %s", code, raw)
	}
	// A bad model is refused as an add would refuse it.
	if code, raw = n1.adminPost("/llm/plan", `{"name":"chat","engine":"sim"}`); code != 400 {
		t.Errorf("plan of a name the catalog has: %d %s, want 400", code, raw)
	}
}
