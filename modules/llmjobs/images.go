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

// generations answers POST /v1/images/generations: the prompt becomes a
// text to image workflow (ComfyUI's default one) run as a job of the
// model, and the answer waits for it: the pictures as base64 PNG
// (b64_json, the default) or as the job's output URLs (url).
func (h *Jobs) generations(w http.ResponseWriter, r *http.Request) {
	var req imagesRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		apiErr(w, r, http.StatusBadRequest, "invalid_json", "", "the body must be an images request in JSON (model, prompt, n, size, response_format): %v", err)
		return
	}
	width, height, ok := imageSize(req.Size)
	n := 1
	if req.N != nil {
		n = *req.N
	}
	switch {
	case strings.TrimSpace(req.Prompt) == "":
		apiErr(w, r, http.StatusBadRequest, "missing_required_parameter", "prompt", "prompt is required: what the picture shows")
	case len(req.Prompt) > 32000:
		apiErr(w, r, http.StatusBadRequest, "invalid_value", "prompt", "prompt is %d characters long; at most 32000", len(req.Prompt))
	case n < 1 || n > 10:
		apiErr(w, r, http.StatusBadRequest, "invalid_value", "n", "n %d: ask 1 to 10 pictures", n)
	case !ok:
		apiErr(w, r, http.StatusBadRequest, "invalid_value", "size", "size %s: give WIDTHxHEIGHT, each 64 to 4096 and a multiple of 8 (such as 1024x768), or auto", catalog.Bounded(req.Size))
	case req.ResponseFormat != "" && req.ResponseFormat != "b64_json" && req.ResponseFormat != "url":
		apiErr(w, r, http.StatusBadRequest, "invalid_value", "response_format", "response_format %s: use b64_json or url", catalog.Bounded(req.ResponseFormat))
	case req.OutputFormat != "" && req.OutputFormat != "png":
		apiErr(w, r, http.StatusBadRequest, "invalid_value", "output_format", "output_format %s: this gateway's image models write png", catalog.Bounded(req.OutputFormat))
	case req.Stream:
		apiErr(w, r, http.StatusBadRequest, "unsupported_value", "stream", "stream: this gateway answers image generations whole; leave stream out (or follow a job: POST /v1/jobs and GET /v1/jobs/{id}/events)")
	default:
		h.generate(w, r, req, width, height, n)
	}
}

// generate runs the request's workflow as a job and answers with its
// pictures.
func (h *Jobs) generate(w http.ResponseWriter, r *http.Request, req imagesRequest, width, height, n int) {
	if !h.checkModel(w, r, req.Model) {
		return
	}
	m, _ := h.svc.app.Load().Lookup(req.Model)
	wf := txt2img(checkpointOf(m), req.Prompt, width, height, n)
	classes, _ := checkWorkflow(wf)
	j := &job{ID: newJobID(), Object: "job", Model: m.Name, State: stateQueued, Priority: "normal", Owner: ownerOf(r),
		CreatedAt: time.Now().Unix(), Outputs: []outputFile{}, Workflow: wf, classes: classes,
		Metadata: map[string]string{"api": "images.generations"}}
	ch, stop := h.svc.watch(j.ID)
	defer stop()
	if !h.svc.enqueue(j) {
		w.Header().Set("Retry-After", "30")
		apiErr(w, r, http.StatusTooManyRequests, "queue_full", "", "model %s has %d jobs waiting; try again later", m.Name, h.MaxQueued)
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
		msg := "the job ended " + st.State
		if st.Error != nil {
			msg = st.Error.Message
		}
		apiErr(w, r, http.StatusInternalServerError, "image_generation_failed", "", "generating the pictures failed (job %s): %s", j.ID, msg)
		return
	}
	h.writeImages(w, r, req, st, width, height)
}

// writeImages answers with the job's pictures.
func (h *Jobs) writeImages(w http.ResponseWriter, r *http.Request, req imagesRequest, st job, width, height int) {
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
		"size": fmt.Sprintf("%dx%d", width, height), "background": "opaque"})
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
	var seed [8]byte
	_, _ = rand.Read(seed[:])
	s := binary.LittleEndian.Uint64(seed[:]) >> 14 // ComfyUI's seeds fit in 50 bits
	wf := map[string]any{
		"3": node("KSampler", map[string]any{"seed": s, "steps": 20, "cfg": 7, "sampler_name": "euler", "scheduler": "normal", "denoise": 1,
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

func node(class string, inputs map[string]any) map[string]any {
	return map[string]any{"class_type": class, "inputs": inputs}
}
