package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// comfyTxt2img is ComfyUI's default workflow as its Export (API) writes
// it, with steps and size to fill in.
const comfyTxt2img = `{
  "3": {"inputs": {"seed": 156680208700286, "steps": STEPS, "cfg": 8, "sampler_name": "euler", "scheduler": "normal", "denoise": 1,
        "model": ["4", 0], "positive": ["6", 0], "negative": ["7", 0], "latent_image": ["5", 0]}, "class_type": "KSampler", "_meta": {"title": "KSampler"}},
  "4": {"inputs": {"ckpt_name": "v1-5-pruned-emaonly.safetensors"}, "class_type": "CheckpointLoaderSimple", "_meta": {"title": "Load Checkpoint"}},
  "5": {"inputs": {"width": 320, "height": 192, "batch_size": 1}, "class_type": "EmptyLatentImage", "_meta": {"title": "Empty Latent Image"}},
  "6": {"inputs": {"text": "a lighthouse on a cliff at dusk, oil painting", "clip": ["4", 1]}, "class_type": "CLIPTextEncode", "_meta": {"title": "Positive"}},
  "7": {"inputs": {"text": "blurry, watermark", "clip": ["4", 1]}, "class_type": "CLIPTextEncode", "_meta": {"title": "Negative"}},
  "8": {"inputs": {"samples": ["3", 0], "vae": ["4", 2]}, "class_type": "VAEDecode", "_meta": {"title": "VAE Decode"}},
  "9": {"inputs": {"filename_prefix": "llmgw", "images": ["8", 0]}, "class_type": "SaveImage", "_meta": {"title": "Save Image"}}
}`

func workflow(steps string) string { return strings.Replace(comfyTxt2img, "STEPS", steps, 1) }

// jobView is a job as GET /v1/jobs/{id} shows it.
type jobView struct {
	ID            string  `json:"id"`
	Object        string  `json:"object"`
	Model         string  `json:"model"`
	State         string  `json:"state"`
	Replica       string  `json:"replica"`
	Progress      float64 `json:"progress"`
	QueuePosition *int    `json:"queue_position"`
	Node          *struct {
		ID        string `json:"id"`
		ClassType string `json:"class_type"`
		Step      int    `json:"step"`
		Steps     int    `json:"steps"`
	} `json:"node"`
	Error   *struct{ Code, Message string } `json:"error"`
	Outputs []struct {
		Index       int    `json:"index"`
		Node        string `json:"node"`
		ContentType string `json:"content_type"`
		Bytes       int64  `json:"bytes"`
		URL         string `json:"url"`
	} `json:"outputs"`
}

// jobCall makes one call of the jobs API with key and decodes a job.
func jobCall(t *testing.T, g *gateway, key, method, path, body string) (int, jobView, string) {
	t.Helper()
	req, _ := http.NewRequest(method, g.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var j jobView
	_ = json.Unmarshal(raw, &j)
	return resp.StatusCode, j, string(raw)
}

// followJob reads GET /v1/jobs/{id}/events to the job's end and returns
// every state it showed.
func followJob(t *testing.T, g *gateway, key, id string) []jobView {
	t.Helper()
	req, _ := http.NewRequest("GET", g.base+"/v1/jobs/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	c := &http.Client{Timeout: 60 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var seen []jobView
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok && event == "job" {
			var j jobView
			if err := json.Unmarshal([]byte(d), &j); err != nil {
				t.Fatalf("event data %s: %v", d, err)
			}
			seen = append(seen, j)
		}
	}
	return seen
}

func jobsGateway(t *testing.T, models string) *gateway {
	t.Helper()
	return jobsGatewayWith(t, models, "")
}

// jobsGatewayWith is jobsGateway with more routes on its site (such as
// llm_admin's).
func jobsGatewayWith(t *testing.T, models, routes string) *gateway {
	t.Helper()
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{}),
		quota: new(string), before: "\t\tllm_jobs\n", routes: routes}
	g.writeConfig(models+tenancyBlock("", "", "", "")+`
		org acme2 {
			team sales {
				project beta {
					key k3 `+tenancy.HashKey("secret-3")+`
				}
			}
		}
		model chat {
			engine sim
		}`, "")
	g.start()
	return g
}

const picturesModel = `
		model pictures {
			engine simimage
			option step_time 20ms
			target_concurrency 1
		}`

