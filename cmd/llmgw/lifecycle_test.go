package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm"
)

// A model with max 0 is kept in the catalog and never started: listed as
// stopped with the reason, requests for it get 503 saying how to start
// it; scaling it up (the admin API or ctl) starts it, scaling it back to
// max 0 drains its replicas, and that survives a restart.
func TestModelKeptWithMaxZero(t *testing.T) {
	g := startGateway(t, `
		model kept {
			engine sim
			max 0
		}
		model base {
			engine sim
		}`, "")
	g.readyReplicas("base", 1)
	if code, body := adminDo(t, g, "POST", "/llm/models", `{"name":"later","engine":"sim","scaling":{"max":0}}`); code != 201 {
		t.Fatalf("adding a model with max 0: %d %s", code, body)
	}
	// A few supervision ticks: nothing starts.
	time.Sleep(1500 * time.Millisecond)
	for _, name := range []string{"kept", "later"} {
		st := g.models()[name]
		if st.State != "stopped" || !strings.Contains(st.Reason, "kept in the catalog with max 0") || len(st.Replicas) != 0 || st.Max != 0 {
			t.Errorf("%s: %s %q, %d replicas, max %d; want stopped, kept with max 0, none", name, st.State, st.Reason, len(st.Replicas), st.Max)
		}
		_, apiErr := chatErr(g.client(), name)
		if apiErr == nil || apiErr.StatusCode != 503 || !strings.Contains(apiErr.Message, "scale it to start it") {
			t.Errorf("a request for %s: %+v; want 503 saying to scale it", name, apiErr)
		}
	}
	if out, err := ctlRun(t, g, "models"); err != nil || !regexpLine(out, "later", "sim", "stopped", "0/0-0") {
		t.Errorf("ctl models: %v\n%s", err, out)
	}

	// Scaling it up starts it.
	out, err := ctlRun(t, g, "model", "scale", "later", "--max", "1")
	if err != nil || !strings.Contains(out, "min 1, max 1") {
		t.Fatalf("ctl model scale --max 1: %v\n%s", err, out)
	}
	rs := g.readyReplicas("later", 1)
	chatOnce(t, g, "later")

	// Back to max 0: its replica drains and stops.
	out, err = ctlRun(t, g, "model", "scale", "later", "--min", "0", "--max", "0")
	if err != nil || !strings.Contains(out, "min 0, max 0") {
		t.Fatalf("ctl model scale --max 0: %v\n%s", err, out)
	}
	waitFor(t, 15*time.Second, "the replica to stop", func() bool {
		return len(g.models()["later"].Replicas) == 0 && !processAlive(int(rs[0].PID))
	})
	if st := g.models()["later"]; st.State != "stopped" {
		t.Errorf("after scaling to max 0: %s %q", st.State, st.Reason)
	}

	// Kept across a restart, still not running; then started by the API.
	g.stop()
	g.start()
	time.Sleep(1500 * time.Millisecond)
	if st := g.models()["later"]; st.State != "stopped" || len(st.Replicas) != 0 || !st.Runtime {
		t.Errorf("after a restart: %+v", st)
	}
	if code, body := adminDo(t, g, "POST", "/llm/models/later/scale", `{"min":0,"max":2}`); code != 200 {
		t.Fatalf("scale: %d %s", code, body)
	}
	if resp := chatOnce(t, g, "later"); resp.SystemFingerprint != "llmgw-sim:later" {
		t.Errorf("answered as %q", resp.SystemFingerprint)
	}
	if code, body := adminDo(t, g, "POST", "/llm/models/later/scale", `{"min":1,"max":0}`); code != 400 || !strings.Contains(string(body), "below min") {
		t.Errorf("min 1 max 0: %d %s", code, body)
	}
}

// In a cluster a model kept with max 0 runs on no node; scaling it up
// through any node starts it where the plan puts it, and every node
// serves it.
func TestClusterModelKeptWithMaxZero(t *testing.T) {
	c := startCluster(t, 2, fmt.Sprintf(clusterModels, llm.HashKey("secret-1")))
	n1, n2 := c.nodes["n1"], c.nodes["n2"]
	if code, body := adminDo(t, n1, "POST", "/llm/models", `{"name":"kept","engine":"sim","scaling":{"max":0}}`); code != 201 {
		t.Fatalf("add: %d %s", code, body)
	}
	waitFor(t, 20*time.Second, "n2 to list kept as stopped", func() bool {
		st, ok := n2.models()["kept"]
		return ok && st.State == "stopped" && strings.Contains(st.Reason, "max 0")
	})
	time.Sleep(time.Second) // a few heartbeats and plans
	for _, g := range []*gateway{n1, n2} {
		if st := g.models()["kept"]; len(st.Replicas) != 0 {
			t.Errorf("kept has replicas: %+v", st.Replicas)
		}
		if code, _, body := ask(t, g, "secret-1", "kept"); code != 503 || !strings.Contains(body, "max 0") {
			t.Errorf("a request for kept: %d %s", code, body)
		}
	}
	out, err := ctlRun(t, n2, "model", "scale", "kept", "--max", "1")
	if err != nil {
		t.Fatalf("ctl model scale on n2: %v\n%s", err, out)
	}
	for _, g := range []*gateway{n1, n2} {
		waitFor(t, 30*time.Second, "a ready replica of kept", func() bool { return len(g.readyOn("kept")) == 1 })
		if code, _, body := ask(t, g, "secret-1", "kept"); code != 200 {
			t.Errorf("a request for kept after the scale: %d %s", code, body)
		}
	}
}
