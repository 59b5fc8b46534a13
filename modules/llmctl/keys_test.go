package llmctl

import (
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

func TestKeys(t *testing.T) {
	revoked := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	a := newAdmin(t, map[string]answer{
		"GET /llm/keys": {body: []llmapi.KeyInfo{
			{ID: "ci", Project: "acme/research/alpha", Source: "config"},
			{ID: "old", Project: "acme/research/alpha", Source: "runtime", Revoked: &revoked},
		}},
		"POST /llm/keys":             {body: llmapi.KeyInfo{ID: "k1", Project: "acme/research/alpha", Secret: "sk-llmgw-abc"}},
		"DELETE /llm/keys/k1":        {status: 204, body: ""},
		"POST /llm/keys/k1/rotate":   {body: llmapi.KeyInfo{ID: "k1", Secret: "sk-llmgw-def"}},
		"PUT /llm/keys/k1/limits":    {body: llmapi.KeyInfo{ID: "k1", Limits: &tenancy.Limits{RequestsPerMinute: 60, Models: []string{"chat"}}}},
		"PUT /llm/keys/nolim/limits": {body: llmapi.KeyInfo{ID: "nolim"}},
		"POST /llm/keys/gone/rotate": {status: 404, body: `{"error":"no key \"gone\""}`},
	})
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"keys"}, lines(
			"KEY  PROJECT              SOURCE   STATE",
			"ci   acme/research/alpha  config   active",
			"old  acme/research/alpha  runtime  revoked 2026-05-01T12:00:00Z")},
		{[]string{"keys", "create", "--project", "acme/research/alpha"}, "key k1 in acme/research/alpha\nsecret: sk-llmgw-abc\n(the secret is shown only now)\n"},
		{[]string{"keys", "revoke", "k1"}, "key k1 revoked\n"},
		{[]string{"keys", "rotate", "k1"}, "key k1 rotated\nsecret: sk-llmgw-def\n(the secret is shown only now)\n"},
		{[]string{"keys", "limits", "k1", "--requests-per-minute", "60", "--models", "chat"}, `key k1 limits: {"requests_per_minute":60,"models":["chat"]}` + "\n"},
		{[]string{"keys", "limits", "nolim", "--clear"}, "key nolim limits: none of its own\n"},
	}
	for _, tt := range tests {
		out, _, err := run(t, a, tt.args...)
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		check(t, strings.Join(tt.args, " "), out, tt.want)
	}
	checkSent(t, a,
		"GET /llm/keys",
		`POST /llm/keys {"id":"","project":"acme/research/alpha"}`,
		"DELETE /llm/keys/k1",
		"POST /llm/keys/k1/rotate",
		`PUT /llm/keys/k1/limits {"requests_per_minute":60,"models":["chat"]}`,
		`PUT /llm/keys/nolim/limits {}`)

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"keys", "create"}, "--project is required: org/team/project as declared in the config"},
		{[]string{"keys", "limits", "k1"}, "give the limits (such as --requests-per-minute 60) or --clear to remove them"},
		{[]string{"keys", "rotate", "gone"}, `no key "gone"`},
	} {
		if _, _, err := run(t, a, tt.args...); err == nil || err.Error() != tt.want {
			t.Errorf("%v: got %v, want %q", tt.args, err, tt.want)
		}
	}
}
