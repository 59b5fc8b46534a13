package llmctl

import (
	"strings"
	"testing"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

func TestTenants(t *testing.T) {
	acme := llmapi.TenantLevel{Kind: "organisation", Path: "acme", Source: "config",
		Limits:   &tenancy.Limits{RequestsPerMinute: 60, Budget: 100, BudgetPeriod: "month", Models: []string{"chat"}},
		Capacity: &tenancy.Capacity{Memory: 64 << 30, GPUs: 2},
		Used:     llmapi.OwnerUse{Replicas: 1, Memory: 8 << 30, Cores: 4, GPUs: 1},
		Models:   []string{"chat"}, Keys: 2}
	research := llmapi.TenantLevel{Kind: "team", Path: "acme/research", Source: "runtime"}
	a := newAdmin(t, map[string]answer{
		"GET /llm/tenants":                                    {body: []llmapi.TenantLevel{acme, research}},
		"GET /llm/tenants/orgs/acme/teams/research":           {body: research},
		"POST /llm/tenants/orgs/acme/teams":                   {body: research},
		"POST /llm/tenants/orgs/acme/teams/research/projects": {body: llmapi.TenantLevel{Kind: "project", Path: "acme/research/alpha"}},
		"PATCH /llm/tenants/orgs/acme":                        {body: acme},
		"DELETE /llm/tenants/orgs/acme/teams/research":        {status: 204, body: ""},
	})
	table := lines(
		"LEVEL         PATH           SOURCE   LIMITS                                     CAPACITY               USED                                         MODELS  KEYS",
		"organisation  acme           config   60 req/min, budget 100/month, models chat  64 GiB memory, 2 GPUs  1 replicas, 8.0 GiB memory, 4 cores, 1 GPUs  chat    2",
		"team          acme/research  runtime  -                                          -                      -                                                    0")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"tenants"}, table},
		{[]string{"tenants", "get", "acme/research"}, lines(
			"LEVEL  PATH           SOURCE   LIMITS  CAPACITY  USED  MODELS  KEYS",
			"team   acme/research  runtime  -       -         -             0")},
		{[]string{"tenants", "create", "acme/research", "--requests-per-minute", "60", "--memory", "64GiB"}, "team acme/research created\n"},
		{[]string{"tenants", "create", "acme/research/alpha"}, "project acme/research/alpha created\n"},
		{[]string{"tenants", "set", "acme", "--gpus", "0", "--models", "chat,embed"}, "organisation acme changed\n" + lines(
			"LEVEL         PATH  SOURCE  LIMITS                                     CAPACITY               USED                                         MODELS  KEYS",
			"organisation  acme  config  60 req/min, budget 100/month, models chat  64 GiB memory, 2 GPUs  1 replicas, 8.0 GiB memory, 4 cores, 1 GPUs  chat    2")},
		{[]string{"tenants", "delete", "acme/research"}, "acme/research deleted\n"},
	}
	for _, tt := range tests {
		out, _, err := run(t, a, tt.args...)
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		check(t, strings.Join(tt.args, " "), out, tt.want)
	}
	checkSent(t, a,
		"GET /llm/tenants",
		"GET /llm/tenants/orgs/acme/teams/research",
		`POST /llm/tenants/orgs/acme/teams {"capacity":{"memory":68719476736},"limits":{"requests_per_minute":60},"name":"research"}`,
		`POST /llm/tenants/orgs/acme/teams/research/projects {"name":"alpha"}`,
		`PATCH /llm/tenants/orgs/acme {"capacity":{"gpus":null},"limits":{"models":["chat","embed"]}}`,
		"DELETE /llm/tenants/orgs/acme/teams/research")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"tenants", "set", "acme", "--cores", "-1"}, "--cores -1: use 0 (no limit) or more"},
		{[]string{"tenants", "set", "acme", "--memory", "lots"}, `--memory "lots" is not a size such as 64GiB`},
	} {
		if _, _, err := run(t, a, tt.args...); err == nil || err.Error() != tt.want {
			t.Errorf("%v: got %v, want %q", tt.args, err, tt.want)
		}
	}
}
