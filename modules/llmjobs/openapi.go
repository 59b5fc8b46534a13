package llmjobs

import (
	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/llm/apidoc"
)

// The routes of llm_jobs, on a site under its route (/v1/* in the
// manual's examples), called with an API key, for GET /llm/openapi.json.
func init() {
	llm.DescribeAdminOperations(operations...)
}

var operations = []llm.AdminOperation{
	{Method: "POST", Path: "/v1/jobs", Request: createRequest{}, Response: job{},
		Body:    `{"model":"pictures","priority":"normal","workflow":{"6":{"class_type":"CLIPTextEncode","inputs":{"text":"a lighthouse at dusk","clip":["4",1]}}}}`,
		Summary: "llm_jobs: queue a workflow in ComfyUI's API format (Export (API)) for a model whose engine speaks ComfyUI; answers at once with the job, queued. 400 for a bad workflow, model or priority, or a prompt a guardrail blocks (guardrail_blocked); 404 for an unknown model; 429 when the model's queue is full (queue_full) or a level of the key's tenancy has used its jobs_per_day or gpu_seconds_per_day (job_quota_exceeded, with Retry-After)"},
	{Method: "GET", Path: "/v1/jobs", Response: jobList{},
		Summary: "llm_jobs: the jobs of the key's project, newest first (?limit=1 to 100, default 20)"},
	{Method: "GET", Path: "/v1/jobs/{id}", Response: job{},
		Summary: "llm_jobs: one job: its state (queued, running, succeeded, failed, cancelled), progress, the node running, its place in the queue, why it waits (waiting: its tenant runs its concurrent_jobs), its outputs and error; 404 for a job of another project or past its retention"},
	{Method: "DELETE", Path: "/v1/jobs/{id}", Response: job{},
		Summary: "llm_jobs: cancel a job: a queued one leaves its queue (and gives its jobs_per_day count back), a running one is interrupted; answers the job, cancelled. 409 when it has already finished"},
	{Method: "GET", Path: "/v1/jobs/{id}/events", Response: apidoc.Stream,
		Summary: "llm_jobs: the job as Server-Sent Events (event: job, data: the job as GET /v1/jobs/{id} shows it) at each change, until it ends"},
	{Method: "GET", Path: "/v1/jobs/{id}/outputs/{n}", Response: apidoc.File,
		Summary: "llm_jobs: output n (from 0) of a job, the file its workflow wrote, with its content type (image/png, model/gltf-binary, …); 404 when it has no such output"},
	{Method: "POST", Path: "/v1/images/generations", Request: imagesRequest{}, Response: imagesResponse{},
		Body:    `{"model":"pictures","prompt":"a lighthouse at dusk","n":1,"size":"1024x1024"}`,
		Summary: "llm_jobs, OpenAI's Images API: the prompt runs as a text to image job of the model and the answer waits for its pictures (b64_json, or url of the job's outputs); the same errors as POST /v1/jobs, and 500 when the job fails"},
	{Method: "POST", Path: "/v1/images/edits", Response: imagesResponse{}, BodyType: "multipart/form-data",
		Body:    `{"model":"pictures","prompt":"add a red hat","image":"(the picture's bytes, with its filename)"}`,
		Summary: "llm_jobs, OpenAI's Images API: edit pictures (multipart form: image or image[], an optional mask, prompt, model, n, size, response_format, stream); they run as an image to image job of the model; the answer is as for generations"},
}

// jobList is the answer of GET /v1/jobs.
type jobList struct {
	Object  string `json:"object"` // list
	Data    []job  `json:"data"`
	HasMore bool   `json:"has_more"`
}

// imagesResponse is the answer of POST /v1/images/generations.
type imagesResponse struct {
	Created      int64       `json:"created"`
	Data         []imageData `json:"data"`
	OutputFormat string      `json:"output_format"`
	Size         string      `json:"size"`
	Background   string      `json:"background"`
}

// imageData is one picture of an images answer.
type imageData struct {
	B64JSON       string `json:"b64_json,omitempty"`
	URL           string `json:"url,omitempty"`
	RevisedPrompt string `json:"revised_prompt"`
}
