package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// redisServer is a real redis-server on a free loopback port.
type redisServer struct {
	t    *testing.T
	port int
	dir  string
	cmd  *exec.Cmd
}

func startRedis(t *testing.T) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is not installed; .ci/install installs it (apt-get install redis-server)")
	}
	r := &redisServer{t: t, port: freePort(t), dir: t.TempDir()}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *redisServer) url() string { return fmt.Sprintf("redis://127.0.0.1:%d", r.port) }

func (r *redisServer) start() {
	r.t.Helper()
	r.cmd = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", fmt.Sprint(r.port),
		"--save", "", "--appendonly", "no", "--dir", r.dir)
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	waitFor(r.t, 10*time.Second, "redis to listen", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", r.port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

func (r *redisServer) stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
		r.cmd = nil
	}
}

// tenancyBlock declares one organisation, team and project with keys k1 and
// k2 (secrets "secret-1" and "secret-2"), the given limits at each level.
func tenancyBlock(org, team, project, key string) string {
	return fmt.Sprintf(`
		org acme {
			%s
			team research {
				%s
				project alpha {
					%s
					key k1 %s {
						%s
					}
					key k2 %s
				}
			}
		}`, org, team, project, tenancy.HashKey("secret-1"), key, tenancy.HashKey("secret-2"))
}

const quotaModels = `
		model sim-chat {
			engine sim
			option max_tokens 10
		}
		model other {
			engine sim
			min 0
		}`

func keyClient(g *gateway, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(g.base+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

func chatErr(c openai.Client, model string, opts ...option.RequestOption) (*openai.ChatCompletion, *openai.Error) {
	resp, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	}, opts...)
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		return nil, apiErr
	}
	if err != nil {
		return nil, &openai.Error{StatusCode: -1, Message: err.Error()}
	}
	return resp, nil
}

// freshMinute waits, if needed, so that a test that counts per minute does
// not straddle two clock minutes.
func freshMinute(t *testing.T, need time.Duration) {
	if left := time.Until(time.Now().Truncate(time.Minute).Add(time.Minute)); left < need {
		t.Logf("waiting %s for a fresh minute", left.Round(time.Second))
		time.Sleep(left + 100*time.Millisecond)
	}
}

func TestQuotaAuthAndModels(t *testing.T) {
	g := startQuotaGateway(t, quotaModels+tenancyBlock("", "", "models sim-*", ""), "")
	for _, tc := range []struct{ name, key, code string }{
		{"missing key", "", "invalid_api_key"},
		{"unknown key", "secret-3", "invalid_api_key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, e := chatErr(keyClient(g, tc.key), "sim-chat")
			if e == nil || e.StatusCode != 401 || e.Code != tc.code {
				t.Fatalf("got %+v, want 401 %s", e, tc.code)
			}
		})
	}
	if _, e := chatErr(keyClient(g, "secret-1"), "sim-chat"); e != nil {
		t.Fatalf("a valid key was refused: %v", e)
	}
	_, e := chatErr(keyClient(g, "secret-1"), "other")
	if e == nil || e.StatusCode != 403 || e.Code != "model_not_allowed" || !strings.Contains(e.Message, `"other"`) {
		t.Fatalf("a model outside the glob: got %+v, want 403 model_not_allowed", e)
	}
	c := keyClient(g, "secret-1")
	page, err := c.Models.List(bg)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != "sim-chat" {
		t.Errorf("/v1/models lists %+v, want only sim-chat", page.Data)
	}
	waitFor(t, 5*time.Second, "the key id in the access log", func() bool {
		return strings.Contains(g.logs.String(), `"llm_key":"k1"`)
	})
	if strings.Contains(g.logs.String(), "secret-1") {
		t.Error("a key's secret appears in the logs")
	}
}

func TestQuotaCountersSurviveReload(t *testing.T) {
	freshMinute(t, 20*time.Second)
	cfg := quotaModels + tenancyBlock("", "", "requests_per_minute 2", "")
	g := startQuotaGateway(t, cfg, "")
	c := keyClient(g, "secret-1")
	for range 2 {
		if _, e := chatErr(c, "sim-chat"); e != nil {
			t.Fatal(e)
		}
	}
	g.reload(cfg, "")
	if _, e := chatErr(c, "sim-chat"); e == nil || e.StatusCode != 429 {
		t.Errorf("after a reload the counter restarted: got %+v, want 429", e)
	}
	var info llmapi.KeyInfo
	g.adminGet("/llm/keys/k1", &info)
	if info.Effective == nil || info.Effective.RequestsPerMinute != 2 || len(info.Levels) != 4 {
		t.Errorf("the key's effective policy: %+v", info)
	}
}

