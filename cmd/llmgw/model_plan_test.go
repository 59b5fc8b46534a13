package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/mirror/s3test"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// adminPost posts body to an admin route and returns the status and body.
func (g *gateway) adminPost(path, body string) (int, []byte) {
	g.t.Helper()
	resp, b := post(g.t, fmt.Sprintf("http://127.0.0.1:%d%s", g.admin, path), body)
	return resp.StatusCode, b
}

// A model's source is checked before the catalog changes: a mirror
// version that does not exist, a registry repository or file that does
// not exist, a URL that answers 404 and a file that is not GGUF for
// Ollama are refused with the reason; a URL, mirror version or registry
// file that exists gives its size; check_source false (and ctl --no-check-source) lets a
// source through that only the nodes could reach. Config models with a
// bad source are served with a warning in the log.
func TestModelSourceChecked(t *testing.T) {
	a, b := s3test.Start(t), s3test.Start(t)
	src := tinyModel(t)
	tiny, _ := os.ReadFile(src)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		files := map[string][]byte{"/files/tiny.gguf": tiny, "/files/notes.txt": []byte("these are notes, not weights\n")}
		f, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, r.URL.Path, time.Time{}, bytes.NewReader(f))
	}))
	defer web.Close()
	// A stand-in for the registry's API: org/tiny at main holds tiny.gguf.
	registry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/models/org/tiny/revision/main":
			w.Write([]byte(`{"sha":"c0ffee0000000000000000000000000000000000"}`))
		case "/api/models/org/tiny/tree/c0ffee0000000000000000000000000000000000":
			fmt.Fprintf(w, `[{"type":"file","path":"tiny.gguf","size":%d}]`, len(tiny))
		default:
			http.NotFound(w, r)
		}
	}))
	defer registry.Close()
	// The stand-ins listen on loopback, which URLs given at run time may
	// reach only when the config allows it.
	block := ollamaModels(t, `runtime_hosts 127.0.0.1
		model base {
			engine sim
		}
		model broken {
			engine ollama
			source mirror://tiny/v7
			min 0
		}
		model nodesonly {
			engine ollama
			source mirror://tiny/v8
			check_source off
			min 0
		}`) + strings.Replace(mirrorBlock(t, a, b, filepath.Join(t.TempDir(), "cache")), "sync_interval 1s", "sync_interval 1s\n\t\t\tregistry "+registry.URL, 1)
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{})}
	g.writeConfig(block, "")
	if out, err := mirrorCLI(t, g, "add", "tiny", src, "--version", "v1"); err != nil {
		t.Fatalf("mirror add: %v\n%s", err, out)
	}
	g.start()
	defer g.stop()

	add := func(name, source, extra string) (int, string) {
		code, body := g.adminPost("/llm/models", fmt.Sprintf(`{"name":%q,"engine":"ollama","source":%q,"context_length":512,"scaling":{"min":0}%s}`, name, source, extra))
		return code, string(body)
	}
	refused := []struct{ name, source, want string }{
		{"no-version", "mirror://tiny/v9", "version tiny/v9 does not exist in the mirror (it has v1)"},
		{"no-model", "mirror://nothing", "model nothing has no version in the mirror"},
		{"web-404", web.URL + "/files/gone.gguf", "answered 404 Not Found"},
		{"hf-missing", "hf://org/missing", "repository org/missing at revision main: not found in the registry"},
		{"hf-no-file", "hf://org/tiny/big.gguf", `repository org/tiny has no file at \"big.gguf\"`},
		{"web-text", web.URL + "/files/notes.txt", "engine ollama loads gguf weights and " + web.URL + "/files/notes.txt is neither GGUF nor safetensors"},
	}
	for _, tc := range refused {
		code, body := add(tc.name, tc.source, "")
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, tc.want) || !strings.Contains(body, `"check_source\": false`) {
			t.Errorf("%s: got %d %s; want 422 with %q and the opt-out", tc.name, code, body, tc.want)
		}
	}
	ms := g.models()
	if len(ms) != 3 {
		t.Fatalf("refused models reached the catalog: %v", ms)
	}

	for _, tc := range []struct{ name, source, kind string }{
		{"web", web.URL + "/files/tiny.gguf", "url"},
		{"mirrored", "mirror://tiny/v1", "mirror"},
		{"registry", "hf://org/tiny/tiny.gguf", "registry"},
	} {
		code, body := add(tc.name, tc.source, "")
		var got llmapi.AddedModel
		_ = json.Unmarshal([]byte(body), &got)
		if sc := got.SourceCheck; code != http.StatusCreated || sc == nil || sc.Size != int64(len(tiny)) || sc.Kind != tc.kind || sc.Format != "gguf" {
			t.Errorf("%s: got %d %s; want 201 with the source's size %d", tc.name, code, body, len(tiny))
		}
	}
	code, body := add("trusted", web.URL+"/files/notes.txt", `,"check_source":false`)
	if code != http.StatusCreated || !strings.Contains(body, `"checked":false`) {
		t.Errorf("check_source false: got %d %s", code, body)
	}

	// A config model is served as before, with a warning that names it;
	// check_source off in the Caddyfile keeps one quiet.
	waitFor(t, 10*time.Second, "the warning about broken", func() bool {
		return strings.Contains(g.logs.String(), `"msg":"a model's source failed its check; its replicas will fail to start until it is fixed","model":"broken"`)
	})
	if strings.Contains(g.logs.String(), `"model":"nodesonly","error"`) {
		t.Error("check_source off: the config model was checked")
	}

	// The same through ctl.
	file := filepath.Join(t.TempDir(), "m.yaml")
	os.WriteFile(file, []byte("name: cli\nengine: ollama\nsource: mirror://tiny/v9\nscaling: {min: 0}\n"), 0o644)
	if out, err := ctlRun(t, g, "model", "add", "-f", file); err == nil || !strings.Contains(out, "does not exist in the mirror") {
		t.Errorf("ctl model add of a missing version: %v\n%s", err, out)
	}
	if out, err := ctlRun(t, g, "model", "add", "-f", file, "--no-check-source"); err != nil || !strings.Contains(out, "model cli added") {
		t.Errorf("ctl model add --no-check-source: %v\n%s", err, out)
	}
	if _, ok := g.models()["cli"]; !ok || len(g.models()) != 8 {
		t.Errorf("catalog after the adds: %v", g.models())
	}
}

