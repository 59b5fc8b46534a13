package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// The request log's end-to-end tests: every request recorded once, with
// what a user would look for, across a reload and across two nodes; a
// tenant admin sees its tenant's requests only; retention holds.

// requestLogTenants are two organisations with a key each: k1
// (secret-1, acme/research/alpha, sim-* models only, bodies kept) and k3
// (secret-3, globex/ops/web).
var requestLogTenants = requestLogOrgs + `
		request_log {
			bodies acme/research
		}`

var requestLogOrgs = fmt.Sprintf(`
		org acme {
			team research {
				project alpha {
					models sim-*
					key k1 %s
				}
			}
		}
		org globex {
			team ops {
				project web {
					key k3 %s
				}
			}
		}`, tenancy.HashKey("secret-1"), tenancy.HashKey("secret-3"))

// sentRequest is what a client saw of one request.
type sentRequest struct {
	id, key, model string
	status         int
}

// shape is the i-th request of a mix a platform's clients send: most
// chats answered, some streamed, and the failures a log is read for (an
// unknown model, a bad key, a model the key may not use).
func shape(i int) (key, model, body string) {
	switch i % 20 {
	case 0:
		return "secret-1", "no-such-model", `{"model":"no-such-model","messages":[{"role":"user","content":"hello?"}]}`
	case 1:
		return "wrong-secret", "sim-chat", `{"model":"sim-chat","messages":[{"role":"user","content":"hi"}]}`
	case 2:
		return "secret-1", "other", `{"model":"other","messages":[{"role":"user","content":"may I?"}]}`
	case 3, 4, 5:
		return "secret-3", "sim-chat", fmt.Sprintf(`{"model":"sim-chat","stream":true,"messages":[{"role":"user","content":"stream %d"}]}`, i)
	case 6, 7, 8, 9:
		return "secret-3", "sim-chat", fmt.Sprintf(`{"model":"sim-chat","messages":[{"role":"user","content":"question %d from globex"}]}`, i)
	}
	return "secret-1", "sim-chat", fmt.Sprintf(`{"model":"sim-chat","max_tokens":5,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"question %d: what is the capital of France?"}]}`, i)
}

// fire sends n requests of the mix, conc at a time, spread over bases in
// turn; halfway it calls midway (a reload) while requests are in flight.
func fire(t *testing.T, bases []string, n, conc int, midway func()) ([]sentRequest, int) {
	t.Helper()
	out := make([]sentRequest, n)
	lost := new(atomic.Int64)
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if i == n/2 && midway != nil {
					once.Do(midway)
				}
				key, model, body := shape(i)
				out[i] = send(t, client, bases[i%len(bases)], key, model, body, lost)
			}
		}()
	}
	wg.Wait()
	return out, int(lost.Load())
}

// send sends one request. A connection a reload closed under it is
// retried, as clients do; lost counts those, whose first try the gateway
// may have answered (and logged) with nobody there to read it.
func send(t *testing.T, client *http.Client, base, key, model, body string, lost *atomic.Int64) sentRequest {
	for try := 0; ; try++ {
		req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			if lost.Add(1); try < 10 {
				client.CloseIdleConnections() // the others the reload closed
				time.Sleep(20 * time.Millisecond)
				continue
			}
			t.Errorf("request: %v", err)
			return sentRequest{}
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return sentRequest{id: resp.Header.Get("X-Request-Id"), key: key, model: model, status: resp.StatusCode}
	}
}

// readLog pages through GET /llm/requests at base (an admin endpoint)
// and returns every record by id, failing on one seen twice.
func readLog(t *testing.T, base, query string) map[string]llmapi.RequestRecord {
	t.Helper()
	all := map[string]llmapi.RequestRecord{}
	for cursor, pages := "", 0; ; pages++ {
		var p llmapi.RequestPage
		getJSON(t, base+"/llm/requests?limit=1000&"+query+"&before="+cursor, &p)
		for _, r := range p.Data {
			if _, dup := all[r.ID]; dup {
				t.Fatalf("request %s is in the log twice", r.ID)
			}
			all[r.ID] = r
		}
		if !p.HasMore || pages > 1000 {
			return all
		}
		cursor = p.Next
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, raw)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, raw)
	}
}

