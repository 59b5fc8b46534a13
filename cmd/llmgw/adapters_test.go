package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/llmgw/llmgw/mirror/s3test"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/plugins/enginetest/tinygguf"
)

// adaptersRivers writes the tiny model's LoRA adapter whose greedy
// answers are "river river …".
func adaptersRivers(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rivers.gguf")
	if err := tinygguf.WriteAdapterFile(path, tinygguf.Default(), tinygguf.Adapter{Favour: []string{"river"}}); err != nil {
		t.Fatal(err)
	}
	return path
}

// adaptersAsk sends a greedy chat request with key and returns the
// answer and the model the answer names.
func adaptersAsk(t *testing.T, g *gateway, key, model string) (string, string) {
	t.Helper()
	resp, e := chatErrWith(keyClient(g, key), openai.ChatCompletionNewParams{
		Model: model, MaxTokens: openai.Int(8), Temperature: openai.Float(0),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("tell me about the sea")},
	})
	if e != nil {
		t.Fatalf("%s: %d %s: %s", model, e.StatusCode, e.Code, e.Message)
	}
	return resp.Choices[0].Message.Content, resp.Model
}

func chatErrWith(c openai.Client, p openai.ChatCompletionNewParams) (*openai.ChatCompletion, *openai.Error) {
	resp, err := c.Chat.Completions.New(bg, p)
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		return nil, apiErr
	}
	if err != nil {
		return nil, &openai.Error{Message: err.Error()}
	}
	return resp, nil
}

