package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// The files of deploy/, from this package's directory.
const (
	dashboardFile = "../../deploy/grafana/llmgw-dashboard.json"
	alertsFile    = "../../deploy/prometheus/llmgw-alerts.yml"
)

// emptyOnFreshGateway are the dashboard's queries that may answer
// nothing in this test, and why.
var emptyOnFreshGateway = map[string]string{
	"llmgw_mirror_transfer_bytes_total": "the mirror moved no bytes: sim models have no weights to fetch or copy",
}

// TestPrometheusDashboardAndAlerts scrapes a gateway with a real
// Prometheus, through GET /llm/metrics with a viewer's token, and runs
// every query of the Grafana dashboard against it: each must be valid
// PromQL and find data. The alert rules load and evaluate without error.
func TestPrometheusDashboardAndAlerts(t *testing.T) {
	bin := prometheusBin(t)
	g := observedGateway(t)
	prom := startPrometheus(t, bin, g.http)
	waitFor(t, 60*time.Second, "Prometheus to scrape llmgw", func() bool {
		return len(prom.query(t, `up{job="llmgw"} == 1`)) == 1
	})
	makeTraffic(t, g)
	waitFor(t, 60*time.Second, "Prometheus to see the traffic in three scrapes", func() bool {
		return len(prom.query(t, `count_over_time(llmgw_requests_total{model="broken",status="500"}[1m]) >= 3`)) == 1 &&
			len(prom.query(t, `llmgw_kb_ingested_files_total{status="completed"} >= 1`)) == 1
	})
	queries := dashboardQueries(t)
	if len(queries) < 30 {
		t.Fatalf("found %d queries in %s, want the dashboard's 30 or more", len(queries), dashboardFile)
	}
	for _, q := range queries {
		expr := strings.NewReplacer("${model}", ".*", "$model", ".*", "$__rate_interval", "1m").Replace(q.expr)
		res, err := prom.tryQuery(expr)
		switch {
		case err != nil:
			t.Errorf("panel %q: %s: %v", q.panel, expr, err)
		case len(res) == 0 && emptyReason(expr) == "":
			t.Errorf("panel %q: %s: no data; the gateway served traffic that it counts", q.panel, expr)
		}
	}
	if got := prom.labelValues(t, "model", "llmgw_requests_total"); !strings.Contains(got, `"broken"`) || !strings.Contains(got, `"sim-chat"`) {
		t.Errorf("the model variable's label_values(llmgw_requests_total, model): got %s, want broken and sim-chat", got)
	}
	checkRulesLoaded(t, prom)
	checkErrorAlertPending(t, g, prom)
}

// checkErrorAlertPending fails the broken model once more, now that its
// 5xx series has a sample, and waits for LlmgwHighErrorRate to be
// pending for it (it fires after 10 minutes): the rule matches what the
// gateway reports.
func checkErrorAlertPending(t *testing.T, g *gateway, prom *promServer) {
	t.Helper()
	if _, e := chatErr(keyClient(g, "secret-1"), "broken"); e == nil || e.StatusCode != 500 {
		t.Fatalf("broken: got %+v, want 500", e)
	}
	waitFor(t, 30*time.Second, "LlmgwHighErrorRate to be pending for the broken model", func() bool {
		r := prom.alertRules(t)["LlmgwHighErrorRate"]
		for _, a := range r.Alerts {
			if a.Labels["model"] == "broken" && (a.State == "pending" || a.State == "firing") {
				return true
			}
		}
		return false
	})
	if res := prom.query(t, `llmgw_requests_total{model="sim-chat",status="200"} >= 3`); len(res) != 1 {
		t.Errorf("sim-chat's answers: got %s, want one series at 3 or more", res)
	}
}

func emptyReason(expr string) string {
	for metric, why := range emptyOnFreshGateway {
		if strings.Contains(expr, metric) {
			return why
		}
	}
	return ""
}

func prometheusBin(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("prometheus is not installed (Debian package prometheus); .ci/install installs it")
		}
		t.Skip("prometheus is not installed (apt-get install prometheus)")
	}
	return bin
}

