package llmguard

import (
	"bytes"
	"encoding/json"
	"io"
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
// /v1/images/generations (the field their texts are in), else "".
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
	case "images/generations":
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
	texts    []string
	at       [][2]string // node id and input of each text; "" for the prompt
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
	if json.Unmarshal(b.top["workflow"], &b.workflow) != nil {
		return nil, false
	}
	b.inputs = map[string]map[string]json.RawMessage{}
	ids := make([]string, 0, len(b.workflow))
	for id := range b.workflow {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		var in map[string]json.RawMessage
		if json.Unmarshal(b.workflow[id]["inputs"], &in) != nil {
			continue
		}
		b.inputs[id] = in
		keys := make([]string, 0, len(in))
		for k := range in {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
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
		if at[0] == "" {
			b.top["prompt"] = v
			continue
		}
		b.inputs[at[0]][at[1]] = v
		in, _ := marshal(b.inputs[at[0]])
		b.workflow[at[0]]["inputs"] = in
	}
	if b.workflow != nil {
		wf, err := marshal(b.workflow)
		if err != nil {
			return nil, err
		}
		b.top["workflow"] = wf
	}
	return marshal(b.top)
}

// serveJob runs the input checks on a job's prompts (POST /v1/jobs: the
// text inputs of its workflow's nodes; POST /v1/images/generations: its
// prompt) before llm_jobs queues it. A blocked job gets the error a
// blocked chat prompt gets and is never queued; redacted values are
// replaced by their placeholders in the workflow (a picture has no text
// to put them back in). Output checks do not run: a job's outputs are
// files.
func (g *Guardrails) serveJob(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, field string) error {
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
	start := time.Now()
	var model string
	_ = json.Unmarshal(body.top["model"], &model)
	st := newState(g, model)
	if g.app != nil {
		if m, err := g.app.Lookup(model); err == nil {
			st.model = m.Name
		}
	}
	tenant, _ := tenancy.TenantOf(r)
	checks := g.planJob(st, tenant)
	blocked, redact := g.inspectInput(r.Context(), st, body.texts, checks, field)
	if blocked == nil && len(redact) > 0 {
		blocked = g.redactJob(r, st, body, redact)
	}
	took := time.Since(start)
	observeDuration(Input, took.Seconds())
	w.Header().Add("Server-Timing", timing("guard", took))
	defer st.finish(r)
	if blocked != nil {
		metricRefused.WithLabelValues(st.model, strconv.Itoa(blocked.Status)).Inc()
		blocked.WriteFor(w, r)
		return nil
	}
	return next.ServeHTTP(w, r)
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

// redactJob replaces the redacted values in the request's body.
func (g *Guardrails) redactJob(r *http.Request, st *state, b *jobBody, redact []Finding) *openai.Error {
	changed := map[int]string{}
	st.vault.redact(b.texts, resolve(redact), func(ti int, text string) { changed[ti] = text })
	raw, err := b.set(changed)
	if err != nil {
		g.logger.Error("redacting a job's prompt", zap.Error(err))
		return &openai.Error{Status: http.StatusInternalServerError, Type: "server_error", Code: "guardrail_error",
			Message: "redacting the job's prompt failed: " + err.Error()}
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(raw)), int64(len(raw))
	r.Header.Set("Content-Length", strconv.Itoa(len(raw)))
	return nil
}
