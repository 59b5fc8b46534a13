package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm"
)

// gpusNode is a node declared with four GPUs and room for the rest.
const gpusNode = `
		drain_timeout 2m
		node {
			memory 64GiB
			cores 64
			gpus 4
		}`

// gpusList writes devices as CUDA_VISIBLE_DEVICES does.
func gpusList(ds []int) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = strconv.Itoa(d)
	}
	return strings.Join(s, ",")
}

// gpusSeen is what a sim replica process says of its GPU devices: its
// own report in /v1/models, and CUDA_VISIBLE_DEVICES and
// HIP_VISIBLE_DEVICES in its environment as the kernel holds it.
func gpusSeen(t *testing.T, r llm.ReplicaStatus) (report, cuda, hip string) {
	t.Helper()
	resp, err := http.Get(r.URL + "/models")
	if err != nil {
		t.Fatalf("replica %s: %v", r.ID, err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			VisibleDevices string `json:"visible_devices"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Data) != 1 {
		t.Fatalf("replica %s: /v1/models: %v %+v", r.ID, err, list)
	}
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", r.PID))
	if err != nil {
		t.Fatalf("replica %s: %v", r.ID, err)
	}
	for _, kv := range bytes.Split(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("CUDA_VISIBLE_DEVICES=")); ok {
			cuda = string(v)
		}
		if v, ok := bytes.CutPrefix(kv, []byte("HIP_VISIBLE_DEVICES=")); ok {
			hip = string(v)
		}
	}
	return list.Data[0].VisibleDevices, cuda, hip
}

// gpusCheckReplicas checks that the replicas listed hold want devices
// each, that no two share one, and that each replica process sees just
// its own; it returns the devices by replica id.
func gpusCheckReplicas(t *testing.T, rs []llm.ReplicaStatus, want int, taken map[int]string) map[string][]int {
	t.Helper()
	out := map[string][]int{}
	for _, r := range rs {
		if len(r.GPUs) != want {
			t.Fatalf("replica %s holds GPUs %v, want %d of them", r.ID, r.GPUs, want)
		}
		for _, d := range r.GPUs {
			if other, ok := taken[d]; ok {
				t.Fatalf("replicas %s and %s share GPU %d", r.ID, other, d)
			}
			taken[d] = r.ID
		}
		report, cuda, hip := gpusSeen(t, r)
		if l := gpusList(r.GPUs); report != l || cuda != l || hip != l {
			t.Errorf("replica %s holds GPUs %s; its process reports %q, runs with CUDA_VISIBLE_DEVICES=%q HIP_VISIBLE_DEVICES=%q",
				r.ID, l, report, cuda, hip)
		}
		out[r.ID] = r.GPUs
	}
	return out
}

func TestGPUsAsDevices(t *testing.T) {
	g := startGateway(t, gpusNode, "")
	const modelA = `{"name":"a","engine":"sim","options":{"tokens_per_second":"20"},"resources":{"gpus":2},"scaling":{"min":2,"max":2}}`
	code, body := adminDo(t, g, "POST", "/llm/plan", modelA)
	var pl llm.Plan
	if err := json.Unmarshal(body, &pl); code != 200 || err != nil || !pl.Fits || len(pl.Replicas) != 2 {
		t.Fatalf("plan of a: %d %s", code, body)
	}
	if code, body := adminDo(t, g, "POST", "/llm/models", modelA); code != 201 {
		t.Fatalf("adding a: %d %s", code, body)
	}
	as := g.readyReplicas("a", 2)
	byID := gpusCheckReplicas(t, as, 2, map[int]string{})
	var planned, got []string
	for i, r := range as {
		planned, got = append(planned, gpusList(pl.Replicas[i].GPUs)), append(got, gpusList(r.GPUs))
	}
	slices.Sort(planned)
	slices.Sort(got)
	if !slices.Equal(planned, got) {
		t.Errorf("the plan gave a devices %v; the add gave %v", planned, got)
	}

	// Through the gateway: the replica that answered runs on its devices.
	for range 4 {
		resp, body := post(t, g.base+"/v1/chat/completions", `{"model":"a","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`)
		rep := resp.Header.Get("X-Llm-Replica")
		if resp.StatusCode != 200 || byID[rep] == nil || resp.Header.Get("X-Sim-Visible-Devices") != gpusList(byID[rep]) {
			t.Fatalf("chat: %d, replica %q, devices %q; the replicas hold %v: %s", resp.StatusCode, rep,
				resp.Header.Get("X-Sim-Visible-Devices"), byID, body)
		}
	}
	// ctl lists them.
	out, err := ctlRun(t, g, "replicas")
	if err != nil || !strings.Contains(out, "GPUS") {
		t.Fatalf("ctl replicas: %v %s", err, out)
	}
	for id, ds := range byID {
		if !gpusLineHas(out, id, gpusList(ds)) {
			t.Errorf("ctl replicas does not show %s on GPUs %s:\n%s", id, gpusList(ds), out)
		}
	}

	// b needs one GPU while a holds all four: it waits, saying who holds them.
	if code, body := adminDo(t, g, "POST", "/llm/models", `{"name":"b","engine":"sim","resources":{"gpus":1},"scaling":{"min":1}}`); code != 201 {
		t.Fatalf("adding b: %d %s", code, body)
	}
	waitFor(t, 10*time.Second, "b to wait", func() bool { return g.models()["b"].State == "waiting" })
	b := g.models()["b"]
	for id, ds := range byID {
		if want := gpusList(ds) + " by " + id; !strings.Contains(b.Reason, want) {
			t.Errorf("b's reason %q does not say %q", b.Reason, want)
		}
	}
	if !strings.Contains(b.Reason, "a replica needs 1 GPUs; the node has 0 GPUs free") {
		t.Errorf("b's reason: %q", b.Reason)
	}

	// a scaled down to one replica: the other drains, and b starts on
	// devices it freed.
	if code, body := adminDo(t, g, "POST", "/llm/models/a/scale", `{"min":1,"max":1}`); code != 200 {
		t.Fatalf("scaling a down: %d %s", code, body)
	}
	bs := g.readyReplicas("b", 1)
	kept := g.readyReplicas("a", 1)[0]
	var gone llm.ReplicaStatus
	for _, r := range as {
		if r.ID != kept.ID {
			gone = r
		}
	}
	if !slices.Contains(byID[gone.ID], bs[0].GPUs[0]) {
		t.Errorf("b runs on GPU %v; a's replica that stopped held %v", bs[0].GPUs, byID[gone.ID])
	}
	taken := map[int]string{}
	gpusCheckReplicas(t, []llm.ReplicaStatus{kept}, 2, taken)
	gpusCheckReplicas(t, bs, 1, taken)

	// a changed live to one GPU under streams: its new replica starts
	// beside the old on the free device, no stream is cut, and the old
	// replica's two devices are free again once it stops.
	results := openStreams(t, g, "a", 8, 40)
	code, body = adminDo(t, g, "POST", "/llm/models/a/settings", `{"resources":{"gpus":1}}`)
	if code != 200 {
		t.Fatalf("live change of a to one GPU: %d %s", code, body)
	}
	var roll llm.Rollout
	_ = json.Unmarshal(body, &roll)
	if len(roll.Replaced) != 1 || roll.Replaced[0] != kept.ID || len(roll.Started) != 1 || roll.OneAtATime {
		t.Errorf("rollout: %s", body)
	}
	checkStreams(t, "live change of GPUs", results, 8, 40)
	waitFor(t, 30*time.Second, "a's old replica to exit", func() bool { return !processAlive(int(kept.PID)) })
	a := g.readyReplicas("a", 1)[0]
	taken = map[int]string{}
	gpusCheckReplicas(t, bs, 1, taken)
	gpusCheckReplicas(t, []llm.ReplicaStatus{a}, 1, taken)
	var nodeSt llm.NodeStatus
	g.adminGet("/llm/node", &nodeSt)
	if nodeSt.Used.GPUs != 2 || nodeSt.Free.GPUs != 2 || nodeSt.GPUDevices == nil || len(nodeSt.GPUDevices.Free) != 2 ||
		slices.Contains(nodeSt.GPUDevices.Free, a.GPUs[0]) || slices.Contains(nodeSt.GPUDevices.Free, bs[0].GPUs[0]) {
		t.Errorf("node after the change: %+v %+v, want 2 GPUs used, 2 free (not a's %v nor b's %v)", nodeSt, nodeSt.GPUDevices, a.GPUs, bs[0].GPUs)
	}
	// A shape no node can hold is refused, nothing changed.
	if code, body := adminDo(t, g, "POST", "/llm/models/a/settings", `{"resources":{"gpus":5}}`); code != 409 {
		t.Errorf("a change to 5 GPUs on a node of 4: %d %s", code, body)
	}

	// A reload that leaves a and b as they are keeps their replicas and
	// their devices.
	g.reload(gpusNode+`
		model e {
			engine sim
			min 0
		}`, "")
	st := g.models()
	for _, was := range []llm.ReplicaStatus{a, bs[0]} {
		m := st[strings.SplitN(was.ID, "-", 2)[0]]
		if len(m.Replicas) != 1 || m.Replicas[0].ID != was.ID || m.Replicas[0].PID != was.PID || !slices.Equal(m.Replicas[0].GPUs, was.GPUs) {
			t.Errorf("after a reload: %+v, want replica %s on GPUs %v kept", m.Replicas, was.ID, was.GPUs)
		}
	}
	// And the next replica still gets a device nobody holds.
	if code, body := adminDo(t, g, "POST", "/llm/models/b/scale", `{"min":2,"max":2}`); code != 200 {
		t.Fatalf("scaling b up: %d %s", code, body)
	}
	gpusCheckReplicas(t, append(g.readyReplicas("b", 2), g.readyReplicas("a", 1)...), 1, map[int]string{})
}

// gpusLineHas reports whether a line of a ctl table names both id and
// devices.
func gpusLineHas(out, id, devices string) bool {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, id) && slices.Contains(strings.Fields(line), devices) {
			return true
		}
	}
	return false
}

