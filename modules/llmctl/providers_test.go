package llmctl

import (
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

func TestProviders(t *testing.T) {
	until := time.Now().Add(30*time.Second + 400*time.Millisecond).UTC()
	ttft, headroom, reqs, tokens := 182.4, 0.25, int64(12), int64(3400)
	chat := llmapi.ProvidersModel{Name: "chat", Policy: "cost", LatencyObjectiveMS: 400, Providers: []llmapi.ProviderState{
		{Name: "cheap", Model: "chat/cheap", State: "resting", RestingUntil: until, RestReason: "429", FailuresInARow: 0},
		{Name: "dear", Model: "chat/dear", State: "ready", TTFTMS: &ttft, RPM: 60, MinuteRequests: &reqs, MinuteTokens: &tokens, Headroom: &headroom},
	}}
	a := newAdmin(t, map[string]answer{
		"GET /llm/providers/models":      {body: []llmapi.ProvidersModel{chat}},
		"GET /llm/providers/models/chat": {body: chat},
		"GET /llm/providers/models/nope": {status: 404, body: map[string]string{"error": `no model "nope" here; GET /llm/providers/models lists the models with providers this node has routed, GET /llm/models every model`}},
	})
	want := lines(
		"MODEL  PROVIDER  STATE    TTFT   RESTING UNTIL           FAILS  REQ/MIN  TOKENS/MIN  HEADROOM",
		"chat   cheap     resting  -      "+until.Local().Format(time.TimeOnly)+" (in 30s, 429)  0      -        -           -",
		"chat   dear      ready    182ms  -                       0      12/60    3400        25%")
	for _, args := range [][]string{{"providers"}, {"providers", "chat"}} {
		out, _, err := run(t, a, args...)
		if err != nil {
			t.Fatal(err)
		}
		check(t, strings.Join(args, " "), out, want)
	}
	out, _, err := run(t, a, "providers", "chat", "-o", "yaml")
	if err != nil || !strings.Contains(out, "rest_reason: \"429\"") || !strings.Contains(out, "ttft_ms: 182.4") {
		t.Errorf("providers chat -o yaml: got %v\n%s", err, out)
	}
	_, _, err = run(t, a, "providers", "nope")
	if err == nil || !strings.Contains(err.Error(), `no model "nope" here; GET /llm/providers/models lists`) {
		t.Errorf("an unknown model: got %v, want the endpoint's message", err)
	}
	checkSent(t, a, "GET /llm/providers/models", "GET /llm/providers/models/chat", "GET /llm/providers/models/chat", "GET /llm/providers/models/nope")

	empty := newAdmin(t, map[string]answer{"GET /llm/providers/models": {body: []llmapi.ProvidersModel{}}})
	if out, _, _ := run(t, empty, "providers"); !strings.Contains(out, "no model with providers has been asked here yet") {
		t.Errorf("no models: got\n%s", out)
	}
}
