// Package llmjobs is the llm_jobs HTTP handler: workflows run as jobs on
// the replicas of models whose engine speaks ComfyUI's API (ComfyUI
// itself, or the simimage simulator). POST /v1/jobs queues a workflow in
// ComfyUI's API format for a model and answers at once; GET /v1/jobs/{id}
// follows it (state, progress, the node running, its place in the
// queue), GET /v1/jobs/{id}/events streams its changes (server-sent
// events), DELETE /v1/jobs/{id} cancels it, GET /v1/jobs/{id}/outputs/{n}
// serves the files it wrote. Each model has a queue: higher priorities
// first, then the tenants in turn, each tenant's jobs in order; one job
// runs on a replica at a time. Jobs and their outputs are kept in the
// data directory: queued jobs survive a reload and a restart.
//
// The ComfyUI client lives in package comfy, with no Caddy in it.
package llmjobs

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm"
)

func init() {
	caddy.RegisterModule(Jobs{})
}

// Jobs serves the jobs API. Put it after llm_quota (a job belongs to the
// project of its key; only that project sees it).
//
// The tenancy limits jobs_per_day and gpu_seconds_per_day of every level
// of the caller's key are checked before a job is queued: past one, 429
// with code job_quota_exceeded, a message naming the level and
// Retry-After (until 00:00 UTC). A level running its concurrent_jobs has
// its next jobs wait in the queue while other tenants' pass them. The
// day's counts are kept in quota.json in the jobs' directory.
type Jobs struct {
	// Retention is how long a finished job (succeeded, failed or
	// cancelled) and its outputs are kept. Default: 24h.
	Retention caddy.Duration `json:"retention,omitempty"`
	// MaxQueued bounds the jobs waiting for one model; a job beyond it
	// gets 429. Default: 1000.
	MaxQueued int `json:"max_queued,omitempty"`
	// MaxWorkflow bounds a workflow's size, in bytes. Default: 8 MiB.
	MaxWorkflow int64 `json:"max_workflow,omitempty"`
	// MaxInputSize bounds one input file of a job (a PNG, JPEG or WebP
	// picture its workflow loads, or an image of /v1/images/edits), in
	// bytes; a larger one gets 413. Default: 16 MiB.
	MaxInputSize int64 `json:"max_input_size,omitempty"`
	// MaxInputs bounds the input files of one job. Default: 8.
	MaxInputs int `json:"max_inputs,omitempty"`

	svc     *service
	poolKey string
	logger  *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (Jobs) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.llm_jobs",
		New: func() caddy.Module { return new(Jobs) },
	}
}

var pool = caddy.NewUsagePool()

// Provision opens (or shares, across reloads) the jobs' service: its
// store in the data directory, its queues and their dispatchers.
func (j *Jobs) Provision(ctx caddy.Context) error {
	j.logger = ctx.Logger()
	if j.Retention == 0 {
		j.Retention = caddy.Duration(24 * time.Hour)
	}
	if j.MaxQueued == 0 {
		j.MaxQueued = 1000
	}
	if j.MaxWorkflow == 0 {
		j.MaxWorkflow = 8 << 20
	}
	if j.MaxInputSize == 0 {
		j.MaxInputSize = 16 << 20
	}
	if j.MaxInputs == 0 {
		j.MaxInputs = 8
	}
	if j.Retention < 0 || j.MaxQueued < 0 || j.MaxWorkflow < 0 || j.MaxInputSize < 0 || j.MaxInputs < 0 {
		return fmt.Errorf("llm_jobs: retention, max_queued, max_workflow, max_input_size and max_inputs must not be negative")
	}
	a, err := ctx.App("llm")
	if err != nil {
		return err
	}
	dir := filepath.Join(caddy.AppDataDir(), "llm", "jobs")
	j.poolKey = "jobs:" + dir
	v, _, err := pool.LoadOrNew(j.poolKey, func() (caddy.Destructor, error) {
		return openService(dir, j.logger)
	})
	if err != nil {
		return fmt.Errorf("llm_jobs: %w", err)
	}
	j.svc = v.(*service)
	j.svc.use(a.(*llm.App), time.Duration(j.Retention), j.MaxQueued)
	return registerMetrics(ctx.GetMetricsRegistry(), j.svc) // metrics.go
}

// Cleanup lets go of the service; the last handler using it stops it.
func (j *Jobs) Cleanup() error {
	if j.poolKey != "" {
		_, _ = pool.Delete(j.poolKey)
	}
	return nil
}

// ServeHTTP answers /v1/jobs and what is under it, and OpenAI's Images
// API (/v1/images/generations and /v1/images/edits); other requests go
// on.
func (j *Jobs) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if k := strings.Index(r.URL.Path, "/v1/images/"); k >= 0 {
		switch rest := strings.TrimSuffix(r.URL.Path[k+len("/v1/images/"):], "/"); {
		case rest == "generations" && r.Method == http.MethodPost:
			j.generations(w, r)
		case rest == "edits" && r.Method == http.MethodPost:
			j.edits(w, r)
		case rest == "generations" || rest == "edits":
			w.Header().Set("Allow", "POST")
			apiErr(w, r, http.StatusMethodNotAllowed, "method_not_allowed", "", "use POST for /v1/images/%s", rest)
		default:
			apiErr(w, r, http.StatusNotFound, "unknown_url", "", "unknown endpoint %s; this gateway serves POST /v1/images/generations and /v1/images/edits, and workflows as jobs under /v1/jobs", r.URL.Path)
		}
		return nil
	}
	i := strings.Index(r.URL.Path, "/v1/jobs")
	if i < 0 {
		return next.ServeHTTP(w, r)
	}
	rest := strings.Trim(r.URL.Path[i+len("/v1/jobs"):], "/")
	if rest != "" && r.URL.Path[i+len("/v1/jobs")] != '/' {
		return next.ServeHTTP(w, r) // /v1/jobsfoo: not ours
	}
	j.serveAPI(w, r, rest)
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Jobs)(nil)
	_ caddy.CleanerUpper          = (*Jobs)(nil)
	_ caddyhttp.MiddlewareHandler = (*Jobs)(nil)
)
