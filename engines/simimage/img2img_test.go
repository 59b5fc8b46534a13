package simimage

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// img2imgWF is an image to image workflow: an uploaded picture, scaled,
// encoded, sampled at denoise 0.6 and saved, two of it.
const img2imgWF = `{
  "1": {"class_type": "LoadImage", "inputs": {"image": "INPUT"}},
  "2": {"class_type": "ImageScale", "inputs": {"image": ["1", 0], "upscale_method": "lanczos", "width": 96, "height": 64, "crop": "disabled"}},
  "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "m.safetensors"}},
  "5": {"class_type": "VAEEncode", "inputs": {"pixels": ["2", 0], "vae": ["4", 2]}},
  "10": {"class_type": "RepeatLatentBatch", "inputs": {"samples": ["5", 0], "amount": 2}},
  "6": {"class_type": "CLIPTextEncode", "inputs": {"text": "make it autumn", "clip": ["4", 1]}},
  "3": {"class_type": "KSampler", "inputs": {"seed": 1, "steps": 4, "cfg": 7, "sampler_name": "euler", "scheduler": "normal", "denoise": 0.6,
        "model": ["4", 0], "positive": ["6", 0], "negative": ["6", 0], "latent_image": ["10", 0]}},
  "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
  "9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "edit", "images": ["8", 0]}}
}`

// solid is a PNG of one colour.
func solid(c color.NRGBA, w, h int) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c.R, c.G, c.B, c.A
	}
	var buf bytes.Buffer
	_ = png.Encode(&buf, img)
	return buf.Bytes()
}

func uploadPicture(t *testing.T, base, name string, b []byte) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("image", name)
	fw.Write(b)
	_ = mw.WriteField("overwrite", "true")
	mw.Close()
	resp, err := http.Post(base+"/upload/image", mw.FormDataContentType(), &body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("upload: %v %v", resp, err)
	}
	resp.Body.Close()
}

// average is a PNG's mean colour.
func average(t *testing.T, b []byte) (r, g, bl float64, w, h int) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	bd := img.Bounds()
	for y := bd.Min.Y; y < bd.Max.Y; y++ {
		for x := bd.Min.X; x < bd.Max.X; x++ {
			c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
			r, g, bl = r+float64(c.R), g+float64(c.G), bl+float64(c.B)
		}
	}
	n := float64(bd.Dx() * bd.Dy())
	return r / n, g / n, bl / n, bd.Dx(), bd.Dy()
}

// An image to image workflow draws pictures that keep what went in: a
// red picture gives reddish pictures, a blue one bluish, at the size
// ImageScale asked, as many as RepeatLatentBatch made; with previews on,
// each sampler step sends ComfyUI's binary preview message (event 1,
// a JPEG).
func TestImageToImage(t *testing.T) {
	ts, _ := newTestServer(t, Config{Model: "m", Previews: true})
	uploadPicture(t, ts.URL, "red.png", solid(color.NRGBA{230, 10, 10, 255}, 40, 30))
	uploadPicture(t, ts.URL, "blue.png", solid(color.NRGBA{10, 10, 230, 255}, 40, 30))
	ws := dial(t, ts, "c1")
	for _, tc := range []struct {
		name    string
		reddish bool
	}{{"red.png", true}, {"blue.png", false}} {
		_, out := postJSON(t, ts.URL+"/prompt", `{"client_id":"c1","prompt":`+strings.Replace(img2imgWF, "INPUT", tc.name, 1)+`}`)
		id, _ := out["prompt_id"].(string)
		previews := readWithPreviews(t, ws, id)
		if len(previews) != 4 {
			t.Errorf("%s: %d previews, want one per step (4)", tc.name, len(previews))
		}
		var hist map[string]map[string]any
		getJSON(t, ts.URL+"/history/"+id, &hist)
		images := hist[id]["outputs"].(map[string]any)["9"].(map[string]any)["images"].([]any)
		if len(images) != 2 {
			t.Fatalf("%s: %d pictures, want 2", tc.name, len(images))
		}
		im := images[0].(map[string]any)
		b := get(t, ts.URL+"/view?"+url.Values{"filename": {im["filename"].(string)}, "type": {"output"}}.Encode())
		r, _, bl, w, h := average(t, b)
		if w != 96 || h != 64 || (r > bl+60) != tc.reddish || (bl > r+60) == tc.reddish {
			t.Errorf("%s: a %dx%d picture of mean red %.0f, blue %.0f", tc.name, w, h, r, bl)
		}
	}
}

// readWithPreviews reads the client's messages until the prompt ends and
// returns the preview pictures' sizes.
func readWithPreviews(t *testing.T, ws *websocket.Conn, id string) []image.Point {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var sizes []image.Point
	for {
		typ, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if typ == websocket.MessageBinary {
			if len(b) < 8 || binary.BigEndian.Uint32(b) != 1 || binary.BigEndian.Uint32(b[4:]) != 1 {
				t.Fatalf("a binary message that is not a JPEG preview: % x", b[:min(len(b), 8)])
			}
			cfg, err := jpeg.DecodeConfig(bytes.NewReader(b[8:]))
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, image.Pt(cfg.Width, cfg.Height))
			continue
		}
		var e event
		_ = json.Unmarshal(b, &e)
		if e.Data["prompt_id"] == id && (e.Type == "execution_success" || e.Type == "execution_error") {
			if e.Type != "execution_success" {
				t.Fatalf("the workflow failed: %v", e.Data)
			}
			return sizes
		}
	}
}
