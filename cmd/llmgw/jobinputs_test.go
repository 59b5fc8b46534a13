package main

import (
	"bytes"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// comfyImg2img is an image to image workflow in ComfyUI's API format
// whose LoadImage loads the job's input photo ("input:photo").
const comfyImg2img = `{
  "1": {"class_type": "LoadImage", "inputs": {"image": "input:photo"}},
  "2": {"class_type": "ImageScale", "inputs": {"image": ["1", 0], "upscale_method": "lanczos", "width": 96, "height": 64, "crop": "disabled"}},
  "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "v1-5-pruned-emaonly.safetensors"}},
  "5": {"class_type": "VAEEncode", "inputs": {"pixels": ["2", 0], "vae": ["4", 2]}},
  "6": {"class_type": "CLIPTextEncode", "inputs": {"text": "the same, in autumn", "clip": ["4", 1]}},
  "3": {"class_type": "KSampler", "inputs": {"seed": 1, "steps": STEPS, "cfg": 7, "sampler_name": "euler", "scheduler": "normal", "denoise": 0.6,
        "model": ["4", 0], "positive": ["6", 0], "negative": ["6", 0], "latent_image": ["5", 0]}},
  "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
  "9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "edit", "images": ["8", 0]}}
}`

// solidPNG is a w×h PNG of one colour.
func solidPNG(c color.NRGBA, w, h int) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c.R, c.G, c.B, c.A
	}
	var buf bytes.Buffer
	_ = png.Encode(&buf, img)
	return buf.Bytes()
}

// meanRGB is a PNG's mean colour and size.
func meanRGB(t *testing.T, b []byte) (r, g, bl float64, size image.Point) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PNG: %v (%.40q)", err, b)
	}
	bd := img.Bounds()
	for y := bd.Min.Y; y < bd.Max.Y; y++ {
		for x := bd.Min.X; x < bd.Max.X; x++ {
			c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
			r, g, bl = r+float64(c.R), g+float64(c.G), bl+float64(c.B)
		}
	}
	n := float64(bd.Dx() * bd.Dy())
	return r / n, g / n, bl / n, bd.Size()
}

// formPart is one part of a multipart body: a file when filename is set.
type formPart struct {
	name, filename string
	data           []byte
}

// multipartCall posts parts to path with key.
func multipartCall(t *testing.T, g *gateway, key, path string, parts ...formPart) (int, string) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, p := range parts {
		var w io.Writer
		if p.filename != "" {
			w, _ = mw.CreateFormFile(p.name, p.filename)
		} else {
			w, _ = mw.CreateFormField(p.name)
		}
		w.Write(p.data)
	}
	mw.Close()
	req, _ := http.NewRequest("POST", g.base+path, &body)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// A job takes input files in a multipart body: the workflow's
