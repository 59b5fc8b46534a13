package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

func ctlRun(t *testing.T, g *gateway, args ...string) (string, error) {
	t.Helper()
	return ctlRunEnv(t, g, nil, args...)
}

func TestCtl(t *testing.T) {
	g := startQuotaGateway(t, quotaModels+tenancyBlock("", "", "", ""), "")
	g.stop()
	g.before = "\t\tllm_cache"
	g.writeConfig(quotaModels+tenancyBlock("", "", "", ""), "")
	g.start()
	g.readyReplicas("sim-chat", 1)

	out, err := ctlRun(t, g, "models")
	if err != nil || !strings.Contains(out, "MODEL") || !regexpLine(out, "sim-chat", "sim", "ready") || !regexpLine(out, "other", "idle") {
		t.Errorf("ctl models: %v\n%s", err, out)
	}
	out, err = ctlRun(t, g, "replicas")
	if err != nil || !regexpLine(out, "sim-chat-", "sim-chat", "ready", "http://127.0.0.1:") {
		t.Errorf("ctl replicas: %v\n%s", err, out)
	}
	if out, err = ctlRun(t, g, "model", "stop", "other"); err != nil || !strings.Contains(out, "model other: stopped") {
		t.Errorf("ctl model stop: %v\n%s", err, out)
	}
	if out, err = ctlRun(t, g, "model", "start", "other"); err != nil || !strings.Contains(out, "model other: idle") {
		t.Errorf("ctl model start: %v\n%s", err, out)
	}
	file := g.dir + "/model.yaml"
	if err := os.WriteFile(file, []byte("name: cli-model\nengine: sim\naliases: [cm]\nscaling:\n  min: 1\n  max: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err = ctlRun(t, g, "model", "add", "-f", file); err != nil || !strings.Contains(out, "model cli-model added") {
		t.Errorf("ctl model add: %v\n%s", err, out)
	}
	if out, err = ctlRun(t, g, "model", "scale", "cli-model", "--min", "2", "--max", "2"); err != nil || !strings.Contains(out, "min 2, max 2") {
		t.Errorf("ctl model scale: %v\n%s", err, out)
	}
	g.readyReplicas("cli-model", 2)
	if out, err = ctlRun(t, g, "model", "scale", "sim-chat", "--min", "2"); err == nil || !strings.Contains(out, "config file") {
		t.Errorf("ctl model scale of a config model: %v\n%s", err, out)
	}
	if out, err = ctlRun(t, g, "model", "remove", "cli-model"); err != nil || !strings.Contains(out, "removed") {
		t.Errorf("ctl model remove: %v\n%s", err, out)
	}
	out, err = ctlRun(t, g, "engines", "--json")
	var engines []llmapi.EngineStatus
	if err != nil || json.Unmarshal([]byte(out), &engines) != nil {
		t.Errorf("ctl engines --json: %v\n%s", err, out)
	}
	running := map[string]bool{}
	for _, e := range engines {
		running[e.Type] = e.Running
	}
	if !running["sim"] || running["openai"] || len(running) < 6 { // every built-in engine, sim running
		t.Errorf("ctl engines --json: %v\n%s", err, out)
	}

	out, err = ctlRun(t, g, "keys", "create", "--project", "acme/research/alpha", "--id", "cli")
	i := strings.Index(out, "secret: ")
	if err != nil || i < 0 {
		t.Fatalf("ctl keys create: %v\n%s", err, out)
	}
	secret := strings.Fields(out[i+len("secret: "):])[0]
	if _, e := chatErr(keyClient(g, secret), "sim-chat"); e != nil {
		t.Fatalf("the key from ctl does not work: %v", e)
	}
	out, err = ctlRun(t, g, "keys")
	if err != nil || !regexpLine(out, "cli", "acme/research/alpha", "runtime", "active") || strings.Contains(out, secret) {
		t.Errorf("ctl keys: %v\n%s", err, out)
	}
	out, err = ctlRun(t, g, "usage", "--key", "cli")
	if err != nil || !regexpLine(out, "sim-chat", "1") || !strings.Contains(out, "(total)") {
		t.Errorf("ctl usage: %v\n%s", err, out)
	}
	out, err = ctlRun(t, g, "cache")
	if err != nil || !strings.Contains(out, "ENTRIES") {
		t.Errorf("ctl cache: %v\n%s", err, out)
	}
	if out, err = ctlRun(t, g, "keys", "revoke", "cli"); err != nil || !strings.Contains(out, "revoked") {
		t.Errorf("ctl keys revoke: %v\n%s", err, out)
	}
	if _, e := chatErr(keyClient(g, secret), "sim-chat"); e == nil || e.StatusCode != 401 {
		t.Errorf("a key revoked by ctl still works: %+v", e)
	}

	// Errors say what to do.
	if out, err = ctlRun(t, g, "keys", "revoke", "k1"); err == nil || !strings.Contains(out, "config file") {
		t.Errorf("revoking a config key: %v\n%s", err, out)
	}
	if out, err = ctlRun(t, g, "usage"); err == nil || !strings.Contains(out, "name one node") {
		t.Errorf("usage without a node: %v\n%s", err, out)
	}
	raw, err := exec.Command(binary, "ctl", "--admin", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "models").CombinedOutput()
	if err == nil || !strings.Contains(string(raw), "is llmgw running") {
		t.Errorf("no llmgw at --admin: %v\n%s", err, raw)
	}
}

// regexpLine reports whether some line of out holds all the words, in order.
func regexpLine(out string, words ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		rest, ok := line, true
		for _, w := range words {
			i := strings.Index(rest, w)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(w):]
		}
		if ok {
			return true
		}
	}
	return false
}

