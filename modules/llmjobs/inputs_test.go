package llmjobs

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/jpeg"
	"image/png"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/engines/simimage"
	"github.com/llmgw/llmgw/modules/llmjobs/comfy"
)

func pngOf(w, h int) []byte {
	var buf bytes.Buffer
	_ = png.Encode(&buf, image.NewNRGBA(image.Rect(0, 0, w, h)))
	return buf.Bytes()
}

func TestPictureInfo(t *testing.T) {
	var jpg bytes.Buffer
	_ = jpeg.Encode(&jpg, image.NewRGBA(image.Rect(0, 0, 30, 20)), nil)
	// A whole 1x1 lossless WebP.
	webp := []byte("RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00\x2f\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00")
	for _, tc := range []struct {
		name   string
		b      []byte
		ct     string
		w, h   int
		wantOK bool
	}{
		{"png", pngOf(12, 7), "image/png", 12, 7, true},
		{"jpeg", jpg.Bytes(), "image/jpeg", 30, 20, true},
		{"webp", webp, "image/webp", 1, 1, true},
		{"text", []byte("hello, this is not a picture at all"), "", 0, 0, false},
		{"a gif", []byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;"), "", 0, 0, false},
	} {
		ct, _, w, h, ok := pictureInfo(tc.b)
		if ct != tc.ct || w != tc.w || h != tc.h || ok != tc.wantOK {
			t.Errorf("%s: got %s %dx%d %v, want %s %dx%d %v", tc.name, ct, w, h, ok, tc.ct, tc.w, tc.h, tc.wantOK)
		}
	}
}

func TestInputRefs(t *testing.T) {
	wf := json.RawMessage(`{"1":{"class_type":"LoadImage","inputs":{"image":"input:photo"},"_meta":{"title":"Load"}},
		"2":{"class_type":"LoadImage","inputs":{"image":"input:photo","upload":"image"}},
		"3":{"class_type":"CLIPTextEncode","inputs":{"text":"input: not a reference","clip":["4",1]}}}`)
	photo := []*inputFile{{Name: "photo"}}
	for _, tc := range []struct {
		name string
		ins  []*inputFile
		want string
	}{
		{"each input used", photo, ""},
		{"no input file", nil, `refers to input "photo", but the job has no input file of that name (it has: none)`},
		{"an unused input", append(photo, &inputFile{Name: "other"}), `the input file other is not used by the workflow`},
	} {
		if got := checkInputRefs(wf, tc.ins); !strings.Contains(got, tc.want) || (tc.want == "") != (got == "") {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	bound, err := bindInputs(wf, map[string]string{"photo": "llmgw-job_1-photo.png"})
	if err != nil {
		t.Fatal(err)
	}
	var nodes map[string]struct {
		Inputs map[string]any `json:"inputs"`
		Meta   map[string]any `json:"_meta"`
	}
	_ = json.Unmarshal(bound, &nodes)
	if nodes["1"].Inputs["image"] != "llmgw-job_1-photo.png" || nodes["2"].Inputs["image"] != "llmgw-job_1-photo.png" ||
		nodes["3"].Inputs["text"] != "input: not a reference" || nodes["1"].Meta["title"] != "Load" || nodes["2"].Inputs["upload"] != "image" {
		t.Errorf("bound workflow: %s", bound)
	}
}

func TestDue(t *testing.T) {
	for _, tc := range []struct {
		step, steps, k, p int
		want              bool
	}{
		{6, 20, 0, 2, false}, {7, 20, 0, 2, true}, {13, 20, 1, 2, false}, {14, 20, 1, 2, true},
		{10, 20, 0, 1, true}, {1, 20, 0, 3, false}, {0, 0, 2, 3, true}, {20, 20, 2, 3, true},
	} {
		if got := due(comfy.Progress{Step: tc.step, Steps: tc.steps}, tc.k, tc.p); got != tc.want {
			t.Errorf("step %d of %d, partial %d of %d: got %v, want %v", tc.step, tc.steps, tc.k, tc.p, got, tc.want)
		}
	}
}

// The edits' workflow, with two pictures, a mask, a size and n, runs on
// a ComfyUI API server (the simulator) once its inputs are uploaded and
// bound, and draws n pictures of the size.
func TestImg2imgRuns(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := simimage.NewServer(ctx, simimage.Config{Model: "m", StepTime: time.Millisecond, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	c := &comfy.Client{Base: ts.URL, ID: "t"}
	wf := img2img("m.safetensors", "a kite", []string{"image", "image_2"}, "mask", 96, 64, 3)
	if classes, msg := checkWorkflow(wf); msg != "" || len(classes) != 14 {
		t.Fatalf("workflow: %q, %d nodes: %s", msg, len(classes), wf)
	}
	ins := []*inputFile{{Name: "image"}, {Name: "image_2"}, {Name: "mask"}}
	if msg := checkInputRefs(wf, ins); msg != "" {
		t.Fatal(msg)
	}
	names := map[string]string{}
	for _, in := range ins {
		if names[in.Name], err = c.Upload(ctx, "job-"+in.Name+".png", pngOf(40, 30)); err != nil {
			t.Fatal(err)
		}
	}
	bound, err := bindInputs(wf, names)
	if err != nil {
		t.Fatal(err)
	}
	outs, err := c.Run(ctx, bound, nil)
	if err != nil || len(outs) != 3 {
		t.Fatalf("run: %v, %d outputs", err, len(outs))
	}
	body, _, err := c.Fetch(ctx, outs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	cfg, err := png.DecodeConfig(body)
	if err != nil || cfg.Width != 96 || cfg.Height != 64 {
		t.Errorf("picture: %v %+v", err, cfg)
	}
}
