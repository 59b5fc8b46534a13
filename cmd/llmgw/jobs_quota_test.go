package main

import (
	"bytes"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// jobQuotaTenancy: the project alpha may have 4 jobs a day, one running
// at a time; the key k3 of the project beta may use 1 GPU second a day.
var jobQuotaTenancy = `
		org acme {
			team research {
				project alpha {
					jobs_per_day    4
					concurrent_jobs 1
					key k1 ` + tenancy.HashKey("secret-1") + `
					key k2 ` + tenancy.HashKey("secret-2") + `
				}
			}
		}
		org acme2 {
			team sales {
				project beta {
					key k3 ` + tenancy.HashKey("secret-3") + ` {
						gpu_seconds_per_day 1
					}
				}
			}
		}
		model pictures {
			engine simimage
			option step_time 20ms
			min 2
			max 2
			target_concurrency 1
		}`

// postRefused sends body to path with key and returns the status, the
// error's code and message, and Retry-After.
func postRefused(t *testing.T, g *gateway, key, path, body string) (int, string, string, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", g.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(raw, &e)
	return resp.StatusCode, e.Error.Code, e.Error.Message, resp.Header.Get("Retry-After")
}

// Job quotas per tenancy level: concurrent_jobs holds a project's second
// job queued (saying why) while another project's job passes it and
// runs; jobs_per_day and gpu_seconds_per_day refuse with 429 naming the
// level and when it renews, on /v1/jobs and /v1/images/generations; the
// counts survive a reload and a restart.
func TestJobQuotas(t *testing.T) {
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{}),
		quota: new(string), before: "\t\tllm_jobs\n"}
	g.writeConfig(jobQuotaTenancy, "")
	g.start()
	g.readyReplicas("pictures", 2)
	var alpha []string
	for _, steps := range []string{"250", "20", "20"} {
		code, j, raw := jobCall(t, g, "secret-1", "POST", "/v1/jobs", `{"model":"pictures","workflow":`+workflow(steps)+`}`)
		if code != 200 {
			t.Fatalf("alpha's job: %d %s", code, raw)
		}
		alpha = append(alpha, j.ID)
	}
	waitFor(t, 20*time.Second, "alpha's first job running", func() bool {
		_, v, _ := jobCall(t, g, "secret-1", "GET", "/v1/jobs/"+alpha[0], "")
		return v.State == "running"
	})
	_, beta, raw := jobCall(t, g, "secret-3", "POST", "/v1/jobs", `{"model":"pictures","workflow":`+workflow("80")+`}`)
	if beta.ID == "" {
		t.Fatalf("beta's job: %s", raw)
	}
	// beta's job runs on the free replica while alpha's second waits.
	seen := followJob(t, g, "secret-3", beta.ID)
	if last := seen[len(seen)-1]; last.State != "succeeded" {
		t.Fatalf("beta's job: %+v", last)
	}
	_, first, _ := jobCall(t, g, "secret-1", "GET", "/v1/jobs/"+alpha[0], "")
	_, second, raw := jobCall(t, g, "secret-1", "GET", "/v1/jobs/"+alpha[1], "")
	if first.State != "running" || second.State != "queued" ||
		!strings.Contains(raw, "the project acme/research/alpha runs 1 jobs, its concurrent_jobs") {
		t.Errorf("while alpha's first job runs (%s), its second: %s", first.State, raw)
	}
	// alpha's jobs run one at a time, and all succeed.
	for _, id := range alpha {
		waitFor(t, 60*time.Second, "alpha's job "+id+" done", func() bool {
			_, v, _ := jobCall(t, g, "secret-1", "GET", "/v1/jobs/"+id, "")
			var running int
			for _, other := range alpha {
				if _, o, _ := jobCall(t, g, "secret-1", "GET", "/v1/jobs/"+other, ""); o.State == "running" {
					running++
				}
			}
			if running > 1 {
				t.Fatalf("alpha runs %d jobs at once; its concurrent_jobs is 1", running)
			}
			return v.State == "succeeded"
		})
	}
	// The fourth job of the day is accepted (another key of alpha), the
	// fifth is not, on either route.
	if code, _, raw := jobCall(t, g, "secret-2", "POST", "/v1/jobs", `{"model":"pictures","workflow":`+workflow("2")+`}`); code != 200 {
		t.Fatalf("alpha's fourth job: %d %s", code, raw)
	}
	checkRefused := func(when string) {
		t.Helper()
		for _, tc := range []struct{ key, path, body, want string }{
			{"secret-1", "/v1/jobs", `{"model":"pictures","workflow":` + workflow("2") + `}`, "the project acme/research/alpha has used its 4 jobs per day (jobs_per_day); it renews in "},
			{"secret-2", "/v1/images/generations", `{"model":"pictures","prompt":"a lighthouse","size":"64x64"}`, "the project acme/research/alpha has used its 4 jobs per day"},
			{"secret-3", "/v1/jobs", `{"model":"pictures","workflow":` + workflow("2") + `}`, "the key k3 has used "},
		} {
			code, ecode, msg, retry := postRefused(t, g, tc.key, tc.path, tc.body)
			secs, _ := strconv.Atoi(retry)
			if code != 429 || ecode != "job_quota_exceeded" || !strings.Contains(msg, tc.want) || secs < 1 || secs > 86400 {
				t.Errorf("%s: %s %s: %d %s %q (Retry-After %q), want 429 job_quota_exceeded saying %q", when, tc.key, tc.path, code, ecode, msg, retry, tc.want)
			}
			if tc.key == "secret-3" && !strings.Contains(msg, "of its 1 GPU seconds per day (gpu_seconds_per_day)") {
				t.Errorf("%s: k3's refusal: %q", when, msg)
			}
		}
	}
	checkRefused("the same day")
	if v, _ := value(scrape(t, g), "llmgw_jobs_refused_total", map[string]string{"reason": "job_quota_exceeded"}); v != 3 {
		t.Errorf("llmgw_jobs_refused_total{reason=job_quota_exceeded} is %v after 3 refusals", v)
	}
	g.reload(jobQuotaTenancy, "")
	checkRefused("after a reload")
	g.stop()
	g.start()
	checkRefused("after a restart")
}

