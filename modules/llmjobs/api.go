package llmjobs

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/openai"
	"github.com/llmgw/llmgw/plugins/engine"
)

// apiErr is an error in OpenAI's format.
func apiErr(w http.ResponseWriter, r *http.Request, status int, code, param, format string, args ...any) {
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	(&openai.Error{Status: status, Type: typ, Code: code, Param: param, Message: fmt.Sprintf(format, args...)}).WriteFor(w, r)
}

// serveAPI routes /v1/jobs[/rest].
func (h *Jobs) serveAPI(w http.ResponseWriter, r *http.Request, rest string) {
	parts := strings.Split(rest, "/")
	switch {
	case rest == "" && r.Method == http.MethodPost:
		h.create(w, r)
	case rest == "" && r.Method == http.MethodGet:
		h.list(w, r)
	case len(parts) == 1 && r.Method == http.MethodGet:
		h.get(w, r, parts[0])
	case len(parts) == 1 && r.Method == http.MethodDelete:
		h.cancel(w, r, parts[0])
	case len(parts) == 2 && parts[1] == "events" && r.Method == http.MethodGet:
		h.events(w, r, parts[0])
	case len(parts) == 3 && parts[1] == "outputs" && r.Method == http.MethodGet:
		h.output(w, r, parts[0], parts[2])
	case rest == "" || len(parts) <= 3:
		w.Header().Set("Allow", "GET, POST, DELETE")
		apiErr(w, r, http.StatusMethodNotAllowed, "method_not_allowed", "", "%s is not allowed on %s: POST /v1/jobs queues a job; GET /v1/jobs/{id} reads one, DELETE cancels it; GET /v1/jobs/{id}/events and /v1/jobs/{id}/outputs/{n}", r.Method, r.URL.Path)
	default:
		apiErr(w, r, http.StatusNotFound, "unknown_url", "", "unknown endpoint %s", r.URL.Path)
	}
}

// createRequest is the body of POST /v1/jobs (or its part request, when
// it is multipart/form-data with input files).
type createRequest struct {
	Model      string            `json:"model"`
	Workflow   json.RawMessage   `json:"workflow"`
	Priority   string            `json:"priority"`
	Metadata   map[string]string `json:"metadata"`
	Idempotent bool              `json:"idempotent"`
	// Parameters fill a workflow given by name (one of the model's
	// workflows): parameter name → value.
	Parameters map[string]any `json:"parameters"`
	// Inputs names files of /v1/files as the job's inputs (input name →
	// file id), besides those of a multipart body.
	Inputs map[string]string `json:"inputs"`
}

// decodeJob reads a job's JSON.
func (h *Jobs) decodeJob(rd io.Reader, req *createRequest) *openai.Error {
	body, err := io.ReadAll(rd)
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) || int64(len(body)) > h.MaxWorkflow+4096 {
		return &openai.Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large", Param: "workflow",
			Message: fmt.Sprintf("the request is over %d bytes (max_workflow)", h.MaxWorkflow)}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(req); err != nil {
		return openai.BadRequest("invalid_json", "the job must be a JSON object with model and workflow (ComfyUI's API format): %v", err)
	}
	return nil
}

// readCreate reads POST /v1/jobs: JSON, or multipart/form-data with
// input files.
func (h *Jobs) readCreate(w http.ResponseWriter, r *http.Request) (createRequest, []*inputFile, *openai.Error) {
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "multipart/form-data" {
		return h.readMultipartJob(w, r)
	}
	var req createRequest
	e := h.decodeJob(http.MaxBytesReader(w, r.Body, h.MaxWorkflow+4096), &req)
	return req, nil, e
}

