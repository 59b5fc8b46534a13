package main

import (
	"testing"
	"time"
)

// A replica running a job is retired only when the job ends: the
// model's restart starts a new replica beside it, the old one drains
// while its job runs on to succeeded, and then it stops.
func TestJobsDrainWithTheirReplica(t *testing.T) {
	g := jobsGateway(t, picturesModel)
	old := g.readyReplicas("pictures", 1)[0].ID
	_, j, raw := jobCall(t, g, "secret-1", "POST", "/v1/jobs", `{"model":"pictures","workflow":`+workflow("150")+`}`)
	if j.ID == "" {
		t.Fatalf("POST /v1/jobs: %s", raw)
	}
	waitFor(t, 20*time.Second, "the job running", func() bool {
		_, v, _ := jobCall(t, g, "secret-1", "GET", "/v1/jobs/"+j.ID, "")
		return v.State == "running"
	})
	if code, body := g.adminPost("/llm/models/pictures/restart", ""); code != 200 {
		t.Fatalf("restarting the model: %d %s", code, body)
	}
	var draining bool
	for _, r := range g.models()["pictures"].Replicas {
		if r.ID == old && r.State == "draining" {
			draining = true
		}
	}
	_, v, _ := jobCall(t, g, "secret-1", "GET", "/v1/jobs/"+j.ID, "")
	if !draining || v.State != "running" {
		t.Fatalf("once the new replica is ready, the old one drains while its job runs: draining %v, job %+v, replicas %+v", draining, v, g.models()["pictures"].Replicas)
	}
	seen := followJob(t, g, "secret-1", j.ID)
	if last := seen[len(seen)-1]; last.State != "succeeded" || last.Replica != old {
		t.Fatalf("the job on the draining replica: %+v", last)
	}
	waitFor(t, 20*time.Second, "the old replica gone once its job ended", func() bool {
		for _, r := range g.models()["pictures"].Replicas {
			if r.ID == old {
				return false
			}
		}
		return true
	})
}
