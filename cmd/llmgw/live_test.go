package main

import (
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

const liveModel = `
		drain_timeout 2m
		node {
			memory 4GiB
			cores 64
		}
		model d {
			engine sim
			option tokens_per_second 20
			option max_tokens 5
			resources {
				memory 1GiB
			}
		}`

// load sends short requests until stop is closed and counts those that
// did not answer 200.
func liveLoad(t *testing.T, g *gateway, stop <-chan struct{}) (wait func() (ok, failed int64)) {
	var okN, failN atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r, body := post(t, g.base+"/v1/chat/completions", `{"model":"d","max_tokens":2,"messages":[{"role":"user","content":"x"}]}`)
				if r.StatusCode != 200 {
					failN.Add(1)
					t.Logf("a request during the change: %d %s", r.StatusCode, body)
				} else {
					okN.Add(1)
				}
			}
		}()
	}
	return func() (int64, int64) { wg.Wait(); return okN.Load(), failN.Load() }
}

// answerLength is the length of an answer when the request sets none: the
// sim engine's max_tokens option, which the test changes live.
func answerLength(t *testing.T, g *gateway) int64 {
	t.Helper()
	return chatOnce(t, g, "d").Usage.CompletionTokens
}

// contextServed is the context length the replica that answered runs
// with, as the sim engine reports it.
func contextServed(t *testing.T, g *gateway) string {
	t.Helper()
	r, body := post(t, g.base+"/v1/chat/completions", `{"model":"d","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`)
	if r.StatusCode != 200 {
		t.Fatalf("chat: %d %s", r.StatusCode, body)
	}
	return r.Header.Get("X-Sim-Context-Length")
}

func TestLiveChangeAndRestartUnderStreams(t *testing.T) {
	g := startGateway(t, liveModel, "")
	old := g.readyReplicas("d", 1)[0]
	if cl := contextServed(t, g); cl != "" {
		t.Errorf("context length served before the change: %q, want none", cl)
	}
	if n := answerLength(t, g); n != 5 {
		t.Fatalf("answer length before the change: %d, want 5", n)
	}

	// A change of options and context length, under 32 streams and a
	// steady flow of short requests.
	results := openStreams(t, g, "d", 32, drainTokens)
	stop := make(chan struct{})
	wait := liveLoad(t, g, stop)
	code, body := adminDo(t, g, "POST", "/llm/models/d/settings", `{"options":{"max_tokens":"7"},"context_length":4096}`)
	if code != 200 {
		t.Fatalf("live change: %d %s", code, body)
	}
	var out llmapi.Rollout
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Replaced) != 1 || out.Replaced[0] != old.ID || len(out.Started) != 1 || out.OneAtATime {
		t.Errorf("rollout: %s", body)
	}
	if !strings.Contains(out.Note, "config file") {
		t.Errorf("the answer does not say the config file keeps the old values: %s", body)
	}
	// The new replica serves new requests with the change at once.
	if n := answerLength(t, g); n != 7 {
		t.Errorf("answer length after the change: %d, want 7", n)
	}
	if cl := contextServed(t, g); cl != "4096" {
		t.Errorf("context length served after the change: %q, want 4096", cl)
	}
	checkStreams(t, "live change", results, 32, drainTokens)
	close(stop)
	okN, failed := wait()
	if failed != 0 || okN == 0 {
		t.Errorf("requests during the live change: %d ok, %d failed", okN, failed)
	}
	t.Logf("during the live change: 32 streams of %d tokens, %d short requests ok, %d failed; rollout %s", drainTokens, okN, failed, body)
	waitFor(t, 10*time.Second, "the old replica to exit", func() bool { return !processAlive(int(old.PID)) })
	waitFor(t, 10*time.Second, "only the new replica listed", func() bool {
		rs := g.models()["d"].Replicas
		return len(rs) == 1 && rs[0].ID == out.Started[0]
	})

	// A shape that cannot be placed is refused and nothing changes.
	cur := g.readyReplicas("d", 1)[0]
	code, body = adminDo(t, g, "POST", "/llm/models/d/settings", `{"resources":{"memory":8589934592}}`)
	if code != 409 || !strings.Contains(string(body), "do not fit") {
		t.Errorf("a change that cannot be placed: %d %s", code, body)
	}
	if st := g.models()["d"]; st.Resources == nil || st.Resources.Memory != 1<<30 || len(st.Replicas) != 1 || st.Replicas[0].ID != cur.ID {
		t.Errorf("after a refused change the model changed: %+v", st)
	}
	// So is an option the engine does not know.
	if code, body = adminDo(t, g, "POST", "/llm/models/d/settings", `{"options":{"colour":"red"}}`); code != 400 {
		t.Errorf("an unknown option: %d %s", code, body)
	}

	// A restart under load: new replica ids, no error.
	results = openStreams(t, g, "d", 32, drainTokens)
	stop = make(chan struct{})
	wait = liveLoad(t, g, stop)
	code, body = adminDo(t, g, "POST", "/llm/models/d/restart", "")
	if code != 200 {
		t.Fatalf("restart: %d %s", code, body)
	}
	var rs llmapi.Rollout
	_ = json.Unmarshal(body, &rs)
	if len(rs.Started) != 1 || rs.Started[0] == cur.ID || len(rs.Replaced) != 1 || rs.Replaced[0] != cur.ID {
		t.Errorf("restart rollout: %s", body)
	}
	checkStreams(t, "restart", results, 32, drainTokens)
	close(stop)
	if okN, failed := wait(); failed != 0 || okN == 0 {
		t.Errorf("requests during the restart: %d ok, %d failed", okN, failed)
	}
	waitFor(t, 10*time.Second, "the restarted replica to exit", func() bool { return !processAlive(int(cur.PID)) })
	if n := answerLength(t, g); n != 7 {
		t.Errorf("answer length after the restart: %d, want 7", n)
	}

	// ctl takes the same change.
	if outS, err := ctlRun(t, g, "model", "set", "d", "--option", "max_tokens=9"); err != nil || !strings.Contains(outS, "replaced") {
		t.Errorf("ctl model set: %v %s", err, outS)
	}
	if outS, err := ctlRun(t, g, "model", "restart", "d"); err != nil || !strings.Contains(outS, "replaced") {
		t.Errorf("ctl model restart: %v %s", err, outS)
	}

	// A reload of the unchanged config file keeps the change, and the
	// replica that runs with it.
	before := g.readyReplicas("d", 1)[0]
	// (Another model is added in the file: Caddy skips a reload of the
	// same config.)
	g.reload(liveModel+`
		model e {
			engine sim
			min 0
		}`, "")
	if n := answerLength(t, g); n != 9 {
		t.Errorf("answer length after a reload: %d, want 9 (the change kept over the file)", n)
	}
	if cl := contextServed(t, g); cl != "4096" {
		t.Errorf("context length served after a reload: %q, want 4096", cl)
	}
	if after := g.readyReplicas("d", 1)[0]; after.ID != before.ID {
		t.Errorf("the reload replaced replica %s (with the change) by %s", before.ID, after.ID)
	}

	for _, action := range []string{"model changed live", "model restarted"} {
		if p := g.audit("action=" + strings.ReplaceAll(action, " ", "+")); len(p.Entries) == 0 {
			t.Errorf("no audit entry %q", action)
		}
	}
}

