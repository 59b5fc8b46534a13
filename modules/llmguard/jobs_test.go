package llmguard

import (
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// jobWorkflow is a text to image workflow with a positive and a
// negative prompt, file names and settings.
const jobWorkflow = `{"model":"pictures","workflow":{
  "3": {"class_type": "KSampler", "inputs": {"seed": 1, "steps": 2, "sampler_name": "euler", "scheduler": "normal", "positive": ["6", 0]}},
  "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "v1-5-pruned-emaonly.safetensors"}},
  "6": {"class_type": "CLIPTextEncode", "inputs": {"text": "POSITIVE", "clip": ["4", 1]}},
  "7": {"class_type": "CLIPTextEncode", "inputs": {"text": "NEGATIVE", "clip": ["4", 1]}},
  "8": {"class_type": "LoadImage", "inputs": {"image": "photo of me.png", "upload": "image"}},
  "9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "llmgw secret", "images": ["8", 0]}}}}`

// The prompts of a workflow are its string inputs that name no file,
// model or setting.
func TestJobTexts(t *testing.T) {
	b, ok := readJobBody([]byte(jobWorkflow), "workflow")
	if !ok {
		t.Fatal("the workflow was not read")
	}
	got, _ := json.Marshal(b.texts)
	if want := `["POSITIVE","NEGATIVE"]`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
	for _, tc := range []struct {
		key, value string
		want       bool
	}{
		{"text", "a cat", true}, {"prompt", "bomb", true}, {"negative", "blurry, watermark", true},
		{"ckpt_name", "a cat", false}, {"lora_name", "x", false}, {"image", "cat.png", false},
		{"text", "model.safetensors", false}, {"text", "version 1.5", true}, {"text", "1.5", true}, {"text", "  ", false},
	} {
		if got := promptInput(tc.key, tc.value); got != tc.want {
			t.Errorf("%s %q: got %v, want %v", tc.key, tc.value, got, tc.want)
		}
	}
}

// sawBody stands in for llm_jobs: it keeps the body it was given.
type sawBody struct{ body string }

func (s *sawBody) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	b, _ := io.ReadAll(r.Body)
	s.body = string(b)
	w.WriteHeader(200)
	return nil
}

func postJob(t *testing.T, g *Guardrails, next caddyhttp.Handler, path, body string) (int, string) {
	t.Helper()
	r := httptest.NewRequest("POST", path, strings.NewReader(body))
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
	w := httptest.NewRecorder()
	if err := g.ServeHTTP(w, r, next); err != nil {
		t.Fatal(err)
	}
	return w.Code, w.Body.String()
}

// A workflow whose prompt (or an images request whose prompt) trips a
// check is refused as a chat prompt is, and never reaches llm_jobs; a
// clean one goes on unchanged; a redacted value is replaced in the
// workflow.
func TestJobsGuarded(t *testing.T) {
	g := newGuard(t, &Guardrails{},
		&Regex{Scope: Scope{Name: "no-weapons", On: []Stage{Input}}, Deny: []Pattern{{Name: "weapon", Regex: `(?i)\bbomb\b`}}},
		&PII{Scope: Scope{Name: "pii"}})
	for _, tc := range []struct {
		name, path, body string
		code             int
		want             string
	}{
		{"a clean workflow", "/v1/jobs", jobWorkflow, 200, "a lighthouse"},
		{"a negative prompt", "/v1/jobs", strings.Replace(jobWorkflow, "NEGATIVE", "a bomb", 1), 400, `guardrail \"no-weapons\"`},
		{"an email", "/v1/jobs", jobWorkflow, 200, "<EMAIL_"},
		{"an images prompt", "/v1/images/generations", `{"model":"pictures","prompt":"a Bomb in a box"}`, 400, `"param":"prompt"`},
		{"a clean images prompt", "/v1/images/generations", `{"model":"pictures","prompt":"a lighthouse"}`, 200, `"prompt":"a lighthouse"`},
	} {
		body := strings.Replace(tc.body, "POSITIVE", "a lighthouse", 1)
		if tc.name == "an email" {
			body = strings.Replace(body, "a lighthouse", "mail ann@example.com", 1)
		}
		next := &sawBody{}
		code, raw := postJob(t, g, next, tc.path, body)
		seen := next.body
		if code != 200 {
			seen = raw
		}
		if code != tc.code || !strings.Contains(seen, tc.want) {
			t.Errorf("%s: %d %s (llm_jobs saw %q), want %d with %q", tc.name, code, raw, next.body, tc.code, tc.want)
		}
		if code == 400 && (next.body != "" || !strings.Contains(raw, `"code":"guardrail_blocked"`)) {
			t.Errorf("%s: blocked with %s, and llm_jobs saw %q", tc.name, raw, next.body)
		}
		if tc.name == "an email" && strings.Contains(seen, "ann@example.com") {
			t.Errorf("the email reached llm_jobs: %s", seen)
		}
	}
}

