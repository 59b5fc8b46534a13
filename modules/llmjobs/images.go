package llmjobs

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/openai"
)

// imagesRequest is the body of POST /v1/images/generations, as OpenAI's
// Images API takes it.
type imagesRequest struct {
	Model             string `json:"model"`
	Prompt            string `json:"prompt"`
	N                 *int   `json:"n"`
	Size              string `json:"size"`
	ResponseFormat    string `json:"response_format"`
	OutputFormat      string `json:"output_format"`
	Quality           string `json:"quality"`
	Style             string `json:"style"`
	Background        string `json:"background"`
	Moderation        string `json:"moderation"`
	OutputCompression *int   `json:"output_compression"`
	User              string `json:"user"`
	SafetyIdentifier  string `json:"safety_identifier"`
	InputFidelity     string `json:"input_fidelity"` // edits
	Stream            bool   `json:"stream"`
	PartialImages     *int   `json:"partial_images"`
}

// imageSize reads size: WxH (each 64 to 4096, a multiple of 8), or auto
// (1024x1024).
func imageSize(s string) (int, int, bool) {
	if s == "" || s == "auto" {
		return 1024, 1024, true
	}
	ws, hs, ok := strings.Cut(s, "x")
	w, err1 := strconv.Atoi(ws)
	h, err2 := strconv.Atoi(hs)
	if !ok || err1 != nil || err2 != nil || w < 64 || h < 64 || w > 4096 || h > 4096 || w%8 != 0 || h%8 != 0 {
		return 0, 0, false
	}
	return w, h, true
}

// imagesJob is one request of the Images API as the job that answers
// it: its workflow and inputs, the size and number of pictures, and how
// to answer.
type imagesJob struct {
	req           imagesRequest
	api           string // images.generations or images.edits
	events        string // its stream's event prefix: image_generation or image_edit
	width, height int
	n             int
	inputs        []*inputFile
	workflow      func(m *catalog.Model) (json.RawMessage, error)
}

// generations answers POST /v1/images/generations: the prompt becomes a
// text to image workflow (the model's txt2img, else ComfyUI's default
// one) run as a job of the
// model, and the answer waits for it: the pictures as base64 PNG
// (b64_json, the default) or as the job's output URLs (url); with
// stream, server-sent events of partial pictures, then the pictures.
func (h *Jobs) generations(w http.ResponseWriter, r *http.Request) {
	var req imagesRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		apiErr(w, r, http.StatusBadRequest, "invalid_json", "", "the body must be an images request in JSON (model, prompt, n, size, response_format): %v", err)
		return
	}
	spec := &imagesJob{req: req, api: "images.generations", events: "image_generation"}
	if e := checkImages(spec, false); e != nil {
		e.WriteFor(w, r)
		return
	}
	spec.workflow = func(m *catalog.Model) (json.RawMessage, error) {
		return imageWorkflow(m, req.Prompt, spec.width, spec.height, spec.n) // named.go
	}
	h.serveImages(w, r, spec)
}

// checkImages checks a request's common fields and sets the size and
// number of pictures; an edit's size may be left to its picture's.
func checkImages(spec *imagesJob, edit bool) *openai.Error {
	req := spec.req
	width, height, ok := imageSize(req.Size)
	if edit && (req.Size == "" || req.Size == "auto") {
		width, height = 0, 0
	}
	n := 1
	if req.N != nil {
		n = *req.N
	}
	bad := func(param, format string, args ...any) *openai.Error {
		e := openai.BadRequest("invalid_value", format, args...)
		e.Param = param
		return e
	}
	switch {
	case strings.TrimSpace(req.Prompt) == "":
		e := bad("prompt", "prompt is required: what the picture shows")
		e.Code = "missing_required_parameter"
		return e
	case len(req.Prompt) > 32000:
		return bad("prompt", "prompt is %d characters long; at most 32000", len(req.Prompt))
	case n < 1 || n > 10:
		return bad("n", "n %d: ask 1 to 10 pictures", n)
	case !ok:
		return bad("size", "size %s: give WIDTHxHEIGHT, each 64 to 4096 and a multiple of 8 (such as 1024x768), or auto", catalog.Bounded(req.Size))
	case req.ResponseFormat != "" && req.ResponseFormat != "b64_json" && req.ResponseFormat != "url":
		return bad("response_format", "response_format %s: use b64_json or url", catalog.Bounded(req.ResponseFormat))
	case req.OutputFormat != "" && req.OutputFormat != "png":
		return bad("output_format", "output_format %s: this gateway's image models write png", catalog.Bounded(req.OutputFormat))
	case req.PartialImages != nil && (*req.PartialImages < 0 || *req.PartialImages > 3):
		return bad("partial_images", "partial_images %d: ask 0 to 3 partial pictures", *req.PartialImages)
	case req.Stream && req.ResponseFormat == "url":
		return bad("response_format", "a stream sends its pictures as b64_json; leave response_format out, or ask url without stream")
	}
	spec.width, spec.height, spec.n = width, height, n
	return nil
}