// When the node has room for only one replica of the new shape, the old
// one drains first and the answer says so.
func TestLiveChangeOneAtATime(t *testing.T) {
	g := startGateway(t, liveModel, "")
	old := g.readyReplicas("d", 1)[0]
	code, body := adminDo(t, g, "POST", "/llm/models/d/settings", `{"resources":{"memory":3758096384},"options":{"max_tokens":"6"}}`)
	if code != 200 {
		t.Fatalf("live change: %d %s", code, body)
	}
	var out llmapi.Rollout
	_ = json.Unmarshal(body, &out)
	if !out.OneAtATime || len(out.Started) != 1 || out.Started[0] == old.ID {
		t.Errorf("rollout: %s", body)
	}
	if n := answerLength(t, g); n != 6 {
		t.Errorf("answer length after the change: %d, want 6", n)
	}
	if st := g.models()["d"]; st.Resources == nil || st.Resources.Memory != 3758096384 {
		t.Errorf("resources after the change: %+v", st.Resources)
	}
	waitFor(t, 10*time.Second, "the old replica to exit", func() bool { return !processAlive(int(old.PID)) })
}

// A model added through the admin API changes the same way; the change
// is kept in storage with it, and no note is needed.
func TestLiveChangeOfARuntimeModel(t *testing.T) {
	g := startGateway(t, liveModel, "")
	if code, body := adminDo(t, g, "POST", "/llm/models", `{"name":"r","engine":"sim","options":{"max_tokens":"3"},"scaling":{"min":1}}`); code != 201 {
		t.Fatalf("add: %d %s", code, body)
	}
	old := g.readyReplicas("r", 1)[0]
	code, body := adminDo(t, g, "POST", "/llm/models/r/settings", `{"options":{"max_tokens":"4"},"context_length":2048}`)
	if code != 200 {
		t.Fatalf("live change: %d %s", code, body)
	}
	var out llmapi.Rollout
	_ = json.Unmarshal(body, &out)
	if len(out.Replaced) != 1 || out.Replaced[0] != old.ID || len(out.Started) != 1 || out.Note != "" {
		t.Errorf("rollout: %s", body)
	}
	if n := chatOnce(t, g, "r").Usage.CompletionTokens; n != 4 {
		t.Errorf("answer length after the change: %d, want 4", n)
	}
	// A reload (the file changes elsewhere) keeps the change and its replica.
	g.reload(liveModel+`
		model e {
			engine sim
			min 0
		}`, "")
	if n := chatOnce(t, g, "r").Usage.CompletionTokens; n != 4 {
		t.Errorf("answer length after a reload: %d, want 4", n)
	}
	if rs := g.readyReplicas("r", 1); rs[0].ID != out.Started[0] {
		t.Errorf("the reload replaced the changed replica %s by %s", out.Started[0], rs[0].ID)
	}
}
