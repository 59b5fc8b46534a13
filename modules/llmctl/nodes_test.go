package llmctl

import (
	"testing"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

func TestNodes(t *testing.T) {
	a := newAdmin(t, map[string]answer{
		"GET /llm/nodes": {body: llmapi.NodesStatus{StoreError: "redis: connection refused", Nodes: []llmapi.NodeInfo{
			{Name: "n1", Version: "v0.16.0", Address: "10.0.0.1:2019", Self: true, Leader: true, Age: "1s", Capacity: llmapi.Amounts{Cores: 8, Memory: 16 << 30},
				Used: llmapi.Amounts{Cores: 2, Memory: 4 << 30}, Replicas: []llmapi.NodeReplica{{ID: "chat-1"}}},
			{Name: "n2", Version: "v0.15.2", Address: "10.0.0.2:2019", Drained: true, Age: "3s", Capacity: llmapi.Amounts{Cores: 4}},
		}, Unplaced: map[string]string{"big": "no node has 80 GiB"}, Versions: map[string][]string{"v0.16.0": {"n1"}, "v0.15.2": {"n2"}}}},
		"POST /llm/nodes/n2/drain":   {body: map[string]any{}},
		"POST /llm/nodes/n2/undrain": {body: map[string]any{}},
	})
	out, _, err := run(t, a, "nodes")
	if err != nil {
		t.Fatal(err)
	}
	check(t, "ctl nodes", out, "warning: redis: connection refused\n"+lines(
		"NODE  VERSION  ADDRESS        HEARTBEAT AGE  CORES  MEMORY          REPLICAS  ",
		"n1    v0.16.0  10.0.0.1:2019  1s             2/8    4.0 GiB/16 GiB  1         self,leader",
		"n2    v0.15.2  10.0.0.2:2019  3s             0/4    0 B/0 B         0         drained",
		"warning: the nodes run different llmgw releases: v0.15.2 on n2; v0.16.0 on n1 (an upgrade under way, or a node left behind: llmgw ctl cluster upgrade)",
		"not fully placed: big: no node has 80 GiB"))
	for _, action := range []string{"drain", "undrain"} {
		if out, _, err = run(t, a, "node", action, "n2"); err != nil {
			t.Fatal(err)
		}
		check(t, action, out, "node n2 "+action+"ed\n")
	}
	checkSent(t, a, "GET /llm/nodes", "POST /llm/nodes/n2/drain", "POST /llm/nodes/n2/undrain")
}
