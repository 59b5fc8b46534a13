package simimage

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// txt2img is ComfyUI's default workflow, as its "Save (API)" writes it.
const txt2img = `{
  "3": {"inputs": {"seed": 156680208700286, "steps": 5, "cfg": 8, "sampler_name": "euler", "scheduler": "normal", "denoise": 1,
        "model": ["4", 0], "positive": ["6", 0], "negative": ["7", 0], "latent_image": ["5", 0]},
        "class_type": "KSampler", "_meta": {"title": "KSampler"}},
  "4": {"inputs": {"ckpt_name": "v1-5-pruned-emaonly.safetensors"}, "class_type": "CheckpointLoaderSimple", "_meta": {"title": "Load Checkpoint"}},
  "5": {"inputs": {"width": 640, "height": 384, "batch_size": 2}, "class_type": "EmptyLatentImage", "_meta": {"title": "Empty Latent Image"}},
  "6": {"inputs": {"text": "beautiful scenery nature glass bottle landscape, , purple galaxy bottle,", "clip": ["4", 1]},
        "class_type": "CLIPTextEncode", "_meta": {"title": "CLIP Text Encode (Prompt)"}},
  "7": {"inputs": {"text": "text, watermark", "clip": ["4", 1]}, "class_type": "CLIPTextEncode", "_meta": {"title": "CLIP Text Encode (Prompt)"}},
  "8": {"inputs": {"samples": ["3", 0], "vae": ["4", 2]}, "class_type": "VAEDecode", "_meta": {"title": "VAE Decode"}},
  "9": {"inputs": {"filename_prefix": "ComfyUI", "images": ["8", 0]}, "class_type": "SaveImage", "_meta": {"title": "Save Image"}}
}`

// hunyuan3d is ComfyUI's Hunyuan3D v2 example (an image to a mesh), in
// API format.
const hunyuan3d = `{
  "54": {"inputs": {"ckpt_name": "hunyuan3d-dit-v2-mv.safetensors"}, "class_type": "ImageOnlyCheckpointLoader"},
  "56": {"inputs": {"image": "INPUT"}, "class_type": "LoadImage"},
  "51": {"inputs": {"crop": "center", "clip_vision": ["54", 1], "image": ["56", 0]}, "class_type": "CLIPVisionEncode"},
  "50": {"inputs": {"clip_vision_output": ["51", 0]}, "class_type": "Hunyuan3Dv2Conditioning"},
  "52": {"inputs": {"resolution": 3072, "batch_size": 1}, "class_type": "EmptyLatentHunyuan3Dv2"},
  "70": {"inputs": {"shift": 1, "model": ["54", 0]}, "class_type": "ModelSamplingAuraFlow"},
  "3":  {"inputs": {"seed": 7, "steps": 3, "cfg": 5.5, "sampler_name": "euler", "scheduler": "normal", "denoise": 1,
         "model": ["70", 0], "positive": ["50", 0], "negative": ["50", 1], "latent_image": ["52", 0]}, "class_type": "KSampler"},
  "61": {"inputs": {"num_chunks": 8000, "octree_resolution": 256, "samples": ["3", 0], "vae": ["54", 2]}, "class_type": "VAEDecodeHunyuan3D"},
  "59": {"inputs": {"threshold": 0.6, "voxel": ["61", 0]}, "class_type": "VoxelToMeshBasic"},
  "67": {"inputs": {"filename_prefix": "mesh/ComfyUI", "mesh": ["59", 0]}, "class_type": "SaveGLB"}
}`

func newTestServer(t *testing.T, cfg Config) (*httptest.Server, *Server) {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.StepTime == 0 {
		cfg.StepTime = 10 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := NewServer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts, s
}

func postJSON(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// event is one WebSocket message of the server.
type event struct {
	Type string         `json:"type"`
	Data map[string]any `json:"data"`
}

// follow reads the client's events until the prompt ends (success,
// error or interrupt) and returns them.
func follow(t *testing.T, ws *websocket.Conn, promptID string) []event {
	t.Helper()
	var evs []event
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("reading events: %v (so far %v)", err, evs)
		}
		var e event
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("event %s: %v", b, err)
		}
		if e.Type == "status" || e.Data["prompt_id"] != promptID {
			continue // the queue's status, or another prompt's event
		}
		evs = append(evs, e)
		switch e.Type {
		case "execution_success", "execution_error", "execution_interrupted":
			return evs
		}
	}
}

