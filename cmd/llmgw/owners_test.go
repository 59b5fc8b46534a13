package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// ownersModel is a runtime model's body: one replica of 1 GiB, owned by owner.
func ownersModel(name, owner string) string {
	return fmt.Sprintf(`{"name":%q,"engine":"sim","owner":%q,"resources":{"memory":1073741824},"scaling":{"min":1,"max":1}}`, name, owner)
}

// ownersState waits until model is in state and returns its status.
func ownersState(g *gateway, model, state string) llmapi.ModelStatus {
	g.t.Helper()
	var st llmapi.ModelStatus
	waitFor(g.t, 30*time.Second, model+" "+state, func() bool {
		st = g.models()[model]
		return st.State == state
	})
	return st
}

func ownersPlan(g *gateway, body string) llmapi.Plan {
	g.t.Helper()
	code, b := adminDo(g.t, g, "POST", "/llm/plan", body)
	var pl llmapi.Plan
	if code != 200 || json.Unmarshal(b, &pl) != nil {
		g.t.Fatalf("plan: %d %s", code, b)
	}
	return pl
}

// A model whose replica would take its owner over its capacity waits,
// saying which level is full and by how much; the plan says the same;
// when another model of the same owner goes, the waiting one starts. An
// organisation's capacity counts its teams' models (the ancestor's limit
// holds where the team's has room), and raising it at runtime admits.
func TestOwnersCapacityWaitsThenAdmits(t *testing.T) {
	g := startGateway(t, `
		org acme {
			capacity {
				memory 3GiB
			}
			team research {
				capacity {
					replicas 2
				}
				project alpha {
					key k1 `+tenancy.HashKey("secret-1")+`
				}
			}
			team ops
		}
		model b {
			engine sim
			owner acme/research/alpha
			resources {
				memory 1GiB
			}
		}`, "")
	if code, b := adminDo(t, g, "POST", "/llm/models", ownersModel("a", "acme/research")); code != 201 {
		t.Fatalf("add a: %d %s", code, b)
	}
	ownersState(g, "a", "ready")
	ownersState(g, "b", "ready")

	// The team has its two replicas: a third waits, and the plan agrees.
	const teamFull = "team acme/research: 1 replica over its capacity of 2 replicas"
	pl := ownersPlan(g, ownersModel("c", "acme/research/alpha"))
	if pl.Fits || !strings.Contains(pl.Reason, teamFull) {
		t.Fatalf("plan for c: got %+v, want it not to fit: %s", pl, teamFull)
	}
	if code, b := adminDo(t, g, "POST", "/llm/models", ownersModel("c", "acme/research/alpha")); code != 201 {
		t.Fatalf("add c: %d %s", code, b)
	}
	st := ownersState(g, "c", "waiting")
	if st.Reason != pl.Reason {
		t.Fatalf("c waits for %q; the plan said %q", st.Reason, pl.Reason)
	}
	if _, e := chatErr(g.client(), "c"); e == nil || e.StatusCode != 503 || !strings.Contains(e.Message, teamFull) {
		t.Errorf("a request for c: got %+v, want 503 naming the full team", e)
	}

	// Another model of the same owner goes: c starts.
	removed := time.Now()
	if code, b := adminDo(t, g, "DELETE", "/llm/models/a", ""); code != 200 && code != 204 {
		t.Fatalf("remove a: %d %s", code, b)
	}
	ownersState(g, "c", "ready")
	t.Logf("c was ready %s after a was removed", time.Since(removed).Round(time.Millisecond))
	if _, e := chatErr(g.client(), "c"); e != nil {
		t.Errorf("c after a went: %v", e)
	}

	// The organisation holds 2 GiB of its 3 (b and c, both research):
	// a model of ops, whose team has no capacity, needing 2 GiB waits
	// on the organisation.
	d := `{"name":"d","engine":"sim","owner":"acme/ops","resources":{"memory":2147483648},"scaling":{"min":1,"max":1}}`
	const orgFull = "org acme: 1.0 GiB of memory over its capacity of 3.0 GiB"
	if pl := ownersPlan(g, d); pl.Fits || !strings.Contains(pl.Reason, orgFull) {
		t.Fatalf("plan for d: got %+v, want: %s", pl, orgFull)
	}
	if code, b := adminDo(t, g, "POST", "/llm/models", d); code != 201 {
		t.Fatalf("add d: %d %s", code, b)
	}
	if st := ownersState(g, "d", "waiting"); !strings.Contains(st.Reason, orgFull) {
		t.Fatalf("d waits for %q, want %s", st.Reason, orgFull)
	}
	var org llmapi.TenantLevel
	g.adminGet("/llm/tenants/orgs/acme", &org)
	if org.Used.Memory != 2<<30 || org.Used.Replicas != 2 || strings.Join(org.Models, ",") != "b,c,d" {
		t.Errorf("the org's use: got %+v, want 2 GiB in 2 replicas, models b,c,d", org)
	}

	// Raising the organisation's capacity at runtime admits d.
	if code, b := adminDo(t, g, "PATCH", "/llm/tenants/orgs/acme", `{"capacity":{"memory":4294967296}}`); code != 200 {
		t.Fatalf("raise the org's capacity: %d %s", code, b)
	}
	ownersState(g, "d", "ready")
	if pl := ownersPlan(g, ownersModel("e", "acme/ops")); pl.Fits || !strings.Contains(pl.Reason, "org acme: 1.0 GiB of memory over its capacity of 4.0 GiB") {
		t.Errorf("plan at the new capacity: got %+v", pl)
	}
	out, err := ctlRun(t, g, "model", "plan", "-f", ownersFile(t, ownersModel("e", "acme/ops")))
	if !strings.Contains(out, "does not fit") || !strings.Contains(out, "org acme: 1.0 GiB of memory over its capacity of 4.0 GiB") {
		t.Errorf("ctl model plan: %v\n%s", err, out)
	}
}

