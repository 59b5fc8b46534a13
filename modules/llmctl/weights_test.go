package llmctl

import (
	"testing"

	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

func TestWeights(t *testing.T) {
	a := newAdmin(t, map[string]answer{
		"GET /llm/weights?node=n1": {body: map[string]any{"nodes": []llmapi.NodeWeights{{Node: "n1", Dir: "/var/cache/w", UnusedBytes: 2 << 30, UsedBytes: 1 << 30,
			Unused: []llmapi.WeightsEntry{{CacheEntry: mirror.CacheEntry{Path: "old/v1", Size: 2 << 30, Files: 3}}},
			Used:   []llmapi.WeightsEntry{{CacheEntry: mirror.CacheEntry{Path: "chat/v2", Size: 1 << 30, Files: 1}, UsedBy: []string{"chat"}}}}}}},
		"POST /llm/weights/prune?dry_run=true": {body: map[string]any{"nodes": []llmapi.WeightsPruned{
			{Node: "n1", DryRun: true, Removed: []mirror.CacheEntry{{Path: "old/v1", Size: 2 << 30}}, Freed: 2 << 30},
			{Node: "n2", Error: "not reachable"},
			{Node: "n3", Note: "no weights directory"},
		}}},
	})
	out, _, err := run(t, a, "weights", "--node", "n1", "--all")
	if err != nil {
		t.Fatal(err)
	}
	check(t, "ctl weights", out, "n1: 2.0 GiB unused, 1.0 GiB used, in /var/cache/w\n"+lines(
		"NODE  PATH     SIZE     FILES  STATE",
		"n1    old/v1   2.0 GiB  3      unused",
		"n1    chat/v2  1.0 GiB  1      used by chat"))
	// A node that was not pruned makes the command fail, after the others.
	out, _, err = run(t, a, "weights", "prune", "--dry-run")
	if err == nil || err.Error() != "1 nodes were not pruned" {
		t.Errorf("got %v", err)
	}
	check(t, "ctl weights prune", out, lines(
		"n1: would remove old/v1 (2.0 GiB)",
		"n1: would remove 1 entries, 2.0 GiB",
		"n2: not pruned: not reachable",
		"n3: no weights directory"))
	checkSent(t, a, "GET /llm/weights?node=n1", `POST /llm/weights/prune?dry_run=true {"dry_run":true}`)
}
