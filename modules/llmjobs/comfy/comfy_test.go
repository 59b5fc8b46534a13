package comfy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/engines/simimage"
)

// The client is tried against the image simulator's server, which speaks
// ComfyUI's API (a stand-in for ComfyUI, which needs Python and a GPU).
func newServer(t *testing.T, cfg simimage.Config) *Client {
	t.Helper()
	cfg.Dir = t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := simimage.NewServer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return &Client{Base: ts.URL, ID: "test-client"}
}

const wf = `{
  "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "m.safetensors"}},
  "5": {"class_type": "EmptyLatentImage", "inputs": {"width": 96, "height": 64, "batch_size": 2}},
  "6": {"class_type": "CLIPTextEncode", "inputs": {"text": "a kite", "clip": ["4", 1]}},
  "3": {"class_type": "KSampler", "inputs": {"seed": 1, "steps": 4, "cfg": 7, "sampler_name": "euler", "scheduler": "normal", "denoise": 1,
        "model": ["4", 0], "positive": ["6", 0], "negative": ["6", 0], "latent_image": ["5", 0]}},
  "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
  "9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "kite", "images": ["8", 0]}},
  "10": {"class_type": "PreviewImage", "inputs": {"images": ["8", 0]}}
}`

func TestRun(t *testing.T) {
	c := newServer(t, simimage.Config{Model: "m", StepTime: time.Millisecond})
	var ps []Progress
	outs, err := c.Run(context.Background(), json.RawMessage(wf), func(p Progress) { ps = append(ps, p) })
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 2 || outs[0].Node != "9" || outs[0].Kind != "images" || !strings.HasPrefix(outs[0].Filename, "kite_") {
		t.Fatalf("outputs (previews left out): %+v", outs)
	}
	var sampled bool
	for _, p := range ps {
		if p.Node == "3" && p.Steps == 4 && p.Fraction() > 0 && p.Fraction() < 1 {
			sampled = true
		}
	}
	if !sampled {
		t.Errorf("progress: %+v", ps)
	}
	body, ct, err := c.Fetch(context.Background(), outs[1])
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(body)
	body.Close()
	if ct != "image/png" || len(b) < 100 || string(b[1:4]) != "PNG" {
		t.Errorf("fetched %s, %d bytes", ct, len(b))
	}
}

func TestRefusedAndFailed(t *testing.T) {
	c := newServer(t, simimage.Config{Model: "m", StepTime: time.Millisecond, FailStep: 2})
	_, err := c.Run(context.Background(), json.RawMessage(strings.Replace(wf, `"VAEDecode"`, `"NoSuchNode"`, 1)), nil)
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.Type != "invalid_prompt" || !strings.Contains(err.Error(), "NoSuchNode") {
		t.Errorf("an unknown node: %v", err)
	}
	_, err = c.Run(context.Background(), json.RawMessage(wf), nil)
	var failed *NodeError
	if !errors.As(err, &failed) || failed.Node != "3" || failed.Class != "KSampler" {
		t.Errorf("a failing step: %v", err)
	}
}

func TestCancelInterrupts(t *testing.T) {
	c := newServer(t, simimage.Config{Model: "m", StepTime: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	long := strings.Replace(wf, `"steps": 4`, `"steps": 1000`, 1)
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx, json.RawMessage(long), func(p Progress) {
			if p.Step == 2 {
				cancel()
			}
		})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled run did not end")
	}
	// The server was told: its next workflow runs at once.
	if _, err := c.Run(context.Background(), json.RawMessage(wf), nil); err != nil {
		t.Errorf("the next run: %v", err)
	}
}

// img2img loads an uploaded picture and samples it.
const img2img = `{
  "1": {"class_type": "LoadImage", "inputs": {"image": "NAME"}},
  "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "m.safetensors"}},
  "5": {"class_type": "VAEEncode", "inputs": {"pixels": ["1", 0], "vae": ["4", 2]}},
  "6": {"class_type": "CLIPTextEncode", "inputs": {"text": "a kite", "clip": ["4", 1]}},
  "3": {"class_type": "KSampler", "inputs": {"seed": 1, "steps": 3, "cfg": 7, "sampler_name": "euler", "scheduler": "normal", "denoise": 0.5,
        "model": ["4", 0], "positive": ["6", 0], "negative": ["6", 0], "latent_image": ["5", 0]}},
  "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
  "9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "kite", "images": ["8", 0]}}
}`

// An uploaded picture is loaded by the name Upload returns, and the
// server's preview pictures reach Previews, one per sampler step, with
// the step they came at.
func TestUploadAndPreviews(t *testing.T) {
	c := newServer(t, simimage.Config{Model: "m", StepTime: time.Millisecond, Previews: true})
	var pic bytes.Buffer
	_ = png.Encode(&pic, image.NewNRGBA(image.Rect(0, 0, 48, 32)))
	name, err := c.Upload(context.Background(), "job-1-photo.png", pic.Bytes())
	if err != nil || name != "job-1-photo.png" {
		t.Fatalf("upload: %q %v", name, err)
	}
	var previews []Preview
	c.Previews = func(p Preview) { previews = append(previews, p) }
	outs, err := c.Run(context.Background(), json.RawMessage(strings.Replace(img2img, "NAME", name, 1)), nil)
	if err != nil || len(outs) != 1 {
		t.Fatalf("run: %v %+v", err, outs)
	}
	if len(previews) != 3 {
		t.Fatalf("%d previews, want 3", len(previews))
	}
	for i, p := range previews {
		if p.ContentType != "image/jpeg" || p.Progress.Step != i+1 || p.Progress.Steps != 3 || p.Progress.Node != "3" {
			t.Errorf("preview %d: %s at %+v", i, p.ContentType, p.Progress)
		}
		if _, err := jpeg.DecodeConfig(bytes.NewReader(p.Image)); err != nil {
			t.Errorf("preview %d: %v", i, err)
		}
	}
}
