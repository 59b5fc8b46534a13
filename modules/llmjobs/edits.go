package llmjobs

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/openai"
)

// edits answers POST /v1/images/edits, OpenAI's multipart form: the
// pictures (image, or several as image[]) and an optional mask become
// the inputs of an image to image workflow run as a job of the model;
// the answer is as for generations.
func (h *Jobs) edits(w http.ResponseWriter, r *http.Request) {
	spec, e := h.readEdit(w, r)
	if e == nil {
		e = checkImages(spec, true)
	}
	if e != nil {
		e.WriteFor(w, r)
		return
	}
	var images []string
	mask := ""
	for _, in := range spec.inputs {
		if in.Name == "mask" {
			mask = in.Name
		} else {
			images = append(images, in.Name)
		}
	}
	spec.workflow = func(m *catalog.Model) (json.RawMessage, error) {
		return img2img(checkpointOf(m), spec.req.Prompt, images, mask, spec.width, spec.height, spec.n), nil
	}
	h.serveImages(w, r, spec)
}

// editFields are the text fields of an edit and where each goes.
func editFields(req *imagesRequest) map[string]func(string) error {
	str := func(p *string) func(string) error { return func(v string) error { *p = v; return nil } }
	num := func(p **int) func(string) error {
		return func(v string) error {
			n, err := strconv.Atoi(v)
			*p = &n
			return err
		}
	}
	return map[string]func(string) error{
		"model": str(&req.Model), "prompt": str(&req.Prompt), "size": str(&req.Size), "response_format": str(&req.ResponseFormat),
		"output_format": str(&req.OutputFormat), "quality": str(&req.Quality), "background": str(&req.Background),
		"user": str(&req.User), "safety_identifier": str(&req.SafetyIdentifier), "input_fidelity": str(&req.InputFidelity),
		"moderation": str(&req.Moderation), "n": num(&req.N), "partial_images": num(&req.PartialImages),
		"output_compression": num(&req.OutputCompression),
		"stream":             func(v string) (err error) { req.Stream, err = strconv.ParseBool(v); return err },
	}
}

// readEdit reads the multipart form of an edit.
func (h *Jobs) readEdit(w http.ResponseWriter, r *http.Request) (*imagesJob, *openai.Error) {
	spec := &imagesJob{api: "images.edits", events: "image_edit"}
	r.Body = http.MaxBytesReader(w, r.Body, h.maxMultipart())
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, openai.BadRequest("invalid_request", "an edit is a multipart/form-data body with the parts image (or image[]), prompt and model: %v", err)
	}
	fields := editFields(&spec.req)
	for {
		part, err := mr.NextPart()
		var tooBig *http.MaxBytesError
		switch {
		case errors.Is(err, io.EOF):
			if len(spec.inputs) == spec.masks() {
				e := openai.BadRequest("missing_required_parameter", "image is required: the picture to edit, as a file part named image (or several named image[])")
				e.Param = "image"
				return nil, e
			}
			return spec, nil
		case errors.As(err, &tooBig):
			return nil, requestTooLarge(h)
		case err != nil:
			return nil, openai.BadRequest("invalid_request", "reading the multipart body: %v", err)
		}
		if e := h.readEditPart(spec, fields, part.FormName(), part); e != nil {
			return nil, e
		}
		part.Close()
	}
}

// readEditPart reads one part: a picture, the mask or a field.
func (h *Jobs) readEditPart(spec *imagesJob, fields map[string]func(string) error, name string, part *multipart.Part) *openai.Error {
	isFile := part.FileName() != ""
	input := ""
	switch {
	case (name == "image" || name == "image[]") && isFile:
		input = "image"
		if n := len(spec.inputs) + 1 - spec.masks(); n > 1 {
			input = "image_" + strconv.Itoa(n)
		}
	case name == "mask" && isFile:
		input = "mask"
	}
	if input != "" {
		in, e := h.readInput(input, name, part)
		if e == nil {
			spec.inputs, e = h.addInput(spec.inputs, in, name)
		}
		return e
	}
	if name == "image" || name == "image[]" || name == "mask" {
		e := openai.BadRequest("invalid_value", "%s must be a file part (with a filename): the picture's bytes, PNG, JPEG or WebP", name)
		e.Param = name
		return e
	}
	set, ok := fields[name]
	if !ok {
		e := openai.BadRequest("unknown_parameter", "unknown part %s: an edit takes image (or image[]), mask, prompt, model, n, size, response_format, stream and partial_images", catalog.Bounded(name))
		e.Param = name
		return e
	}
	b, _ := io.ReadAll(io.LimitReader(part, 64<<10))
	if err := set(strings.TrimSpace(string(b))); err != nil {
		e := openai.BadRequest("invalid_value", "%s %s: give a number (or true/false for stream)", name, catalog.Bounded(string(b)))
		e.Param = name
		return e
	}
	return nil
}

// masks is how many of the inputs are the mask (0 or 1).
func (spec *imagesJob) masks() int {
	for _, in := range spec.inputs {
		if in.Name == "mask" {
			return 1
		}
	}
	return 0
}

// img2img is an image to image workflow: the pictures (blended together
// when there are several), scaled to the size asked (width 0: kept),
// encoded, masked where the mask is transparent, sampled from the
// prompt at denoise 0.75, n of them, and saved. Its inputs are named
// "input:<name>".
func img2img(ckpt, prompt string, images []string, mask string, width, height, n int) json.RawMessage {
	wf := map[string]any{
		"4": node("CheckpointLoaderSimple", map[string]any{"ckpt_name": ckpt}),
		"6": node("CLIPTextEncode", map[string]any{"text": prompt, "clip": []any{"4", 1}}),
		"7": node("CLIPTextEncode", map[string]any{"text": "", "clip": []any{"4", 1}}),
	}
	id := 10
	add := func(class string, inputs map[string]any) []any {
		id++
		wf[strconv.Itoa(id)] = node(class, inputs)
		return []any{strconv.Itoa(id), 0}
	}
	pixels := add("LoadImage", map[string]any{"image": inputRef + images[0]})
	for k, name := range images[1:] {
		other := add("LoadImage", map[string]any{"image": inputRef + name})
		pixels = add("ImageBlend", map[string]any{"image1": pixels, "image2": other, "blend_factor": 1 / float64(k+2), "blend_mode": "normal"})
	}
	if width > 0 {
		pixels = add("ImageScale", map[string]any{"image": pixels, "upscale_method": "lanczos", "width": width, "height": height, "crop": "center"})
	}
	latent := add("VAEEncode", map[string]any{"pixels": pixels, "vae": []any{"4", 2}})
	if n > 1 {
		latent = add("RepeatLatentBatch", map[string]any{"samples": latent, "amount": n})
	}
	if mask != "" {
		m := add("LoadImage", map[string]any{"image": inputRef + mask})
		latent = add("SetLatentNoiseMask", map[string]any{"samples": latent, "mask": []any{m[0], 1}})
	}
	wf["3"] = node("KSampler", map[string]any{"seed": newSeed(), "steps": 20, "cfg": 7, "sampler_name": "euler", "scheduler": "normal", "denoise": 0.75,
		"model": []any{"4", 0}, "positive": []any{"6", 0}, "negative": []any{"7", 0}, "latent_image": latent})
	wf["8"] = node("VAEDecode", map[string]any{"samples": []any{"3", 0}, "vae": []any{"4", 2}})
	wf["9"] = node("SaveImage", map[string]any{"filename_prefix": "llmgw", "images": []any{"8", 0}})
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(wf)
	return bytes.TrimSpace(buf.Bytes())
}
