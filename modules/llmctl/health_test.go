package llmctl

import (
	"strings"
	"testing"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// ctl model test shows what was tried and why it fails, and fails when
// the model does not serve.
func TestModelTest(t *testing.T) {
	const why = "unreachable: GET http://127.0.0.1:9/v1/models: connection refused; check base_url and that the provider is up"
	a := newAdmin(t, map[string]answer{
		"POST /llm/models/gpt/test": {body: llmapi.ModelTest{Model: "gpt", OK: true, Replicas: []llmapi.ReplicaTest{
			{Replica: "gpt-1", URL: "https://p/v1/models", Status: 200, LatencyMS: 12.4, State: "ready"}}}},
		"POST /llm/models/dead/test": {body: llmapi.ModelTest{Model: "dead", Reason: why, Replicas: []llmapi.ReplicaTest{
			{Replica: "dead-1", URL: "http://127.0.0.1:9/v1/models", LatencyMS: 0.3, State: "failing", Reason: why}}}},
	})
	out, _, err := run(t, a, "model", "test", "gpt")
	if err != nil {
		t.Fatal(err)
	}
	check(t, "ctl model test gpt", out, lines(
		"REPLICA  STATE  STATUS  LATENCY  URL                  REASON",
		"gpt-1    ready  200     12ms     https://p/v1/models  ",
		"model gpt serves"))
	out, _, err = run(t, a, "model", "test", "dead")
	if err == nil || err.Error() != "model dead does not serve: "+why {
		t.Errorf("a dead provider: got %v, want an error with the reason", err)
	}
	if !strings.Contains(out, "dead-1   failing  -       0ms      http://127.0.0.1:9/v1/models  "+why) {
		t.Errorf("a dead provider: got\n%s", out)
	}
}