// create queues a job: 200 with it, queued.
func (h *Jobs) create(w http.ResponseWriter, r *http.Request) {
	req, ins, e := h.readCreate(w, r)
	if e == nil && len(req.Inputs) > 0 {
		ins, e = h.fileInputs(r, ins, req.Inputs)
	}
	if e != nil {
		e.WriteFor(w, r)
		return
	}
	if !h.fillNamed(w, r, &req) { // named.go
		return
	}
	classes, msg := checkWorkflow(req.Workflow)
	if msg == "" {
		msg = checkInputRefs(req.Workflow, ins)
	}
	if msg != "" {
		apiErr(w, r, http.StatusBadRequest, "invalid_workflow", "workflow", "%s", msg)
		return
	}
	if req.Priority == "" {
		req.Priority = "normal"
	}
	if _, ok := priorities[req.Priority]; !ok {
		apiErr(w, r, http.StatusBadRequest, "invalid_value", "priority", "priority %s: use high, normal or low", catalog.Bounded(req.Priority))
		return
	}
	if len(req.Metadata) > 16 {
		apiErr(w, r, http.StatusBadRequest, "invalid_value", "metadata", "metadata has %d keys; at most 16", len(req.Metadata))
		return
	}
	if !h.checkModel(w, r, req.Model) {
		return
	}
	j := &job{ID: newJobID(), Object: "job", Model: req.Model, State: stateQueued, Priority: req.Priority, Owner: ownerOf(r),
		CreatedAt: time.Now().Unix(), Outputs: []outputFile{}, Metadata: req.Metadata, Workflow: req.Workflow, classes: classes,
		Idempotent: req.Idempotent}
	if h.queue(w, r, j, ins) {
		h.writeJob(w, http.StatusOK, j.ID)
	}
}

// queue keeps a new job's inputs and queues it, or answers why not.
func (h *Jobs) queue(w http.ResponseWriter, r *http.Request, j *job, ins []*inputFile) bool {
	if !h.admit(w, r, j) { // quota.go
		return false
	}
	if err := h.svc.keepInputs(j, ins); err != nil {
		h.svc.usage.giveBack(levelKeys(j), j.QuotaDay)
		h.svc.removeJobFiles(j.ID)
		apiErr(w, r, http.StatusInternalServerError, "server_error", "", "keeping the job's input files: %v", err)
		return false
	}
	if !h.svc.enqueue(j) {
		h.svc.usage.giveBack(levelKeys(j), j.QuotaDay)
		h.svc.removeJobFiles(j.ID)
		w.Header().Set("Retry-After", "30")
		metricRefused.WithLabelValues("queue_full").Inc()
		apiErr(w, r, http.StatusTooManyRequests, "queue_full", "", "model %s has %d jobs waiting (max_queued); try again later", j.Model, h.MaxQueued)
		return false
	}
	return true
}

// checkModel answers 400 unless model is a catalog model whose engine
// runs workflows.
func (h *Jobs) checkModel(w http.ResponseWriter, r *http.Request, model string) bool {
	if model == "" {
		apiErr(w, r, http.StatusBadRequest, "missing_required_parameter", "model", "model is required: a model whose engine runs ComfyUI workflows")
		return false
	}
	app := h.svc.app.Load()
	m, err := app.Lookup(model)
	if err != nil {
		apiErr(w, r, http.StatusNotFound, "model_not_found", "model", "%v", err)
		return false
	}
	if !app.Speaks(m, engine.CapComfyUI) {
		apiErr(w, r, http.StatusBadRequest, "model_not_supported", "model", "the model %s does not run workflows (its engine, %s, does not speak ComfyUI's API); give a model of an engine that does, such as comfyui or simimage", m.Name, m.Engine)
		return false
	}
	if err := app.LicenceRefusal(r.Context(), m, ownerOf(r)); err != nil {
		apiErr(w, r, http.StatusForbidden, "licence_not_accepted", "model", "%v", err)
		return false
	}
	return true
}

// checkWorkflow checks the shape of a workflow in ComfyUI's API format
// (node id → class_type and inputs) and returns each node's class; the
// server checks the rest when the job runs.
func checkWorkflow(raw json.RawMessage) (map[string]string, string) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, "workflow is required: a workflow in ComfyUI's API format (Export (API) in ComfyUI), an object of node id → {class_type, inputs}"
	}
	var nodes map[string]struct {
		ClassType string          `json:"class_type"`
		Inputs    json.RawMessage `json:"inputs"`
	}
	if err := json.Unmarshal(raw, &nodes); err != nil {
		return nil, "workflow must be an object of node id → {class_type, inputs}, as ComfyUI's Export (API) writes it: " + err.Error()
	}
	if len(nodes) == 0 {
		return nil, "workflow has no nodes"
	}
	classes := make(map[string]string, len(nodes))
	for id, n := range nodes {
		if n.ClassType == "" {
			return nil, fmt.Sprintf("workflow node %s has no class_type; is this the UI format? Export the workflow with Export (API)", catalog.Bounded(id))
		}
		classes[id] = n.ClassType
	}
	return classes, ""
}

