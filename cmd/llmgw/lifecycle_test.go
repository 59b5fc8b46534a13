package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// A model with max 0 is kept in the catalog and never started: listed as
// stopped with the reason, requests for it get 503 saying how to start
// it; scaling it up (the admin API or ctl) starts it, scaling it back to
// max 0 drains its replicas, and that survives a restart.
func TestModelKeptWithMaxZero(t *testing.T) {
	g := startGateway(t, `
		model kept {
			engine sim
			max 0
		}
		model base {
			engine sim
		}`, "")
	g.readyReplicas("base", 1)
	if code, body := adminDo(t, g, "POST", "/llm/models", `{"name":"later","engine":"sim","scaling":{"max":0}}`); code != 201 {
		t.Fatalf("adding a model with max 0: %d %s", code, body)
	}
	// A few supervision ticks: nothing starts.
	time.Sleep(1500 * time.Millisecond)
	for _, name := range []string{"kept", "later"} {
		st := g.models()[name]
		if st.State != "stopped" || !strings.Contains(st.Reason, "kept in the catalog with max 0") || len(st.Replicas) != 0 || st.Max != 0 {
			t.Errorf("%s: %s %q, %d replicas, max %d; want stopped, kept with max 0, none", name, st.State, st.Reason, len(st.Replicas), st.Max)
		}
		_, apiErr := chatErr(g.client(), name)
		if apiErr == nil || apiErr.StatusCode != 503 || !strings.Contains(apiErr.Message, "scale it to start it") {
			t.Errorf("a request for %s: %+v; want 503 saying to scale it", name, apiErr)
		}
	}
	if out, err := ctlRun(t, g, "models"); err != nil || !regexpLine(out, "later", "sim", "stopped", "0/0-0") {
		t.Errorf("ctl models: %v\n%s", err, out)
	}

	// Scaling it up starts it.
	out, err := ctlRun(t, g, "model", "scale", "later", "--max", "1")
	if err != nil || !strings.Contains(out, "min 1, max 1") {
		t.Fatalf("ctl model scale --max 1: %v\n%s", err, out)
	}
	rs := g.readyReplicas("later", 1)
	chatOnce(t, g, "later")

	// Back to max 0: its replica drains and stops.
	out, err = ctlRun(t, g, "model", "scale", "later", "--min", "0", "--max", "0")
	if err != nil || !strings.Contains(out, "min 0, max 0") {
		t.Fatalf("ctl model scale --max 0: %v\n%s", err, out)
	}
	waitFor(t, 15*time.Second, "the replica to stop", func() bool {
		return len(g.models()["later"].Replicas) == 0 && !processAlive(int(rs[0].PID))
	})
	if st := g.models()["later"]; st.State != "stopped" {
		t.Errorf("after scaling to max 0: %s %q", st.State, st.Reason)
	}

	// Kept across a restart, still not running; then started by the API.
	g.stop()
	g.start()
	time.Sleep(1500 * time.Millisecond)
	if st := g.models()["later"]; st.State != "stopped" || len(st.Replicas) != 0 || !st.Runtime {
		t.Errorf("after a restart: %+v", st)
	}
	if code, body := adminDo(t, g, "POST", "/llm/models/later/scale", `{"min":0,"max":2}`); code != 200 {
		t.Fatalf("scale: %d %s", code, body)
	}
	if resp := chatOnce(t, g, "later"); resp.SystemFingerprint != "llmgw-sim:later" {
		t.Errorf("answered as %q", resp.SystemFingerprint)
	}
	if code, body := adminDo(t, g, "POST", "/llm/models/later/scale", `{"min":1,"max":0}`); code != 400 || !strings.Contains(string(body), "below min") {
		t.Errorf("min 1 max 0: %d %s", code, body)
	}
}

