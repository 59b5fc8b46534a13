package llmjobs

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/jpeg"
	"image/png"
	"io"
	"net/http"
	"time"

	"github.com/llmgw/llmgw/modules/llmjobs/comfy"
)

// streamImages answers an images request that asked stream: server-sent
// events as OpenAI's Images API sends them. Up to partial_images
// <events>.partial_image events, each a preview picture the model's
// server sent while it sampled (spread over the steps: the k-th of p
// once the sampler is k/(p+1) of the way), then one <events>.completed
// event per picture; a failure is an error event. A client that leaves
// cancels the job.
func (h *Jobs) streamImages(w http.ResponseWriter, r *http.Request, spec *imagesJob, id string, ch chan struct{}) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	out := &sseWriter{w: w, fl: fl}
	partials, sent, seen := 0, 0, 0
	if spec.req.PartialImages != nil {
		partials = *spec.req.PartialImages
	}
	for {
		st := h.svc.view(id)
		if pv, n := h.svc.latestPreview(id); pv != nil && n > seen && sent < partials && due(pv.Progress, sent, partials) {
			seen = n
			if ev, ok := spec.partialEvent(pv, sent); ok {
				if !out.send(spec.events+".partial_image", ev) {
					h.svc.cancel(id)
					return
				}
				sent++
			}
		}
		if st.finished() {
			h.finishStream(r.Context(), spec, st, out.send)
			return
		}
		select {
		case <-ch:
		case <-r.Context().Done():
			h.svc.cancel(id) // the client left: its pictures are not drawn
			return
		case <-time.After(15 * time.Second):
			if !out.comment("keep-alive") {
				h.svc.cancel(id)
				return
			}
		}
	}
}

// sseWriter writes server-sent events, each flushed.
type sseWriter struct {
	w  io.Writer
	fl http.Flusher
}

// send writes one event of JSON data; false when the client is gone.
func (s *sseWriter) send(event string, data any) bool {
	b, _ := json.Marshal(data)
	_, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, b)
	s.flush()
	return err == nil
}

// comment writes a comment line (a keep-alive).
func (s *sseWriter) comment(text string) bool {
	_, err := fmt.Fprintf(s.w, ": %s\n\n", text)
	s.flush()
	return err == nil
}

func (s *sseWriter) flush() {
	if s.fl != nil {
		s.fl.Flush()
	}
}

// due tells whether partial picture k of p is due at progress pr: once
// the sampler has taken (k+1)/(p+1) of its steps (at once when the
// server does not say its steps).
func due(pr comfy.Progress, k, p int) bool {
	return pr.Steps == 0 || pr.Step*(p+1) >= (k+1)*pr.Steps
}

// finishStream sends the pictures of a finished job, or why there are
// none.
func (h *Jobs) finishStream(ctx context.Context, spec *imagesJob, st job, send func(string, any) bool) {
	if st.State != stateSucceeded {
		send("error", map[string]any{"type": "error", "error": map[string]any{"type": "server_error", "code": "image_generation_failed",
			"message": failure(st), "param": nil}})
		return
	}
	for _, o := range st.Outputs {
		if o.Kind != "images" {
			continue
		}
		b, err := h.svc.outputBytes(ctx, st.ID, o)
		if err != nil {
			send("error", map[string]any{"type": "error", "error": map[string]any{"type": "server_error", "code": "server_error",
				"message": fmt.Sprintf("reading picture %d of job %s: %v", o.Index, st.ID, err), "param": nil}})
			return
		}
		ev := spec.event(spec.events+".completed", b)
		// The model's server counts no tokens: usage is all zeros.
		ev["usage"] = map[string]any{"input_tokens": 0, "output_tokens": 0, "total_tokens": 0,
			"input_tokens_details": map[string]any{"text_tokens": 0, "image_tokens": 0}}
		if !send(spec.events+".completed", ev) {
			return
		}
	}
}

// event is the fields an images event shares.
func (spec *imagesJob) event(typ string, picture []byte) map[string]any {
	return map[string]any{"type": typ, "b64_json": base64.StdEncoding.EncodeToString(picture), "created_at": time.Now().Unix(),
		"size": spec.size(), "quality": quality(spec.req), "background": "opaque", "output_format": "png"}
}

// partialEvent is partial picture k: the preview, as a PNG (previews
// come as JPEG or PNG; a WebP one is skipped).
func (spec *imagesJob) partialEvent(pv *comfy.Preview, k int) (map[string]any, bool) {
	b := pv.Image
	switch pv.ContentType {
	case "image/png":
	case "image/jpeg":
		img, err := jpeg.Decode(bytes.NewReader(b))
		if err != nil {
			return nil, false
		}
		var buf bytes.Buffer
		if png.Encode(&buf, img) != nil {
			return nil, false
		}
		b = buf.Bytes()
	default:
		return nil, false
	}
	ev := spec.event(spec.events+".partial_image", b)
	ev["partial_image_index"] = k
	return ev, true
}
