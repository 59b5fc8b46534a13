package llmctl

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

func TestModelPlan(t *testing.T) {
	file := filepath.Join(t.TempDir(), "model.json")
	if err := os.WriteFile(file, []byte(`{"name": "big", "engine": "vllm", "resources": {"gpus": 2}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	a := newAdmin(t, map[string]answer{"POST /llm/plan": {body: llmapi.Plan{Model: "big", Fits: false,
		Replicas:    []llmapi.PlannedReplica{{Node: "n1", Resources: llmapi.Amounts{Memory: 8 << 30, Cores: 4, GPUs: 2}, GPUs: []int{0, 1}}},
		Evict:       []llmapi.PlannedEviction{{Model: "toy", Replica: "toy-1", Class: "opportunistic", Resources: llmapi.Amounts{GPUs: 1}}},
		Missing:     &llmapi.Amounts{GPUs: 1},
		Reason:      "one GPU short",
		Note:        "counted without the drained node n2",
		SourceCheck: &llmapi.SourceCheck{Checked: false, Note: "only the nodes reach it"},
	}}})
	out, _, err := run(t, a, "model", "plan", "-f", file)
	if err != nil {
		t.Fatal(err)
	}
	check(t, "ctl model plan", out, lines(
		"model big does not fit (source not checked: only the nodes reach it)",
		"  replica 1 on node n1: 8.0 GiB memory, 4 cores, 2 GPUs on GPUs 0,1",
		"  stops opportunistic replica toy-1 of toy (frees 1 GPUs)",
		"  missing: 1 GPUs; one GPU short",
		"  note: counted without the drained node n2"))
	checkSent(t, a, `POST /llm/plan {"engine":"vllm","name":"big","resources":{"gpus":2}}`)
	if _, _, err := run(t, a, "model", "plan"); err == nil || err.Error() != "give the model's file with -f model.yaml" {
		t.Errorf("no file: got %v", err)
	}
}