// Guardrails check the prompts of a job's workflow, of an images request
// and of an image edit: one that trips a check is refused as a chat prompt is (400,
// guardrail_blocked) and never queued; a clean one runs.
func TestJobGuardrails(t *testing.T) {
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{}),
		quota: new(string), before: `		llm_guardrails {
			regex weapons {
				deny weapon "(?i)\bbomb\b"
				on input
			}
		}
		llm_jobs
`}
	g.writeConfig(picturesModel+tenancyBlock("", "", "", ""), "")
	g.start()
	g.readyReplicas("pictures", 1)
	blocked := strings.Replace(workflow("2"), "blurry, watermark", "blurry, a BOMB", 1)
	for _, tc := range []struct{ path, body, param string }{
		{"/v1/jobs", `{"model":"pictures","workflow":` + blocked + `}`, "workflow"},
		{"/v1/images/generations", `{"model":"pictures","prompt":"a bomb on a table","size":"64x64"}`, "prompt"},
	} {
		req, _ := http.NewRequest("POST", g.base+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer secret-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Error struct{ Code, Message, Param, Type string } `json:"error"`
		}
		_ = json.Unmarshal(raw, &e)
		if resp.StatusCode != 400 || e.Error.Code != "guardrail_blocked" || e.Error.Param != tc.param ||
			!strings.Contains(e.Error.Message, `blocked by guardrail "weapons"`) {
			t.Errorf("%s with a blocked prompt: %d %s", tc.path, resp.StatusCode, raw)
		}
	}
	// An edit's prompt (a multipart form) likewise.
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	_ = mw.WriteField("model", "pictures")
	_ = mw.WriteField("prompt", "put a bomb on it")
	fw, _ := mw.CreateFormFile("image", "in.png")
	_ = png.Encode(fw, image.NewRGBA(image.Rect(0, 0, 64, 64)))
	_ = mw.Close()
	req, _ := http.NewRequest("POST", g.base+"/v1/images/edits", &form)
	req.Header.Set("Authorization", "Bearer secret-1")
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	edit, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(edit), `"code":"guardrail_blocked"`) || !strings.Contains(string(edit), `"param":"prompt"`) {
		t.Errorf("an edit with a blocked prompt: %d %s", resp.StatusCode, edit)
	}
	var list struct {
		Data []jobView `json:"data"`
	}
	_, _, raw := jobCall(t, g, "secret-1", "GET", "/v1/jobs", "")
	if json.Unmarshal([]byte(raw), &list) != nil || len(list.Data) != 0 {
		t.Errorf("a blocked job was queued: %s", raw)
	}
	code, j, raw := jobCall(t, g, "secret-1", "POST", "/v1/jobs", `{"model":"pictures","workflow":`+workflow("2")+`}`)
	if code != 200 {
		t.Fatalf("a clean job: %d %s", code, raw)
	}
	if seen := followJob(t, g, "secret-1", j.ID); seen[len(seen)-1].State != "succeeded" {
		t.Errorf("a clean job: %+v", seen[len(seen)-1])
	}
	code, _, _, _ = postRefused(t, g, "secret-1", "/v1/images/generations", `{"model":"pictures","prompt":"a lighthouse","size":"64x64"}`)
	if code != 200 {
		t.Errorf("a clean images request: %d", code)
	}
}