// In a cluster a model kept with max 0 runs on no node; scaling it up
// through any node starts it where the plan puts it, and every node
// serves it. The audit log of every node's changes reads the same from
// each node.
func TestClusterModelKeptAndAudit(t *testing.T) {
	c := startCluster(t, 2, fmt.Sprintf(clusterModels, tenancy.HashKey("secret-1")))
	n1, n2 := c.nodes["n1"], c.nodes["n2"]
	if code, body := adminDo(t, n1, "POST", "/llm/models", `{"name":"kept","engine":"sim","scaling":{"max":0}}`); code != 201 {
		t.Fatalf("add: %d %s", code, body)
	}
	waitFor(t, 20*time.Second, "n2 to list kept as stopped", func() bool {
		st, ok := n2.models()["kept"]
		return ok && st.State == "stopped" && strings.Contains(st.Reason, "max 0")
	})
	time.Sleep(time.Second) // a few heartbeats and plans
	for _, g := range []*gateway{n1, n2} {
		if st := g.models()["kept"]; len(st.Replicas) != 0 {
			t.Errorf("kept has replicas: %+v", st.Replicas)
		}
		if code, _, body := ask(t, g, "secret-1", "kept"); code != 503 || !strings.Contains(body, "max 0") {
			t.Errorf("a request for kept: %d %s", code, body)
		}
	}
	if code, body := adminAs(t, n2, "dave", "POST", "/llm/models/kept/scale", `{"max":1}`); code != 200 {
		t.Fatalf("scale on n2: %d %s", code, body)
	}
	for _, g := range []*gateway{n1, n2} {
		waitFor(t, 30*time.Second, "a ready replica of kept", func() bool { return len(g.readyOn("kept")) == 1 })
		if code, _, body := ask(t, g, "secret-1", "kept"); code != 200 {
			t.Errorf("a request for kept after the scale: %d %s", code, body)
		}
	}

	// Every node's changes are read back from any node, with the node
	// that made them (the cluster's audit stream in Redis).
	for _, g := range []*gateway{n1, n2} {
		p := g.audit("model=kept")
		if got := actions(p); !slices.Equal(got, []string{"dave: model scaled", "tests: model added"}) || p.Source != "cluster" {
			t.Fatalf("audit through a node: %v from %q", got, p.Source)
		}
		if p.Entries[0].Node != "n2" || p.Entries[1].Node != "n1" {
			t.Errorf("nodes of the entries: %s, %s; want n2, n1", p.Entries[0].Node, p.Entries[1].Node)
		}
	}
	first := n1.audit("model=kept&limit=1")
	second := n1.audit("model=kept&limit=1&cursor=" + first.Next)
	if got := append(actions(first), actions(second)...); len(got) != 2 || got[1] != "tests: model added" || second.Next != "" {
		t.Errorf("pages of one: %v (next %q)", got, second.Next)
	}
	out, err := ctlRun(t, n1, "audit", "--actor", "dave")
	if err != nil || !regexpLine(out, "n2", "dave", "model scaled", "model=kept") {
		t.Errorf("ctl audit --actor dave on n1: %v\n%s", err, out)
	}
}

// adminAs sends an admin request as actor and returns the status and body.
func adminAs(t *testing.T, g *gateway, actor, method, path, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d%s", g.admin, path), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Llmgw-Actor", actor)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (g *gateway) audit(query string) llmapi.AuditPage {
	g.t.Helper()
	var p llmapi.AuditPage
	g.adminGet("/llm/audit?"+query, &p)
	return p
}

func actions(p llmapi.AuditPage) []string {
	var out []string
	for _, e := range p.Entries {
		out = append(out, e.Actor+": "+e.Action)
	}
	return out
}