func dial(t *testing.T, ts *httptest.Server, clientID string) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(ts.URL, "http")+"/ws?clientId="+clientID, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, b, err := ws.Read(ctx) // the first status, with the client's sid
	if err != nil || !strings.Contains(string(b), `"sid":"`+clientID+`"`) {
		t.Fatalf("first message: %s %v", b, err)
	}
	return ws
}

// A text to image workflow runs with a progress event per step, and its
// two pictures are PNGs of the asked size, the same for the same
// workflow and different for another prompt.
func TestTextToImage(t *testing.T) {
	ts, _ := newTestServer(t, Config{Model: "sd15"})
	ws := dial(t, ts, "c1")
	code, out := postJSON(t, ts.URL+"/prompt", `{"client_id":"c1","prompt":`+txt2img+`}`)
	id, _ := out["prompt_id"].(string)
	if code != 200 || id == "" || out["node_errors"] == nil {
		t.Fatalf("POST /prompt: %d %v", code, out)
	}
	evs := follow(t, ws, id)
	var steps []float64
	var executed map[string]any
	for _, e := range evs {
		switch e.Type {
		case "progress":
			if e.Data["node"] == "3" && e.Data["max"] == 5.0 {
				steps = append(steps, e.Data["value"].(float64))
			}
		case "executed":
			if e.Data["node"] == "9" {
				executed = e.Data["output"].(map[string]any)
			}
		}
	}
	if evs[0].Type != "execution_start" || evs[len(evs)-1].Type != "execution_success" || len(steps) != 5 || steps[4] != 5 || executed == nil {
		t.Fatalf("events: %+v", evs)
	}
	var hist map[string]struct {
		Outputs map[string]struct {
			Images []struct{ Filename, Subfolder, Type string } `json:"images"`
		} `json:"outputs"`
		Status struct {
			StatusStr string `json:"status_str"`
			Completed bool   `json:"completed"`
		} `json:"status"`
	}
	getJSON(t, ts.URL+"/history/"+id, &hist)
	h := hist[id]
	if h.Status.StatusStr != "success" || !h.Status.Completed || len(h.Outputs["9"].Images) != 2 {
		t.Fatalf("history: %+v", hist)
	}
	var first []byte
	for i, im := range h.Outputs["9"].Images {
		b := get(t, ts.URL+"/view?"+url.Values{"filename": {im.Filename}, "subfolder": {im.Subfolder}, "type": {im.Type}}.Encode())
		cfg, err := png.DecodeConfig(bytes.NewReader(b))
		if err != nil || cfg.Width != 640 || cfg.Height != 384 {
			t.Fatalf("picture %d: %v %+v", i, err, cfg)
		}
		if i == 0 {
			first = b
		} else if bytes.Equal(b, first) {
			t.Error("the two pictures of a batch are the same")
		}
	}
	// The same workflow again draws the same first picture; another
	// prompt another.
	again := runAndFetch(t, ts, ws, txt2img)
	other := runAndFetch(t, ts, ws, strings.Replace(txt2img, "purple galaxy bottle", "a red fox in the snow", 1))
	if !bytes.Equal(again, first) || bytes.Equal(other, first) {
		t.Errorf("deterministic pictures: same workflow equal %v, other prompt different %v", bytes.Equal(again, first), !bytes.Equal(other, first))
	}
}

// runAndFetch runs a workflow and returns its first picture.
func runAndFetch(t *testing.T, ts *httptest.Server, ws *websocket.Conn, wf string) []byte {
	t.Helper()
	_, out := postJSON(t, ts.URL+"/prompt", `{"client_id":"c1","prompt":`+wf+`}`)
	id := out["prompt_id"].(string)
	follow(t, ws, id)
	var hist map[string]map[string]any
	getJSON(t, ts.URL+"/history/"+id, &hist)
	im := hist[id]["outputs"].(map[string]any)["9"].(map[string]any)["images"].([]any)[0].(map[string]any)
	return get(t, ts.URL+"/view?"+url.Values{"filename": {im["filename"].(string)}, "type": {"output"}}.Encode())
}

