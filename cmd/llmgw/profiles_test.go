package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// profilesConfig is a node of two GPUs that hog, a critical model,
// takes whole, and a model q with a GPU profile and a CPU profile.
const profilesConfig = `
		drain_timeout 2m
		node {
			memory 64GiB
			cores 16
			gpus 2
		}
		model hog {
			engine sim
			class critical
			resources {
				gpus 2
			}
		}
		model q {
			engine sim
			option tokens_per_second 5
			profile gpu {
				gpus 1
				memory 4GiB
			}
			profile cpu {
				cores 4
				memory 8GiB
				option tokens_per_second 2
			}
		}`

// readyOn waits until model has exactly one ready replica, on profile,
// and returns it.
func readyOn(t *testing.T, g *gateway, model, profile string) llmapi.ReplicaStatus {
	t.Helper()
	var r llmapi.ReplicaStatus
	waitFor(t, 60*time.Second, model+" ready on profile "+profile, func() bool {
		var ready []llmapi.ReplicaStatus
		for _, x := range g.models()[model].Replicas {
			if x.State == "ready" {
				ready = append(ready, x)
			}
		}
		if len(ready) == 1 && ready[0].Profile == profile {
			r = ready[0]
			return true
		}
		return false
	})
	return r
}

// A node whose GPUs are full runs the model on its CPU profile, saying
// why; when a GPU frees the model moves back to its GPU profile, and the
// 32 streams its CPU replica was serving all end whole.
func TestModelProfiles(t *testing.T) {
	g := startGateway(t, profilesConfig, "")
	g.readyReplicas("hog", 1)
	cpu := readyOn(t, g, "q", "cpu")
	if len(cpu.GPUs) != 0 || !strings.Contains(cpu.ProfileNote, "profile gpu") {
		t.Errorf("the CPU replica: GPUs %v, note %q; want none, and a note on why not gpu", cpu.GPUs, cpu.ProfileNote)
	}
	st := g.models()["q"]
	if len(st.Profiles) != 2 || st.Profiles[0].Name != "gpu" || !strings.Contains(st.Reason, "runs on profile cpu") || !strings.Contains(st.Reason, "GPU") {
		t.Errorf("GET /llm/models for q: profiles %v, reason %q", st.Profiles, st.Reason)
	}
	out, err := ctlRun(t, g, "models")
	if err != nil || !strings.Contains(out, "PROFILES") || !regexpLine(out, "q", "sim", "ready", "cpu", "runs on profile cpu") {
		t.Errorf("ctl models: %v\n%s", err, out)
	}
	// The answer comes from the CPU replica.
	resp, _ := post(t, g.base+"/v1/chat/completions", `{"model":"q","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("X-Llm-Replica") != cpu.ID {
		t.Fatalf("a request: %d from %q, want 200 from %s", resp.StatusCode, resp.Header.Get("X-Llm-Replica"), cpu.ID)
	}

	const streams, tokens = 32, 40 // 20 s each at the CPU profile's rate
	results := openStreams(t, g, "q", streams, tokens)
	if code, body := g.adminPost("/llm/models/hog/stop", ""); code != 200 {
		t.Fatalf("stopping hog: %d %s", code, body)
	}
	gpu := readyOn(t, g, "q", "gpu")
	if n := len(results); n > 0 {
		t.Fatalf("%d streams ended before the move: the test shows nothing about streams during it", n)
	}
	if len(gpu.GPUs) != 1 {
		t.Errorf("the GPU replica holds GPUs %v, want one", gpu.GPUs)
	}
	// The CPU replica drains: it is listed as such while its streams run,
	// and no stream is cut.
	var draining bool
	for _, r := range g.models()["q"].Replicas {
		draining = draining || r.ID == cpu.ID && r.State == "draining"
	}
	if !draining {
		t.Errorf("the CPU replica is not draining after the move: %+v", g.models()["q"].Replicas)
	}
	checkStreams(t, "streams on the CPU replica during the move", results, streams, tokens)
	resp, _ = post(t, g.base+"/v1/chat/completions", `{"model":"q","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("X-Llm-Replica") != gpu.ID {
		t.Errorf("after the move: %d from %q, want 200 from %s", resp.StatusCode, resp.Header.Get("X-Llm-Replica"), gpu.ID)
	}
	waitFor(t, 30*time.Second, "the CPU replica gone", func() bool { return len(g.models()["q"].Replicas) == 1 })
	if st := g.models()["q"]; st.Reason != "" {
		t.Errorf("q on its first profile still gives a reason: %q", st.Reason)
	}
}

// A model whose GPU profile cannot fit (too little memory) while GPUs
// are free is not run on its CPU profile: it waits, saying why and how
// to allow it, in GET /llm/models, ctl models and a plan. With prefer
// cpu the same model runs on the CPU.
func TestModelProfilesCPUWhileGPUsFree(t *testing.T) {
	shapes := `
			profile gpu {
				gpus 1
				memory 200GiB
			}
			profile cpu {
				cores 2
				memory 4GiB
			}`
	g := startGateway(t, `
		node {
			memory 64GiB
			cores 16
			gpus 2
		}
		model refused {
			engine sim`+shapes+`
		}
		model chosen {
			engine sim
			prefer cpu`+shapes+`
		}`, "")
	readyOn(t, g, "chosen", "cpu")
	var st llmapi.ModelStatus
	waitFor(t, 30*time.Second, "refused waiting", func() bool {
		st = g.models()["refused"]
		return st.State == "waiting"
	})
	if len(st.Replicas) != 0 || !strings.Contains(st.Reason, "on the CPU while 2 GPUs are free") || !strings.Contains(st.Reason, "prefer cpu") ||
		!strings.Contains(st.Reason, "profile gpu") {
		t.Errorf("refused: %d replicas, reason %q", len(st.Replicas), st.Reason)
	}
	out, err := ctlRun(t, g, "models")
	if err != nil || !regexpLine(out, "refused", "waiting", "none running", "prefer cpu") {
		t.Errorf("ctl models: %v\n%s", err, out)
	}
	resp, body := post(t, g.base+"/v1/chat/completions", `{"model":"refused","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "prefer cpu") {
		t.Errorf("a request to refused: %d %s", resp.StatusCode, body)
	}
	// A plan shows the profile each replica would get, and the refusal.
	plan := func(body string) llmapi.Plan {
		code, raw := g.adminPost("/llm/plan", body)
		var pl llmapi.Plan
		if code != 200 || json.Unmarshal(raw, &pl) != nil {
			t.Fatalf("POST /llm/plan: %d %s", code, raw)
		}
		return pl
	}
	pl := plan(`{"name":"p1","engine":"sim","scaling":{"min":2},"profiles":[{"name":"gpu","resources":{"gpus":1}},{"name":"cpu","resources":{"cores":2}}]}`)
	if !pl.Fits || len(pl.Replicas) != 2 || pl.Replicas[0].Profile != "gpu" || pl.Replicas[1].Profile != "gpu" {
		t.Errorf("plan of two one-GPU replicas with two GPUs free: %+v", pl)
	}
	pl = plan(`{"name":"p2","engine":"sim","scaling":{"min":3},"profiles":[{"name":"gpu","resources":{"gpus":1}},{"name":"cpu","resources":{"cores":2}}]}`)
	if !pl.Fits || len(pl.Replicas) != 3 || pl.Replicas[2].Profile != "cpu" || !strings.Contains(pl.Replicas[2].Note, "profile gpu") {
		t.Errorf("plan of three with two GPUs free: %+v", pl)
	}
	file := filepath.Join(t.TempDir(), "p2.yaml")
	if err := os.WriteFile(file, []byte("name: p2\nengine: sim\nscaling:\n  min: 3\nprofiles:\n  - name: gpu\n    resources: {gpus: 1}\n  - name: cpu\n    resources: {cores: 2}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := ctlRun(t, g, "model", "plan", "-f", file); err != nil || !strings.Contains(out, "replica 1 on node") ||
		!strings.Contains(out, ", profile gpu: 1 GPUs") || !strings.Contains(out, ", profile cpu: 2 cores") || !strings.Contains(out, "not on an earlier profile: profile gpu") {
		t.Errorf("ctl model plan: %v\n%s", err, out)
	}
	pl = plan(`{"name":"p3","engine":"sim","profiles":[{"name":"gpu","resources":{"gpus":1,"memory":214748364800}},{"name":"cpu","resources":{"cores":2}}]}`)
	if pl.Fits || !strings.Contains(pl.Reason, "prefer cpu") {
		t.Errorf("plan of a GPU profile too big with GPUs free: %+v", pl)
	}
}

// In a cluster of a GPU node and a CPU node, q runs on its CPU profile
// while a critical model holds the GPU; once that model stops, q moves
// to the GPU node on its GPU profile, and the streams its CPU replica
// serves end whole.
func TestClusterModelProfiles(t *testing.T) {
	c := &cluster{t: t, redis: startRedis(t), nodes: map[string]*gateway{}, peer: map[string]string{}, models: `
		drain_timeout 2m
		model hog {
			engine sim
			class critical
			resources {
				gpus 1
			}
		}
		model q {
			engine sim
			option tokens_per_second 5
			profile gpu {
				gpus 1
			}
			profile cpu {
				cores 2
				option tokens_per_second 2
			}
		}`, extra: map[string]string{
		"n1": "node {\n\t\t\tmemory 64GiB\n\t\t\tcores 16\n\t\t\tgpus 1\n\t\t}",
		"n2": "node {\n\t\t\tmemory 64GiB\n\t\t\tcores 16\n\t\t\tgpus 0\n\t\t}",
	}}
	for _, name := range []string{"n1", "n2"} { // without llm_quota: no keys in this test
		g := c.node(name)
		g.quota = nil
		g.writeConfig(c.blocks[name], c.router)
		g.start()
		c.nodes[name] = g
	}
	n1 := c.nodes["n1"]
	where := func(model string) (on []string) {
		for _, r := range n1.models()[model].Replicas {
			if r.State == "ready" {
				on = append(on, r.Node+":"+r.Profile)
			}
		}
		return on
	}
	// q's CPU replica is on n2, or on n1 when the plan placed it before
	// n2 joined: it moves back on its node, or across, alike.
	waitFor(t, 60*time.Second, "hog on n1 and q on a CPU profile", func() bool {
		h, q := where("hog"), where("q")
		return len(h) == 1 && h[0] == "n1:" && len(q) == 1 && strings.HasSuffix(q[0], ":cpu")
	})
	const streams, tokens = 32, 40
	results := openStreams(t, n1, "q", streams, tokens)
	if code, body := n1.adminPost("/llm/models/hog/stop", ""); code != 200 {
		t.Fatalf("stopping hog: %d %s", code, body)
	}
	waitFor(t, 60*time.Second, "q on n1's GPU", func() bool {
		q := where("q")
		return len(q) == 1 && q[0] == "n1:gpu"
	})
	if n := len(results); n > 0 {
		t.Fatalf("%d streams ended before the move: the test shows nothing about streams during it", n)
	}
	checkStreams(t, "streams on q's CPU replica while it moved", results, streams, tokens)
	// A plan for another such model shows where and on which profile.
	code, raw := n1.adminPost("/llm/plan", `{"name":"p","engine":"sim","scaling":{"min":2},"profiles":[{"name":"gpu","resources":{"gpus":1}},{"name":"cpu","resources":{"cores":2}}]}`)
	var pl llmapi.Plan
	if code != 200 || json.Unmarshal(raw, &pl) != nil || !pl.Fits || len(pl.Replicas) != 2 {
		t.Fatalf("POST /llm/plan: %d %s", code, raw)
	}
	var got []string
	for _, r := range pl.Replicas {
		got = append(got, r.Node+":"+r.Profile)
	}
	slices.Sort(got)
	if strings.Join(got, ",") != "n1:cpu,n2:cpu" {
		t.Errorf("plan with q on n1's only GPU: %v, want the CPU profile, one on each node", got)
	}
}
