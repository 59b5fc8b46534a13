package llmctl

import (
	"strings"
	"testing"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// TestFailuresAreErrors: a command whose answer says something failed
// returns an error (llmgw exits 1), in every output format, after
// printing what it got.
func TestFailuresAreErrors(t *testing.T) {
	a := newAdmin(t, map[string]answer{
		"POST /llm/models/chat/test": {body: llmapi.ModelTest{Model: "chat", OK: false, Reason: "no replica answers"}},
		"GET /llm/weights":           {body: map[string]any{"nodes": []llmapi.NodeWeights{{Node: "n1", Dir: "/w"}, {Node: "n2", Error: "timeout"}}}},
		"POST /llm/weights/prune":    {body: map[string]any{"nodes": []llmapi.WeightsPruned{{Node: "n1"}, {Node: "n2", Error: "timeout"}}}},
	})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"model", "test", "chat"}, "model chat does not serve: no replica answers"},
		{[]string{"weights"}, "nodes n2 did not answer; the list lacks their weights"},
		{[]string{"weights", "prune"}, "1 nodes were not pruned"},
	} {
		for _, format := range []string{"table", "json", "yaml"} {
			out, _, err := run(t, a, append([]string{"-o", format}, tc.args...)...)
			if err == nil || err.Error() != tc.want {
				t.Errorf("ctl -o %s %s: got %v, want %q", format, strings.Join(tc.args, " "), err, tc.want)
			}
			if format != "table" && !strings.Contains(out, "n") {
				t.Errorf("ctl -o %s %s printed nothing", format, strings.Join(tc.args, " "))
			}
		}
	}
}
