package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A model of the image simulator (a simulated ComfyUI) runs as a real
// replica process on loopback that answers ComfyUI's API; the engine
// lists its ComfyUI capability; a chat request to it is refused with a
// 400 that says why, in OpenAI's error format.
func TestSimImageModel(t *testing.T) {
	g := startGateway(t, `
		model pictures {
			engine simimage
			option step_time 5ms
		}`, "")
	r := g.readyReplicas("pictures", 1)[0]
	if !strings.HasPrefix(r.URL, "http://127.0.0.1:") {
		t.Fatalf("replica URL %q", r.URL)
	}
	resp, err := http.Get(r.URL + "/models/checkpoints")
	if err != nil {
		t.Fatal(err)
	}
	var ckpts []string
	_ = json.NewDecoder(resp.Body).Decode(&ckpts)
	resp.Body.Close()
	if len(ckpts) != 1 || ckpts[0] != "pictures.safetensors" {
		t.Errorf("the replica's checkpoints: %v", ckpts)
	}
	out, err := ctlRun(t, g, "engines")
	if err != nil || !regexpLine(out, "simimage", "comfyui") {
		t.Errorf("ctl engines: %v\n%s", err, out)
	}
	resp, body := post(t, g.base+"/v1/chat/completions", `{"model":"pictures","messages":[{"role":"user","content":"a red fox"}]}`)
	var e struct {
		Error struct{ Type, Code, Message string }
	}
	_ = json.Unmarshal(body, &e)
	if resp.StatusCode != 400 || e.Error.Code != "model_not_supported" || !strings.Contains(e.Error.Message, "runs image workflows") {
		t.Errorf("chat to the image model: %d %s", resp.StatusCode, body)
	}
	// Without llm_jobs on the site, the images and jobs APIs say what is
	// missing.
	resp, body = post(t, g.base+"/v1/images/generations", `{"model":"pictures","prompt":"a red fox"}`)
	if resp.StatusCode != 404 || !strings.Contains(string(body), "llm_jobs") {
		t.Errorf("images without llm_jobs: %d %s", resp.StatusCode, body)
	}
	// The replica is supervised like any other: its process killed, it is
	// replaced.
	killed := r.PID
	if err := killPID(killed); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a new replica of pictures", func() bool {
		rs := g.models()["pictures"].Replicas
		return len(rs) == 1 && rs[0].State == "ready" && rs[0].PID != killed
	})
}
