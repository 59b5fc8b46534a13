package llmctl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

var twoModels = []llmapi.ModelStatus{
	{Name: "chat", Engine: "sim", State: "ready", Min: 1, Max: 2, Aliases: []string{"gpt", "small"}, MaxOutput: 4096,
		Replicas: []llmapi.ReplicaStatus{{ID: "chat-1", State: "ready"}}},
	{Name: "other", Engine: "llamacpp", State: "idle", Reason: "no requests", Replicas: []llmapi.ReplicaStatus{}},
}

func TestModelsProfiles(t *testing.T) {
	ms := []llmapi.ModelStatus{{Name: "qwen", Engine: "vllm", State: "ready", Min: 2, Max: 2,
		Reason:   "replica qwen-2 runs on profile cpu, not on an earlier profile: profile gpu: no room",
		Profiles: []llmapi.ProfileStatus{{Name: "gpu"}, {Name: "cpu", Engine: "llamacpp"}},
		Replicas: []llmapi.ReplicaStatus{{ID: "qwen-1", State: "ready", Profile: "gpu"}, {ID: "qwen-2", State: "ready", Profile: "cpu"}}}}
	a := newAdmin(t, map[string]answer{"GET /llm/models": {body: ms}})
	out, _, err := run(t, a, "models")
	if err != nil {
		t.Fatal(err)
	}
	check(t, "ctl models", out, lines(
		"MODEL  ENGINE  STATE  REPLICAS (MIN-MAX)  PROFILES  MAX OUTPUT  ALIASES  REASON",
		"qwen   vllm    ready  2/2-2               gpu,cpu   -                    replica qwen-2 runs on profile cpu, not on an earlier profile: profile gpu: no room"))
}

func TestModels(t *testing.T) {
	a := newAdmin(t, map[string]answer{"GET /llm/models": {body: twoModels}})
	out, _, err := run(t, a, "models")
	if err != nil {
		t.Fatal(err)
	}
	check(t, "ctl models", out, lines(
		"MODEL  ENGINE    STATE  REPLICAS (MIN-MAX)  PROFILES  MAX OUTPUT  ALIASES    REASON",
		"chat   sim       ready  1/1-2               -         4096        gpt,small  ",
		"other  llamacpp  idle   0/0-0               -         -                      no requests"))
	// --json prints the admin endpoint's answer as it came.
	out, _, err = run(t, a, "--json", "models")
	if err != nil {
		t.Fatal(err)
	}
	check(t, "ctl --json models", out, `[{"name":"chat","aliases":["gpt","small"],"engine":"sim","state":"ready","min":1,"max":2,"class":"","max_output":4096,"replicas":[{"id":"chat-1","state":"ready","url":"","inflight":0,"started":"0001-01-01T00:00:00Z"}]},{"name":"other","engine":"llamacpp","state":"idle","reason":"no requests","min":0,"max":0,"class":"","replicas":[]}]`+"\n")
}

func TestModelAddScaleRemove(t *testing.T) {
	file := filepath.Join(t.TempDir(), "model.yaml")
	if err := os.WriteFile(file, []byte("name: tiny\nengine: llamacpp\nsource: /w/tiny.gguf\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := newAdmin(t, map[string]answer{
		"POST /llm/models": {body: llmapi.AddedModel{ModelStatus: llmapi.ModelStatus{Name: "tiny", State: "starting"},
			SourceCheck: &llmapi.SourceCheck{Checked: true, Source: "/w/tiny.gguf", Kind: "file", Format: "gguf", Size: 3 << 20}}},
		"POST /llm/models/tiny/scale":        {body: llmapi.ModelStatus{Name: "tiny", Min: 0, Max: 3}},
		"DELETE /llm/models/tiny?purge=true": {body: map[string]any{"purged": []string{"tiny/v1"}}},
		"DELETE /llm/models/a%2Fb":           {body: map[string]any{}},
		"POST /llm/models/tiny/stop":         {body: llmapi.ModelStatus{Name: "tiny", State: "stopped"}},
		"POST /llm/models/tiny/start":        {body: llmapi.ModelStatus{Name: "tiny", State: "starting"}},
		"POST /llm/models/tiny/restart":      {body: llmapi.Rollout{ModelStatus: llmapi.ModelStatus{Name: "tiny"}, Replaced: []string{"tiny-1"}, Started: []string{"tiny-2"}, OneAtATime: true}},
	})
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"model", "add", "-f", file, "--no-check-source"}, "model tiny added: starting (source /w/tiny.gguf: file gguf, 3.0 MiB)\n"},
		{[]string{"model", "scale", "tiny", "--min", "0", "--max", "3", "--idle-timeout", "5m"}, "model tiny: min 0, max 3\n"},
		{[]string{"model", "remove", "tiny", "--purge"}, "model tiny removed\nweights purged: tiny/v1\n"},
		{[]string{"model", "remove", "a/b"}, "model a/b removed\n"},
		{[]string{"model", "stop", "tiny"}, "model tiny: stopped\n"},
		{[]string{"model", "start", "tiny"}, "model tiny: starting\n"},
		{[]string{"model", "restart", "tiny"}, "model tiny: replaced tiny-1 with tiny-2\nthe node had no room for a new replica beside an old one: they were replaced one at a time\n"},
	}
	for _, tt := range tests {
		out, _, err := run(t, a, tt.args...)
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		check(t, strings.Join(tt.args, " "), out, tt.want)
	}
	checkSent(t, a,
		`POST /llm/models {"check_source":false,"engine":"llamacpp","name":"tiny","source":"/w/tiny.gguf"}`,
		`POST /llm/models/tiny/scale {"idle_timeout":"5m","max":3,"min":0}`,
		`DELETE /llm/models/tiny?purge=true`,
		`DELETE /llm/models/a%2Fb`,
		`POST /llm/models/tiny/stop`,
		`POST /llm/models/tiny/start`,
		`POST /llm/models/tiny/restart`)
}