// serveImages runs the request's workflow as a job and answers with its
// pictures, whole or streamed.
func (h *Jobs) serveImages(w http.ResponseWriter, r *http.Request, spec *imagesJob) {
	if !h.checkModel(w, r, spec.req.Model) {
		return
	}
	m, _ := h.svc.app.Load().Lookup(spec.req.Model)
	wf, err := spec.workflow(m)
	if err != nil {
		apiErr(w, r, http.StatusBadRequest, "invalid_workflow", "model", "the model's %s workflow cannot run this request: %v", "txt2img", err)
		return
	}
	classes, _ := checkWorkflow(wf)
	j := &job{ID: newJobID(), Object: "job", Model: m.Name, State: stateQueued, Priority: "normal", Owner: ownerOf(r),
		CreatedAt: time.Now().Unix(), Outputs: []outputFile{}, Workflow: wf, classes: classes,
		Metadata: map[string]string{"api": spec.api}}
	ch, stop := h.svc.watch(j.ID)
	defer stop()
	if !h.queue(w, r, j, spec.inputs) {
		return
	}
	if spec.req.Stream {
		h.streamImages(w, r, spec, j.ID, ch)
		return
	}
	for st := h.svc.view(j.ID); !st.finished(); st = h.svc.view(j.ID) {
		select {
		case <-ch:
		case <-r.Context().Done():
			h.svc.cancel(j.ID) // the client left: its pictures are not drawn
			return
		}
	}
	st := h.svc.view(j.ID)
	if st.State != stateSucceeded {
		apiErr(w, r, http.StatusInternalServerError, "image_generation_failed", "", "%s", failure(st))
		return
	}
	h.writeImages(w, r, spec, st)
}

// failure says why an images job did not succeed.
func failure(st job) string {
	msg := "the job ended " + st.State
	if st.Error != nil {
		msg = st.Error.Message
	}
	return fmt.Sprintf("making the pictures failed (job %s): %s", st.ID, msg)
}

// writeImages answers with the job's pictures.
func (h *Jobs) writeImages(w http.ResponseWriter, r *http.Request, spec *imagesJob, st job) {
	req := spec.req
	data := []map[string]any{}
	for _, o := range st.Outputs {
		if o.Kind != "images" {
			continue
		}
		if req.ResponseFormat == "url" {
			data = append(data, map[string]any{"url": baseURL(r) + o.URL, "revised_prompt": req.Prompt})
			continue
		}
		b, err := h.svc.outputBytes(r.Context(), st.ID, o)
		if err != nil {
			apiErr(w, r, http.StatusInternalServerError, "server_error", "", "reading picture %d of job %s: %v", o.Index, st.ID, err)
			return
		}
		data = append(data, map[string]any{"b64_json": base64.StdEncoding.EncodeToString(b), "revised_prompt": req.Prompt})
	}
	writeJSON(w, http.StatusOK, map[string]any{"created": st.CreatedAt, "data": data, "output_format": "png",
		"size": spec.size(), "background": "opaque", "quality": quality(req)})
}

// size is the pictures' size as the answer gives it.
func (spec *imagesJob) size() string {
	for _, in := range spec.inputs {
		if spec.width == 0 && in.Name == "image" {
			return fmt.Sprintf("%dx%d", in.Width, in.Height)
		}
	}
	return fmt.Sprintf("%dx%d", spec.width, spec.height)
}

func quality(req imagesRequest) string {
	if req.Quality == "" {
		return "auto"
	}
	return req.Quality
}

// baseURL is the scheme and host the client reached.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// checkpointOf is the checkpoint file the workflow loads: the base name
// of the model's source, else <model>.safetensors.
func checkpointOf(m *catalog.Model) string {
	if m.Source != "" {
		return path.Base(filepath.ToSlash(m.Source))
	}
	return path.Base(m.Name) + ".safetensors"
}

// txt2img is ComfyUI's default text to image workflow for one request.
func txt2img(ckpt, prompt string, width, height, n int) json.RawMessage {
	wf := map[string]any{
		"3": node("KSampler", map[string]any{"seed": newSeed(), "steps": 20, "cfg": 7, "sampler_name": "euler", "scheduler": "normal", "denoise": 1,
			"model": []any{"4", 0}, "positive": []any{"6", 0}, "negative": []any{"7", 0}, "latent_image": []any{"5", 0}}),
		"4": node("CheckpointLoaderSimple", map[string]any{"ckpt_name": ckpt}),
		"5": node("EmptyLatentImage", map[string]any{"width": width, "height": height, "batch_size": n}),
		"6": node("CLIPTextEncode", map[string]any{"text": prompt, "clip": []any{"4", 1}}),
		"7": node("CLIPTextEncode", map[string]any{"text": "", "clip": []any{"4", 1}}),
		"8": node("VAEDecode", map[string]any{"samples": []any{"3", 0}, "vae": []any{"4", 2}}),
		"9": node("SaveImage", map[string]any{"filename_prefix": "llmgw", "images": []any{"8", 0}}),
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(wf)
	return bytes.TrimSpace(buf.Bytes())
}

// newSeed is a random seed; ComfyUI's seeds fit in 50 bits.
func newSeed() uint64 {
	var seed [8]byte
	_, _ = rand.Read(seed[:])
	return binary.LittleEndian.Uint64(seed[:]) >> 14
}

func node(class string, inputs map[string]any) map[string]any {
	return map[string]any{"class_type": class, "inputs": inputs}
}