// Changes made through the admin API are read back from the audit log,
// newest first, with their actor and fields, filtered and paged, through
// the API and ctl, and across a restart; a key's secret never appears.
func TestAuditLogReadBack(t *testing.T) {
	g := startGateway(t, `
		model base {
			engine sim
		}
		audit {
			keep 7d
			max_entries 1000
		}`+tenancyBlock("", "", "", ""), "")
	steps := []struct{ actor, method, path, body string }{
		{"alice", "POST", "/llm/models", `{"name":"extra","engine":"sim","scaling":{"min":0}}`},
		{"bob", "POST", "/llm/keys", `{"project":"acme/research/alpha","id":"k-audit"}`},
		{"alice", "POST", "/llm/models/extra/scale", `{"min":0,"max":3}`},
	}
	var secret string
	for _, s := range steps {
		code, body := adminAs(t, g, s.actor, s.method, s.path, s.body)
		if code >= 300 {
			t.Fatalf("%s %s: %d %s", s.method, s.path, code, body)
		}
		var k llmapi.KeyInfo
		if json.Unmarshal(body, &k) == nil && k.Secret != "" {
			secret = k.Secret
		}
	}
	p := g.audit("")
	want := []string{"alice: model scaled", "bob: key created", "alice: model added"}
	if got := actions(p); !slices.Equal(got, want) || p.Source != "storage" {
		t.Fatalf("GET /llm/audit: %v from %q; want %v from storage", got, p.Source, want)
	}
	if e := p.Entries[0]; e.Fields["model"] != "extra" || e.Fields["max"] != float64(3) || e.Node == "" || time.Since(e.Time) > time.Minute {
		t.Errorf("the scale entry: %+v", e)
	}
	if e := p.Entries[1]; e.Fields["key"] != "k-audit" || e.Fields["project"] != "acme/research/alpha" {
		t.Errorf("the key entry: %+v", e)
	}
	if raw, _ := json.Marshal(p); secret == "" || strings.Contains(string(raw), secret) {
		t.Errorf("the key's secret (%q) is in the audit log, or none was made", secret)
	}
	if got := actions(g.audit("actor=alice&model=extra")); !slices.Equal(got, []string{"alice: model scaled", "alice: model added"}) {
		t.Errorf("actor=alice&model=extra: %v", got)
	}
	if got := actions(g.audit("action=key")); !slices.Equal(got, []string{"bob: key created"}) {
		t.Errorf("action=key: %v", got)
	}
	if got := g.audit("until=" + time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)); len(got.Entries) != 0 {
		t.Errorf("until an hour ago: %v", actions(got))
	}
	// Pages of two, by cursor.
	first := g.audit("limit=2")
	second := g.audit("limit=2&cursor=" + first.Next)
	if got := append(actions(first), actions(second)...); first.Next == "" || second.Next != "" || !slices.Equal(got, want) {
		t.Errorf("pages: %v (next %q, then %q)", got, first.Next, second.Next)
	}
	if code, body := adminDo(t, g, "GET", "/llm/audit?since=yesterday", ""); code != 400 || !strings.Contains(string(body), "RFC 3339") {
		t.Errorf("a bad since: %d %s", code, body)
	}

	out, err := ctlRun(t, g, "audit", "--since", "1h", "--actor", "alice")
	if err != nil || !regexpLine(out, "alice", "model scaled", "max=3", "model=extra") || strings.Contains(out, "bob") {
		t.Errorf("ctl audit --since 1h --actor alice: %v\n%s", err, out)
	}

	// Kept across a restart; new entries go on top.
	g.stop()
	g.start()
	if code, body := adminAs(t, g, "carol", "POST", "/llm/models/extra/stop", ""); code != 200 {
		t.Fatalf("stop: %d %s", code, body)
	}
	out, err = ctlRun(t, g, "--json", "audit", "--since", "1h")
	var after llmapi.AuditPage
	if err != nil || json.Unmarshal([]byte(out), &after) != nil {
		t.Fatalf("ctl --json audit: %v\n%s", err, out)
	}
	if got := actions(after); !slices.Equal(got, append([]string{"carol: model stopped"}, want...)) {
		t.Errorf("after a restart: %v", got)
	}
}