// list answers GET /v1/jobs: the caller's jobs, newest first.
func (h *Jobs) list(w http.ResponseWriter, r *http.Request) {
	owner := ownerOf(r)
	limit := 20
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			apiErr(w, r, http.StatusBadRequest, "invalid_value", "limit", "limit %s: give 1 to 100", catalog.Bounded(v))
			return
		}
		limit = n
	}
	data := h.svc.listFor(owner, limit)
	writeJSON(w, http.StatusOK, jobList{Object: "list", Data: data, HasMore: len(data) == limit})
}

// get answers GET /v1/jobs/{id}.
func (h *Jobs) get(w http.ResponseWriter, r *http.Request, id string) {
	if _, ok := h.find(w, r, id); ok {
		h.writeJob(w, http.StatusOK, id)
	}
}

// find is the caller's job id, or 404 (a job of another project is not
// there for the caller).
func (h *Jobs) find(w http.ResponseWriter, r *http.Request, id string) (*job, bool) {
	j := h.svc.lookup(id, ownerOf(r))
	if j == nil {
		apiErr(w, r, http.StatusNotFound, "job_not_found", "", "no job %s (GET /v1/jobs lists yours; finished jobs are kept for %s)", catalog.Bounded(id), time.Duration(h.Retention))
		return nil, false
	}
	return j, true
}

// cancel answers DELETE /v1/jobs/{id}: a queued job leaves its queue, a
// running one is interrupted; both end cancelled.
func (h *Jobs) cancel(w http.ResponseWriter, r *http.Request, id string) {
	if _, ok := h.find(w, r, id); !ok {
		return
	}
	ch, stop := h.svc.watch(id)
	defer stop()
	if state, ok := h.svc.cancel(id); !ok {
		apiErr(w, r, http.StatusConflict, "job_finished", "", "job %s has already %s; there is nothing to cancel", id, state)
		return
	}
	// A running job ends once its replica has stopped it: wait for that
	// (bounded) so that the answer shows it cancelled.
	for deadline := time.After(10 * time.Second); !h.svc.view(id).finished(); {
		select {
		case <-ch:
		case <-deadline:
			h.writeJob(w, http.StatusOK, id)
			return
		case <-r.Context().Done():
			return
		}
	}
	h.writeJob(w, http.StatusOK, id)
}

// output answers GET /v1/jobs/{id}/outputs/{n}: the file.
func (h *Jobs) output(w http.ResponseWriter, r *http.Request, id, n string) {
	if _, ok := h.find(w, r, id); !ok {
		return
	}
	st := h.svc.view(id)
	i, err := strconv.Atoi(n)
	if err != nil || i < 0 || i >= len(st.Outputs) {
		apiErr(w, r, http.StatusNotFound, "output_not_found", "", "job %s has %d outputs (0 to %d); %s is not one of them (its state is %s)", id, len(st.Outputs), len(st.Outputs)-1, catalog.Bounded(n), st.State)
		return
	}
	o := st.Outputs[i]
	f, err := h.svc.openOutput(r.Context(), id, o) // s3outputs.go
	if err != nil {
		apiErr(w, r, http.StatusNotFound, "output_not_found", "", "job %s's output %d cannot be read: %v", id, i, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", o.ContentType)
	w.Header().Set("Content-Disposition", fmt.Sprintf("inline; filename=%q", o.Filename))
	w.Header().Set("Content-Length", strconv.FormatInt(o.Bytes, 10))
	_, _ = io.Copy(w, f)
}

// events answers GET /v1/jobs/{id}/events: the job as it is, then again
// at each change, as server-sent events (event: job), until it ends.
func (h *Jobs) events(w http.ResponseWriter, r *http.Request, id string) {
	if _, ok := h.find(w, r, id); !ok {
		return
	}
	ch, stop := h.svc.watch(id)
	defer stop()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	last := ""
	for {
		st := h.svc.view(id)
		b, _ := json.Marshal(st)
		if string(b) != last {
			last = string(b)
			if _, err := fmt.Fprintf(w, "event: job\ndata: %s\n\n", b); err != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
		}
		if st.ID == "" || st.finished() {
			return // it ended (or, past its retention, was removed)
		}
		select {
		case <-r.Context().Done():
			return
		case <-ch:
		case <-time.After(15 * time.Second):
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
		}
	}
}

// writeJob writes job id as the API shows it.
func (h *Jobs) writeJob(w http.ResponseWriter, code int, id string) {
	writeJSON(w, code, h.svc.view(id))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// ownerOf is the project of the request's key ("" without llm_quota).
func ownerOf(r *http.Request) string {
	if t, ok := tenancy.TenantOf(r); ok {
		return t.Project
	}
	return ""
}

func newJobID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "job_" + hex.EncodeToString(b[:])
}