// A workflow in ComfyUI's API format runs as a job on a simimage
// replica: queued at once, followed through server-sent events to
// succeeded with its progress and node, its picture fetched as a PNG of
// the asked size. Another project does not see it. Bad requests get a
// 4xx in OpenAI's format that says what to do.
func TestJobs(t *testing.T) {
	g := jobsGateway(t, picturesModel)
	g.readyReplicas("pictures", 1)
	code, j, raw := jobCall(t, g, "secret-1", "POST", "/v1/jobs", `{"model":"pictures","workflow":`+workflow("10")+`,"metadata":{"ticket":"T-1"}}`)
	if code != 200 || j.Object != "job" || j.Model != "pictures" || (j.State != "queued" && j.State != "running") {
		t.Fatalf("POST /v1/jobs: %d %s", code, raw)
	}
	seen := followJob(t, g, "secret-1", j.ID)
	last := seen[len(seen)-1]
	if last.State != "succeeded" || last.Progress != 1 || len(last.Outputs) != 1 {
		t.Fatalf("the job ended %+v after %d events", last, len(seen))
	}
	var sampling bool
	for _, s := range seen {
		if s.State == "running" && s.Node != nil && s.Node.ClassType == "KSampler" && s.Node.Steps == 10 && s.Progress > 0 && s.Progress < 1 {
			sampling = true
		}
	}
	if !sampling {
		for _, s := range seen {
			if s.Node != nil {
				t.Logf("node %+v progress %v", *s.Node, s.Progress)
			}
		}
		t.Errorf("no event showed the job sampling with its progress: %+v", seen)
	}
	out := last.Outputs[0]
	if out.Node != "9" || out.ContentType != "image/png" || out.URL != "/v1/jobs/"+j.ID+"/outputs/0" {
		t.Errorf("output: %+v", out)
	}
	req, _ := http.NewRequest("GET", g.base+out.URL, nil)
	req.Header.Set("Authorization", "Bearer secret-2") // another key of the same project
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	pic, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cfg, err := png.DecodeConfig(bytes.NewReader(pic))
	if resp.StatusCode != 200 || err != nil || cfg.Width != 320 || cfg.Height != 192 || int64(len(pic)) != out.Bytes {
		t.Errorf("the output: %d, %v, %+v, %d bytes", resp.StatusCode, err, cfg, len(pic))
	}
	// Another project does not see the job.
	for _, path := range []string{"/v1/jobs/" + j.ID, out.URL, "/v1/jobs/" + j.ID + "/events"} {
		if code, _, raw := jobCall(t, g, "secret-3", "GET", path, ""); code != 404 || !strings.Contains(raw, "job_not_found") {
			t.Errorf("GET %s by another project: %d %s", path, code, raw)
		}
	}
	if code, _, raw := jobCall(t, g, "secret-3", "DELETE", "/v1/jobs/"+j.ID, ""); code != 404 {
		t.Errorf("DELETE by another project: %d %s", code, raw)
	}
	if code, _, raw := jobCall(t, g, "secret-1", "DELETE", "/v1/jobs/"+j.ID, ""); code != 409 || !strings.Contains(raw, "already succeeded") {
		t.Errorf("DELETE of a finished job: %d %s", code, raw)
	}
	var list struct {
		Data []jobView `json:"data"`
	}
	_, _, raw = jobCall(t, g, "secret-2", "GET", "/v1/jobs", "")
	if json.Unmarshal([]byte(raw), &list) != nil || len(list.Data) != 1 || list.Data[0].ID != j.ID {
		t.Errorf("GET /v1/jobs: %s", raw)
	}

	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct {
			name, body string
			code       int
			want       string
		}{
			{"a text model", `{"model":"chat","workflow":` + workflow("2") + `}`, 400, "does not run workflows"},
			{"an unknown model", `{"model":"nope","workflow":` + workflow("2") + `}`, 404, "does not exist"},
			{"no model", `{"workflow":` + workflow("2") + `}`, 400, "model is required"},
			{"no workflow", `{"model":"pictures"}`, 400, "workflow is required"},
			{"the UI format", `{"model":"pictures","workflow":{"nodes":[{"id":3,"type":"KSampler"}],"links":[]}}`, 400, "Export (API)"},
			{"a bad priority", `{"model":"pictures","priority":"urgent","workflow":` + workflow("2") + `}`, 400, "use high, normal or low"},
			{"an unknown field", `{"model":"pictures","prompt":"x","workflow":` + workflow("2") + `}`, 400, "unknown field"},
		} {
			code, _, raw := jobCall(t, g, "secret-1", "POST", "/v1/jobs", tc.body)
			if code != tc.code || !strings.Contains(raw, tc.want) || !strings.Contains(raw, `"error"`) {
				t.Errorf("%s: %d %s, want %d saying %q", tc.name, code, raw, tc.code, tc.want)
			}
		}
		// A workflow the model's server refuses fails with its reason.
		_, j, _ := jobCall(t, g, "secret-1", "POST", "/v1/jobs", `{"model":"pictures","workflow":`+strings.Replace(workflow("2"), `"VAEDecode"`, `"VAEDecodeTurbo"`, 1)+`}`)
		seen := followJob(t, g, "secret-1", j.ID)
		if last := seen[len(seen)-1]; last.State != "failed" || last.Error == nil || last.Error.Code != "invalid_workflow" || !strings.Contains(last.Error.Message, "VAEDecodeTurbo") {
			t.Errorf("a workflow with an unknown node: %+v", last)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		_, long, _ := jobCall(t, g, "secret-1", "POST", "/v1/jobs", `{"model":"pictures","workflow":`+workflow("1000")+`}`)
		_, queued, _ := jobCall(t, g, "secret-1", "POST", "/v1/jobs", `{"model":"pictures","workflow":`+workflow("5")+`}`)
		waitFor(t, 20*time.Second, "the long job running", func() bool {
			_, v, _ := jobCall(t, g, "secret-1", "GET", "/v1/jobs/"+long.ID, "")
			return v.State == "running" && v.Node != nil && v.Node.Step > 0
		})
		_, v, raw := jobCall(t, g, "secret-1", "GET", "/v1/jobs/"+queued.ID, "")
		if v.State != "queued" || v.QueuePosition == nil || *v.QueuePosition != 0 {
			t.Errorf("the second job while the first runs: %s", raw)
		}
		if code, v, raw := jobCall(t, g, "secret-1", "DELETE", "/v1/jobs/"+queued.ID, ""); code != 200 || v.State != "cancelled" {
			t.Errorf("cancelling a queued job: %d %s", code, raw)
		}
		if code, v, raw := jobCall(t, g, "secret-1", "DELETE", "/v1/jobs/"+long.ID, ""); code != 200 || v.State != "cancelled" || v.Progress >= 1 {
			t.Errorf("cancelling a running job: %d %s", code, raw)
		}
		// The replica is free again: the next job runs at once.
		_, next, _ := jobCall(t, g, "secret-1", "POST", "/v1/jobs", `{"model":"pictures","workflow":`+workflow("3")+`}`)
		if seen := followJob(t, g, "secret-1", next.ID); seen[len(seen)-1].State != "succeeded" {
			t.Errorf("a job after the cancels: %+v", seen[len(seen)-1])
		}
	})
}