func TestQuotaInheritanceAndHeaders(t *testing.T) {
	freshMinute(t, 20*time.Second)
	// The team allows 3 requests a minute; the project asks for 10 and
	// gets 3; the key's own token limit shows in the headers.
	g := startQuotaGateway(t, quotaModels+tenancyBlock("", "requests_per_minute 3", "requests_per_minute 10", "tokens_per_minute 100000"), "rate_limit_headers always")
	c := keyClient(g, "secret-1")
	var last *http.Response
	for i := range 3 {
		_, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{Model: "sim-chat",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}, option.WithResponseInto(&last))
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	h := last.Header
	if h.Get("X-Ratelimit-Limit-Requests") != "3" || h.Get("X-Ratelimit-Remaining-Requests") != "0" ||
		h.Get("X-Ratelimit-Limit-Tokens") != "100000" || h.Get("X-Ratelimit-Reset-Requests") == "" {
		t.Errorf("rate limit headers: %v", h)
	}
	// k2 shares the team's counter.
	_, e := chatErr(keyClient(g, "secret-2"), "sim-chat")
	if e == nil || e.StatusCode != 429 || e.Code != "rate_limit_exceeded" {
		t.Fatalf("4th request: got %+v, want 429", e)
	}
	if !strings.Contains(e.Message, "team acme/research") || !strings.Contains(e.Message, "3 requests per minute") {
		t.Errorf("message does not name the limit: %q", e.Message)
	}
	if ra := e.Response.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("Retry-After: %q", ra)
	}
}

// By default only a 429 shows the limits.
func TestQuotaRateLimitHeadersOnlyWhenRefused(t *testing.T) {
	freshMinute(t, 20*time.Second)
	g := startQuotaGateway(t, quotaModels+tenancyBlock("", "", "requests_per_minute 1", ""), "")
	c := keyClient(g, "secret-1")
	var first *http.Response
	if _, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{Model: "sim-chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}, option.WithResponseInto(&first)); err != nil {
		t.Fatal(err)
	}
	for name := range first.Header {
		if strings.HasPrefix(name, "X-Ratelimit-") {
			t.Errorf("an admitted answer carries %s: %v", name, first.Header)
		}
	}
	_, e := chatErr(c, "sim-chat")
	if e == nil || e.StatusCode != 429 {
		t.Fatalf("2nd request: got %+v, want 429", e)
	}
	if h := e.Response.Header; h.Get("X-Ratelimit-Limit-Requests") != "1" || h.Get("X-Ratelimit-Remaining-Requests") != "0" {
		t.Errorf("the 429's rate limit headers: %v", h)
	}
}

func TestQuotaBudgetTripsOnSettledCost(t *testing.T) {
	// Each answer is 10 output tokens at 1 per token: 10 a request. With a
	// budget of 25 the third request is admitted (20 spent < 25) and the
	// fourth is refused: the reservation never trips the budget early.
	models := strings.Replace(quotaModels, "option max_tokens 10", "option max_tokens 10\n\t\t\tprice 0 1000000", 1)
	g := startQuotaGateway(t, models+tenancyBlock("budget 25 month", "", "", ""), "")
	c := keyClient(g, "secret-1")
	for i := range 3 {
		if _, e := chatErr(c, "sim-chat"); e != nil {
			t.Fatalf("request %d: %v", i+1, e)
		}
	}
	_, e := chatErr(c, "sim-chat")
	if e == nil || e.StatusCode != 429 || e.Code != "insufficient_quota" || !strings.Contains(e.Message, "organisation acme") {
		t.Fatalf("after the budget: got %+v, want 429 insufficient_quota naming the organisation", e)
	}
	var u struct {
		Total llmapi.Usage `json:"total"`
	}
	g.adminGet("/llm/usage?org=acme", &u)
	if u.Total.Requests != 3 || u.Total.OutputTokens != 30 || u.Total.CostMicros != 30_000_000 {
		t.Errorf("usage: got %+v, want 3 requests, 30 output tokens, cost 30", u.Total)
	}
	code, metrics := adminDo(t, g, "GET", "/metrics", "")
	labels := `{key="k1",model="sim-chat",org="acme",project="acme/research/alpha",team="acme/research"}`
	for _, want := range []string{
		"llmgw_usage_requests_total" + labels + " 3",
		"llmgw_usage_cost_total" + labels + " 30",
		`llmgw_usage_tokens_total{direction="output",key="k1",model="sim-chat",org="acme",project="acme/research/alpha",team="acme/research"} 30`,
		`llmgw_quota_rejections_total{level="organisation",limit="budget"} 1`,
	} {
		if code != 200 || !strings.Contains(string(metrics), want) {
			t.Errorf("metrics (%d) lack %s", code, want)
		}
	}
}