// multipartBody is a multipart/form-data body of text fields and one
// file part.
func multipartBody(t *testing.T, fields [][2]string) (string, string) {
	t.Helper()
	var b strings.Builder
	mw := multipart.NewWriter(&b)
	for _, f := range fields {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	fw, _ := mw.CreateFormFile("image", "cat.png")
	_, _ = fw.Write([]byte("\x89PNG a bomb in the picture's bytes is not text"))
	_ = mw.Close()
	return b.String(), mw.FormDataContentType()
}

// Multipart bodies (a job with input files, an image edit) and a named
// workflow's parameters are checked too; a redacted value is replaced in
// its part, the files go on unchanged.
func TestJobsGuardedMultipart(t *testing.T) {
	g := newGuard(t, &Guardrails{},
		&Regex{Scope: Scope{Name: "no-weapons", On: []Stage{Input}}, Deny: []Pattern{{Name: "weapon", Regex: `(?i)\bbomb\b`}}},
		&PII{Scope: Scope{Name: "pii"}})
	named := `{"model":"pictures","workflow":"txt2img","parameters":{"prompt":"PROMPT","steps":4}}`
	for _, tc := range []struct {
		name, path string
		fields     [][2]string
		code       int
		want       string
	}{
		{"a job's request part", "/v1/jobs", [][2]string{{"request", strings.Replace(jobWorkflow, "NEGATIVE", "a bomb", 1)}}, 400, `"param":"workflow"`},
		{"a named workflow's parameter", "/v1/jobs", [][2]string{{"request", strings.Replace(named, "PROMPT", "a bomb", 1)}}, 400, "no-weapons"},
		{"an edit's prompt", "/v1/images/edits", [][2]string{{"model", "pictures"}, {"prompt", "add a bomb"}}, 400, `"param":"prompt"`},
		{"a clean edit", "/v1/images/edits", [][2]string{{"model", "pictures"}, {"prompt", "add a hat"}}, 200, "add a hat"},
		{"a redacted edit", "/v1/images/edits", [][2]string{{"model", "pictures"}, {"prompt", "write ann@example.com"}}, 200, "write <EMAIL_"},
		{"a redacted parameter", "/v1/jobs", [][2]string{{"request", strings.Replace(named, "PROMPT", "mail ann@example.com", 1)}}, 200, `"prompt":"mail <EMAIL_`},
	} {
		body, ct := multipartBody(t, tc.fields)
		r := httptest.NewRequest("POST", tc.path, strings.NewReader(body))
		r.Header.Set("Content-Type", ct)
		r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
		w := httptest.NewRecorder()
		next := &sawBody{}
		if err := g.ServeHTTP(w, r, next); err != nil {
			t.Fatal(err)
		}
		seen := next.body
		if w.Code != 200 {
			seen = w.Body.String()
		}
		if w.Code != tc.code || !strings.Contains(seen, tc.want) {
			t.Errorf("%s: %d, saw %q; want %d with %q", tc.name, w.Code, seen, tc.code, tc.want)
		}
		if w.Code == 200 && (strings.Contains(seen, "ann@example.com") || !strings.Contains(seen, "a bomb in the picture's bytes")) {
			t.Errorf("%s: llm_jobs saw %q", tc.name, seen)
		}
	}
}