// "input:photo" loads the uploaded picture, and what comes out shows it
// (a red photo gives a reddish picture, a blue one a bluish one). A
// queued job keeps its inputs through a restart. Names the workflow
// does not match, pictures that are not PNG, JPEG or WebP, and files
// over the caps get a 4xx that says what to do, on jobs and on image
// edits; a failing images job is a 500, or streamed an error event.
func TestJobInputs(t *testing.T) {
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{}),
		quota: new(string), before: "\t\tllm_jobs {\n\t\t\tmax_input_size 64KiB\n\t\t\tmax_inputs 2\n\t\t}\n\t\tllm_kb\n"}
	g.writeConfig(picturesModel+`
		model broken {
			engine simimage
			option step_time 20ms
			option fail_step 3
			target_concurrency 1
		}`+tenancyBlock("", "", "", "")+`
		org acme2 {
			team sales {
				project beta {
					key k3 `+tenancy.HashKey("secret-3")+`
				}
			}
		}`, "")
	g.start()
	g.readyReplicas("pictures", 1)
	red, blue := solidPNG(color.NRGBA{230, 20, 20, 255}, 48, 32), solidPNG(color.NRGBA{20, 20, 230, 255}, 48, 32)
	submit := func(steps string, photo []byte) jobView {
		t.Helper()
		req := `{"model":"pictures","workflow":` + strings.Replace(comfyImg2img, "STEPS", steps, 1) + `}`
		code, raw := multipartCall(t, g, "secret-1", "/v1/jobs", formPart{name: "request", data: []byte(req)}, formPart{name: "photo", filename: "photo.png", data: photo})
		var j jobView
		if code != 200 || json.Unmarshal([]byte(raw), &j) != nil || !strings.Contains(raw, `"inputs":[{"name":"photo","filename":"photo.png","content_type":"image/png","width":48,"height":32`) {
			t.Fatalf("POST /v1/jobs with an input: %d %s", code, raw)
		}
		return j
	}
	output := func(j jobView) (float64, float64, image.Point) {
		t.Helper()
		seen := followJob(t, g, "secret-1", j.ID)
		last := seen[len(seen)-1]
		if last.State != "succeeded" || len(last.Outputs) != 1 {
			t.Fatalf("job %s ended %s %+v", j.ID, last.State, last.Error)
		}
		code, _, raw := jobCall(t, g, "secret-1", "GET", last.Outputs[0].URL, "")
		if code != 200 {
			t.Fatalf("output: %d", code)
		}
		r, _, b, size := meanRGB(t, []byte(raw))
		return r, b, size
	}
	if r, b, size := output(submit("4", red)); r < b+60 || size != image.Pt(96, 64) {
		t.Errorf("from a red photo: a %v picture of mean red %.0f, blue %.0f; want a reddish 96x64", size, r, b)
	}
	if r, b, _ := output(submit("4", blue)); b < r+60 {
		t.Errorf("from a blue photo: mean red %.0f, blue %.0f; want a bluish picture", r, b)
	}

	t.Run("restart", func(t *testing.T) {
		first := submit("300", red)
		queued := submit("4", blue)
		waitFor(t, 20*time.Second, "the first job running", func() bool {
			_, v, _ := jobCall(t, g, "secret-1", "GET", "/v1/jobs/"+first.ID, "")
			return v.State == "running"
		})
		g.stop()
		g.start()
		jobCall(t, g, "secret-1", "DELETE", "/v1/jobs/"+first.ID, "") // queued again: it need not run
		if r, b, _ := output(queued); b < r+60 {
			t.Errorf("a job queued before the restart: mean red %.0f, blue %.0f; want its blue photo to show", r, b)
		}
	})

	t.Run("refused", func(t *testing.T) {
		req := func(wf string) formPart {
			return formPart{name: "request", data: []byte(`{"model":"pictures","workflow":` + strings.Replace(wf, "STEPS", "2", 1) + `}`)}
		}
		photo := formPart{name: "photo", filename: "photo.png", data: red}
		big := append(solidPNG(color.NRGBA{1, 2, 3, 255}, 8, 8), make([]byte, 70<<10)...)
		for _, tc := range []struct {
			name  string
			parts []formPart
			code  int
			want  string
		}{
			{"an unknown input", []formPart{req(strings.Replace(comfyImg2img, "input:photo", "input:picture", 1)), photo}, 400, `refers to input \"picture\", but the job has no input file of that name (it has: photo)`},
			{"an unused input", []formPart{req(comfyImg2img), photo, {name: "extra", filename: "x.png", data: blue}}, 400, `the input file extra is not used by the workflow: refer to it as \"input:extra\"`},
			{"not a picture", []formPart{req(comfyImg2img), {name: "photo", filename: "photo.txt", data: []byte("hello")}}, 400, "is not a PNG, JPEG or WebP picture"},
			{"too large", []formPart{req(comfyImg2img), {name: "photo", filename: "big.png", data: big}}, 413, "max_input_size"},
			{"too many", []formPart{req(comfyImg2img), photo, {name: "a", filename: "a.png", data: red}, {name: "b", filename: "b.png", data: red}}, 400, "at most 2 input files (max_inputs)"},
			{"no request part", []formPart{photo}, 400, "no part named request"},
			{"a stray field", []formPart{req(comfyImg2img), photo, {name: "prompt", data: []byte("x")}}, 400, `unknown part \"prompt\"`},
			{"a bad input name", []formPart{req(comfyImg2img), {name: "../photo", filename: "p.png", data: red}}, 400, `input name \"../photo\"`},
		} {
			code, raw := multipartCall(t, g, "secret-1", "/v1/jobs", tc.parts...)
			if code != tc.code || !strings.Contains(raw, tc.want) || !strings.Contains(raw, `"error"`) {
				t.Errorf("%s: %d %s, want %d saying %q", tc.name, code, raw, tc.code, tc.want)
			}
		}
	})

	t.Run("files", func(t *testing.T) {
		// A picture uploaded to /v1/files is an input by its id, for its
		// project only.
		code, raw := multipartCall(t, g, "secret-1", "/v1/files", formPart{name: "purpose", data: []byte("user_data")},
			formPart{name: "file", filename: "photo.png", data: red})
		var f struct{ ID string }
		if code != 200 || json.Unmarshal([]byte(raw), &f) != nil || f.ID == "" {
			t.Fatalf("POST /v1/files: %d %s", code, raw)
		}
		body := `{"model":"pictures","inputs":{"photo":"` + f.ID + `"},"workflow":` + strings.Replace(comfyImg2img, "STEPS", "3", 1) + `}`
		code, j, raw := jobCall(t, g, "secret-2", "POST", "/v1/jobs", body) // another key of the project
		if code != 200 || !strings.Contains(raw, `"inputs":[{"name":"photo","filename":"photo.png","content_type":"image/png"`) {
			t.Fatalf("a job with a file's id as its input: %d %s", code, raw)
		}
		if r, b, _ := output(j); r < b+60 {
			t.Errorf("from a red photo of /v1/files: mean red %.0f, blue %.0f; want a reddish picture", r, b)
		}
		for _, tc := range []struct{ key, body, want string }{
			{"secret-3", body, "your project has no file " + `\"` + f.ID},
			{"secret-1", strings.Replace(body, f.ID, "file-nope", 1), `your project has no file \"file-nope\"`},
		} {
			if code, _, raw := jobCall(t, g, tc.key, "POST", "/v1/jobs", tc.body); code != 400 || !strings.Contains(raw, tc.want) || !strings.Contains(raw, `"param":"inputs.photo"`) {
				t.Errorf("%s: %d %s, want 400 saying %q", tc.key, code, raw, tc.want)
			}
		}
		// A file that is not a picture is refused as an input.
		_, raw = multipartCall(t, g, "secret-1", "/v1/files", formPart{name: "purpose", data: []byte("user_data")},
			formPart{name: "file", filename: "notes.txt", data: []byte("some notes")})
		_ = json.Unmarshal([]byte(raw), &f)
		notes := `{"model":"pictures","inputs":{"photo":"` + f.ID + `"},"workflow":` + strings.Replace(comfyImg2img, "STEPS", "3", 1) + `}`
		if code, _, raw := jobCall(t, g, "secret-1", "POST", "/v1/jobs", notes); code != 400 || !strings.Contains(raw, "is not a PNG, JPEG or WebP picture") {
			t.Errorf("a text file as an input: %d %s", code, raw)
		}
	})

	t.Run("images", func(t *testing.T) {
		// An edit over max_input_size, and one with an unknown part.
		big := append(solidPNG(color.NRGBA{1, 2, 3, 255}, 8, 8), make([]byte, 70<<10)...)
		fields := []formPart{{name: "model", data: []byte("pictures")}, {name: "prompt", data: []byte("autumn")}}
		for _, tc := range []struct {
			name  string
			parts []formPart
			code  int
			want  string
		}{
			{"too large", append(fields, formPart{name: "image", filename: "big.png", data: big}), 413, "max_input_size"},
			{"an unknown part", append(fields, formPart{name: "image", filename: "a.png", data: red}, formPart{name: "strength", data: []byte("1")}), 400, "an edit takes image (or image[]), mask, prompt"},
			{"no image", fields, 400, "image is required"},
		} {
			code, raw := multipartCall(t, g, "secret-1", "/v1/images/edits", tc.parts...)
			if code != tc.code || !strings.Contains(raw, tc.want) {
				t.Errorf("%s: %d %s, want %d saying %q", tc.name, code, raw, tc.code, tc.want)
			}
		}
		// A job that fails: a 500 that says why, or, streamed, an error
		// event after the events sent.
		req, _ := http.NewRequest("POST", g.base+"/v1/images/generations", strings.NewReader(`{"model":"broken","prompt":"a kite","size":"64x64"}`))
		req.Header.Set("Authorization", "Bearer secret-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 500 || !strings.Contains(string(raw), "simulated failure at step 3") {
			t.Errorf("a failing generation: %d %s", resp.StatusCode, raw)
		}
		req, _ = http.NewRequest("POST", g.base+"/v1/images/generations", strings.NewReader(`{"model":"broken","prompt":"a kite","size":"64x64","stream":true,"partial_images":3}`))
		req.Header.Set("Authorization", "Bearer secret-1")
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		// 20 steps, 3 partial pictures: the first is due at step 5, after
		// the failure at step 3.
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" ||
			!strings.HasPrefix(string(raw), "event: error\ndata: {") || !strings.Contains(string(raw), "simulated failure at step 3") || strings.Contains(string(raw), "partial_image") {
			t.Errorf("a failing stream: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
		}
	})
}
