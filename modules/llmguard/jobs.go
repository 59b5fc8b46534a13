package llmguard

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/openai"
)

// maxJobBody bounds the body of a job the checks read; llm_jobs bounds
// it too (max_workflow).
const maxJobBody = 64 << 20

// jobEndpoint is "workflow" for POST /v1/jobs, "prompt" for POST
// /v1/images/generations and /v1/images/edits (the field their texts
// are in), else "".
func jobEndpoint(r *http.Request) string {
	if r.Method != http.MethodPost {
		return ""
	}
	i := strings.Index(r.URL.Path, "/v1/")
	if i < 0 {
		return ""
	}
	switch strings.TrimSuffix(r.URL.Path[i+len("/v1/"):], "/") {
	case "jobs":
		return "workflow"
	case "images/generations", "images/edits":
		return "prompt"
	}
	return ""
}

// jobBody is a job's request body as the checks read it: its members,
// and its texts with where each is.
type jobBody struct {
	top      map[string]json.RawMessage
	workflow map[string]map[string]json.RawMessage // node id → its members
	inputs   map[string]map[string]json.RawMessage // node id → its inputs
	params   map[string]json.RawMessage            // a named workflow's parameters
	texts    []string
	at       [][2]string // node id and input of each text ("#parameters" and a name; "" for the prompt)
	part     string      // in a multipart body: the part the texts are in
}

// readJobBody reads the texts of a job (its workflow's prompts) or of an
// images request (its prompt). ok is false when the body is not JSON of
// that shape (llm_jobs answers that).
func readJobBody(raw []byte, field string) (*jobBody, bool) {
	b := &jobBody{}
	if json.Unmarshal(raw, &b.top) != nil {
		return nil, false
	}
	if field == "prompt" {
		var p string
		if json.Unmarshal(b.top["prompt"], &p) != nil {
			return nil, false
		}
		b.texts, b.at = []string{p}, [][2]string{{"", ""}}
		return b, true
	}
	var name string
	if json.Unmarshal(b.top["workflow"], &b.workflow) != nil && json.Unmarshal(b.top["workflow"], &name) != nil {
		return nil, false // neither a graph nor the name of one of the model's workflows
	}
	if raw, ok := b.top["parameters"]; ok && json.Unmarshal(raw, &b.params) != nil {
		return nil, false
	}
	for _, k := range sortedKeys(b.params) {
		var s string
		if json.Unmarshal(b.params[k], &s) == nil && promptInput(k, s) {
			b.texts, b.at = append(b.texts, s), append(b.at, [2]string{"#parameters", k})
		}
	}
	b.inputs = map[string]map[string]json.RawMessage{}
	for _, id := range sortedKeys(b.workflow) {
		var in map[string]json.RawMessage
		if json.Unmarshal(b.workflow[id]["inputs"], &in) != nil {
			continue
		}
		b.inputs[id] = in
		for _, k := range sortedKeys(in) {
			var s string
			if json.Unmarshal(in[k], &s) == nil && promptInput(k, s) {
				b.texts, b.at = append(b.texts, s), append(b.at, [2]string{id, k})
			}
		}
	}
	return b, true
}

