package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/mirror/s3test"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// mirrorBlock is the llm app's mirror block for two versitygw stores.
func mirrorBlock(t *testing.T, a, b *s3test.Server, cache string) string {
	t.Setenv("LLMGW_TEST_S3_ACCESS", s3test.AccessKey)
	t.Setenv("LLMGW_TEST_S3_SECRET", s3test.SecretKey)
	store := func(name string, s *s3test.Server) string {
		return fmt.Sprintf(`store %s s3 {
				endpoint %s
				bucket weights
				prefix llmgw/
				region us-east-1
				access_key_env LLMGW_TEST_S3_ACCESS
				secret_key_env LLMGW_TEST_S3_SECRET
				part_size 5MiB
			}`, name, s.Endpoint())
	}
	return fmt.Sprintf(`
		mirror {
			%s
			%s
			cache %s 1GiB
			sync_interval 1s
		}`, store("s3-a", a), store("s3-b", b), cache)
}

// mirrorCLI runs llmgw mirror against the gateway's Caddyfile.
func mirrorCLI(t *testing.T, g *gateway, args ...string) (string, error) {
	t.Helper()
	all := append([]string{"mirror", "--config", filepath.Join(g.dir, "Caddyfile")}, args...)
	cmd := exec.Command(binary, all...)
	cmd.Env = append(os.Environ(), "HOME="+g.dir, "XDG_DATA_HOME="+filepath.Join(g.dir, "data"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestMirrorServesOllama stores the tiny model in two S3 stores with the
// CLI, then serves it with the real Ollama from mirror:// and from an
// http URL the mirror takes in first: the engine starts only on verified
// local weights.
func TestMirrorServesOllama(t *testing.T) {
	a, b := s3test.Start(t), s3test.Start(t)
	src := tinyModel(t)
	orig, _ := os.ReadFile(src)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "tiny.gguf", time.Time{}, bytes.NewReader(orig))
	}))
	defer web.Close()
	cache := filepath.Join(t.TempDir(), "cache")
	block := ollamaModels(t, `model tiny {
			engine ollama
			source mirror://tiny
			context_length 512
			min 1
		}
		model webtiny {
			engine ollama
			source `+web.URL+`/files/tiny.gguf
			context_length 512
			min 1
		}`) + mirrorBlock(t, a, b, cache)

	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{})}
	g.writeConfig(block, "")
	out, err := mirrorCLI(t, g, "add", "tiny", src, "--version", "v1")
	if err != nil || !strings.Contains(out, "added tiny/v1 (gguf, 1 files") || !strings.Contains(out, "to s3-a, s3-b") {
		t.Fatalf("mirror add: %v\n%s", err, out)
	}
	out, err = mirrorCLI(t, g, "add", "model", filepath.Join(t.TempDir(), "missing.gguf"))
	if err == nil || !strings.Contains(out, "no such file") {
		t.Errorf("mirror add of a missing file: %v\n%s", err, out)
	}
	g.start()
	g.readyReplicas("tiny", 1)
	g.readyReplicas("webtiny", 1)

	c := g.client()
	for _, model := range []string{"tiny", "webtiny"} {
		resp, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
			Model: model, MaxTokens: openai.Int(4), Temperature: openai.Float(0),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		})
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		if resp.Usage.CompletionTokens < 1 {
			t.Errorf("%s: usage %+v", model, resp.Usage)
		}
	}
	got, err := os.ReadFile(filepath.Join(cache, "tiny", "v1", "tiny.gguf"))
	if err != nil || !bytes.Equal(got, orig) {
		t.Fatalf("node cache copy of tiny/v1: %v (equal %v)", err, bytes.Equal(got, orig))
	}

	var view llmapi.MirrorView
	g.adminGet("/llm/mirror", &view)
	if strings.Join(view.Stores, ",") != "s3-a,s3-b" {
		t.Errorf("mirror view stores %v", view.Stores)
	}
	inUse := map[string]int{}
	for _, cv := range view.Cache {
		inUse[cv.Model] = cv.InUse
	}
	if inUse["tiny"] != 1 || inUse["webtiny"] != 1 {
		t.Errorf("node cache %+v: want tiny and webtiny each used by one replica", view.Cache)
	}

	// The URL source was added to both stores under the model's name.
	var list []mirror.VersionInfo
	waitFor(t, 10*time.Second, "webtiny on both stores", func() bool {
		g.adminGet("/llm/mirror/versions", &list)
		for _, v := range list {
			if v.Model == "webtiny" && len(v.Stores) == 2 && strings.HasPrefix(v.Origin.Source, web.URL) {
				return true
			}
		}
		return false
	})
	out, err = mirrorCLI(t, g, "verify", "tiny")
	if err != nil || strings.Count(out, " ok") != 2 {
		t.Errorf("mirror verify: %v\n%s", err, out)
	}
	out, err = mirrorCLI(t, g, "show", "tiny", "v1")
	if err != nil || !strings.Contains(out, "tiny/v1  format gguf") || !strings.Contains(out, "tiny.gguf") {
		t.Errorf("mirror show: %v\n%s", err, out)
	}

	// A version removed with one store down is removed there when it is back.
	if out, err = mirrorCLI(t, g, "add", "tiny", src, "--version", "v2"); err != nil {
		t.Fatalf("mirror add v2: %v\n%s", err, out)
	}
	b.Kill()
	out, err = mirrorCLI(t, g, "remove", "tiny", "v2")
	if err != nil || !strings.Contains(out, "removed tiny/v2 from s3-a") || !strings.Contains(out, "s3-b removes it when it answers") {
		t.Errorf("mirror remove with s3-b down: %v\n%s", err, out)
	}
	b.Restart()
	// The gateway reconciles every second too; whichever runs first
	// applies the tombstone.
	out, err = mirrorCLI(t, g, "sync")
	if err != nil || !regexpLine(out, "s3-b", "ok") {
		t.Errorf("mirror sync: %v\n%s", err, out)
	}
	if _, err := os.Stat(b.ObjectPath("weights", "llmgw/models/tiny/v2/files/tiny.gguf")); !os.IsNotExist(err) {
		t.Errorf("tiny/v2 still on s3-b after sync: %v", err)
	}
	out, err = mirrorCLI(t, g, "list")
	if err != nil || strings.Contains(out, "v2") || !regexpLine(out, "tiny", "v1*", "gguf", "s3-a,s3-b") {
		t.Errorf("mirror list: %v\n%s", err, out)
	}
}

