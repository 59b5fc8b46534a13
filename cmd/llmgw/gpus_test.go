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

	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
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
func gpusSeen(t *testing.T, r llmapi.ReplicaStatus) (report, cuda, hip string) {
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
func gpusCheckReplicas(t *testing.T, rs []llmapi.ReplicaStatus, want int, taken map[int]string) map[string][]int {
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
	var pl llmapi.Plan
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
	var gone llmapi.ReplicaStatus
	for _, r := range as {
		if r.ID != kept.ID {
			gone = r
		}
	}
	if !slices.Contains(byID[gone.ID], bs[0].GPUs[0]) {
		t.Errorf("b runs on GPU %v; a's replica that stopped held %v", bs[0].GPUs, byID[gone.ID])
	}
	taken := map[int]string{}
	gpusCheckReplicas(t, []llmapi.ReplicaStatus{kept}, 2, taken)
	gpusCheckReplicas(t, bs, 1, taken)

	// a changed live to one GPU under streams: its new replica starts
	// beside the old on the free device, no stream is cut, and the old
	// replica's two devices are free again once it stops.
	results := openStreams(t, g, "a", 8, 40)
	code, body = adminDo(t, g, "POST", "/llm/models/a/settings", `{"resources":{"gpus":1}}`)
	if code != 200 {
		t.Fatalf("live change of a to one GPU: %d %s", code, body)
	}
	var roll llmapi.Rollout
	_ = json.Unmarshal(body, &roll)
	if len(roll.Replaced) != 1 || roll.Replaced[0] != kept.ID || len(roll.Started) != 1 || roll.OneAtATime {
		t.Errorf("rollout: %s", body)
	}
	checkStreams(t, "live change of GPUs", results, 8, 40)
	waitFor(t, 30*time.Second, "a's old replica to exit", func() bool { return !processAlive(int(kept.PID)) })
	a := g.readyReplicas("a", 1)[0]
	taken = map[int]string{}
	gpusCheckReplicas(t, bs, 1, taken)
	gpusCheckReplicas(t, []llmapi.ReplicaStatus{a}, 1, taken)
	var nodeSt llmapi.NodeStatus
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
	for _, was := range []llmapi.ReplicaStatus{a, bs[0]} {
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
					key k1 `+tenancy.HashKey("gpus-secret")+`
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
		var rs []llmapi.ReplicaStatus
		waitFor(t, 60*time.Second, "four ready replicas of g seen from "+name, func() bool {
			rs = gw.models()["g"].Replicas
			ready := 0
			for _, r := range rs {
				if r.State == string(fleet.ReplicaReady) {
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

// A critical model's replica takes the one GPU of an opportunistic one:
// the opportunistic replica's process is gone before the critical
// replica's process starts, on the same device; the opportunistic model
// then waits, naming who holds it. (The sim replica exits at once when
// stopped, so the wait for the device is shown by TestGPUDevicesEviction
// in modules/llm; here the order is checked as the processes ran.)
func TestGPUsEviction(t *testing.T) {
	g := startGateway(t, `
		node {
			memory 64GiB
			cores 64
			gpus 1
		}
		model low {
			engine sim
			class opportunistic
			resources {
				gpus 1
			}
		}
		model high {
			engine sim
			class critical
			min 0
			resources {
				gpus 1
			}
		}`, "")
	low := g.readyReplicas("low", 1)[0]
	gpusCheckReplicas(t, []llmapi.ReplicaStatus{low}, 1, map[int]string{})
	chatOnce(t, g, "high")
	high := g.readyReplicas("high", 1)[0]
	gpusCheckReplicas(t, []llmapi.ReplicaStatus{high}, 1, map[int]string{})
	if processAlive(int(low.PID)) {
		t.Fatalf("low's replica (pid %d) still runs beside high's on GPU %v", low.PID, high.GPUs)
	}
	exited := gpusExitedAt(t, g, low.ID)
	if started := gpusProcessStart(t, high.PID); started.Before(exited.Add(-50 * time.Millisecond)) {
		t.Errorf("high's engine started at %s, %s before low's released GPU %v (its process exited at %s)",
			started.Format(time.StampMilli), exited.Sub(started), high.GPUs, exited.Format(time.StampMilli))
	}
	waitFor(t, 10*time.Second, "low to wait", func() bool { return g.models()["low"].State == "waiting" })
	st := g.models()["low"]
	// (high's replica, named by its id or, when low last tried while it
	// was starting, by its model)
	if st.State != "waiting" || !strings.Contains(st.Reason, "GPUs in use: 0 by "+high.ID) && !strings.Contains(st.Reason, "GPUs in use: 0 by a replica of high") {
		t.Errorf("low: %s %q", st.State, st.Reason)
	}
}

// gpusExitedAt is when the gateway logged that a replica's engine server
// exited.
func gpusExitedAt(t *testing.T, g *gateway, replica string) time.Time {
	t.Helper()
	for _, line := range strings.Split(g.logs.String(), "\n") {
		var e struct {
			TS      float64 `json:"ts"`
			Msg     string  `json:"msg"`
			Replica string  `json:"replica"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Msg == "engine server exited" && e.Replica == replica {
			return time.Unix(0, int64(e.TS*1e9))
		}
	}
	t.Fatalf("no log of replica %s exiting", replica)
	return time.Time{}
}

// gpusProcessStart is when a process started, from /proc (to 10ms).
func gpusProcessStart(t *testing.T, pid int64) time.Time {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ticks, _ := strconv.ParseInt(fields[19], 10, 64) // starttime, field 22, in 1/100 s since boot
	up, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	secs, _ := strconv.ParseFloat(strings.Fields(string(up))[0], 64)
	boot := time.Now().Add(-time.Duration(secs * float64(time.Second)))
	return boot.Add(time.Duration(ticks) * 10 * time.Millisecond)
}
