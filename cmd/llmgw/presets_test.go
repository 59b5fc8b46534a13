package main

import (
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// Presets: ctl model presets lists the shipped ones and the config's,
// with what each needs and why this machine cannot run one (no ComfyUI,
// no GPU); an automatic preset the machine can run adds itself, one it
// cannot does not; ctl model add --preset adds one under a name, its
// licence still to accept; a removed automatic preset is remembered as
// declined across a restart, until it is added again by hand.
func TestPresets(t *testing.T) {
	dir := t.TempDir()
	wf := filepath.Join(dir, "studio.json")
	graph := strings.NewReplacer(`"text": "a lighthouse on a cliff at dusk, oil painting"`, `"text": "{{prompt}}"`,
		`"steps": STEPS`, `"steps": "{{steps}}"`, `"width": 320`, `"width": "{{width}}"`,
		`"ckpt_name": "v1-5-pruned-emaonly.safetensors"`, `"ckpt_name": "studio.safetensors"`).Replace(comfyTxt2img)
	if !strings.Contains(graph, "{{prompt}}") || !strings.Contains(graph, "{{steps}}") || !strings.Contains(graph, "{{width}}") {
		t.Fatalf("the test's workflow has no parameters: %s", graph)
	}
	if err := os.WriteFile(wf, []byte(graph), 0o600); err != nil {
		t.Fatal(err)
	}
	g := jobsGatewayWith(t, `
		preset studio {
			description "The studio's pictures"
			kind image
			automatic
			engine simimage
			option step_time 5ms
			target_concurrency 1
			licence studio-terms https://example.com/studio-terms
			workflow txt2img `+wf+` {
				param steps 3
				param width 64
			}
		}
		preset huge {
			kind image
			automatic
			engine simimage
			resources {
				gpus 4
			}
		}`, fmt.Sprintf(`route /llm/* {
		llm_admin {
			token watcher %s viewer
			token acme-lead %s tenant_admin org acme
			token ops %s operator
		}
	}`, tenancy.HashKey("watcher-token"), tenancy.HashKey("acme-lead-token"), tenancy.HashKey("ops-token")))
	waitFor(t, 30*time.Second, "the automatic preset added", func() bool { return g.models()["studio"].Name == "studio" })

	presets := func() map[string]llmapi.PresetStatus {
		t.Helper()
		var ps []llmapi.PresetStatus
		g.adminGet("/llm/presets", &ps)
		out := map[string]llmapi.PresetStatus{}
		for _, p := range ps {
			out[p.Name] = p
		}
		return out
	}
	ps := presets()
	for name, want := range map[string]string{"studio": "added", "huge": "unavailable", "sim-pictures": "available", "sdxl-turbo": "unavailable", "hunyuan3d-2": "unavailable"} {
		if ps[name].State != want {
			t.Errorf("preset %s: state %q, want %q: %+v", name, ps[name].State, want, ps[name])
		}
	}
	if why := strings.Join(ps["huge"].WhyNot, " "); !strings.Contains(why, "GPU") {
		t.Errorf("why the huge preset cannot run does not name the GPUs: %q", why)
	}
	if why := strings.Join(ps["sdxl-turbo"].WhyNot, " "); !strings.Contains(why, "main.py") && !strings.Contains(why, "GPU") {
		t.Errorf("why a ComfyUI preset cannot run here: %q", why)
	}
	if _, ok := g.models()["huge"]; ok {
		t.Error("an automatic preset the machine cannot run was added")
	}
	if w := ps["studio"].Workflows; len(w) != 1 || w[0].Name != "txt2img" || strings.Join(w[0].Parameters, ",") != "prompt,steps,width" || ps["studio"].Shipped {
		t.Errorf("the config's preset as listed: %+v", ps["studio"])
	}

	out, err := ctlRun(t, g, "model", "presets")
	if err != nil || !regexpLine(out, "studio", "image", "simimage", "studio-terms", "added as studio (automatic)") ||
		!regexpLine(out, "sdxl-turbo", "comfyui", "1 GPUs", "sai-nc-community", "unavailable") || !regexpLine(out, "huge", "4 GPUs", "unavailable", "GPU") {
		t.Errorf("ctl model presets: %v\n%s", err, out)
	}

	// As an attacker: a viewer and a tenant admin add nothing; a tenant
	// admin does not even list the presets; a body that tries to set what
	// the model runs is refused; an operator adds one.
	for _, tc := range []struct {
		token, method, path, body string
		code                      int
		want                      string
	}{
		{"watcher-token", "GET", "/llm/presets", "", 200, "sdxl-turbo"},
		{"watcher-token", "POST", "/llm/presets/sim-mesh/add", "", 403, ""},
		{"acme-lead-token", "POST", "/llm/presets/sim-mesh/add", `{"name":"mine"}`, 403, ""},
		{"acme-lead-token", "GET", "/llm/presets", "", 403, ""},
		{"acme-lead-token", "GET", "/llm/jobs/models", "", 403, ""},
		{"", "POST", "/llm/presets/sim-mesh/add", "", 401, ""},
		{"ops-token", "POST", "/llm/presets/sim-mesh/add", `{"name":"m","engine":"sim","options":{"bin":"/bin/sh"}}`, 400, "the model's name, nothing else"},
		{"ops-token", "POST", "/llm/presets/sim-mesh/add", `{"name":"{env.HOME}"}`, 400, ""},
		{"ops-token", "POST", "/llm/presets/sim-mesh/add", `{"name":"` + strings.Repeat("x", 5000) + `"}`, 400, ""},
		{"ops-token", "POST", "/llm/presets/no%20such%00/add", "", 400, "control character"},
		{"ops-token", "POST", "/llm/presets/no-such/add", "", 404, "no preset"},
		{"ops-token", "POST", "/llm/presets/sim-mesh/add", `{"name":"mesh"}`, 201, `"name":"mesh"`},
	} {
		code, _, body := siteCall(t, g, tc.token, tc.method, tc.path, tc.body)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s %s as %q: %d %.200s, want %d with %q", tc.method, tc.path, tc.body, tc.token, code, body, tc.code, tc.want)
		}
	}
	if m, ok := g.models()["mesh"]; !ok || m.Engine != "simimage" {
		t.Errorf("the operator's add through the site: %+v", m)
	}

	// Added by hand, under a name; its licence (none here) and its workflow.
	out, err = ctlRun(t, g, "model", "add", "--preset", "sim-pictures", "--name", "pics")
	if err != nil || !strings.Contains(out, "model pics added from preset sim-pictures") {
		t.Fatalf("ctl model add --preset: %v\n%s", err, out)
	}
	if out, err := ctlRun(t, g, "model", "add", "--preset", "sim-pictures", "--name", "pics"); err == nil || !strings.Contains(out, "already has model pics") {
		t.Errorf("adding a preset's model twice: %v\n%s", err, out)
	}
	if out, err := ctlRun(t, g, "model", "add", "--preset", "no-such"); err == nil || !strings.Contains(out, `no preset "no-such"`) {
		t.Errorf("an unknown preset: %v\n%s", err, out)
	}
	if out, err := ctlRun(t, g, "model", "add", "--preset", "sim-pictures", "--name", "../../etc"); err == nil {
		t.Errorf("a preset added under a name that is not one: %s", out)
	}
	var pics llmapi.ModelStatus
	g.adminGet("/llm/models/pics", &pics)
	if pics.Engine != "simimage" {
		t.Errorf("the preset's model: %+v", pics)
	}
	_, j, raw := jobCall(t, g, "secret-1", "POST", "/v1/jobs", `{"model":"pics","workflow":`+workflow("2")+`}`)
	if j.ID == "" {
		t.Fatalf("a job on the preset's model: %s", raw)
	}
	if seen := followJob(t, g, "secret-1", j.ID); seen[len(seen)-1].State != "succeeded" {
		t.Errorf("the job on the preset's model: %+v", seen[len(seen)-1])
	}

	// A job names one of the preset's workflows and gives its parameters.
	_, j, raw = jobCall(t, g, "secret-1", "POST", "/v1/jobs", `{"model":"pics","workflow":"txt2img","parameters":{"prompt":"a red kite over dunes","width":128,"height":96,"steps":3}}`)
	if j.ID == "" {
		t.Fatalf("a job naming the preset's workflow: %s", raw)
	}
	if seen := followJob(t, g, "secret-1", j.ID); seen[len(seen)-1].State != "succeeded" {
		t.Fatalf("the job of the named workflow: %+v", seen[len(seen)-1])
	}
	_, _, png := jobCall(t, g, "secret-1", "GET", "/v1/jobs/"+j.ID+"/outputs/0", "")
	if cfg, err := pngConfig(png); err != nil || cfg.Width != 128 || cfg.Height != 96 {
		t.Errorf("the named workflow's picture: %+v %v", cfg, err)
	}
	for body, want := range map[string]string{
		`{"model":"pics","workflow":"outpaint","parameters":{"prompt":"x"}}`:            "its workflows are txt2img, img2img",
		`{"model":"pics","workflow":"txt2img","parameters":{"prompt":"x","cfg":9}}`:     `no parameter \"cfg\"`,
		`{"model":"pics","workflow":"txt2img"}`:                                         "needs the parameter prompt",
		`{"model":"chat","workflow":"txt2img","parameters":{"prompt":"x"}}`:             "has no workflows of its own",
		`{"model":"nope","workflow":"txt2img","parameters":{"prompt":"x"}}`:             "model_not_found",
		`{"model":"pics","workflow":` + workflow("2") + `,"parameters":{"prompt":"x"}}`: "parameters go with a workflow's name",
	} {
		if code, _, raw := jobCall(t, g, "secret-1", "POST", "/v1/jobs", body); code/100 != 4 || !strings.Contains(raw, want) {
			t.Errorf("%s: %d %s, want %q", body, code, raw, want)
		}
	}

	// What the studio's replica found in its model folders, with the
	// workflows that use each file.
	g.readyReplicas("studio", 1)
	var found []struct {
		Model    string
		Replicas []struct {
			Folders map[string][]struct {
				File      string
				Workflows []string
			}
		}
	}
	g.adminGet("/llm/jobs/models", &found)
	b, _ := json.Marshal(found)
	if !strings.Contains(string(b), `{"File":"studio.safetensors","Workflows":["txt2img"]}`) || strings.Contains(string(b), `"Model":"chat"`) {
		t.Errorf("GET /llm/jobs/models: %s", b)
	}

	// The studio's licence holds its jobs back until it is accepted.
	if code, _, raw := jobCall(t, g, "secret-1", "POST", "/v1/jobs", `{"model":"studio","workflow":`+workflow("2")+`}`); code != 403 || !strings.Contains(raw, "studio-terms") {
		t.Errorf("a job on the studio before its licence is accepted: %d %s", code, raw)
	}
	out, err = ctlRun(t, g, "model", "add", "--preset", "studio", "--name", "studio2")
	if err != nil || !strings.Contains(out, "licence studio-terms") || !strings.Contains(out, "llmgw ctl model licence accept studio2") {
		t.Errorf("ctl model add of a preset with a licence: %v\n%s", err, out)
	}

	// Removed: declined, and still declined after a restart.
	if out, err := ctlRun(t, g, "model", "remove", "studio"); err != nil {
		t.Fatalf("ctl model remove studio: %v\n%s", err, out)
	}
	if p := presets()["studio"]; p.State != "added" || p.Model != "studio2" {
		t.Errorf("the studio preset, its first model removed, a second still there: %+v", p)
	}
	if out, err := ctlRun(t, g, "model", "remove", "studio2"); err != nil {
		t.Fatalf("ctl model remove studio2: %v\n%s", err, out)
	}
	if p := presets()["studio"]; p.State != "declined" || p.DeclinedAt == nil {
		t.Errorf("the studio preset once removed: %+v", p)
	}
	g.stop()
	checks := strings.Count(g.logs.String(), "automatic presets checked")
	g.start()
	waitFor(t, 30*time.Second, "the automatic presets checked after the restart", func() bool {
		return strings.Count(g.logs.String(), "automatic presets checked") > checks
	})
	if _, ok := g.models()["studio"]; ok {
		t.Error("a declined automatic preset came back after a restart")
	}
	out, err = ctlRun(t, g, "model", "presets")
	if err != nil || !regexpLine(out, "studio", "declined by ", "(automatic)") {
		t.Errorf("ctl model presets after the restart: %v\n%s", err, out)
	}
	if out, err := ctlRun(t, g, "model", "add", "--preset", "studio"); err != nil || !strings.Contains(out, "model studio added") {
		t.Fatalf("adding a declined preset by hand: %v\n%s", err, out)
	}
	if p := presets()["studio"]; p.State != "added" {
		t.Errorf("the studio preset added again: %+v", p)
	}
	// The audit log names who added and removed what, from which preset.
	var audit struct{ Entries []llmapi.AuditEntry }
	g.adminGet("/llm/audit?action=model+added", &audit)
	b, _ = json.Marshal(audit.Entries)
	if !strings.Contains(string(b), "llmgw (automatic preset)") || !strings.Contains(string(b), `"preset":"sim-pictures"`) {
		t.Errorf("the audit log of the adds: %s", b)
	}
}

// pngConfig is the size of a PNG.
func pngConfig(b string) (image.Config, error) { return png.DecodeConfig(strings.NewReader(b)) }
