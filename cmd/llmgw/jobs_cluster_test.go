package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// In a cluster, a job queued on a node without a replica of its model
// runs on another node's replica (through the node-to-node endpoint,
// which carries no WebSocket: the job's end is read from the replica's
// history); its outputs are fetched where it was queued, and the Images
// API works the same way.
func TestJobsInCluster(t *testing.T) {
	c := &cluster{t: t, redis: startRedis(t), nodes: map[string]*gateway{}, peer: map[string]string{}, before: "\t\tllm_jobs\n",
		models: fmt.Sprintf(clusterModels, tenancy.HashKey("secret-1")) + `
		model pictures {
			engine simimage
			option step_time 10ms
			target_concurrency 1
			resources {
				memory 2GiB
			}
		}`,
		extra: map[string]string{
			"n1": "node {\n\t\t\tmemory 1GiB\n\t\t}",
			"n2": "node {\n\t\t\tmemory 8GiB\n\t\t}",
		}}
	n1 := c.add("n1")
	c.add("n2")
	waitFor(t, 60*time.Second, "pictures ready on n2, as n1 sees it", func() bool {
		return slices.Equal(n1.readyOn("pictures"), []string{"n2"})
	})
	code, j, raw := jobCall(t, n1, "secret-1", "POST", "/v1/jobs", `{"model":"pictures","workflow":`+workflow("5")+`}`)
	if code != 200 || j.ID == "" {
		t.Fatalf("a job queued on n1: %d %s", code, raw)
	}
	seen := followJob(t, n1, "secret-1", j.ID)
	last := seen[len(seen)-1]
	if last.State != "succeeded" || !strings.HasPrefix(last.Replica, "pictures-") || len(last.Outputs) != 1 {
		t.Fatalf("the job queued on n1, run on n2's replica: %+v", last)
	}
	if code, _, png := jobCall(t, n1, "secret-1", "GET", "/v1/jobs/"+j.ID+"/outputs/0", ""); code != 200 || !strings.HasPrefix(png, "\x89PNG") {
		t.Errorf("its output through n1: %d %.40q", code, png)
	}
	code, _, raw = jobCall(t, n1, "secret-1", "POST", "/v1/images/generations", `{"model":"pictures","prompt":"a harbour at night","size":"64x64"}`)
	if code != 200 || !strings.Contains(raw, `"b64_json"`) {
		t.Errorf("images.generate through n1: %d %.300s", code, raw)
	}
	// A bad workflow is refused by n2's replica, and says so on n1.
	bad := strings.Replace(workflow("2"), `"KSampler"`, `"NoSuchSampler"`, 1)
	_, j, _ = jobCall(t, n1, "secret-1", "POST", "/v1/jobs", `{"model":"pictures","workflow":`+bad+`}`)
	seen = followJob(t, n1, "secret-1", j.ID)
	if last := seen[len(seen)-1]; last.State != "failed" || last.Error == nil || !strings.Contains(last.Error.Message, "NoSuchSampler") {
		t.Errorf("a workflow the remote replica refuses: %+v", last)
	}
}
