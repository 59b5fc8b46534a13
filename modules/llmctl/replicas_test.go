package llmctl

import (
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

func TestReplicasAndEngines(t *testing.T) {
	now := time.Now()
	a := newAdmin(t, map[string]answer{
		"GET /llm/models": {body: []llmapi.ModelStatus{{Name: "chat", Replicas: []llmapi.ReplicaStatus{
			{ID: "chat-1", State: "ready", URL: "http://127.0.0.1:9001", Node: "n1", PID: 42, GPUs: []int{0, 1}, Inflight: 3, Started: now},
			{ID: "chat-2", State: "starting", URL: "http://127.0.0.1:9002", Started: now},
		}}}},
		"POST /llm/replicas/chat-1/restart": {body: map[string]any{}},
		"GET /llm/engines": {body: []llmapi.EngineStatus{
			{Type: "sim", Version: "1.0", PID: 7, Capabilities: []string{"chat"}, Formats: []string{"sim"}, Running: true},
			{Type: "llamacpp", Version: "b100", PID: 8, Capabilities: []string{"chat", "embeddings"}, Formats: []string{"gguf"}, Running: true},
			{Type: "openai", Version: "0.1.0", Capabilities: []string{"chat"}, Formats: []string{"remote"}},
			{Type: "vllm", Error: "vllm not found on PATH"},
		}},
	})
	out, _, err := run(t, a, "replicas")
	if err != nil {
		t.Fatal(err)
	}
	check(t, "ctl replicas", out, lines(
		"REPLICA  MODEL  STATE     NODE  URL                    PID  GPUS  IN FLIGHT  UP",
		"chat-1   chat   ready     n1    http://127.0.0.1:9001  42   0,1   3          0s",
		"chat-2   chat   starting        http://127.0.0.1:9002  0    -     0          0s"))
	if out, _, err = run(t, a, "replicas", "restart", "chat-1"); err != nil {
		t.Fatal(err)
	}
	check(t, "ctl replicas restart", out, "replica chat-1 restarting\n")
	if out, _, err = run(t, a, "engines"); err != nil {
		t.Fatal(err)
	}
	check(t, "ctl engines", out, lines(
		"ENGINE    VERSION  STATE       PID  CAPABILITIES     FORMATS  NOTE",
		"llamacpp  b100     running     8    chat,embeddings  gguf     ",
		"openai    0.1.0    installed   -    chat             remote   ",
		"sim       1.0      running     7    chat             sim      ",
		"vllm               cannot run  -                              vllm not found on PATH"))
	checkSent(t, a, "GET /llm/models", "POST /llm/replicas/chat-1/restart", "GET /llm/engines")
}