// TestMirrorAdminAndPurge drives the mirror through the admin API and ctl
// with the sim engine: add a version, serve a runtime model from it, then
// remove the model with purge; weights another model uses stay.
func TestMirrorAdminAndPurge(t *testing.T) {
	a, b := s3test.Start(t), s3test.Start(t)
	cache := filepath.Join(t.TempDir(), "cache")
	g := startGateway(t, `
		model keeper {
			engine sim
			source mirror://shared
		}`+mirrorBlock(t, a, b, cache), "")
	dir := t.TempDir()
	for _, name := range []string{"shared", "solo"} {
		p := filepath.Join(dir, name+".gguf")
		os.WriteFile(p, []byte("GGUF weights of "+name), 0o644)
		code, body := adminDo(t, g, "POST", "/llm/mirror/versions", fmt.Sprintf(`{"model":%q,"version":"v1","source":%q}`, name, p))
		if code != 200 {
			t.Fatalf("add %s: %d %s", name, code, body)
		}
	}
	code, body := adminDo(t, g, "POST", "/llm/mirror/versions", `{"model":"bad","source":"/nonexistent/x.gguf"}`)
	if code != 400 || !strings.Contains(string(body), "no such file") {
		t.Errorf("add of a missing file: %d %s", code, body)
	}
	dir2 := t.TempDir()
	os.WriteFile(filepath.Join(dir2, "model.pt"), []byte("pickle"), 0o644)
	code, body = adminDo(t, g, "POST", "/llm/mirror/versions", fmt.Sprintf(`{"model":"pk","source":%q}`, dir2))
	if code != 400 || !strings.Contains(string(body), "model.pt is a pickle format") {
		t.Errorf("add of a pickle: %d %s", code, body)
	}

	for _, m := range []string{"solo", "shared"} {
		code, body = adminDo(t, g, "POST", "/llm/models", fmt.Sprintf(`{"name":"rt-%s","engine":"sim","source":"mirror://%s/v1","scaling":{"min":1}}`, m, m))
		if code != 200 && code != 201 {
			t.Fatalf("add model rt-%s: %d %s", m, code, body)
		}
	}
	g.readyReplicas("rt-solo", 1)
	g.readyReplicas("rt-shared", 1)
	if _, err := os.Stat(filepath.Join(cache, "solo", "v1", "solo.gguf")); err != nil {
		t.Fatalf("solo not in the node cache: %v", err)
	}

	// A version a model uses cannot be removed from under it.
	code, body = adminDo(t, g, "DELETE", "/llm/mirror/versions/solo/v1", "")
	if code != 409 || !strings.Contains(string(body), "rt-solo") {
		t.Errorf("removing a version in use: %d %s", code, body)
	}

	out, err := ctlRun(t, g, "model", "remove", "rt-shared", "--purge")
	if err != nil || !strings.Contains(out, "no weights purged") {
		t.Errorf("ctl model remove --purge of a model sharing weights: %v\n%s", err, out)
	}
	out, err = ctlRun(t, g, "model", "remove", "rt-solo", "--purge")
	if err != nil || !strings.Contains(out, "weights purged: solo/v1") {
		t.Errorf("ctl model remove --purge: %v\n%s", err, out)
	}
	var list []mirror.VersionInfo
	g.adminGet("/llm/mirror/versions", &list)
	var have []string
	for _, v := range list {
		have = append(have, v.Model+"/"+v.Version)
	}
	if strings.Join(have, ",") != "shared/v1" {
		t.Errorf("versions after purge: %v, want shared/v1 only", have)
	}
	if _, err := os.Stat(filepath.Join(cache, "solo")); !os.IsNotExist(err) {
		t.Errorf("solo still in the node cache: %v", err)
	}
	for _, s := range []*s3test.Server{a, b} {
		if _, err := os.Stat(s.ObjectPath("weights", "llmgw/models/solo/v1/files/solo.gguf")); !os.IsNotExist(err) {
			t.Errorf("solo still on %s: %v", s.Endpoint(), err)
		}
	}

	// Reconciliation state is visible; a store that goes down shows.
	b.Kill()
	waitFor(t, 15*time.Second, "s3-b seen as unreachable", func() bool {
		var v llmapi.MirrorView
		g.adminGet("/llm/mirror", &v)
		return len(v.Sync.Stores) == 2 && !v.Sync.Stores[1].Reachable && v.Sync.Stores[0].Reachable
	})
	fams := scrape(t, g)
	if v, ok := value(fams, "llmgw_mirror_store_up", map[string]string{"store": "s3-b"}); !ok || v != 0 {
		t.Errorf("llmgw_mirror_store_up{store=s3-b} = %v (%v), want 0", v, ok)
	}
	if v, ok := value(fams, "llmgw_mirror_store_up", map[string]string{"store": "s3-a"}); !ok || v != 1 {
		t.Errorf("llmgw_mirror_store_up{store=s3-a} = %v (%v), want 1", v, ok)
	}
	if v, _ := value(fams, "llmgw_mirror_transfer_bytes_total", map[string]string{"kind": "fetch", "store": "s3-a"}); v < float64(len("GGUF weights of shared")) {
		t.Errorf("llmgw_mirror_transfer_bytes_total{kind=fetch,store=s3-a} = %v", v)
	}
	if v, _ := value(fams, "llmgw_mirror_transfer_bytes_total", map[string]string{"kind": "add", "store": "s3-b"}); v < 2 {
		t.Errorf("llmgw_mirror_transfer_bytes_total{kind=add,store=s3-b} = %v", v)
	}
	var raw map[string]any
	code, body = adminDo(t, g, "POST", "/llm/mirror/sync", "")
	if code != 200 || json.Unmarshal(body, &raw) != nil || !strings.Contains(fmt.Sprint(raw["error"]), "store s3-b is unreachable") {
		t.Errorf("sync with s3-b down: %d %s", code, body)
	}

	// With both stores down, a replica that restarts takes the node's copy.
	a.Kill()
	old := g.readyReplicas("keeper", 1)[0].ID
	if code, body := adminDo(t, g, "POST", "/llm/replicas/"+old+"/restart", ""); code != 200 {
		t.Fatalf("restart: %d %s", code, body)
	}
	waitFor(t, 30*time.Second, "keeper back from the node cache", func() bool {
		m := g.models()["keeper"]
		return len(m.Replicas) == 1 && m.Replicas[0].ID != old && m.Replicas[0].State == "ready"
	})
	chatOnce(t, g, "keeper")
}