func ownersFile(t *testing.T, body string) string {
	f := t.TempDir() + "/model.json"
	if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// Organisations, teams and projects are created through the admin API
// (and ctl), a key is minted in the new project, its rate limit holds,
// a change of the limit holds from the next request, and all of it
// survives a reload and a restart. Deleting a level of the config file,
// or one that still has keys, levels or models, is refused with the
// reason; every change is in the audit log.
func TestOwnersTenancyAtRuntime(t *testing.T) {
	block := quotaModels + tenancyBlock("", "", "", "")
	g := startQuotaGateway(t, block, "")
	for _, c := range []struct{ path, body string }{
		{"/llm/tenants/orgs", `{"name":"beta","capacity":{"replicas":5}}`},
		{"/llm/tenants/orgs/beta/teams", `{"name":"web"}`},
		{"/llm/tenants/orgs/beta/teams/web/projects", `{"name":"shop","limits":{"requests_per_minute":2}}`},
	} {
		if code, b := adminDo(t, g, "POST", c.path, c.body); code != 201 {
			t.Fatalf("POST %s: %d %s", c.path, code, b)
		}
	}
	if code, b := adminDo(t, g, "POST", "/llm/tenants/orgs", `{"name":"beta"}`); code != 409 {
		t.Errorf("creating beta twice: %d %s", code, b)
	}
	if code, b := adminDo(t, g, "POST", "/llm/tenants/orgs/nope/teams", `{"name":"x"}`); code != 404 {
		t.Errorf("a team under no org: %d %s", code, b)
	}
	code, body := adminDo(t, g, "POST", "/llm/keys", `{"project":"beta/web/shop","id":"shop-key"}`)
	if code != 201 {
		t.Fatalf("mint a key in the new project: %d %s", code, body)
	}
	var key llmapi.KeyInfo
	_ = json.Unmarshal(body, &key)
	c := keyClient(g, key.Secret)

	freshMinute(t, 20*time.Second)
	for i := range 2 {
		if _, e := chatErr(c, "sim-chat"); e != nil {
			t.Fatalf("request %d within the limit: %v", i+1, e)
		}
	}
	if _, e := chatErr(c, "sim-chat"); e == nil || e.StatusCode != 429 {
		t.Fatalf("the third request in a minute at 2 a minute: got %+v, want 429", e)
	}
	// A higher limit holds from the next request.
	if code, b := adminDo(t, g, "PATCH", "/llm/tenants/orgs/beta/teams/web/projects/shop", `{"limits":{"requests_per_minute":4}}`); code != 200 {
		t.Fatalf("raise the limit: %d %s", code, b)
	}
	for i := range 2 {
		if _, e := chatErr(c, "sim-chat"); e != nil {
			t.Fatalf("request %d after raising the limit to 4: %v", i+3, e)
		}
	}
	if _, e := chatErr(c, "sim-chat"); e == nil || e.StatusCode != 429 {
		t.Fatalf("the fifth request at 4 a minute: got %+v, want 429", e)
	}
	// ctl lowers it to 1: the next request is refused.
	if out, err := ctlRun(t, g, "tenants", "set", "beta/web/shop", "--requests-per-minute", "1"); err != nil || !strings.Contains(out, "project beta/web/shop changed") {
		t.Fatalf("ctl tenants set: %v\n%s", err, out)
	}
	// A level of the config file may be changed: the change overlays it.
	if code, b := adminDo(t, g, "PUT", "/llm/tenants/orgs/acme/teams/research", `{"capacity":{"replicas":3}}`); code != 200 || !strings.Contains(string(b), `"source":"config+runtime"`) {
		t.Fatalf("change a config team: %d %s", code, b)
	}

	check := func(when string) {
		t.Helper()
		var p llmapi.TenantLevel
		g.adminGet("/llm/tenants/orgs/beta/teams/web/projects/shop", &p)
		if p.Source != "runtime" || p.Limits == nil || p.Limits.RequestsPerMinute != 1 || p.Keys != 1 {
			t.Fatalf("%s: the project is %+v, want runtime, 1 a minute, 1 key", when, p)
		}
		var team llmapi.TenantLevel
		g.adminGet("/llm/tenants/orgs/acme/teams/research", &team)
		if team.Source != "config+runtime" || team.Capacity == nil || team.Capacity.Replicas != 3 {
			t.Fatalf("%s: the config team is %+v, want its capacity changed to 3 replicas", when, team)
		}
		// At 1 a minute the second of two requests is refused, whether
		// the counters were kept (a reload) or started afresh (a restart
		// with in-process counters) or a new minute began.
		_, _ = chatErr(c, "sim-chat")
		if _, e := chatErr(c, "sim-chat"); e == nil || e.StatusCode != 429 {
			t.Fatalf("%s: the second of two requests at 1 a minute: got %+v, want 429", when, e)
		}
	}
	check("at once")
	g.reload(block, "")
	check("after a reload")
	g.stop()
	g.start()
	check("after a restart")
	out, err := ctlRun(t, g, "tenants")
	if err != nil || !strings.Contains(out, "beta/web/shop") || !strings.Contains(out, "1 req/min") || !strings.Contains(out, "5 replicas") {
		t.Errorf("ctl tenants: %v\n%s", err, out)
	}

	// Refusals, with their reasons.
	for _, c := range []struct {
		path, want string
		code       int
	}{
		{"/llm/tenants/orgs/acme", "declared in the config file", 409},
		{"/llm/tenants/orgs/acme/teams/research/projects/alpha", "declared in the config file", 409},
		{"/llm/tenants/orgs/beta/teams/web/projects/shop", "still has 1 key", 409},
		{"/llm/tenants/orgs/beta", "still has teams (beta/web)", 409},
		{"/llm/tenants/orgs/nope", "no org nope", 404},
	} {
		if code, b := adminDo(t, g, "DELETE", c.path, ""); code != c.code || !strings.Contains(string(b), c.want) {
			t.Errorf("DELETE %s: got %d %s, want %d %q", c.path, code, b, c.code, c.want)
		}
	}
	// Emptied, they go, from the bottom up; a level that owns a model
	// cannot go either.
	if code, _ := adminDo(t, g, "DELETE", "/llm/keys/shop-key", ""); code != 204 {
		t.Fatalf("revoke: %d", code)
	}
	if code, b := adminDo(t, g, "DELETE", "/llm/tenants/orgs/beta/teams/web/projects/shop", ""); code != 204 {
		t.Fatalf("delete the emptied project: %d %s", code, b)
	}
	if code, b := adminDo(t, g, "POST", "/llm/models", `{"name":"web-model","engine":"sim","owner":"beta/web","scaling":{"min":0}}`); code != 201 {
		t.Fatalf("add a model owned by beta/web: %d %s", code, b)
	}
	if code, b := adminDo(t, g, "DELETE", "/llm/tenants/orgs/beta/teams/web", ""); code != 409 || !strings.Contains(string(b), "still owns models (web-model)") {
		t.Errorf("deleting a team that owns a model: %d %s", code, b)
	}
	if code, _ := adminDo(t, g, "DELETE", "/llm/models/web-model", ""); code >= 300 {
		t.Fatalf("remove web-model: %d", code)
	}
	if out, err := ctlRun(t, g, "tenants", "delete", "beta/web"); err != nil {
		t.Fatalf("ctl tenants delete: %v\n%s", err, out)
	}
	if code, b := adminDo(t, g, "DELETE", "/llm/tenants/orgs/beta", ""); code != 204 {
		t.Fatalf("delete the emptied org: %d %s", code, b)
	}
	// A config level's runtime change is undone: the file's limits apply.
	if code, b := adminDo(t, g, "DELETE", "/llm/tenants/orgs/acme/teams/research?overlay=true", ""); code != 204 {
		t.Fatalf("undo the config team's change: %d %s", code, b)
	}
	var team llmapi.TenantLevel
	g.adminGet("/llm/tenants/orgs/acme/teams/research", &team)
	if team.Source != "config" || team.Capacity != nil {
		t.Errorf("after undoing its change, the config team is %+v", team)
	}
	var levels []llmapi.TenantLevel
	g.adminGet("/llm/tenants", &levels)
	if len(levels) != 3 {
		t.Errorf("after deleting beta: got %+v, want acme's three levels", levels)
	}
	var audit struct {
		Entries []llmapi.AuditEntry `json:"entries"`
	}
	g.adminGet("/llm/audit?action=tenant&limit=100", &audit)
	var actions []string
	for _, e := range audit.Entries {
		actions = append(actions, e.Action+" "+fmt.Sprint(e.Fields["path"]))
	}
	for _, want := range []string{"tenant level created beta/web/shop", "tenant level changed beta/web/shop", "tenant level changed acme/research", "tenant level deleted beta", "tenant level reset to the config file acme/research"} {
		if !strings.Contains(strings.Join(actions, "\n"), want) {
			t.Errorf("the audit log lacks %q: %v", want, actions)
		}
	}
}

// In a cluster an owner's capacity counts its replicas on every node,
// and the tenancy tree changed on one node holds on the others: a
// project created on n1 takes a key minted on n1 that n2 admits, and a
// capacity raised on n2 lets the waiting model start.
func TestOwnersCluster(t *testing.T) {
	c := startCluster(t, 2, `
		model chat {
			engine sim
			owner acme/research
			min 2
			max 2
		}
		model extra {
			engine sim
			owner acme
			min 2
			max 2
		}
		org acme {
			capacity {
				replicas 3
			}
			team research {
				project alpha {
					key k1 `+tenancy.HashKey("secret-1")+`
				}
			}
		}`)
	n1, n2 := c.nodes["n1"], c.nodes["n2"]
	const orgFull = "org acme: 1 replica over its capacity of 3 replicas"
	waitFor(t, 60*time.Second, "chat on two nodes and one replica of extra", func() bool {
		return len(n1.readyOn("chat")) == 2 && len(n1.readyOn("extra")) == 1
	})
	waitFor(t, 10*time.Second, "extra waiting on the org's capacity", func() bool {
		st := n2.models()["extra"]
		return strings.Contains(st.Reason, orgFull)
	})

	for _, s := range []struct{ path, body string }{
		{"/llm/tenants/orgs/acme/teams", `{"name":"web"}`},
		{"/llm/tenants/orgs/acme/teams/web/projects", `{"name":"shop","limits":{"requests_per_minute":100}}`},
	} {
		if code, b := adminDo(t, n1, "POST", s.path, s.body); code != 201 {
			t.Fatalf("POST %s on n1: %d %s", s.path, code, b)
		}
	}
	code, body := adminDo(t, n1, "POST", "/llm/keys", `{"project":"acme/web/shop"}`)
	if code != 201 {
		t.Fatalf("mint a key on n1: %d %s", code, body)
	}
	var key llmapi.KeyInfo
	_ = json.Unmarshal(body, &key)
	if code, _, b := ask(t, n2, key.Secret, "chat"); code != 200 {
		t.Fatalf("the new project's key on n2: %d %s", code, b)
	}
	var p llmapi.TenantLevel
	waitFor(t, 10*time.Second, "n2 to know the new project", func() bool {
		n2.adminGet("/llm/tenants/orgs/acme/teams/web/projects/shop", &p)
		return p.Source == "runtime"
	})

	if code, b := adminDo(t, n2, "PATCH", "/llm/tenants/orgs/acme", `{"capacity":{"replicas":4}}`); code != 200 {
		t.Fatalf("raise the org's capacity on n2: %d %s", code, b)
	}
	waitFor(t, 60*time.Second, "both replicas of extra", func() bool {
		return len(n1.readyOn("extra")) == 2
	})
}
