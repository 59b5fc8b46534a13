package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
)

func chatOnce(t *testing.T, g *gateway, model string) *openai.ChatCompletion {
	t.Helper()
	c := g.client()
	resp, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	if err != nil {
		t.Fatalf("chat with %s: %v", model, err)
	}
	return resp
}

func TestReplicaKilledComesBack(t *testing.T) {
	g := startGateway(t, `
		model m {
			engine sim
		}`, "")
	old := g.readyReplicas("m", 1)[0]
	if err := syscall.Kill(int(old.PID), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "a new replica", func() bool {
		rs := g.models()["m"].Replicas
		return len(rs) == 1 && rs[0].PID != old.PID
	})
	chatOnce(t, g, "m")
}

func TestPluginKilledKeepsReplicasAndStreams(t *testing.T) {
	g := startGateway(t, drainModel(20), "")
	rep := g.readyReplicas("d", 1)[0]
	plugin := g.enginePIDs()["sim"]
	if plugin == 0 {
		t.Fatal("no sim plugin pid")
	}
	results := openStreams(t, g, "d", 20, drainTokens)
	if err := syscall.Kill(plugin, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The replica outlives its plugin; a new plugin adopts it.
	waitFor(t, 20*time.Second, "a new plugin", func() bool {
		p := g.enginePIDs()["sim"]
		return p != 0 && p != plugin
	})
	waitFor(t, 10*time.Second, "the new plugin to adopt the replica", func() bool {
		return strings.Contains(g.logs.String(), "replica adopted by the restarted engine plugin")
	})
	checkStreams(t, "plugin killed", results, 20, drainTokens)
	if rs := g.models()["d"].Replicas; len(rs) != 1 || rs[0].PID != rep.PID {
		t.Fatalf("after the plugin restart: %+v, want the same replica (pid %d)", rs, rep.PID)
	}
	chatOnce(t, g, "d")
	// The new plugin supervises it: a restart through it stops the old
	// process and starts a new one.
	if code, body := adminDo(t, g, "POST", "/llm/replicas/"+rep.ID+"/restart", ""); code != 200 {
		t.Fatalf("restart: %d %s", code, body)
	}
	waitFor(t, 10*time.Second, "the adopted replica to be stopped by the new plugin", func() bool { return !processAlive(int(rep.PID)) })
	chatOnce(t, g, "d")
}

func TestPluginHangKeepsReplicas(t *testing.T) {
	g := startGateway(t, `
		model h {
			engine sim
			option tokens_per_second 20
			min 3
			max 3
		}`, "")
	reps := g.readyReplicas("h", 3)
	plugin := g.enginePIDs()["sim"]
	results := openStreams(t, g, "h", 30, 160) // 8s at 20 tokens/s
	if err := syscall.Kill(plugin, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// While the plugin hangs, requests are served by its replicas.
	for range 5 {
		chatOnce(t, g, "h")
		time.Sleep(time.Second)
	}
	time.Sleep(3 * time.Second)
	_ = syscall.Kill(plugin, syscall.SIGCONT)
	checkStreams(t, "plugin hung", results, 30, 160)
	waitFor(t, 20*time.Second, "a live plugin", func() bool { return g.enginePIDs()["sim"] != 0 })
	got := g.models()["h"].Replicas
	if len(got) != 3 {
		t.Fatalf("after the hang: %d replicas, want the same 3", len(got))
	}
	for i, r := range reps {
		if !processAlive(int(r.PID)) {
			t.Errorf("replica %d (pid %d) was stopped while its plugin hung", i, r.PID)
		}
	}
	if strings.Contains(g.logs.String(), `"msg":"replica lost"`) {
		t.Error("a replica was declared lost while only its plugin hung")
	}
	chatOnce(t, g, "h")
}

func TestGatewayKilledStopsEngines(t *testing.T) {
	g := startGateway(t, drainModel(0), "")
	rep := g.readyReplicas("d", 1)[0]
	plugin := g.enginePIDs()["sim"]
	_ = g.cmd.Process.Kill()
	<-g.exited
	waitFor(t, 15*time.Second, "the plugin and its engine server to exit with llmgw", func() bool {
		return !processAlive(plugin) && !processAlive(int(rep.PID))
	})
}

func TestOnDemandStartAndIdleStop(t *testing.T) {
	g := startGateway(t, `
		model lazy {
			engine sim
			min 0
			idle_timeout 1s
		}`, "")
	if st := g.models()["lazy"]; st.State != "idle" || len(st.Replicas) != 0 {
		t.Fatalf("before any request: got state %q with %d replicas, want idle with none", st.State, len(st.Replicas))
	}
	chatOnce(t, g, "lazy") // waits for the start
	rs := g.models()["lazy"].Replicas
	if len(rs) != 1 {
		t.Fatalf("after a request: %d replicas, want 1", len(rs))
	}
	waitFor(t, 15*time.Second, "the idle replica to stop", func() bool { return len(g.models()["lazy"].Replicas) == 0 })
	waitFor(t, 5*time.Second, "its process to exit", func() bool { return !processAlive(int(rs[0].PID)) })
	chatOnce(t, g, "lazy") // and it starts again
}

func TestScaleUpUnderLoad(t *testing.T) {
	g := startGateway(t, `
		model busy {
			engine sim
			option ttft 1500ms
			min 1
			max 2
			target_concurrency 1
		}`, "")
	g.readyReplicas("busy", 1)
	done := make(chan error, 3)
	for range 3 {
		go func() {
			c := g.client()
			_, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
				Model:    "busy",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			})
			done <- err
		}()
	}
	g.readyReplicas("busy", 2)
	for range 3 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

const reloadRouter = ""

func TestReloadKeepsReplicasAndStreams(t *testing.T) {
	models := `
		model keep {
			engine sim
			option tokens_per_second 20
		}
		model change {
			engine sim
		}`
	g := startGateway(t, models, reloadRouter)
	keep := g.readyReplicas("keep", 1)[0]
	change := g.readyReplicas("change", 1)[0]
	plugin := g.enginePIDs()["sim"]

	// A stream in flight across the reload: 30 tokens at 20/s.
	req, _ := http.NewRequest("POST", g.base+"/v1/chat/completions", strings.NewReader(
		`{"model":"keep","stream":true,"max_tokens":30,"messages":[{"role":"user","content":"hi"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	streamDone := make(chan []string, 1)
	go func() {
		var events []string
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if s, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events = append(events, s)
			}
		}
		streamDone <- events
	}()
	time.Sleep(300 * time.Millisecond)

	g.reload(strings.Replace(models, "model change {\n\t\t\tengine sim", "model change {\n\t\t\tengine sim\n\t\t\toption max_tokens 3", 1), reloadRouter)

	if got := g.enginePIDs()["sim"]; got != plugin {
		t.Errorf("plugin pid changed across reload: %d -> %d", plugin, got)
	}
	if got := g.readyReplicas("keep", 1)[0]; got.PID != keep.PID {
		t.Errorf("unchanged model's replica restarted: pid %d -> %d", keep.PID, got.PID)
	}
	waitFor(t, 20*time.Second, "the changed model's replica to be replaced", func() bool {
		rs := g.models()["change"].Replicas
		return len(rs) == 1 && rs[0].PID != change.PID
	})
	waitFor(t, 5*time.Second, "the changed model's old replica to exit", func() bool { return !processAlive(int(change.PID)) })

	events := <-streamDone
	if len(events) == 0 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream across the reload broke: %d events, last %q", len(events), events[len(events)-1:])
	}
	var words int
	for _, e := range events[:len(events)-1] {
		var ch openai.ChatCompletionChunk
		if err := json.Unmarshal([]byte(e), &ch); err != nil {
			t.Fatalf("bad chunk %q: %v", e, err)
		}
		if len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
			words++
		}
	}
	if words != 30 {
		t.Errorf("stream across the reload delivered %d tokens, want 30", words)
	}
}

func TestStopLeavesNoProcesses(t *testing.T) {
	g := startGateway(t, `
		model a {
			engine sim
			max 2
		}
		model b {
			engine sim
		}`, "")
	var pids []int
	for _, m := range []string{"a", "b"} {
		for _, r := range g.readyReplicas(m, 1) {
			pids = append(pids, int(r.PID))
		}
	}
	pids = append(pids, g.enginePIDs()["sim"])
	g.stop()
	for _, pid := range pids {
		if processAlive(pid) {
			t.Errorf("process %d still running after llmgw stopped", pid)
		}
	}
}