// In a cluster each node hands out its own devices: a model of four
// one-GPU replicas on two nodes of two GPUs each runs two on each, on
// devices 0 and 1 of its node, and every node's listing shows each
// replica's node and devices.
func TestGPUsInACluster(t *testing.T) {
	c := startCluster(t, 2, `
		org acme {
			team research {
				project alpha {
					key k1 `+llm.HashKey("gpus-secret")+`
				}
			}
		}
		node {
			memory 64GiB
			cores 64
			gpus 2
		}
		model g {
			engine sim
			min 4
			max 4
			resources {
				gpus 1
			}
		}`)
	for _, name := range c.names() {
		gw := c.nodes[name]
		var rs []llm.ReplicaStatus
		waitFor(t, 60*time.Second, "four ready replicas of g seen from "+name, func() bool {
			rs = gw.models()["g"].Replicas
			ready := 0
			for _, r := range rs {
				if r.State == llm.ReplicaReady {
					ready++
				}
			}
			return ready == 4
		})
		perNode := map[string]map[int]string{}
		for _, r := range rs {
			if len(r.GPUs) != 1 {
				t.Fatalf("from %s: replica %s on %s holds GPUs %v, want one", name, r.ID, r.Node, r.GPUs)
			}
			if perNode[r.Node] == nil {
				perNode[r.Node] = map[int]string{}
			}
			if other, ok := perNode[r.Node][r.GPUs[0]]; ok {
				t.Fatalf("from %s: %s and %s share GPU %d of %s", name, r.ID, other, r.GPUs[0], r.Node)
			}
			perNode[r.Node][r.GPUs[0]] = r.ID
			if r.Node == name { // a local replica: its process sees its device
				if report, cuda, _ := gpusSeen(t, r); report != gpusList(r.GPUs) || cuda != gpusList(r.GPUs) {
					t.Errorf("on %s: replica %s holds %v; its process reports %q, CUDA_VISIBLE_DEVICES=%q", name, r.ID, r.GPUs, report, cuda)
				}
			}
		}
		if len(perNode) != 2 || len(perNode["n1"]) != 2 || len(perNode["n2"]) != 2 {
			t.Errorf("from %s: replicas by node and device: %v", name, perNode)
		}
	}
	// A request through n1 may be answered on either node, by a replica
	// process that sees its own device.
	byID := map[string][]int{}
	for _, r := range c.nodes["n1"].models()["g"].Replicas {
		byID[r.ID] = r.GPUs
	}
	for range 6 {
		req, _ := http.NewRequest("POST", c.nodes["n1"].base+"/v1/chat/completions",
			strings.NewReader(`{"model":"g","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`))
		req.Header.Set("Authorization", "Bearer gpus-secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		rep := resp.Header.Get("X-Llm-Replica")
		if resp.StatusCode != 200 || byID[rep] == nil || resp.Header.Get("X-Sim-Visible-Devices") != gpusList(byID[rep]) {
			t.Errorf("through n1: %d, replica %q, devices %q; the replicas hold %v", resp.StatusCode, rep, resp.Header.Get("X-Sim-Visible-Devices"), byID)
		}
	}
	out, err := ctlRun(t, c.nodes["n1"], "replicas")
	if err != nil || strings.Count(out, " n2 ") != 2 {
		t.Errorf("ctl replicas on n1: %v\n%s", err, out)
	}
}
