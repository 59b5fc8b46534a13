package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// TestClusterModelRestart: POST /llm/models/<name>/restart in a cluster
// replaces the model's replicas on every node that runs some, node by
// node, while requests through both nodes go on without an error.
func TestClusterModelRestart(t *testing.T) {
	c := startCluster(t, 2, fmt.Sprintf(clusterModels, tenancy.HashKey("secret-1")))
	n1, n2 := c.nodes["n1"], c.nodes["n2"]
	ids := func() []string {
		var st llmapi.ModelStatus
		n2.adminGet("/llm/models/chat", &st)
		var out []string
		for _, r := range st.Replicas {
			if r.State == string(fleet.ReplicaReady) {
				out = append(out, r.ID)
			}
		}
		slices.Sort(out)
		return out
	}
	var on []string
	deadline := time.Now().Add(30 * time.Second)
	for on = n1.readyOn("chat"); len(on) < 3 && time.Now().Before(deadline); on = n1.readyOn("chat") {
		time.Sleep(100 * time.Millisecond)
	}
	if len(on) < 3 {
		t.Fatalf("chat ready on %v, want three replicas", on)
	}
	before := ids()
	l := steadyLoad(t, func() []*gateway { return []*gateway{n1, n2} }, "secret-1", "chat", 16)
	code, body := n1.adminPost("/llm/models/chat/restart", "")
	ok, failed := l.end()
	if code != 200 {
		t.Fatalf("restart in a cluster: %d %s", code, body)
	}
	var ro llmapi.Rollout
	if err := json.Unmarshal(body, &ro); err != nil || len(ro.Replaced) == 0 || len(ro.Started) != len(ro.Replaced) {
		t.Fatalf("the rollout: %v %s", err, body)
	}
	t.Logf("%d requests served during the restart", ok)
	if len(failed) > 0 {
		t.Errorf("requests failed during a cluster restart: %v", failed)
	}
	// The old replicas are gone; the model is served by new ones (the
	// cluster's plan may have moved some since, so their number is not
	// checked here).
	waitFor(t, 30*time.Second, "only new replicas ready", func() bool {
		now := ids()
		if len(now) == 0 {
			return false
		}
		for _, id := range now {
			if slices.Contains(before, id) || slices.Contains(ro.Replaced, id) {
				return false
			}
		}
		return true
	})
}