// Jobs queued when llmgw stops are queued again when it starts, and run;
// the finished ones and their outputs are still there.
func TestJobsSurviveARestart(t *testing.T) {
	g := jobsGateway(t, picturesModel)
	g.readyReplicas("pictures", 1)
	_, done, _ := jobCall(t, g, "secret-1", "POST", "/v1/jobs", `{"model":"pictures","workflow":`+workflow("2")+`}`)
	followJob(t, g, "secret-1", done.ID)
	var ids []string
	for range 3 {
		_, j, raw := jobCall(t, g, "secret-1", "POST", "/v1/jobs", `{"model":"pictures","workflow":`+workflow("100")+`}`)
		if j.ID == "" {
			t.Fatalf("POST: %s", raw)
		}
		ids = append(ids, j.ID)
	}
	waitFor(t, 20*time.Second, "the first of them running", func() bool {
		_, v, _ := jobCall(t, g, "secret-1", "GET", "/v1/jobs/"+ids[0], "")
		return v.State == "running"
	})
	g.stop()
	g.start()
	if code, _, raw := jobCall(t, g, "secret-1", "GET", "/v1/jobs/"+done.ID+"/outputs/0", ""); code != 200 || !strings.HasPrefix(raw, "\x89PNG") {
		t.Errorf("a finished job's output after the restart: %d, %.40q", code, raw)
	}
	for _, id := range ids {
		seen := followJob(t, g, "secret-1", id)
		if last := seen[len(seen)-1]; last.State != "succeeded" {
			t.Errorf("job %s after the restart: %+v", id, last)
		}
	}
}

