package llmctl

import (
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

func TestAudit(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	a := newAdmin(t, map[string]answer{
		"GET /llm/audit?action=model&actor=alice&limit=2&since=1h": {body: llmapi.AuditPage{Warning: "node n2 did not answer", Next: "c2",
			Entries: []llmapi.AuditEntry{
				{Time: at, Node: "n1", Actor: "alice", Action: "model scaled", Fields: map[string]any{"model": "chat", "max": 2, "min": 1}},
				{Time: at.Add(-time.Minute), Actor: "alice", Action: "model added"},
			}}},
	})
	out, _, err := run(t, a, "audit", "--since", "1h", "--actor", "alice", "--action", "model", "--limit", "2")
	if err != nil {
		t.Fatal(err)
	}
	local := func(t time.Time) string { return t.Local().Format(time.DateTime) }
	check(t, "ctl audit", out, "warning: node n2 did not answer\n"+lines(
		"TIME                 NODE  ACTOR  ACTION        FIELDS",
		local(at)+"  n1    alice  model scaled  max=2 min=1 model=chat",
		local(at.Add(-time.Minute))+"        alice  model added   ",
		"more: llmgw ctl audit --cursor c2 (with the same filters)"))
}