// checkRecorded checks every request sent is in the log once, as the
// client saw it.
func checkRecorded(t *testing.T, sent []sentRequest, lost int, logged map[string]llmapi.RequestRecord) {
	t.Helper()
	tenants := map[string]string{"secret-1": "acme/research/alpha", "secret-3": "globex/ops/web"}
	missing := 0
	for i, s := range sent {
		if s.id == "" {
			t.Fatalf("request %d (%d) had no X-Request-Id", i, s.status)
		}
		r, ok := logged[s.id]
		if !ok {
			missing++
			continue
		}
		model := s.model
		if s.status == 401 {
			model = "" // a request without a valid key is not read
		}
		if r.Status != s.status || r.Model != model || r.Tenant != tenants[s.key] {
			t.Errorf("request %d: logged status %d model %q tenant %q; the client saw %d for %q with %s", i, r.Status, r.Model, r.Tenant, s.status, s.model, s.key)
		}
		if s.status >= 400 && r.Error == "" {
			t.Errorf("request %d: a %d without its error code in the log: %+v", i, s.status, r)
		}
		if s.status == 200 && (r.Served != "sim-chat" || r.CompletionTokens == 0 || r.LatencyMS <= 0 || r.TTFTMS <= 0 || r.Replica == "") {
			t.Errorf("request %d: an answered request logged without its model, tokens, latency or replica: %+v", i, r)
		}
	}
	if missing > 0 || len(logged) < len(sent) || len(logged) > len(sent)+lost {
		t.Fatalf("the log holds %d records for %d requests answered (and %d tries a reload cut); %d answered requests are missing", len(logged), len(sent), lost, missing)
	}
	t.Logf("%d requests answered and logged once each; %d tries cut by a reload, retried", len(sent), lost)
}

// waitLogged waits until the log at base holds n records.
func waitLogged(t *testing.T, base string, n int) map[string]llmapi.RequestRecord {
	t.Helper()
	var got map[string]llmapi.RequestRecord
	waitFor(t, 60*time.Second, fmt.Sprintf("%d requests in the log", n), func() bool {
		got = readLog(t, base, "")
		return len(got) >= n
	})
	time.Sleep(300 * time.Millisecond) // a duplicate would come with the next batch
	return readLog(t, base, "")
}

func TestRequestLogEveryRequestOnceAcrossAReload(t *testing.T) {
	g := startQuotaGateway(t, quotaModels+requestLogTenants, "")
	admin := fmt.Sprintf("http://127.0.0.1:%d", g.admin)
	const n = 10000
	sent, lost := fire(t, []string{g.base}, n, 64, func() {
		g.reload(quotaModels+requestLogTenants+"\n\t\tmodel extra {\n\t\t\tengine sim\n\t\t}", "")
	})
	checkRecorded(t, sent, lost, waitLogged(t, admin, n))

	// What a user looks for: the failed requests of one key in the last
	// hour; a key's requests; a tenant's; one request by part of its id.
	failed := readLog(t, admin, "key=k1&status=error&since=1h")
	want := 0
	for _, s := range sent {
		if s.key == "secret-1" && s.status >= 400 {
			want++
		}
	}
	if len(failed) != want || want == 0 {
		t.Errorf("k1's failed requests in the last hour: %d in the log, the clients saw %d", len(failed), want)
	}
	if got := len(readLog(t, admin, "tenant=globex")); got != n*7/20 {
		t.Errorf("globex's requests: %d, want %d", got, n*7/20)
	}
	id := sent[n-1].id
	if got := readLog(t, admin, "q="+strings.ToUpper(id[len(id)-10:])); len(got) != 1 {
		t.Errorf("the request found by part of its id: %d records", len(got))
	}

	// Bodies: acme's are kept (the request as forwarded, the answer as
	// given), globex's are not.
	var acme, globex llmapi.RequestDetail
	for _, s := range sent {
		if s.status == 200 && s.key == "secret-1" && acme.ID == "" {
			getJSON(t, admin+"/llm/requests/"+s.id, &acme)
		}
		if s.status == 200 && s.key == "secret-3" && globex.ID == "" {
			getJSON(t, admin+"/llm/requests/"+s.id, &globex)
		}
	}
	if !acme.Bodies || !strings.Contains(acme.RequestBody, "capital of France") || !strings.Contains(acme.ResponseBody, "choices") {
		t.Errorf("acme's request kept without its bodies: %+v", acme)
	}
	if globex.Bodies || globex.RequestBody != "" || globex.ResponseBody != "" {
		t.Errorf("globex's request kept with bodies: %+v", globex)
	}
	resp, err := http.Get(admin + "/llm/requests/req_0000000000000000000000000000")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 404 || !strings.Contains(string(body), "not in the log") {
			t.Errorf("an unknown request: %d %s", resp.StatusCode, body)
		}
	}
	// The access log names the request id, the cost and the time to
	// first byte.
	if !strings.Contains(g.logs.String(), `"llm_request_id":"`+sent[n-1].id+`"`) || !strings.Contains(g.logs.String(), `"llm_ttft_ms":`) {
		t.Error("the access log lacks llm_request_id or llm_ttft_ms")
	}
}