// A replica killed while it runs a job fails the job, naming the
// replica; an idempotent job runs again on the replica that replaces it,
// and succeeds.
func TestJobsReplicaKilled(t *testing.T) {
	g := jobsGateway(t, picturesModel)
	killRunning := func(id string) {
		t.Helper()
		var replica string
		waitFor(t, 20*time.Second, "job "+id+" sampling", func() bool {
			_, v, _ := jobCall(t, g, "secret-1", "GET", "/v1/jobs/"+id, "")
			replica = v.Replica
			return v.State == "running" && v.Node != nil && v.Node.Step > 2
		})
		for _, r := range g.models()["pictures"].Replicas {
			if r.ID == replica {
				if err := killPID(r.PID); err != nil {
					t.Fatal(err)
				}
				return
			}
		}
		t.Fatalf("replica %s of the job is not listed", replica)
	}
	g.readyReplicas("pictures", 1)
	_, j, _ := jobCall(t, g, "secret-1", "POST", "/v1/jobs", `{"model":"pictures","workflow":`+workflow("500")+`}`)
	killRunning(j.ID)
	seen := followJob(t, g, "secret-1", j.ID)
	if last := seen[len(seen)-1]; last.State != "failed" || last.Error == nil || last.Error.Code != "replica_failed" ||
		!strings.Contains(last.Error.Message, "pictures-") || !strings.Contains(last.Error.Message, "idempotent") {
		t.Errorf("a job whose replica was killed: %+v %+v", last, last.Error)
	}
	g.readyReplicas("pictures", 1)
	_, j, _ = jobCall(t, g, "secret-1", "POST", "/v1/jobs", `{"model":"pictures","idempotent":true,"workflow":`+workflow("200")+`}`)
	killRunning(j.ID)
	seen = followJob(t, g, "secret-1", j.ID)
	var retried bool
	for _, s := range seen {
		retried = retried || s.State == "queued" && s.Error != nil && s.Error.Code == "replica_failed"
	}
	_, last, raw := jobCall(t, g, "secret-1", "GET", "/v1/jobs/"+j.ID, "")
	if last.State != "succeeded" || last.Error != nil || !retried || !strings.Contains(raw, `"attempts":2`) {
		t.Errorf("an idempotent job whose replica was killed: retried %v, %s", retried, raw)
	}
}

// 500 jobs of 5 projects on 2 replicas: while every project has jobs
// waiting, the projects take turns (each gets 20% of the runs, within 10%
// of it, though one queued 300 jobs before the others queued theirs); a
// reload in the middle loses nothing; every job succeeds.
func TestJobsFairUnderLoad(t *testing.T) {
	var keys strings.Builder
	for i := range 5 {
		fmt.Fprintf(&keys, "\t\t\t\tproject p%d {\n\t\t\t\t\tkey k%d %s\n\t\t\t\t}\n", i, i, tenancy.HashKey(fmt.Sprintf("load-key-%d", i)))
	}
	models := `
		model pictures {
			engine simimage
			option step_time 10ms
			min 2
			max 2
			target_concurrency 1
		}
		org load {
			team t {
` + keys.String() + `			}
		}`
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{}),
		quota: new(string), before: "\t\tllm_jobs\n"}
	g.writeConfig(models, "")
	g.start()
	g.readyReplicas("pictures", 2)
	wf := `{"model":"pictures","workflow":` + strings.Replace(workflow("8"), `"width": 320, "height": 192`, `"width": 64, "height": 64`, 1) + `}`
	submit := func(p, n int) {
		for range n {
			if code, _, raw := jobCall(t, g, fmt.Sprintf("load-key-%d", p), "POST", "/v1/jobs", wf); code != 200 {
				t.Fatalf("submitting for p%d: %d %s", p, code, raw)
			}
		}
	}
	counts := func() (done [5]int, waiting [5]int) {
		for p := range 5 {
			var list struct {
				Data []jobView `json:"data"`
			}
			_, _, raw := jobCall(t, g, fmt.Sprintf("load-key-%d", p), "GET", "/v1/jobs?limit=100", "")
			_ = json.Unmarshal([]byte(raw), &list)
			for _, j := range list.Data {
				switch j.State {
				case "succeeded", "running":
					done[p]++
				case "queued":
					waiting[p]++
				default:
					t.Fatalf("job %s of p%d: %s %+v", j.ID, p, j.State, j.Error)
				}
			}
		}
		return done, waiting
	}
	submit(0, 100)
	submit(0, 100)
	submit(0, 100) // p0 floods the queue first (only its newest 100 are counted)
	for p := 1; p < 5; p++ {
		submit(p, 50)
	}
	before, _ := counts()
	g.reload(models, "")
	var after, waiting [5]int
	waitFor(t, 120*time.Second, "100 more jobs run", func() bool {
		after, waiting = counts()
		n := 0
		for p := 1; p < 5; p++ {
			n += after[p] - before[p]
		}
		return n >= 80
	})
	for p := 1; p < 5; p++ {
		if waiting[p] == 0 {
			t.Fatalf("p%d has no job waiting any more: the measure is over (before %v, after %v)", p, before, after)
		}
		if d := after[p] - before[p]; d < 18 || d > 22 {
			t.Errorf("p%d ran %d jobs while the 5 projects ran about 100: want 18 to 22 (before %v, after %v)", p, d, before, after)
		}
	}
	waitFor(t, 180*time.Second, "every job done", func() bool {
		_, w := counts()
		return w == [5]int{}
	})
}
