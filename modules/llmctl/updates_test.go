package llmctl

import (
	"strings"
	"testing"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

func TestModelUpdates(t *testing.T) {
	a := newAdmin(t, map[string]answer{
		"GET /llm/models/tiny/updates?check=true": {body: llmapi.ModelUpdates{Model: "tiny", MirrorModel: "tiny", Repository: "hf://acme/tiny",
			Current: "v1", CurrentCommit: "abc", Previous: "v0", Available: "def", UpdateAvailable: true, Every: "1h", Error: "rate limited"}},
		"GET /llm/models/other/updates": {body: llmapi.ModelUpdates{Model: "other", MirrorModel: "other", Every: "never"}},
		"POST /llm/models/tiny/update": {body: llmapi.VersionRollout{From: "v1", To: "v2",
			Rollout: llmapi.Rollout{ModelStatus: llmapi.ModelStatus{Name: "tiny"}, Replaced: []string{"tiny-1"}, Started: []string{"tiny-2"}, Note: "weights fetched"}}},
		"POST /llm/models/tiny/rollback": {body: llmapi.VersionRollout{From: "v2", To: "v1",
			Rollout: llmapi.Rollout{ModelStatus: llmapi.ModelStatus{Name: "tiny"}}}},
	})
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"model", "updates", "tiny", "--check"}, lines(
			"model tiny (mirror model tiny) follows hf://acme/tiny",
			"current:  v1 (commit abc)",
			"previous: v0",
			"update available: commit def (llmgw ctl model update tiny)",
			"not checked yet; checks: 1h",
			"error: rate limited")},
		{[]string{"model", "updates", "other"}, lines(
			"model other (mirror model other) follows -",
			"current:  - (commit -)",
			"not checked yet; checks: never")},
		{[]string{"model", "update", "tiny", "--timeout", "1m"}, "model tiny: version v1 → v2\nmodel tiny: replaced tiny-1 with tiny-2\nweights fetched\n"},
		{[]string{"model", "rollback", "tiny"}, "model tiny: version v2 → v1\nmodel tiny: replaced none with none\n"},
	}
	for _, tt := range tests {
		out, _, err := run(t, a, tt.args...)
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		check(t, strings.Join(tt.args, " "), out, tt.want)
	}
	checkSent(t, a, "GET /llm/models/tiny/updates?check=true", "GET /llm/models/other/updates", "POST /llm/models/tiny/update", "POST /llm/models/tiny/rollback")
}