func adminDo(t *testing.T, g *gateway, method, path, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d%s", g.admin, path), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Llmgw-Actor", "tests")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes()
}

func TestQuotaRuntimeKeys(t *testing.T) {
	g := startQuotaGateway(t, quotaModels+tenancyBlock("", "", "", ""), "")
	code, body := adminDo(t, g, "POST", "/llm/keys", `{"project":"acme/research/alpha","id":"ci"}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	var created llmapi.KeyInfo
	_ = json.Unmarshal(body, &created)
	if !strings.HasPrefix(created.Secret, tenancy.SecretPrefix) {
		t.Fatalf("no secret in %s", body)
	}
	if _, e := chatErr(keyClient(g, created.Secret), "sim-chat"); e != nil {
		t.Fatalf("a new key does not work at once: %v", e)
	}
	if code, body := adminDo(t, g, "POST", "/llm/keys", `{"project":"acme/nope/alpha"}`); code != 400 || !strings.Contains(string(body), "not declared") {
		t.Errorf("unknown project: %d %s", code, body)
	}
	if code, _ := adminDo(t, g, "DELETE", "/llm/keys/k1", ""); code != 409 {
		t.Errorf("revoking a config key: got %d, want 409", code)
	}
	var list []llmapi.KeyInfo
	g.adminGet("/llm/keys", &list)
	if len(list) != 3 || strings.Contains(fmt.Sprint(list), created.Secret) {
		t.Errorf("key list: %+v", list)
	}

	// It survives a restart.
	g.stop()
	g.start()
	if _, e := chatErr(keyClient(g, created.Secret), "sim-chat"); e != nil {
		t.Fatalf("the key does not survive a restart: %v", e)
	}

	// Rotation: the old secret stops, the new one works.
	code, body = adminDo(t, g, "POST", "/llm/keys/ci/rotate", "")
	var rotated llmapi.KeyInfo
	_ = json.Unmarshal(body, &rotated)
	if code != 200 || rotated.Secret == "" || rotated.Secret == created.Secret {
		t.Fatalf("rotate: %d %s", code, body)
	}
	if _, e := chatErr(keyClient(g, created.Secret), "sim-chat"); e == nil || e.StatusCode != 401 {
		t.Errorf("the old secret still works after rotation: %+v", e)
	}
	if _, e := chatErr(keyClient(g, rotated.Secret), "sim-chat"); e != nil {
		t.Errorf("the rotated secret does not work: %v", e)
	}

	// Revocation.
	if code, _ := adminDo(t, g, "DELETE", "/llm/keys/ci", ""); code != 204 {
		t.Fatalf("revoke: %d", code)
	}
	if _, e := chatErr(keyClient(g, rotated.Secret), "sim-chat"); e == nil || e.StatusCode != 401 {
		t.Errorf("a revoked key still works: %+v", e)
	}
	var info llmapi.KeyInfo
	g.adminGet("/llm/keys/ci", &info)
	if info.Revoked == nil {
		t.Errorf("the key is not shown as revoked: %+v", info)
	}
}

func TestQuotaExactAcrossInstances(t *testing.T) {
	redis := startRedis(t)
	freshMinute(t, 30*time.Second)
	quota := "\t\t\tstore " + redis.url()
	g1 := startQuotaGateway(t, quotaModels+tenancyBlock("", "", "requests_per_minute 7", ""), quota)
	g2 := startQuotaGateway(t, quotaModels+tenancyBlock("", "", "requests_per_minute 7", ""), quota)
	var (
		mu       sync.Mutex
		ok, deny int
		wg       sync.WaitGroup
	)
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := g1
			if i%2 == 1 {
				g = g2
			}
			_, e := chatErr(keyClient(g, "secret-1"), "sim-chat")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case e == nil:
				ok++
			case e.StatusCode == 429:
				deny++
			default:
				t.Errorf("unexpected error: %+v", e)
			}
		}()
	}
	wg.Wait()
	if ok != 7 || deny != 17 {
		t.Errorf("a burst across two instances admitted %d and refused %d, want exactly 7 and 17", ok, deny)
	}
}

func TestQuotaTokensSettleStreamedUsage(t *testing.T) {
	redis := startRedis(t)
	freshMinute(t, 30*time.Second)
	quota := "\t\t\tstore " + redis.url()
	g1 := startQuotaGateway(t, quotaModels+tenancyBlock("", "", "tokens_per_minute 100", ""), quota)
	g2 := startQuotaGateway(t, quotaModels+tenancyBlock("", "", "tokens_per_minute 100", ""), quota)
	// Each streamed answer reserves its prompt estimate plus max_tokens 10
	// and settles at what the stream's usage says.
	body := `{"model":"sim-chat","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	var used int64
	admitted := 0
	for i := 0; i < 20; i++ {
		g := []*gateway{g1, g2}[i%2]
		req, _ := http.NewRequest("POST", g.base+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer secret-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == 429 {
			resp.Body.Close()
			break
		}
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		// Like an SSE client, stop at [DONE] and go on at once: the usage
		// must be settled by then.
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() && sc.Text() != "data: [DONE]" {
		}
		resp.Body.Close()
		admitted++
		used += 4 + 10 // the sim counts 1 word + 3 per message, and 10 tokens
	}
	// Each request reserves 19 (9 for its 33-byte messages, 10 for
	// max_tokens) and settles at 14. With settlement, the 6th request is
	// admitted (5*14 + 19 = 89 <= 100) and the 7th is not (6*14 + 19 > 100).
	// Without settlement only 5 would be (5*19 + 19 > 100); without
	// reservations, 7.
	if admitted != 6 {
		t.Errorf("admitted %d streamed requests across two instances, want 6 (settled use %d of 100)", admitted, used)
	}
	var u struct {
		Total llmapi.Usage `json:"total"`
	}
	g1.adminGet("/llm/usage?key=k1", &u)
	if u.Total.Requests != 6 || u.Total.InputTokens != 24 || u.Total.OutputTokens != 60 {
		t.Errorf("usage in redis: %+v, want 6 requests, 24 input and 60 output tokens", u.Total)
	}
}

func TestQuotaRedisOutage(t *testing.T) {
	redis := startRedis(t)
	deny := startQuotaGateway(t, quotaModels+tenancyBlock("", "", "requests_per_minute 1000", ""), "\t\t\tstore "+redis.url())
	allow := startQuotaGateway(t, quotaModels+tenancyBlock("", "", "requests_per_minute 1000", ""), "\t\t\tstore "+redis.url()+"\n\t\t\ton_store_error allow")
	for _, g := range []*gateway{deny, allow} {
		if _, e := chatErr(keyClient(g, "secret-1"), "sim-chat"); e != nil {
			t.Fatalf("before the outage: %v", e)
		}
	}
	redis.stop()
	for range 3 {
		_, e := chatErr(keyClient(deny, "secret-1"), "sim-chat")
		if e == nil || e.StatusCode != 503 || e.Code != "quota_store_unavailable" {
			t.Fatalf("deny policy during the outage: got %+v, want 503 quota_store_unavailable", e)
		}
		if _, e := chatErr(keyClient(allow, "secret-1"), "sim-chat"); e != nil {
			t.Fatalf("allow policy during the outage: %v", e)
		}
	}
	if n := strings.Count(deny.logs.String(), "quota store unreachable"); n != 1 {
		t.Errorf("the outage was logged %d times, want once", n)
	}
	redis.start()
	waitFor(t, 10*time.Second, "counting to resume in redis", func() bool {
		_, e := chatErr(keyClient(deny, "secret-1"), "sim-chat")
		return e == nil
	})
	// The log reaches the test through a pipe, maybe after the answer.
	waitFor(t, 5*time.Second, "the end of the outage to be logged", func() bool {
		return strings.Contains(deny.logs.String(), "quota store reachable again")
	})
	// Counting resumed in redis: the other instance sees this one's request.
	var u struct {
		Total llmapi.Usage `json:"total"`
	}
	allow.adminGet("/llm/usage?key=k1", &u)
	if u.Total.Requests < 1 {
		t.Errorf("no usage recorded in redis after it returned: %+v", u.Total)
	}
}

func TestQuotaSettlesCutStreams(t *testing.T) {
	g := startQuotaGateway(t, `
		model slow {
			engine sim
			option tokens_per_second 20
		}`+tenancyBlock("", "", "tokens_per_minute 100000", ""), "")
	req, _ := http.NewRequest("POST", g.base+"/v1/chat/completions", strings.NewReader(
		`{"model":"slow","stream":true,"max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer secret-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	events := 0
	for events < 5 { // the role event and four tokens
		if _, err := resp.Body.Read(buf); err != nil {
			t.Fatal(err)
		}
		if buf[0] == '\n' {
			events++ // two newlines per event
		}
		if events == 10 {
			break
		}
	}
	resp.Body.Close()
	var u struct {
		Total llmapi.Usage `json:"total"`
	}
	waitFor(t, 5*time.Second, "the cut stream to be settled", func() bool {
		g.adminGet("/llm/usage?key=k1", &u)
		return u.Total.Requests == 1
	})
	if u.Total.OutputTokens < 2 || u.Total.OutputTokens > 100 || u.Total.InputTokens == 0 {
		t.Errorf("a stream cut after a few tokens settled as %+v; want the tokens it streamed, not its 1000-token reservation", u.Total)
	}
}

func TestQuotaPassesBadRequestsThrough(t *testing.T) {
	g := startQuotaGateway(t, quotaModels+tenancyBlock("", "", "", ""), "")
	for _, tc := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"messages":[{"role":"user","content":"x"}]}`, 400, "missing_model"},
		{`{"model":"sim-caht","messages":[{"role":"user","content":"x"}]}`, 404, "model_not_found"},
	} {
		req, _ := http.NewRequest("POST", g.base+"/v1/chat/completions", strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer secret-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(b.String(), `"code":"`+tc.code+`"`) {
			t.Errorf("%s: got %d %s, want %d %s", tc.body, resp.StatusCode, b.String(), tc.status, tc.code)
		}
	}
}

func TestQuotaFallbacksStayWithinAllowedModels(t *testing.T) {
	models := `
		model primary {
			engine sim
			option fail_status 500
			fallback backup
		}
		model backup {
			engine sim
		}`
	g := startQuotaGateway(t, models+tenancyBlock("", "", "models primary", "")+
		fmt.Sprintf(`
		org open {
			team t {
				project p {
					key k3 %s
				}
			}
		}`, tenancy.HashKey("secret-3")), "")
	// A key that may use only primary gets primary's error, not backup's answer.
	if _, e := chatErr(keyClient(g, "secret-1"), "primary"); e == nil || e.StatusCode != 500 {
		t.Errorf("restricted key: got %+v, want primary's 500", e)
	}
	// A key that may use every model falls back.
	resp, e := chatErr(keyClient(g, "secret-3"), "primary")
	if e != nil || resp.SystemFingerprint != "llmgw-sim:backup" {
		t.Errorf("open key: got %+v %v, want the fallback's answer", resp, e)
	}
}

// A request for n choices reserves n times its completion: with 300
// tokens a minute, n=4 of at most 100 tokens is refused, naming the
// reservation, and n=1 fits.
func TestQuotaEstimateCountsChoices(t *testing.T) {
	freshMinute(t, 20*time.Second)
	g := startQuotaGateway(t, quotaModels+tenancyBlock("", "", "", "tokens_per_minute 300"), "")
	c := keyClient(g, "secret-1")
	ask := func(n int64) error {
		_, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{Model: "sim-chat",
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			N:         openai.Int(n),
			MaxTokens: openai.Int(100)})
		return err
	}
	var e *openai.Error
	if err := ask(4); !errors.As(err, &e) || e.StatusCode != 429 || !strings.Contains(e.Message, "this request reserves 40") {
		t.Fatalf("n=4, max_tokens=100 against 300 tokens a minute: got %v, want 429 naming a reservation of 400 and more", err)
	}
	if err := ask(1); err != nil {
		t.Fatalf("n=1, max_tokens=100 against 300 tokens a minute: %v", err)
	}
}

// TestUsageCountedOnce: two llm_quota handlers (two routes, as two sites
// have) count into one store, and GET /llm/usage reads it once.
func TestUsageCountedOnce(t *testing.T) {
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{})}
	none := ""
	g.quota = &none
	g.routes = "\troute /other/v1/* {\n\t\tllm_quota\n\t\trespond 204\n\t}"
	g.writeConfig(quotaModels+tenancyBlock("", "", "", ""), "")
	g.start()
	c := keyClient(g, "secret-1")
	for i := range 2 {
		if _, e := chatErr(c, "sim-chat"); e != nil {
			t.Fatalf("request %d: %v", i+1, e)
		}
	}
	var u struct {
		Total llmapi.Usage `json:"total"`
	}
	g.adminGet("/llm/usage?key=k1", &u)
	if u.Total.Requests != 2 {
		t.Errorf("usage of two requests with two llm_quota handlers: got %d requests, want 2", u.Total.Requests)
	}
}
