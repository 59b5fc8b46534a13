package fleet

import (
	"testing"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"go.uber.org/zap"
)

// A clustered node that had no room for a replica the plan gave it says
// so in its heartbeat (the planner then places the model elsewhere and
// avoids this node for it); once the plan no longer gives it that
// replica, the reason must go, or the node is left out of the model's
// placement for good.
func TestClusteredFleetForgetsNoRoomWhenUnassigned(t *testing.T) {
	node := NewNode()
	node.Ledger.SetCapacity(&catalog.Resources{Memory: 4 << 30, Cores: 4}, false)
	m := &catalog.Model{Name: "big", Engine: "openai", Resources: &catalog.Resources{Memory: 5 << 30, Cores: 1}}
	f := New(m, nil, zap.NewNop(), Options{Clustered: true, Node: node})
	defer f.cancel()

	f.SetCluster("n1", 1, nil, "", nil)
	f.Tick()
	f.mu.Lock()
	why := f.waitFor
	f.mu.Unlock()
	if why == "" {
		t.Fatal("a replica that does not fit the node: want a reason in waitFor, got none")
	}

	f.SetCluster("n1", 0, nil, "", nil) // the plan moved it to another node
	f.Tick()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.waitFor != "" {
		t.Fatalf("the plan gives this node no replica of the model, but it still reports %q (the planner will never place it here again)", f.waitFor)
	}
}