// POST /llm/plan says where a model's replicas would go and what would be
// stopped for them, changes nothing, and a real add then does just that;
// for a model too big it says what is missing.
func TestModelPlan(t *testing.T) {
	g := startGateway(t, `
		node {
			memory 4GiB
			cores 64
		}
		model bulk {
			engine sim
			class opportunistic
			resources {
				memory 3GiB
			}
		}`, "")
	bulk := g.readyReplicas("bulk", 1)[0]
	var before llmapi.NodeStatus
	g.adminGet("/llm/node", &before)

	std := `{"name":"std","engine":"sim","resources":{"memory":2147483648}}`
	code, body := g.adminPost("/llm/plan", std)
	var pl llmapi.Plan
	if err := json.Unmarshal(body, &pl); code != http.StatusOK || err != nil {
		t.Fatalf("plan: %d %s", code, body)
	}
	host, _ := os.Hostname()
	if !pl.Fits || len(pl.Replicas) != 1 || pl.Replicas[0].Node != host || pl.Replicas[0].Resources.Memory != 2<<30 ||
		len(pl.Evict) != 1 || pl.Evict[0].Replica != bulk.ID || pl.Evict[0].Class != "opportunistic" {
		t.Fatalf("plan: got %s; want one replica on %s that stops %s", body, host, bulk.ID)
	}
	// Nothing changed.
	var after llmapi.NodeStatus
	g.adminGet("/llm/node", &after)
	ms := g.models()
	if _, ok := ms["std"]; ok || len(ms) != 1 || len(ms["bulk"].Replicas) != 1 || ms["bulk"].Replicas[0].ID != bulk.ID || after != before {
		t.Fatalf("the plan changed something: %v, node %+v then %+v", ms, before, after)
	}

	// The real add does what the plan said.
	if code, body := g.adminPost("/llm/models", std); code != http.StatusCreated {
		t.Fatalf("add: %d %s", code, body)
	}
	g.readyReplicas("std", 1)
	waitFor(t, 10*time.Second, "bulk's replica to stop", func() bool { return len(g.models()["bulk"].Replicas) == 0 })
	g.adminGet("/llm/node", &after)
	if after.Used.Memory != pl.Replicas[0].Resources.Memory {
		t.Errorf("after the add the node uses %d bytes; the plan said %d", after.Used.Memory, pl.Replicas[0].Resources.Memory)
	}

	// Too big even after stopping everything of a lower class.
	huge := `{"name":"huge","engine":"sim","class":"critical","resources":{"memory":8589934592}}`
	code, body = g.adminPost("/llm/plan", huge)
	pl = llmapi.Plan{}
	_ = json.Unmarshal(body, &pl)
	if code != http.StatusOK || pl.Fits || len(pl.Replicas) != 0 || pl.Missing == nil || pl.Missing.Memory != 4<<30 ||
		!strings.Contains(pl.Reason, "needs 8.0 GiB memory") {
		t.Errorf("plan of a model too big: %d %s; want 4 GiB missing", code, body)
	}
	file := filepath.Join(t.TempDir(), "huge.json")
	os.WriteFile(file, []byte(huge), 0o644)
	out, err := ctlRun(t, g, "model", "plan", "-f", file)
	if err != nil || !strings.Contains(out, "model huge does not fit") || !strings.Contains(out, "missing: 4.0 GiB memory") {
		t.Errorf("ctl model plan: %v\n%s", err, out)
	}
	if ms := g.models(); len(ms) != 2 || len(ms["std"].Replicas) != 1 {
		t.Errorf("the plans changed the catalog: %v", ms)
	}
	// A body an add refuses is refused by the plan too, for the same reason.
	for _, bad := range []struct{ body, want string }{
		{`{"name":"std","engine":"sim"}`, "used twice"},
		{`{"name":"z","engine":"nosuch"}`, "no plugin"},
		{`{"name":"x","engine":"sim","options":{"tokens_per_secnd":"20"}}`, `engine sim has no option \"tokens_per_secnd\"`},
	} {
		if code, body := g.adminPost("/llm/plan", bad.body); code != http.StatusBadRequest || !strings.Contains(string(body), bad.want) {
			t.Errorf("plan of %s: %d %s, want 400 with %q", bad.body, code, body, bad.want)
		}
	}
}