func TestModelSet(t *testing.T) {
	a := newAdmin(t, map[string]answer{
		"POST /llm/models/chat/settings": {body: llmapi.Rollout{ModelStatus: llmapi.ModelStatus{Name: "chat", Class: "critical", Owner: "acme",
			Fallbacks: []string{"b", "c"}, Canary: &catalog.Canary{Model: "chat-v2", Share: 0.1}, MaxOutput: 2048}}},
		"GET /llm/models/chat": {body: llmapi.ModelStatus{Name: "chat", Resources: &catalog.Resources{Memory: 1 << 30, Cores: 2}}},
	})
	out, _, err := run(t, a, "model", "set", "chat", "--class", "critical", "--owner", "acme", "--fallbacks", "b, c,", "--canary", "chat-v2:10%", "--max-output", "2048")
	if err != nil {
		t.Fatal(err)
	}
	check(t, "ctl model set", out, "model chat: class critical, owner \"acme\", fallbacks [b,c], canary chat-v2 10%, max output 2048\n")
	// Resources not given keep the model's current ones.
	if _, _, err := run(t, a, "model", "set", "chat", "--gpus", "1", "--option", "k=v", "--context-length", "4096"); err != nil {
		t.Fatal(err)
	}
	checkSent(t, a,
		`POST /llm/models/chat/settings {"canary":{"model":"chat-v2","share":0.1},"class":"critical","fallbacks":["b","c"],"max_output":2048,"owner":"acme"}`,
		`GET /llm/models/chat`,
		`POST /llm/models/chat/settings {"context_length":4096,"options":{"k":"v"},"resources":{"memory":1073741824,"cores":2,"gpus":1}}`)

	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"nothing", []string{"model", "set", "chat"}, "nothing to change; give --class, --owner, --fallbacks, --canary, --max-output, --context-length, --option, --arg, --memory, --cores or --gpus"},
		{"canary", []string{"model", "set", "chat", "--canary", "chat-v2"}, `--canary "chat-v2": want model:percent such as chat-v2:10%, or off`},
		{"option", []string{"model", "set", "chat", "--option", "k"}, `--option "k": use k=v (k= removes the option)`},
		{"max output", []string{"model", "set", "chat", "--max-output", "-1"}, "--max-output -1: use 0 (no limit) or more"},
	} {
		if _, _, err := run(t, a, tt.args...); err == nil || err.Error() != tt.want {
			t.Errorf("%s: got %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestModelSetResourcesWithJSON: with --json, the resources not given
// still come from the model's current ones, and only the answer of the
// change is printed.
func TestModelSetResourcesWithJSON(t *testing.T) {
	a := newAdmin(t, map[string]answer{
		"GET /llm/models/chat":           {body: llmapi.ModelStatus{Name: "chat", Resources: &catalog.Resources{Memory: 1 << 30, Cores: 2}}},
		"POST /llm/models/chat/settings": {body: `{"name":"chat","replaced":["chat-1"],"started":["chat-2"]}`},
	})
	out, _, err := run(t, a, "--json", "model", "set", "chat", "--gpus", "1")
	if err != nil {
		t.Fatal(err)
	}
	check(t, "ctl --json model set", out, `{"name":"chat","replaced":["chat-1"],"started":["chat-2"]}`)
	checkSent(t, a, "GET /llm/models/chat", `POST /llm/models/chat/settings {"resources":{"memory":1073741824,"cores":2,"gpus":1}}`)
}