// An image to 3D workflow (an uploaded picture in, a mesh out) writes a
// valid binary glTF.
func TestImageToMesh(t *testing.T) {
	ts, _ := newTestServer(t, Config{Model: "hunyuan3d"})
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("image", "chair.png")
	_ = png.Encode(fw, draw(64, 48, 1))
	_ = mw.WriteField("overwrite", "true")
	mw.Close()
	resp, err := http.Post(ts.URL+"/upload/image", mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	var up map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&up)
	resp.Body.Close()
	if resp.StatusCode != 200 || up["name"] != "chair.png" || up["type"] != "input" {
		t.Fatalf("upload: %d %v", resp.StatusCode, up)
	}
	ws := dial(t, ts, "c3d")
	_, out := postJSON(t, ts.URL+"/prompt", `{"client_id":"c3d","prompt":`+strings.Replace(hunyuan3d, "INPUT", "chair.png", 1)+`}`)
	id, _ := out["prompt_id"].(string)
	if evs := follow(t, ws, id); evs[len(evs)-1].Type != "execution_success" {
		t.Fatalf("events: %+v", evs)
	}
	var hist map[string]map[string]any
	getJSON(t, ts.URL+"/history/"+id, &hist)
	files := hist[id]["outputs"].(map[string]any)["67"].(map[string]any)["3d"].([]any)
	f := files[0].(map[string]any)
	if f["subfolder"] != "mesh" || !strings.HasSuffix(f["filename"].(string), ".glb") {
		t.Fatalf("3d output: %v", f)
	}
	resp, err = http.Get(ts.URL + "/view?" + url.Values{"filename": {f["filename"].(string)}, "subfolder": {"mesh"}, "type": {"output"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	checkGLB(t, b)
	if ct := resp.Header.Get("Content-Type"); ct != "model/gltf-binary" {
		t.Errorf("content type %q", ct)
	}
	// A workflow naming a picture that was never uploaded fails on that
	// node, as ComfyUI does.
	_, out = postJSON(t, ts.URL+"/prompt", `{"client_id":"c3d","prompt":`+strings.Replace(hunyuan3d, "INPUT", "missing.png", 1)+`}`)
	evs := follow(t, ws, out["prompt_id"].(string))
	last := evs[len(evs)-1]
	if last.Type != "execution_error" || last.Data["node_id"] != "56" || !strings.Contains(last.Data["exception_message"].(string), "Invalid image file") {
		t.Errorf("missing input picture: %+v", last)
	}
}

// checkGLB checks a binary glTF's header and chunks.
func checkGLB(t *testing.T, b []byte) {
	t.Helper()
	if len(b) < 28 || string(b[:4]) != "glTF" || binary.LittleEndian.Uint32(b[4:]) != 2 || int(binary.LittleEndian.Uint32(b[8:])) != len(b) {
		t.Fatalf("not a glTF 2 binary: % x", b[:min(len(b), 16)])
	}
	jsonLen := binary.LittleEndian.Uint32(b[12:])
	if string(b[16:20]) != "JSON" || jsonLen%4 != 0 {
		t.Fatalf("first chunk is not JSON")
	}
	var doc struct {
		Asset  struct{ Version string }
		Meshes []any
	}
	if err := json.Unmarshal(b[20:20+jsonLen], &doc); err != nil || doc.Asset.Version != "2.0" || len(doc.Meshes) != 1 {
		t.Fatalf("glTF JSON: %v %+v", err, doc)
	}
	if bin := b[20+jsonLen:]; string(bin[4:8]) != "BIN\x00" || int(binary.LittleEndian.Uint32(bin)) != len(bin)-8 {
		t.Fatalf("second chunk is not BIN")
	}
}

// Workflows ComfyUI refuses are refused the same way: 400 with its
// error type and the node's errors.
func TestRefusedWorkflows(t *testing.T) {
	ts, _ := newTestServer(t, Config{})
	for _, tc := range []struct{ name, body, typ, node string }{
		{"unknown class", strings.Replace(txt2img, `"VAEDecode"`, `"VAEDecodeTiled9000"`, 1), "invalid_prompt", ""},
		{"missing input", strings.Replace(txt2img, `"steps": 5, `, "", 1), "prompt_outputs_failed_validation", "3"},
		{"bad link", strings.Replace(txt2img, `"latent_image": ["5", 0]`, `"latent_image": ["99", 0]`, 1), "prompt_outputs_failed_validation", "3"},
		{"link to a missing output", strings.Replace(txt2img, `"vae": ["4", 2]`, `"vae": ["4", 7]`, 1), "prompt_outputs_failed_validation", "8"},
		{"no output", `{"1": {"class_type": "EmptyLatentImage", "inputs": {"width": 64, "height": 64, "batch_size": 1}}}`, "prompt_no_outputs", ""},
		{"cycle", `{"1": {"class_type": "VAEDecode", "inputs": {"samples": ["2", 0], "vae": ["2", 0]}}, "2": {"class_type": "VAEEncode", "inputs": {"pixels": ["1", 0], "vae": ["1", 0]}},
			"3": {"class_type": "SaveImage", "inputs": {"images": ["1", 0]}}}`, "invalid_prompt", ""},
	} {
		code, out := postJSON(t, ts.URL+"/prompt", `{"prompt":`+tc.body+`}`)
		e, _ := out["error"].(map[string]any)
		if code != 400 || e["type"] != tc.typ {
			t.Errorf("%s: %d %v, want 400 %s", tc.name, code, out, tc.typ)
			continue
		}
		if tc.node != "" {
			if ne, _ := out["node_errors"].(map[string]any); ne[tc.node] == nil {
				t.Errorf("%s: node_errors %v, want node %s", tc.name, out["node_errors"], tc.node)
			}
		}
	}
	if code, out := postJSON(t, ts.URL+"/prompt", `{"client_id":"x"}`); code != 400 || out["error"].(map[string]any)["type"] != "no_prompt" {
		t.Errorf("no prompt: %d %v", code, out)
	}
}

// A running workflow stops on POST /interrupt; a pending one leaves the
// queue on POST /queue {"delete": [...]}; a failing step fails the
// prompt on its node.
func TestInterruptQueueAndFailure(t *testing.T) {
	ts, _ := newTestServer(t, Config{StepTime: 50 * time.Millisecond})
	ws := dial(t, ts, "c1")
	long := strings.Replace(txt2img, `"steps": 5`, `"steps": 400`, 1)
	_, a := postJSON(t, ts.URL+"/prompt", `{"client_id":"c1","prompt":`+long+`}`)
	_, b := postJSON(t, ts.URL+"/prompt", `{"client_id":"c1","prompt":`+long+`}`)
	var q struct {
		Running [][]any `json:"queue_running"`
		Pending [][]any `json:"queue_pending"`
	}
	waitUntil(t, "a running, b pending", func() bool {
		getJSON(t, ts.URL+"/queue", &q)
		return len(q.Running) == 1 && q.Running[0][1] == a["prompt_id"] && len(q.Pending) == 1 && q.Pending[0][1] == b["prompt_id"]
	})
	if code, _ := postJSON(t, ts.URL+"/queue", `{"delete":["`+b["prompt_id"].(string)+`"]}`); code != 200 {
		t.Fatal("delete from the queue")
	}
	if code, _ := postJSON(t, ts.URL+"/interrupt", `{}`); code != 200 {
		t.Fatal("interrupt")
	}
	evs := follow(t, ws, a["prompt_id"].(string))
	if last := evs[len(evs)-1]; last.Type != "execution_interrupted" || last.Data["node_id"] == nil {
		t.Errorf("interrupted: %+v", last)
	}
	var hist map[string]map[string]any
	getJSON(t, ts.URL+"/history/"+b["prompt_id"].(string), &hist)
	if len(hist) != 0 {
		t.Errorf("the deleted prompt ran: %v", hist)
	}

	ts2, _ := newTestServer(t, Config{StepTime: time.Millisecond, FailStep: 3})
	ws2 := dial(t, ts2, "c2")
	_, c := postJSON(t, ts2.URL+"/prompt", `{"client_id":"c2","prompt":`+txt2img+`}`)
	evs = follow(t, ws2, c["prompt_id"].(string))
	if last := evs[len(evs)-1]; last.Type != "execution_error" || last.Data["node_id"] != "3" || last.Data["node_type"] != "KSampler" {
		t.Errorf("failing step: %+v", last)
	}
	getJSON(t, ts2.URL+"/history/"+c["prompt_id"].(string), &hist)
	if st := hist[c["prompt_id"].(string)]["status"].(map[string]any); st["status_str"] != "error" || st["completed"] != false {
		t.Errorf("history of the failed prompt: %v", st)
	}
}

// /view refuses paths out of its folders; /object_info lists the node
// classes the simulator runs.
func TestViewAndObjectInfo(t *testing.T) {
	ts, _ := newTestServer(t, Config{})
	for _, q := range []string{"filename=../../etc/passwd", "filename=x.png&subfolder=../..", "filename=x.png&type=secrets", "filename=x.png&subfolder=/etc"} {
		resp, err := http.Get(ts.URL + "/view?" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 && resp.StatusCode != 404 {
			t.Errorf("/view?%s: %d", q, resp.StatusCode)
		}
	}
	var info map[string]map[string]any
	getJSON(t, ts.URL+"/object_info", &info)
	if info["KSampler"]["output"].([]any)[0] != "LATENT" || info["SaveImage"]["output_node"] != true {
		t.Errorf("object_info: %v", info["KSampler"])
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	if err := json.Unmarshal(get(t, url), v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}

func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return b
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
