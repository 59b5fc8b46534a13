package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/mirror/s3test"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// With the mirror's S3 stores (versitygw) configured, a job's outputs go
// to both stores and leave the data directory; they are served with one
// store down, and the retention removes them from the stores (here at
// the restart after it has passed).
func TestJobOutputsInMirror(t *testing.T) {
	a, b := s3test.Start(t), s3test.Start(t)
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{}),
		quota: new(string), before: "\t\tllm_jobs {\n\t\t\tretention 3s\n\t\t}\n"}
	g.writeConfig(picturesModel+mirrorBlock(t, a, b, filepath.Join(t.TempDir(), "cache"))+`
		org acme {
			team research {
				project alpha {
					key k1 `+tenancy.HashKey("secret-1")+`
				}
			}
		}`, "")
	g.start()
	g.readyReplicas("pictures", 1)
	_, j, raw := jobCall(t, g, "secret-1", "POST", "/v1/jobs", `{"model":"pictures","workflow":`+workflow("2")+`}`)
	if j.ID == "" {
		t.Fatalf("POST /v1/jobs: %s", raw)
	}
	seen := followJob(t, g, "secret-1", j.ID)
	if last := seen[len(seen)-1]; last.State != "succeeded" || len(last.Outputs) != 1 {
		t.Fatalf("the job: %+v", last)
	}
	key := "llmgw/jobs/outputs/" + j.ID + "/0"
	for name, s := range map[string]*s3test.Server{"a": a, "b": b} {
		got, err := os.ReadFile(s.ObjectPath("weights", key))
		if err != nil || !strings.HasPrefix(string(got), "\x89PNG") {
			t.Fatalf("store %s does not hold the job's picture: %v", name, err)
		}
	}
	jobDir := filepath.Join(g.dir, "data", "caddy", "llm", "jobs", j.ID)
	if _, err := os.Stat(filepath.Join(jobDir, "job.json")); err != nil {
		t.Fatalf("the job's record: %v", err)
	}
	if _, err := os.Stat(filepath.Join(jobDir, "outputs", "0")); !os.IsNotExist(err) {
		t.Errorf("the picture is still in the data directory too: %v", err)
	}
	a.Kill()
	if code, _, png := jobCall(t, g, "secret-1", "GET", "/v1/jobs/"+j.ID+"/outputs/0", ""); code != 200 || !strings.HasPrefix(png, "\x89PNG") {
		t.Errorf("the picture with one store down: %d %.60q", code, png)
	}
	a.Restart()
	time.Sleep(4 * time.Second) // past the retention
	g.stop()
	g.start()
	waitFor(t, 20*time.Second, "the outputs removed from the stores", func() bool {
		_, errA := os.Stat(a.ObjectPath("weights", key))
		_, errB := os.Stat(b.ObjectPath("weights", key))
		return os.IsNotExist(errA) && os.IsNotExist(errB)
	})
	if code, _, raw := jobCall(t, g, "secret-1", "GET", "/v1/jobs/"+j.ID, ""); code != 404 {
		t.Errorf("the job past its retention: %d %s", code, raw)
	}
}