func TestRequestLogTenantAdminSeesItsTenantOnly(t *testing.T) {
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}}
	cfg := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	storage file_system %s
	llm {
%s
%s
	}
}

:%d {
	route /v1/* {
		llm_quota
		llm_router
	}
	route /llm/* {
		llm_admin {
			token root %s admin
			token alpha-lead %s tenant_admin project acme/research/alpha
		}
	}
}
`, g.admin, filepath.Join(g.dir, "storage"), quotaModels, requestLogTenants, g.http, tenancy.HashKey("root-token"), tenancy.HashKey("lead-token"))
	if err := os.WriteFile(filepath.Join(g.dir, "Caddyfile"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start()
	sent, _ := fire(t, []string{g.base}, 200, 8, nil)
	waitLogged(t, fmt.Sprintf("http://127.0.0.1:%d", g.admin), 200)

	code, _, body := siteCall(t, g, "lead-token", "GET", "/llm/requests?limit=1000", "")
	var p llmapi.RequestPage
	if err := json.Unmarshal([]byte(body), &p); code != 200 || err != nil {
		t.Fatalf("the tenant admin's log: %d %s", code, body)
	}
	for _, r := range p.Data {
		if r.Tenant != "acme/research/alpha" {
			t.Fatalf("the tenant admin of acme/research/alpha sees a request of %q", r.Tenant)
		}
	}
	if len(p.Data) == 0 {
		t.Fatal("the tenant admin sees none of its requests")
	}
	// As an attacker: another tenant by filter, by a wider node, and one
	// of its requests by id.
	for _, q := range []string{"tenant=globex", "tenant=acme", "tenant=acme/research", "tenant=globex/ops/web&key=k3"} {
		if code, _, body := siteCall(t, g, "lead-token", "GET", "/llm/requests?"+q, ""); code != 403 || !strings.Contains(body, "outside") {
			t.Errorf("tenant admin asking %s: %d %s", q, code, body)
		}
	}
	for _, s := range sent {
		if s.key == "secret-3" && s.status == 200 {
			if code, _, body := siteCall(t, g, "lead-token", "GET", "/llm/requests/"+s.id, ""); code != 404 {
				t.Errorf("tenant admin reading globex's request %s: %d %s", s.id, code, body)
			}
			if code, _, _ := siteCall(t, g, "root-token", "GET", "/llm/requests/"+s.id, ""); code != 200 {
				t.Errorf("the admin reading a request: %d", code)
			}
			break
		}
	}
	if code, _, _ := siteCall(t, g, "", "GET", "/llm/requests", ""); code != 401 {
		t.Errorf("no token: %d", code)
	}
	if code, _, body := siteCall(t, g, "root-token", "GET", "/llm/requests?limit=0", ""); code != 400 || !strings.Contains(body, "limit") {
		t.Errorf("a bad limit: %d %s", code, body)
	}
}

func TestRequestLogRetentionHoldsItsBound(t *testing.T) {
	g := startQuotaGateway(t, quotaModels+requestLogOrgs+`
		request_log {
			max_records 150
		}`, "")
	admin := fmt.Sprintf("http://127.0.0.1:%d", g.admin)
	sent, _ := fire(t, []string{g.base}, 600, 16, nil)
	waitFor(t, 30*time.Second, "the newest request in the log", func() bool {
		return len(readLog(t, admin, "q="+sent[len(sent)-1].id)) == 1
	})
	time.Sleep(300 * time.Millisecond)
	if got := len(readLog(t, admin, "")); got != 150 {
		t.Fatalf("the log holds %d records, bound 150", got)
	}
	// Retention survives a restart: the file is read again.
	g.stop()
	g.start()
	if got := len(readLog(t, admin, "")); got != 150 {
		t.Fatalf("after a restart the log holds %d records", got)
	}
}

func TestRequestLogOneLogForTwoNodes(t *testing.T) {
	c := startCluster(t, 2, quotaModels+requestLogTenants)
	bases := []string{c.nodes["n1"].base, c.nodes["n2"].base}
	admin1 := fmt.Sprintf("http://127.0.0.1:%d", c.nodes["n1"].admin)
	admin2 := fmt.Sprintf("http://127.0.0.1:%d", c.nodes["n2"].admin)
	const n = 10000
	sent, lost := fire(t, bases, n, 64, func() { c.nodes["n2"].reload(c.blocks["n2"], "") })
	logged := waitLogged(t, admin1, n)
	checkRecorded(t, sent, lost, logged)
	nodes := map[string]int{}
	for _, r := range logged {
		nodes[r.Node]++
	}
	if nodes["n1"] < n/2 || nodes["n2"] < n/2 || nodes["n1"]+nodes["n2"] != len(logged) {
		t.Errorf("records by node: %v, want %d each", nodes, n/2)
	}
	if other := readLog(t, admin2, "node=n1"); len(other) != nodes["n1"] {
		t.Errorf("node n2 reads %d of n1's requests, want %d", len(other), nodes["n1"])
	}
}

func TestCtlRequestsFindsAndFollows(t *testing.T) {
	g := startQuotaGateway(t, quotaModels+requestLogTenants, "")
	admin := fmt.Sprintf("http://127.0.0.1:%d", g.admin)
	sent, _ := fire(t, []string{g.base}, 60, 4, nil)
	waitLogged(t, admin, 60)

	// The failed requests of one key in the last hour.
	out, err := ctlRun(t, g, "requests", "--key", "k1", "--status", "error", "--since", "1h")
	if err != nil {
		t.Fatalf("ctl requests: %v\n%s", err, out)
	}
	for _, s := range sent {
		in := strings.Contains(out, s.id)
		if want := s.key == "secret-1" && s.status >= 400; in != want {
			t.Errorf("request %s (%s, %d) listed: %v, want %v\n%s", s.id, s.key, s.status, in, want, out)
		}
	}
	if !strings.Contains(out, "404 model_not_found") || !strings.Contains(out, "403 model_not_allowed") {
		t.Errorf("the failures are listed without their codes:\n%s", out)
	}
	if out, err := ctlRun(t, g, "requests", "--status", "6xx"); err == nil || !strings.Contains(out, "status") {
		t.Errorf("a bad status: %v\n%s", err, out)
	}

	// --follow prints what comes, once each.
	var buf syncBuffer
	cmd := exec.Command(binary, "ctl", "--admin", fmt.Sprintf("127.0.0.1:%d", g.admin), "requests", "--follow", "--every", "200ms", "--limit", "1")
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// Its first page (the latest request) is out before the new ones are
	// sent: a follow that started after them would begin past them.
	waitFor(t, 30*time.Second, "ctl requests --follow's first page", func() bool { return strings.Contains(buf.String(), "req_") })
	more, _ := fire(t, []string{g.base}, 20, 2, nil)
	printed := func() bool {
		for _, s := range more {
			if !strings.Contains(buf.String(), s.id) {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(60 * time.Second); !printed(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("ctl requests --follow did not print the %d new requests in 60s; it printed:\n%s", len(more), buf.String())
		}
	}
	time.Sleep(600 * time.Millisecond)
	for _, s := range more {
		if n := strings.Count(buf.String(), s.id); n != 1 {
			t.Errorf("request %s printed %d times:\n%s", s.id, n, buf.String())
		}
	}
	// ctl requests show: one request with its bodies (acme keeps them).
	for _, s := range more {
		if s.key == "secret-1" && s.status == 200 {
			out, err := ctlRun(t, g, "requests", "show", s.id)
			if err != nil || !strings.Contains(out, "request body:") || !strings.Contains(out, "capital of France") {
				t.Errorf("ctl requests show: %v\n%s", err, out)
			}
			break
		}
	}
}

// TestRequestLogRedisAway: while the cluster's Redis does not answer, the
// nodes keep serving and their records wait; once it answers again every
// request is in the one log, once (a batch Redis carried out before its
// answer timed out is not added twice).
func TestRequestLogRedisAway(t *testing.T) {
	c := startCluster(t, 2, quotaModels+requestLogTenants)
	bases := []string{c.nodes["n1"].base, c.nodes["n2"].base}
	admin1 := fmt.Sprintf("http://127.0.0.1:%d", c.nodes["n1"].admin)
	before, _ := fire(t, bases, 400, 16, nil)
	waitLogged(t, admin1, 400)

	pid := c.redis.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	during, _ := fire(t, bases, 300, 8, nil)
	served := 0
	for _, s := range during {
		if s.status == 200 {
			served++
		}
	}
	if served == 0 {
		t.Fatal("no request was answered while Redis was away")
	}
	time.Sleep(4 * time.Second) // past the client's read timeout: writes failed and wait
	_ = syscall.Kill(pid, syscall.SIGCONT)
	stopped = false
	if !strings.Contains(c.nodes["n1"].logs.String()+c.nodes["n2"].logs.String(), "records wait in memory") {
		t.Error("no node's request log waited for Redis: the outage was not seen")
	}
	logged := waitLogged(t, admin1, 700)
	checkRecorded(t, append(before, during...), 0, logged)
}

// TestRequestLogToolCallsAndRedactedBodies: MCP tool calls are in the
// log with their tool; a tenant's kept bodies are the request as the
// guardrails redacted it, never the address the client sent.
func TestRequestLogToolCallsAndRedactedBodies(t *testing.T) {
	remote := startMCPUpstream(t, "remote")
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{})}
	t.Setenv("MCP_TEST_TOKEN", "s3cret-upstream")
	cfg := mcpConfig(g, remote, "")
	cfg = strings.Replace(cfg, "\t\truntime_hosts 127.0.0.1\n", "\t\truntime_hosts 127.0.0.1\n\t\trequest_log {\n\t\t\tbodies acme\n\t\t}\n"+guardModels+"\n", 1)
	cfg = strings.Replace(cfg, "\t\tllm_quota\n\t\tllm_router\n", "\t\tllm_quota\n"+guardBlock+"\n\t\tllm_router\n", 1)
	if err := os.WriteFile(filepath.Join(g.dir, "Caddyfile"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start()
	admin := fmt.Sprintf("http://127.0.0.1:%d", g.admin)

	s := mcpClient(t, g.base+"/mcp", "secret-2", false, nil)
	waitFor(t, 30*time.Second, "the local server's tools", func() bool { return slices.Contains(toolNames(t, s), "local__add") })
	if _, err := s.CallTool(bg, &mcp.CallToolParams{Name: "local__add", Arguments: map[string]any{"a": 2, "b": 3}}); err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	var p llmapi.RequestPage
	waitFor(t, 10*time.Second, "the tool call in the log", func() bool {
		getJSON(t, admin+"/llm/requests?api=mcp&key=k2", &p)
		return len(p.Data) > 0
	})
	if r := p.Data[0]; r.Tool != "local__add" || r.Tenant != "acme/research/alpha" || r.Status != 200 {
		t.Errorf("the tool call's record: %+v", r)
	}

	const email = "ana.lopez@example.com"
	code, id, body := chatAs(t, g, "secret-1", "echo", "Please write to "+email+" about the invoice.")
	if code != 200 || !strings.Contains(body, email) {
		t.Fatalf("the client's answer (the address restored): %d %s", code, body)
	}
	var d llmapi.RequestDetail
	waitFor(t, 10*time.Second, "the chat in the log", func() bool {
		resp, err := http.Get(admin + "/llm/requests/" + id)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&d) == nil
	})
	if !d.Bodies || !strings.Contains(d.RequestBody, "invoice") || !strings.Contains(d.ResponseBody, "invoice") {
		t.Fatalf("the kept bodies: %+v", d)
	}
	if strings.Contains(d.RequestBody, email) || strings.Contains(d.ResponseBody, email) || !strings.Contains(d.Guard, "pii/input:redacted") {
		t.Errorf("the log keeps the address the guardrails redacted (guard %q):\nrequest %s\nanswer %s", d.Guard, d.RequestBody, d.ResponseBody)
	}
}

// TestAdminSiteNewRoutesAsAttacker tries the admin routes this release
// adds with roles below the one each needs and with ids no request has.
func TestAdminSiteNewRoutesAsAttacker(t *testing.T) {
	g := adminSite(t)
	for _, c := range []struct {
		token, method, path string
		want                int
	}{
		{"watcher-token", "POST", "/llm/models/sim-chat/test", 403}, // probing is an operator's
		{"lead-token", "POST", "/llm/models/sim-chat/test", 403},
		{"lead-token", "GET", "/llm/traffic", 403}, // every tenant's traffic
		{"lead-token", "GET", "/llm/metrics", 403},
		{"watcher-token", "GET", "/llm/traffic", 200},
		{"root-token", "GET", "/llm/requests/" + strings.Repeat("a", 10000), 400},
		{"root-token", "GET", "/llm/requests/req_%2e%2e%2fnodes", 400},
		{"root-token", "GET", "/llm/requests/req_ffffffffffff0000000000000000", 404},
		{"root-token", "GET", "/llm/requests?before=../../etc", 400},
		{"lead-token", "GET", "/llm/requests/req_ffffffffffff0000000000000000", 404},
	} {
		code, _, body := siteCall(t, g, c.token, c.method, c.path, "")
		if code != c.want {
			t.Errorf("%s %s as %s: %d %s, want %d", c.method, c.path[:min(len(c.path), 60)], c.token, code, body, c.want)
		}
	}
}