// observedGateway runs llmgw with every module that has metrics: quota
// (one key limited to a request a minute), knowledge bases, guardrails,
// the cache, the router with a model that fails, and a mirror of two
// stores; its metrics on the site behind llm_admin.
func observedGateway(t *testing.T) *gateway {
	t.Helper()
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}}
	cfg := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	storage file_system %s
	llm {
		mirror {
			store a dir %s
			store b dir %s
			sync_interval 1s
		}
		model sim-chat {
			engine sim
			option max_tokens 8
			price 0.15 0.60
		}
		model broken {
			engine sim
			option fail_status 500
		}
		org acme {
			team research {
				project alpha {
					key k1 %s
				}
				project beta {
					requests_per_minute 1
					key k2 %s
				}
			}
		}
	}
}

:%d {
	route /v1/* {
		llm_quota
		llm_kb
		llm_guardrails {
			pii {
				email
			}
		}
		llm_cache
		llm_router
	}
	route /llm/* {
		llm_admin {
			token watcher %s viewer
		}
	}
}
`, g.admin, filepath.Join(g.dir, "storage"), t.TempDir(), t.TempDir(), tenancy.HashKey("secret-1"), tenancy.HashKey("secret-2"),
		g.http, tenancy.HashKey("watcher-token"))
	if err := os.WriteFile(filepath.Join(g.dir, "Caddyfile"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start()
	return g
}

// makeTraffic sends what every panel counts: answers, a cache hit, a
// stream, a failing model, a refused key, a guardrail finding, a
// knowledge-base file and a search.
func makeTraffic(t *testing.T, g *gateway) {
	t.Helper()
	c := keyClient(g, "secret-1")
	chatWith(t, c, "sim-chat", "mail me at ann@example.com")
	chatWith(t, c, "sim-chat", "mail me at ann@example.com") // a cache hit
	for _, tc := range []struct {
		key, body string
		want      int
	}{
		{"secret-1", `{"model":"sim-chat","stream":true,"messages":[{"role":"user","content":"stream me"}]}`, 200},
		{"secret-1", `{"model":"broken","messages":[{"role":"user","content":"x"}]}`, 500},
		{"secret-1", `{"model":"sim-caht","messages":[{"role":"user","content":"x"}]}`, 404},
		{"secret-2", `{"model":"sim-chat","messages":[{"role":"user","content":"one"}]}`, 200},
		{"secret-2", `{"model":"sim-chat","messages":[{"role":"user","content":"two"}]}`, 429},
	} {
		req, _ := http.NewRequest("POST", g.base+"/v1/chat/completions", strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer "+tc.key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Fatalf("%s: got %d, want %d", tc.body, resp.StatusCode, tc.want)
		}
	}
	f, err := c.Files.New(bg, openai.FileNewParams{File: openai.File(strings.NewReader("Laptops are returned to IT on the last day."), "it.txt", "text/plain"),
		Purpose: openai.FilePurposeAssistants})
	if err != nil {
		t.Fatalf("uploading a file: %v", err)
	}
	vs, err := c.VectorStores.New(bg, openai.VectorStoreNewParams{Name: openai.String("handbook"), FileIDs: []string{f.ID}})
	if err != nil {
		t.Fatalf("creating a vector store: %v", err)
	}
	waitFor(t, 30*time.Second, "the file to be ingested", func() bool {
		vf, err := c.VectorStores.Files.Get(bg, vs.ID, f.ID)
		return err == nil && vf.Status == openai.VectorStoreFileStatusCompleted
	})
	kbSearch(t, c, vs.ID, "laptop", nil)
}

// promServer is a Prometheus started for one test.
type promServer struct {
	base string
}

// startPrometheus runs prometheus (its config and storage in a temp dir,
// a free loopback port) scraping the gateway's site every second at
// /llm/metrics with the viewer's token, the alert rules loaded.
func startPrometheus(t *testing.T, bin string, site int) *promServer {
	t.Helper()
	rules, err := filepath.Abs(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	dir, port := t.TempDir(), freePort(t)
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
  - job_name: llmgw
    metrics_path: /llm/metrics
    authorization:
      credentials: watcher-token
    static_configs:
      - targets: ["127.0.0.1:%d"]
`, rules, site)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port), "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("prometheus logs:\n%s", logs.String())
		}
	})
	p := &promServer{base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	waitFor(t, 30*time.Second, "prometheus to be ready", func() bool {
		select {
		case <-exited:
			t.Fatalf("prometheus exited:\n%s", logs.String())
		default:
		}
		resp, err := http.Get(p.base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return p
}

// promAnswer is the envelope of Prometheus' HTTP API.
type promAnswer struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
}

func (p *promServer) get(path string, params url.Values) (json.RawMessage, error) {
	resp, err := http.Get(p.base + path + "?" + params.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var a promAnswer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		return nil, fmt.Errorf("%s: %d, not the API's JSON: %w", path, resp.StatusCode, err)
	}
	if a.Status != "success" {
		return nil, fmt.Errorf("%s: %s: %s", path, a.ErrorType, a.Error)
	}
	return a.Data, nil
}

// tryQuery runs an instant query and returns its result's series.
func (p *promServer) tryQuery(expr string) ([]json.RawMessage, error) {
	data, err := p.get("/api/v1/query", url.Values{"query": {expr}})
	if err != nil {
		return nil, err
	}
	var v struct {
		ResultType string            `json:"resultType"`
		Result     []json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	return v.Result, nil
}

func (p *promServer) query(t *testing.T, expr string) []json.RawMessage {
	t.Helper()
	res, err := p.tryQuery(expr)
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return res
}

func (p *promServer) labelValues(t *testing.T, label, match string) string {
	t.Helper()
	data, err := p.get("/api/v1/label/"+label+"/values", url.Values{"match[]": {match}})
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// panelQuery is one target of a dashboard panel.
type panelQuery struct{ panel, expr string }

// dashboardQueries reads every target's expression from the dashboard,
// in rows too.
func dashboardQueries(t *testing.T) []panelQuery {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string  `json:"title"`
		Panels  []panel `json:"panels"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	}
	var d struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var out []panelQuery
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				out = append(out, panelQuery{p.Title, tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// checkRulesLoaded asserts that Prometheus loaded every alert of the
// rules file and evaluated each without error.
func checkRulesLoaded(t *testing.T, p *promServer) {
	t.Helper()
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`(?m)^\s*- alert: (\S+)`).FindAllStringSubmatch(string(raw), -1)
	if len(want) == 0 {
		t.Fatalf("no alerts in %s", alertsFile)
	}
	var got map[string]promRule
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		got = p.alertRules(t)
		evaluated := true
		for _, w := range want {
			evaluated = evaluated && got[w[1]].Health != "" && got[w[1]].Health != "unknown"
		}
		if evaluated || time.Now().After(deadline) {
			break
		}
	}
	if len(got) != len(want) {
		t.Errorf("Prometheus loaded %d alert rules, the file has %d", len(got), len(want))
	}
	for _, w := range want {
		if r := got[w[1]]; r.Health != "ok" {
			t.Errorf("alert %s: health %q (%s), want ok", w[1], r.Health, r.LastError)
		}
	}
}

// promRule is an alert rule as /api/v1/rules reports it.
type promRule struct {
	Name, State, Health, LastError string
	Alerts                         []struct {
		Labels map[string]string
		State  string
	}
}

// alertRules are the alert rules Prometheus loaded, by name.
func (p *promServer) alertRules(t *testing.T) map[string]promRule {
	t.Helper()
	data, err := p.get("/api/v1/rules", url.Values{"type": {"alert"}})
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Groups []struct {
			Rules []promRule `json:"rules"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	out := map[string]promRule{}
	for _, g := range v.Groups {
		for _, r := range g.Rules {
			out[r.Name] = r
		}
	}
	return out
}
