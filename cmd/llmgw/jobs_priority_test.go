package main

import (
	"fmt"
	"testing"
	"time"
)

// Priorities: while one job holds the only replica, the jobs queued after
// it wait high first, then normal, then low, whatever the order they came
// in and whichever project sent them (the place each is told is the
// order the queue picks them in); all of them succeed.
func TestJobsPriorities(t *testing.T) {
	g := jobsGateway(t, picturesModel)
	g.readyReplicas("pictures", 1)
	_, hold, raw := jobCall(t, g, "secret-1", "POST", "/v1/jobs", `{"model":"pictures","workflow":`+workflow("60")+`}`)
	if hold.ID == "" {
		t.Fatalf("POST /v1/jobs: %s", raw)
	}
	waitFor(t, 20*time.Second, "the first job running", func() bool {
		_, v, _ := jobCall(t, g, "secret-1", "GET", "/v1/jobs/"+hold.ID, "")
		return v.State == "running"
	})
	prio := map[string]string{}
	var ids []string
	for i, p := range []string{"low", "normal", "high", "low", "high", "normal", "low", "high", "normal", "low"} {
		key := []string{"secret-1", "secret-3"}[i%2]
		_, j, raw := jobCall(t, g, key, "POST", "/v1/jobs", fmt.Sprintf(`{"model":"pictures","priority":%q,"workflow":%s}`, p, workflow("2")))
		if j.ID == "" {
			t.Fatalf("POST /v1/jobs (%s): %s", p, raw)
		}
		prio[j.ID] = p
		ids = append(ids, j.ID)
	}
	fams := scrape(t, g)
	queued, _ := value(fams, "llmgw_jobs", map[string]string{"model": "pictures", "state": "queued"})
	running, _ := value(fams, "llmgw_jobs", map[string]string{"model": "pictures", "state": "running"})
	if queued != 10 || running != 1 {
		t.Errorf("llmgw_jobs: %v queued, %v running; want 10 and 1", queued, running)
	}
	rank := map[string]int{"high": 0, "normal": 1, "low": 2}
	pos := map[string]int{}
	for _, id := range ids {
		key := "secret-1"
		if _, v, _ := jobCall(t, g, key, "GET", "/v1/jobs/"+id, ""); v.ID == "" {
			key = "secret-3"
		}
		_, v, raw := jobCall(t, g, key, "GET", "/v1/jobs/"+id, "")
		if v.State != "queued" || v.QueuePosition == nil {
			t.Fatalf("job %s while the first holds the replica: %s", id, raw)
		}
		pos[id] = *v.QueuePosition
	}
	for _, a := range ids {
		for _, b := range ids {
			if rank[prio[a]] < rank[prio[b]] && pos[a] >= pos[b] {
				t.Errorf("a %s job (place %d) waits behind a %s one (place %d)", prio[a], pos[a], prio[b], pos[b])
			}
		}
	}
	for _, id := range ids {
		key := "secret-1"
		if _, v, _ := jobCall(t, g, key, "GET", "/v1/jobs/"+id, ""); v.ID == "" {
			key = "secret-3"
		}
		if seen := followJob(t, g, key, id); seen[len(seen)-1].State != "succeeded" {
			t.Fatalf("job %s: %+v", id, seen[len(seen)-1])
		}
	}
	fams = scrape(t, g)
	if v, _ := value(fams, "llmgw_jobs_finished_total", map[string]string{"model": "pictures", "state": "succeeded"}); v != 11 {
		t.Errorf("llmgw_jobs_finished_total{succeeded} is %v after 11 jobs", v)
	}
	if v, _ := value(fams, "llmgw_jobs_run_seconds", map[string]string{"model": "pictures"}); v != 11 {
		t.Errorf("llmgw_jobs_run_seconds counts %v runs, want 11", v)
	}
	if v, _ := value(fams, "llmgw_jobs", map[string]string{"model": "pictures", "state": "queued"}); v != 0 {
		t.Errorf("llmgw_jobs{queued} is %v once every job ended", v)
	}
}