func TestAdminModelStopStartAndReplicaRestart(t *testing.T) {
	g := startGateway(t, `
		model m {
			engine sim
		}`, "")
	old := g.readyReplicas("m", 1)[0]
	if code, body := adminDo(t, g, "POST", "/llm/replicas/"+old.ID+"/restart", ""); code != 200 {
		t.Fatalf("restart: %d %s", code, body)
	}
	waitFor(t, 20*time.Second, "a new replica", func() bool {
		rs := g.models()["m"].Replicas
		return len(rs) == 1 && rs[0].ID != old.ID
	})
	waitFor(t, 10*time.Second, "the old replica to exit", func() bool { return !processAlive(int(old.PID)) })

	if code, body := adminDo(t, g, "POST", "/llm/models/m/stop", ""); code != 200 || !strings.Contains(string(body), `"state":"stopped"`) {
		t.Fatalf("stop: %d %s", code, body)
	}
	r, body := post(t, g.base+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	if r.StatusCode != 503 || !strings.Contains(string(body), "administrator stopped it") {
		t.Errorf("a stopped model: %d %s", r.StatusCode, body)
	}
	// It stays stopped across a restart of llmgw.
	g.stop()
	g.start()
	if st := g.models()["m"]; st.State != "stopped" || len(st.Replicas) != 0 {
		t.Errorf("after a restart: %s with %d replicas, want stopped", st.State, len(st.Replicas))
	}
	if code, _ := adminDo(t, g, "POST", "/llm/models/m/start", ""); code != 200 {
		t.Fatalf("start: %d", code)
	}
	g.readyReplicas("m", 1)
	chatOnce(t, g, "m")

	code, doc := adminDo(t, g, "GET", "/llm/openapi.json", "")
	if code != 200 || !strings.Contains(string(doc), `"/llm/models/{name}/stop"`) {
		t.Errorf("openapi: %d", code)
	}
}

func TestAdminRuntimeModels(t *testing.T) {
	g := startGateway(t, `
		model base {
			engine sim
		}`, "")
	if code, body := adminDo(t, g, "POST", "/llm/models", `{"name":"extra","engine":"sim","aliases":["x2"],"fallbacks":["base"],"scaling":{"min":1,"max":3}}`); code != 201 {
		t.Fatalf("add: %d %s", code, body)
	}
	if resp := chatOnce(t, g, "x2"); resp.SystemFingerprint != "llmgw-sim:extra" {
		t.Errorf("the added model answered as %q", resp.SystemFingerprint)
	}
	for _, bad := range []struct{ body, want string }{
		{`{"name":"base","engine":"sim"}`, "used twice"},
		{`{"name":"y","engine":"sim","fallbacks":["nope"]}`, "not in the catalog"},
		{`{"name":"z","engine":"nosuch"}`, "no plugin"},
		{`{"name":"w","engine":"sim","colour":"red"}`, "unknown field"},
	} {
		if code, body := adminDo(t, g, "POST", "/llm/models", bad.body); code != 400 || !strings.Contains(string(body), bad.want) {
			t.Errorf("adding %s: %d %s, want 400 mentioning %q", bad.body, code, body, bad.want)
		}
	}
	if code, body := adminDo(t, g, "POST", "/llm/models/extra/scale", `{"min":2,"max":3}`); code != 200 {
		t.Fatalf("scale: %d %s", code, body)
	}
	g.readyReplicas("extra", 2)
	if code, body := adminDo(t, g, "POST", "/llm/models/base/scale", `{"min":2}`); code != 409 || !strings.Contains(string(body), "config file") {
		t.Errorf("scaling a config model: %d %s", code, body)
	}
	if code, body := adminDo(t, g, "DELETE", "/llm/models/base", ""); code != 409 || !strings.Contains(string(body), "config file") {
		t.Errorf("removing a config model: %d %s", code, body)
	}

	// Runtime models survive a restart, with their scaling.
	g.stop()
	g.start()
	rs := g.readyReplicas("extra", 2)
	if !g.models()["extra"].Runtime {
		t.Error("the model is not marked as added at runtime")
	}
	if code, body := adminDo(t, g, "DELETE", "/llm/models/extra", ""); code != 204 {
		t.Fatalf("remove: %d %s", code, body)
	}
	if _, ok := g.models()["extra"]; ok {
		t.Error("the removed model is still listed")
	}
	waitFor(t, 10*time.Second, "its replicas to exit", func() bool { return !processAlive(int(rs[0].PID)) && !processAlive(int(rs[1].PID)) })
	r, body := post(t, g.base+"/v1/chat/completions", `{"model":"extra","messages":[{"role":"user","content":"x"}]}`)
	if r.StatusCode != 404 {
		t.Errorf("a removed model: %d %s", r.StatusCode, body)
	}
}