// TestAdaptersServeOllama adds a LoRA adapter, stored in two S3 stores, to
// a model served by the real Ollama, through the admin API: the model's
// replica is replaced by one that loads the adapter (fetched to the node
// and verified), the adapter's name is listed and answers differently
// from the model at temperature 0, the model answers as before, and keys
// see and use the adapter as their model globs allow.
func TestAdaptersServeOllama(t *testing.T) {
	a, b := s3test.Start(t), s3test.Start(t)
	src, lora := tinyModel(t), adaptersRivers(t)
	orig, _ := os.ReadFile(lora)
	cache := filepath.Join(t.TempDir(), "cache")
	// k1 may use the model only; k2 anything.
	block := ollamaModels(t, `model tiny {
			engine ollama
			source `+src+`
			context_length 512
			min 1
		}`) + mirrorBlock(t, a, b, cache) + tenancyBlock("", "", "", "models tiny")
	quota := ""
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{}), quota: &quota}
	g.writeConfig(block, "")
	for _, v := range []string{"v1", "v2"} {
		if out, err := mirrorCLI(t, g, "add", "rivers", lora, "--version", v); err != nil {
			t.Fatalf("mirror add rivers %s: %v\n%s", v, err, out)
		}
	}
	g.start()
	g.readyReplicas("tiny", 1)
	base, _ := adaptersAsk(t, g, "secret-2", "tiny")

	// Not an adapter yet.
	if _, e := chatErr(keyClient(g, "secret-2"), "tiny-rivers"); e == nil || e.StatusCode != 404 {
		t.Fatalf("tiny-rivers before it is declared: %+v, want 404", e)
	}
	// A name that is a model's is refused, and nothing changes.
	code, body := adminDo(t, g, "POST", "/llm/models/tiny/settings", `{"adapters":[{"name":"tiny","source":"mirror://rivers/v1"}]}`)
	if code != 400 || !strings.Contains(string(body), `adapter name \"tiny\" is already the name of model \"tiny\"`) {
		t.Fatalf("an adapter named like the model: %d %s", code, body)
	}
	// A source that is not there is refused before anything changes.
	code, body = adminDo(t, g, "POST", "/llm/models/tiny/settings", `{"adapters":[{"name":"tiny-rivers","source":"mirror://rivers/v9"}]}`)
	if code != 422 || !strings.Contains(string(body), `model \"tiny\": adapter \"tiny-rivers\"`) {
		t.Fatalf("an adapter whose version is not in the mirror: %d %s", code, body)
	}
	code, body = adminDo(t, g, "POST", "/llm/models/tiny/settings", `{"adapters":[{"name":"tiny-rivers","source":"mirror://rivers/v1"}]}`)
	var roll struct {
		Replaced, Started []string
	}
	if err := json.Unmarshal(body, &roll); code != 200 || err != nil || len(roll.Replaced) != 1 || len(roll.Started) != 1 {
		t.Fatalf("adding the adapter: %d %s", code, body)
	}

	// Listed as a model of its own, for the keys whose globs match it.
	list := func(key string) map[string]string {
		c := keyClient(g, key)
		page, err := c.Models.List(bg)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, m := range page.Data {
			var ext struct {
				LLMGW struct{ Base string } `json:"llmgw"`
			}
			_ = json.Unmarshal([]byte(m.RawJSON()), &ext)
			out[m.ID] = ext.LLMGW.Base
		}
		return out
	}
	if got := list("secret-2"); len(got) != 2 || got["tiny-rivers"] != "tiny" {
		t.Errorf("k2's /v1/models: %v, want tiny and tiny-rivers (base tiny)", got)
	}
	if got := list("secret-1"); len(got) != 1 || got["tiny"] != "" {
		t.Errorf("k1's /v1/models: %v, want tiny only", got)
	}
	if _, e := chatErr(keyClient(g, "secret-1"), "tiny-rivers"); e == nil || e.StatusCode != 403 || e.Code != "model_not_allowed" {
		t.Errorf("k1 asking for the adapter: %+v, want 403 model_not_allowed", e)
	}

	adapted, named := adaptersAsk(t, g, "secret-2", "tiny-rivers")
	t.Logf("model: %q; adapter: %q", base, adapted)
	if strings.Count(adapted, "river") < 4 || adapted == base || named != "tiny-rivers" {
		t.Errorf("the adapter answered %q (naming %q); the model %q", adapted, named, base)
	}
	if again, named := adaptersAsk(t, g, "secret-2", "tiny"); again != base || named != "tiny" {
		t.Errorf("the model answers %q (naming %q) beside its adapter; before it, %q", again, named, base)
	}
	got, err := os.ReadFile(filepath.Join(cache, "rivers", "v1", "rivers.gguf"))
	if err != nil || !bytes.Equal(got, orig) {
		t.Errorf("node cache copy of rivers/v1: %v (equal %v)", err, bytes.Equal(got, orig))
	}

	// A version whose bytes no longer match their checksum is not loaded;
	// what runs keeps serving.
	for _, s := range []*s3test.Server{a, b} {
		p := s.ObjectPath("weights", "llmgw/models/rivers/v2/files/rivers.gguf")
		bad := bytes.Clone(orig)
		bad[len(bad)-1] ^= 0xff
		if err := os.WriteFile(p, bad, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, body = adminDo(t, g, "POST", "/llm/models/tiny/settings", `{"adapters":[{"name":"tiny-rivers","source":"mirror://rivers/v2"}]}`)
	if code == 200 || !strings.Contains(string(body), "checksum") {
		t.Errorf("an adapter that fails its checksum: %d %s", code, body)
	}
	if again, _ := adaptersAsk(t, g, "secret-2", "tiny-rivers"); again != adapted {
		t.Errorf("after a failed change the adapter answers %q, before %q", again, adapted)
	}

	// ctl lists the adapters and removes one: its name is gone, the
	// model answers as before.
	if out, err := ctlRun(t, g, "model", "adapter", "list", "tiny"); err != nil || !regexpLine(out, "tiny-rivers", "mirror://rivers/v2", "1") {
		t.Errorf("ctl model adapter list: %v\n%s", err, out)
	}
	if out, err := ctlRun(t, g, "model", "adapter", "remove", "tiny", "tiny-rivers"); err != nil || !strings.Contains(out, "model tiny: replaced") {
		t.Fatalf("ctl model adapter remove: %v\n%s", err, out)
	}
	if _, e := chatErr(keyClient(g, "secret-2"), "tiny-rivers"); e == nil || e.StatusCode != 404 {
		t.Errorf("tiny-rivers once removed: %+v, want 404", e)
	}
	if again, _ := adaptersAsk(t, g, "secret-2", "tiny"); again != base {
		t.Errorf("the model answers %q once its adapter is removed; before, %q", again, base)
	}
	var audit struct {
		Entries []struct{ Action string }
	}
	g.adminGet("/llm/audit?model=tiny", &audit)
	live := 0
	for _, e := range audit.Entries {
		if e.Action == "model changed live" {
			live++
		}
	}
	if live < 2 {
		t.Errorf("audit log: %+v, want the adapter changes recorded", audit.Entries)
	}
}

// TestAdaptersFromConfigFile declares an adapter (a local file) in the
// Caddyfile on a model started on demand: the first request, for the
// adapter, starts the model's replica with the adapter loaded.
func TestAdaptersFromConfigFile(t *testing.T) {
	src, lora := tinyModel(t), adaptersRivers(t)
	g := startGateway(t, ollamaModels(t, `model tiny {
			engine ollama
			source `+src+`
			context_length 512
			min 0
			adapter tiny-rivers {
				source `+lora+`
			}
		}`), "")
	if st := g.models()["tiny"]; st.State != "idle" || len(st.Adapters) != 1 || st.Adapters[0].Name != "tiny-rivers" {
		t.Fatalf("before any request: %q, adapters %+v", st.State, st.Adapters)
	}
	adapted, named := adaptersAsk(t, g, "", "tiny-rivers")
	if strings.Count(adapted, "river") < 4 || named != "tiny-rivers" {
		t.Errorf("the adapter answered %q (naming %q)", adapted, named)
	}
	if base, _ := adaptersAsk(t, g, "", "tiny"); strings.Contains(base, "river") {
		t.Errorf("the model answered %q, as its adapter does", base)
	}
	if n := len(g.models()["tiny"].Replicas); n != 1 {
		t.Errorf("%d replicas serve the model and its adapter, want 1", n)
	}
}

// TestAdaptersClusterOllama serves a model with an adapter on the one node
// of a cluster that has Ollama: a request for the adapter through the other
// node reaches that node's replica (its heartbeat says the replica loaded
// the adapter) and is answered with the adapter applied.
func TestAdaptersClusterOllama(t *testing.T) {
	src, lora := tinyModel(t), adaptersRivers(t)
	c := &cluster{t: t, redis: startRedis(t), nodes: map[string]*gateway{}, peer: map[string]string{},
		models: fmt.Sprintf(clusterModels, tenancy.HashKey("secret-1")) + `
		model tiny {
			engine ollama
			source ` + src + `
			context_length 512
			min 1
			adapter tiny-rivers {
				source ` + lora + `
			}
		}`,
		extra: map[string]string{
			"n1": "engine ollama {\n\t\t\toption bin " + filepath.Join(t.TempDir(), "no-ollama-here") + "\n\t\t}",
			"n2": "engine ollama {\n\t\t\toption bin " + ollamaBin(t) + "\n\t\t}",
		}}
	n1 := c.add("n1")
	c.add("n2")
	waitFor(t, 90*time.Second, "tiny ready on n2, as n1 sees it", func() bool {
		return slices.Equal(n1.readyOn("tiny"), []string{"n2"})
	})
	adapted, named := adaptersAsk(t, n1, "secret-1", "tiny-rivers")
	base, _ := adaptersAsk(t, n1, "secret-1", "tiny")
	if strings.Count(adapted, "river") < 4 || named != "tiny-rivers" || strings.Contains(base, "river") {
		t.Errorf("through n1: the adapter answered %q (naming %q), the model %q", adapted, named, base)
	}
}