// promptInput tells whether a node's string input is text a check reads:
// any string (text, prompt, positive, negative, a caption, a prompt
// template...) except those that name a file, a model or a setting: an
// input named *_name, *_path, *_file, filename_prefix, image, mask,
// video, audio, upload, scheduler, device or weight_dtype, and a value
// with no space that ends in a file extension (v1-5.safetensors,
// input.png).
func promptInput(key, value string) bool {
	if strings.TrimSpace(value) == "" {
		return false
	}
	for _, suf := range []string{"_name", "_path", "_file"} {
		if strings.HasSuffix(key, suf) {
			return false
		}
	}
	switch key {
	case "filename_prefix", "image", "mask", "video", "audio", "upload", "scheduler", "device", "weight_dtype":
		return false
	}
	if ext := path.Ext(value); !strings.ContainsAny(value, " \t\n") && len(ext) > 1 && len(ext) <= 12 && isWord(ext[1:]) {
		return false
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func isWord(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return s != "" && strings.ContainsAny(strings.ToLower(s), "abcdefghijklmnopqrstuvwxyz")
}

// set replaces the texts changed by redaction and encodes the body again.
func (b *jobBody) set(changed map[int]string) ([]byte, error) {
	for i, text := range changed {
		v, _ := marshal(text)
		at := b.at[i]
		switch at[0] {
		case "":
			b.top["prompt"] = v
			continue
		case "#parameters":
			b.params[at[1]] = v
			ps, _ := marshal(b.params)
			b.top["parameters"] = ps
			continue
		}
		b.inputs[at[0]][at[1]] = v
		in, _ := marshal(b.inputs[at[0]])
		b.workflow[at[0]]["inputs"] = in
	}
	if b.inputs != nil && b.workflow != nil {
		wf, err := marshal(b.workflow)
		if err != nil {
			return nil, err
		}
		b.top["workflow"] = wf
	}
	return marshal(b.top)
}

// serveJob runs the input checks on a job's prompts (POST /v1/jobs: the
// text inputs of its workflow's nodes and the string parameters of a
// named workflow, in JSON or in the request part of a multipart body;
// POST /v1/images/generations and /v1/images/edits: the prompt) before
// llm_jobs queues it. A blocked job gets the error a blocked chat prompt
// gets and is never queued; redacted values are replaced by their
// placeholders (a picture has no text to put them back in). Output
// checks do not run: a job's outputs are files.
func (g *Guardrails) serveJob(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, field string) error {
	if ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "multipart/form-data" {
		return g.serveMultipartJob(w, r, next, field, params["boundary"])
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxJobBody+1))
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(raw))
	if err != nil || len(raw) > maxJobBody {
		(&openai.Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
			Message: "the job is over " + strconv.Itoa(maxJobBody>>20) + " MiB, more than llm_guardrails checks; send a smaller workflow"}).WriteFor(w, r)
		return nil
	}
	body, ok := readJobBody(raw, field)
	if !ok {
		return next.ServeHTTP(w, r) // llm_jobs says what is wrong
	}
	st, blocked, changed := g.checkJob(w, r, body, field)
	defer st.finish(r)
	if blocked == nil && len(changed) > 0 {
		if raw, err = body.set(changed); err == nil {
			setBody(r, bytes.NewReader(raw), int64(len(raw)))
		} else {
			blocked = g.redactFailed(err)
		}
	}
	if blocked != nil {
		blocked.WriteFor(w, r)
		return nil
	}
	return next.ServeHTTP(w, r)
}

// checkJob runs the input checks on a job's texts: the error that blocks
// it, else the texts redaction changed (index → new text).
func (g *Guardrails) checkJob(w http.ResponseWriter, r *http.Request, b *jobBody, field string) (*state, *openai.Error, map[int]string) {
	start := time.Now()
	var model string
	_ = json.Unmarshal(b.top["model"], &model)
	st := newState(g, model)
	if g.app != nil {
		if m, err := g.app.Lookup(model); err == nil {
			st.model = m.Name
		}
	}
	tenant, _ := tenancy.TenantOf(r)
	blocked, redact := g.inspectInput(r.Context(), st, b.texts, g.planJob(st, tenant), field)
	changed := map[int]string{}
	if blocked == nil && len(redact) > 0 {
		st.vault.redact(b.texts, resolve(redact), func(ti int, text string) { changed[ti] = text })
	}
	took := time.Since(start)
	observeDuration(Input, took.Seconds())
	w.Header().Add("Server-Timing", timing("guard", took))
	if blocked != nil {
		metricRefused.WithLabelValues(st.model, strconv.Itoa(blocked.Status)).Inc()
	}
	return st, blocked, changed
}

// setBody hands on a new body of n bytes.
func setBody(r *http.Request, body io.Reader, n int64) {
	r.Body, r.ContentLength = io.NopCloser(body), n
	r.Header.Set("Content-Length", strconv.FormatInt(n, 10))
}

func (g *Guardrails) redactFailed(err error) *openai.Error {
	g.logger.Error("redacting a job's prompt", zap.Error(err))
	return &openai.Error{Status: http.StatusInternalServerError, Type: "server_error", Code: "guardrail_error",
		Message: "redacting the job's prompt failed: " + err.Error()}
}

// planJob is plan for a job: the checks that run on its input; those
// that run on output are recorded skipped.
func (g *Guardrails) planJob(st *state, t *tenancy.Tenant) []Check {
	in := st.inBuf[:0]
	for _, c := range g.checks {
		sc := c.CheckScope()
		ok, why := sc.applies(st.model, t)
		if sc.runsOn(Output) {
			st.record(sc, Output, Skipped, "a job's outputs are files, not text")
		}
		switch {
		case !sc.runsOn(Input):
		case !ok:
			st.record(sc, Input, Skipped, why)
		default:
			in = append(in, c)
		}
	}
	return in
}
