package llmctl

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

func TestUsageAndCache(t *testing.T) {
	var usageQuery url.Values
	a := newAdmin(t, map[string]answer{
		"GET /llm/cache":        {body: []map[string]int64{{"entries": 3, "bytes": 4096, "hits_exact": 5, "hits_semantic": 1, "misses": 2, "bypass": 0}}},
		"POST /llm/cache/purge": {body: map[string]int{"purged": 3}},
	})
	out, _, err := run(t, a, "cache")
	if err != nil {
		t.Fatal(err)
	}
	check(t, "ctl cache", out, lines(
		"ENTRIES  BYTES  EXACT HITS  SEMANTIC HITS  MISSES  BYPASSED",
		"3        4096   5           1              2       0"))
	if out, _, err = run(t, a, "cache", "purge", "--model", "chat"); err != nil {
		t.Fatal(err)
	}
	check(t, "ctl cache purge", out, "purged 3 entries\n")
	checkSent(t, a, "GET /llm/cache", `POST /llm/cache/purge {"model":"chat","scope":""}`)

	// The usage query carries from= of now minus --since: the route is
	// matched on its other parameters.
	u := newAdmin(t, nil)
	u.Config.Handler = usageHandler(t, &usageQuery, map[string]any{
		"models": map[string]llmapi.Usage{"chat": {Requests: 2, InputTokens: 10, OutputTokens: 20, CostMicros: 1500}, "a-embed": {Requests: 1, InputTokens: 5}},
		"total":  llmapi.Usage{Requests: 3, InputTokens: 15, OutputTokens: 20, CostMicros: 1500},
	})
	before := time.Now()
	if out, _, err = run(t, u, "usage", "--project", "acme/research/alpha", "--since", "2h"); err != nil {
		t.Fatal(err)
	}
	check(t, "ctl usage", out, lines(
		"MODEL    REQUESTS  INPUT TOKENS  OUTPUT TOKENS  COST",
		"a-embed  1         5             0              0.0000",
		"chat     2         10            20             0.0015",
		"(total)  3         15            20             0.0015"))
	from, err := time.Parse(time.RFC3339, usageQuery.Get("from"))
	if usageQuery.Get("project") != "acme/research/alpha" || err != nil || from.Before(before.Add(-2*time.Hour-time.Second)) || from.After(time.Now().Add(-2*time.Hour)) {
		t.Errorf("usage query: %v", usageQuery)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"usage"}, "name one node: --org, --team org/team, --project org/team/project or --key id"},
		{[]string{"usage", "--org", "a", "--key", "k"}, "name one node: --org, --team org/team, --project org/team/project or --key id"},
		{[]string{"usage", "--org", "a", "--since", "1 day"}, `--since "1 day": use a duration such as 24h`},
	} {
		if _, _, err := run(t, u, tt.args...); err == nil || err.Error() != tt.want {
			t.Errorf("%v: got %v, want %q", tt.args, err, tt.want)
		}
	}
}

func usageHandler(t *testing.T, q *url.Values, body any) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "GET" || r.URL.Path != "/llm/usage" {
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
		*q = r.URL.Query()
		_ = json.NewEncoder(w).Encode(body)
	})
}
