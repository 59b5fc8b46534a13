package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openai/openai-go/v3"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/llmmcp"
)

var (
	benchOnce sync.Once
	benchBin  string
	benchErr  error
)

// mcpServeBinary builds llmgw-bench, whose mcp-serve is the upstream MCP
// server the tests put behind llmgw, into this test process's own
// directory, or takes the one in $LLMGW_TEST_BIN_DIR.
func mcpServeBinary(t *testing.T) string {
	t.Helper()
	if pre := os.Getenv("LLMGW_TEST_BIN_DIR"); pre != "" {
		return filepath.Join(pre, "llmgw-bench")
	}
	benchOnce.Do(func() {
		benchBin = filepath.Join(binDir, "llmgw-bench")
		out, err := exec.Command("go", "build", "-o", benchBin, "../llmgw-bench").CombinedOutput()
		if err != nil {
			benchErr = fmt.Errorf("building llmgw-bench: %v\n%s", err, out)
		}
	})
	if benchErr != nil {
		t.Fatal(benchErr)
	}
	return benchBin
}

// startMCPUpstream runs mcp-serve over Streamable HTTP on a free port.
func startMCPUpstream(t *testing.T, name string) string {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(mcpServeBinary(t), "mcp-serve", "-listen", fmt.Sprintf("127.0.0.1:%d", port), "-name", name)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	waitFor(t, 10*time.Second, "mcp-serve to listen", func() bool {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	return url
}

// mcpConfig is a Caddyfile with the sim model, keys k1 (remote.*,
// local.*, extra.*: globs written with the separator of earlier llmgw)
// and k2 (remote__echo, remote.whoami, local.add), and llm_mcp at /mcp in
// front of a remote server (url) and a local stdio one. Servers added at
// run time may reach 127.0.0.1, where the test's upstreams listen.
func mcpConfig(g *gateway, remote, extraSite string) string {
	return fmt.Sprintf(`{
	admin 127.0.0.1:%d
	storage file_system %s
	log {
		level DEBUG
	}
	llm {
		runtime_hosts 127.0.0.1
		model sim-chat {
			engine sim
			option max_tokens 10
		}
		org acme {
			team research {
				project alpha {
					key k1 %s {
						tools remote.* local.* extra.*
					}
					key k2 %s {
						tools remote__echo remote.whoami local.add
					}
				}
			}
		}
	}
}

:%d {
	log
	%s
	route /v1/* {
		llm_quota
		llm_router
	}
	route /mcp* {
		llm_quota
		llm_mcp {
			server remote {
				url %s
				header Authorization "Bearer upstream-{env.MCP_TEST_TOKEN}"
				timeout 2s
				tenant key k1 {
					header Authorization "Bearer k1-own-{env.MCP_TEST_TOKEN}"
				}
			}
			server local {
				command %s mcp-serve -stdio -name local -crash-after 4
			}
		}
	}
}
`, g.admin, filepath.Join(g.dir, "storage"), tenancy.HashKey("secret-1"), tenancy.HashKey("secret-2"), g.http, extraSite, remote, mcpServeBinary(g.t))
}

// keyHeader sends an llmgw key with every request of an MCP client.
type keyHeader struct{ key string }

func (k keyHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return http.DefaultTransport.RoundTrip(r)
}

// progressLog collects the progress notifications a client receives.
type progressLog struct {
	mu  sync.Mutex
	got []*mcp.ProgressNotificationParams
}

func mcpClient(t *testing.T, url, key string, sse bool, progress *progressLog) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if progress != nil {
		opts.ProgressNotificationHandler = func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progress.mu.Lock()
			progress.got = append(progress.got, req.Params)
			progress.mu.Unlock()
		}
	}
	hc := &http.Client{Transport: keyHeader{key}}
	var tr mcp.Transport = &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}
	if sse {
		tr = &mcp.SSEClientTransport{Endpoint: url, HTTPClient: hc}
	}
	s, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts).Connect(bg, tr, nil)
	if err != nil {
		t.Fatalf("connecting an mcp client to %s: %v", url, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func toolNames(t *testing.T, s *mcp.ClientSession) []string {
	t.Helper()
	res, err := s.ListTools(bg, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

func callText(s *mcp.ClientSession, tool string, args any) (string, bool, error) {
	res, err := s.CallTool(bg, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", false, err
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError, nil
}

// mcpChildren are the mcp-serve processes llmgw started.
func mcpChildren(g *gateway) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 2 && f[1] == strconv.Itoa(g.cmd.Process.Pid) && f[0] != "Z" {
			if cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(cmd), "mcp-serve") {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

func TestMCPGateway(t *testing.T) {
	remote := startMCPUpstream(t, "remote")
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{})}
	t.Setenv("MCP_TEST_TOKEN", "s3cret-upstream")
	write := func(extra string) {
		if err := os.WriteFile(filepath.Join(g.dir, "Caddyfile"), []byte(mcpConfig(g, remote, extra)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("")
	g.start()
	url := g.base + "/mcp"
	k1 := mcpClient(t, url, "secret-1", false, nil)
	k2 := mcpClient(t, url, "secret-2", false, nil)
	waitFor(t, 20*time.Second, "both upstreams' tools", func() bool { return len(toolNames(t, k1)) == 16 })

	t.Run("tools filtered per key", func(t *testing.T) {
		if got, want := toolNames(t, k2), []string{"local__add", "remote__echo", "remote__whoami"}; !slices.Equal(got, want) {
			t.Errorf("k2 lists %v, want %v", got, want)
		}
		got := toolNames(t, k1)
		for _, want := range []string{"local__echo", "local__slow", "remote__add", "remote__contact", "remote__fail", "remote__whoami"} {
			if !slices.Contains(got, want) {
				t.Errorf("k1 lists %v, missing %s", got, want)
			}
		}
	})
	t.Run("call tools", func(t *testing.T) {
		if out, isErr, err := callText(k1, "remote__add", map[string]any{"a": 2, "b": 3}); err != nil || isErr || out != "5" {
			t.Errorf("remote__add = %q, %v, %v; want 5", out, isErr, err)
		}
		if out, isErr, err := callText(k2, "local__add", map[string]any{"a": 40, "b": 2}); err != nil || isErr || out != "42" {
			t.Errorf("local__add (stdio) = %q, %v, %v; want 42", out, isErr, err)
		}
	})
	t.Run("refused tool", func(t *testing.T) {
		_, _, err := callText(k2, "remote__add", map[string]any{"a": 1, "b": 1})
		if err == nil || !strings.Contains(err.Error(), `"k2"`) || !strings.Contains(err.Error(), `"remote__add"`) {
			t.Errorf("k2 calling remote.add: got %v, want a refusal naming k2 and remote.add", err)
		}
	})
	t.Run("upstream credentials", func(t *testing.T) {
		out, _, err := callText(k2, "remote__whoami", map[string]any{})
		if err != nil || out != "Bearer upstream-s3cret-upstream" {
			t.Errorf("the upstream saw Authorization %q (%v); want its own header, never the client's key", out, err)
		}
		out, _, err = callText(k1, "remote__whoami", map[string]any{})
		if err != nil || out != "Bearer k1-own-s3cret-upstream" {
			t.Errorf("for k1 the upstream saw Authorization %q (%v); want k1's own credential", out, err)
		}
		if strings.Contains(g.logs.String(), "s3cret-upstream") {
			t.Error("the upstream's secret is in llmgw's logs")
		}
	})
	t.Run("progress", func(t *testing.T) {
		var pl progressLog
		c := mcpClient(t, url, "secret-1", false, &pl)
		res, err := c.CallTool(bg, &mcp.CallToolParams{Name: "remote__slow", Arguments: map[string]any{"steps": 3, "ms": 50},
			Meta: mcp.Meta{"progressToken": "tok-7"}})
		if err != nil || res.IsError {
			t.Fatalf("remote__slow: %v %+v", err, res)
		}
		waitFor(t, 5*time.Second, "3 progress notifications", func() bool {
			pl.mu.Lock()
			defer pl.mu.Unlock()
			return len(pl.got) == 3
		})
		for i, p := range pl.got {
			if p.ProgressToken != "tok-7" || p.Progress != float64(i+1) || p.Total != 3 {
				t.Errorf("progress %d = %+v, want token tok-7, progress %d of 3", i, p, i+1)
			}
		}
	})
	t.Run("tool error and timeout", func(t *testing.T) {
		if out, isErr, err := callText(k1, "remote__fail", map[string]any{}); err != nil || !isErr || !strings.Contains(out, "read-only") {
			t.Errorf("remote__fail = %q, isError %v, %v; want the server's tool error", out, isErr, err)
		}
		start := time.Now()
		out, isErr, err := callText(k1, "remote__slow", map[string]any{"steps": 1, "ms": 10000})
		if err != nil || !isErr || !strings.Contains(out, "within 2s") {
			t.Errorf("a call past the server's timeout = %q, isError %v, %v; want a tool error naming the timeout", out, isErr, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the timed-out call took %s", d)
		}
	})
	t.Run("upstream list_changed followed", func(t *testing.T) {
		changed := make(chan struct{}, 8)
		c, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
		}).Connect(bg, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: keyHeader{"secret-1"}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, _, err := callText(c, "remote__grow", map[string]any{}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatal("no tools/list_changed reached the client after the upstream's list changed")
		}
		waitFor(t, 5*time.Second, "remote__grown listed", func() bool { return slices.Contains(toolNames(t, c), "remote__grown") })
		if out, _, err := callText(c, "remote__grown", map[string]any{"text": "new"}); err != nil || out != "new" {
			t.Errorf("remote__grown = %q, %v", out, err)
		}
	})
	t.Run("resources and prompts", func(t *testing.T) {
		rr, err := k1.ReadResource(bg, &mcp.ReadResourceParams{URI: "note://local/readme"})
		if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "served by local" {
			t.Errorf("read note://local/readme: %+v %v", rr, err)
		}
		if _, err := k2.ReadResource(bg, &mcp.ReadResourceParams{URI: "note://local/readme"}); err == nil {
			t.Error("k2 read a resource its tools globs do not allow")
		}
		pr, err := k1.GetPrompt(bg, &mcp.GetPromptParams{Name: "remote__greet", Arguments: map[string]string{"who": "Ada"}})
		if err != nil || len(pr.Messages) != 1 || !strings.Contains(pr.Messages[0].Content.(*mcp.TextContent).Text, "Ada") {
			t.Errorf("get prompt remote.greet: %+v %v", pr, err)
		}
	})
	t.Run("legacy sse transport", func(t *testing.T) {
		c := mcpClient(t, url+"/sse", "secret-2", true, nil)
		if got, want := toolNames(t, c), []string{"local__add", "remote__echo", "remote__whoami"}; !slices.Equal(got, want) {
			t.Errorf("k2 over sse lists %v, want %v", got, want)
		}
		if out, _, err := callText(c, "remote__echo", map[string]any{"text": "via sse"}); err != nil || out != "via sse" {
			t.Errorf("remote__echo over sse = %q, %v", out, err)
		}
	})
	t.Run("stdio crash and restart", func(t *testing.T) {
		before := mcpChildren(g)
		// The process exits during its 4th call: one was made above.
		var crashed string
		for i := 0; i < 4 && crashed == ""; i++ {
			out, isErr, err := callText(k1, "local__echo", map[string]any{"text": "hi"})
			if err != nil {
				t.Fatalf("local__echo: %v", err)
			}
			if isErr {
				crashed = out
			}
		}
		if !strings.Contains(crashed, `mcp server "local"`) {
			t.Fatalf("the call during the crash answered %q; want a clear tool error naming the server", crashed)
		}
		waitFor(t, 10*time.Second, "the stdio server to be restarted", func() bool {
			out, isErr, err := callText(k1, "local__echo", map[string]any{"text": "back"})
			return err == nil && !isErr && out == "back"
		})
		if after := mcpChildren(g); len(before) != 1 || len(after) != 1 || before[0] == after[0] {
			t.Errorf("stdio processes before %v, after %v; want one, restarted", before, after)
		}
	})
	t.Run("reload keeps sessions and processes", func(t *testing.T) {
		before := mcpChildren(g)
		write("header X-Reloaded yes")
		out, err := exec.Command(binary, "reload", "--config", filepath.Join(g.dir, "Caddyfile"),
			"--address", fmt.Sprintf("127.0.0.1:%d", g.admin)).CombinedOutput()
		if err != nil {
			t.Fatalf("reload: %v\n%s", err, out)
		}
		resp, err := http.Get(g.base + "/v1/models")
		if err != nil || resp.Header.Get("X-Reloaded") != "yes" {
			t.Fatalf("the new config is not serving: %v", err)
		}
		resp.Body.Close()
		if txt, isErr, err := callText(k2, "local__add", map[string]any{"a": 1, "b": 1}); err != nil || isErr || txt != "2" {
			t.Errorf("a session opened before the reload: local.add = %q, %v, %v", txt, isErr, err)
		}
		if after := mcpChildren(g); !slices.Equal(before, after) {
			t.Errorf("stdio processes before the reload %v, after %v; want the same", before, after)
		}
	})
	t.Run("admin add and disable", func(t *testing.T) {
		body := fmt.Sprintf(`{"name":"extra","url":%q}`, remote)
		resp, raw := post(t, fmt.Sprintf("http://127.0.0.1:%d/llm/mcp/servers", g.admin), body)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("adding a server: %s %s", resp.Status, raw)
		}
		waitFor(t, 10*time.Second, "extra__echo listed", func() bool { return slices.Contains(toolNames(t, k1), "extra__echo") })
		if out, _, err := callText(k1, "extra__echo", map[string]any{"text": "added"}); err != nil || out != "added" {
			t.Errorf("extra__echo = %q, %v", out, err)
		}
		resp, raw = post(t, fmt.Sprintf("http://127.0.0.1:%d/llm/mcp/servers/remote/disable", g.admin), "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("disabling: %s %s", resp.Status, raw)
		}
		if got := toolNames(t, k2); !slices.Equal(got, []string{"local__add"}) {
			t.Errorf("with remote disabled k2 lists %v, want [local.add]", got)
		}
		if _, _, err := callText(k2, "remote__echo", map[string]any{"text": "x"}); err == nil {
			t.Error("a disabled server's tool was called")
		}
		var list []llmmcp.ServerStatus
		g.adminGet("/llm/mcp/servers", &list)
		if len(list) != 3 || list[1].Name != "local" || list[1].Restarts < 1 || list[2].Enabled {
			t.Errorf("GET /llm/mcp/servers = %+v", list)
		}
		out, err := exec.Command(binary, "ctl", "--admin", fmt.Sprintf("127.0.0.1:%d", g.admin), "mcp", "enable", "remote").CombinedOutput()
		if err != nil {
			t.Fatalf("llmgw ctl mcp enable: %v\n%s", err, out)
		}
		if got := toolNames(t, k2); !slices.Equal(got, []string{"local__add", "remote__echo", "remote__whoami"}) {
			t.Errorf("re-enabled, k2 lists %v", got)
		}
		out, err = exec.Command(binary, "ctl", "--admin", fmt.Sprintf("127.0.0.1:%d", g.admin), "mcp", "servers").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "extra") || strings.Contains(string(out), "s3cret") {
			t.Errorf("llmgw ctl mcp servers: %v\n%s", err, out)
		}
	})
	t.Run("agent loop", func(t *testing.T) {
		tools, err := k1.ListTools(bg, nil)
		if err != nil {
			t.Fatal(err)
		}
		var add *mcp.Tool
		for _, tl := range tools.Tools {
			if tl.Name == "remote__add" {
				add = tl
			}
		}
		schema, _ := json.Marshal(add.InputSchema)
		var params map[string]any
		_ = json.Unmarshal(schema, &params)
		// The MCP tool's own name is a valid function name: passed as it is.
		fn := openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: add.Name, Parameters: params})
		c := keyClient(g, "secret-1")
		msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("use remote__add please")}
		first, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{Model: "sim-chat", Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{fn}})
		if err != nil || len(first.Choices) != 1 || len(first.Choices[0].Message.ToolCalls) != 1 {
			t.Fatalf("the model did not ask for a tool: %v %+v", err, first)
		}
		call := first.Choices[0].Message.ToolCalls[0]
		var args map[string]any
		if err := json.Unmarshal([]byte(call.Function.Arguments), &args); err != nil {
			t.Fatalf("tool arguments %q: %v", call.Function.Arguments, err)
		}
		result, isErr, err := callText(k1, call.Function.Name, args)
		if err != nil || isErr {
			t.Fatalf("calling the tool the model asked for: %q %v", result, err)
		}
		msgs = append(msgs, first.Choices[0].Message.ToParam(), openai.ToolMessage(result, call.ID))
		final, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{Model: "sim-chat", Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{fn}})
		if err != nil || !strings.Contains(final.Choices[0].Message.Content, result) {
			t.Errorf("the answer after the tool result: %v %+v; want it to use %q", err, final, result)
		}
	})
	t.Run("access log and audit", func(t *testing.T) {
		logs := g.logs.String()
		if !strings.Contains(logs, `"llm_tool":"remote__add"`) {
			t.Error("the access log has no llm_tool field for a tool call")
		}
		if !strings.Contains(logs, `"logger":"http.handlers.llm_mcp.audit"`) || !strings.Contains(logs, `"key":"k2","server":"local","tool":"add","outcome":"ok"`) {
			t.Error("no audit line for a tool call")
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", g.admin))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		for _, want := range []string{`llmgw_mcp_tool_calls_total{outcome="ok",server="remote",tool="remote__add"}`,
			`llmgw_mcp_tool_calls_total{outcome="tool_error",server="remote",tool="remote__fail"}`,
			`llmgw_mcp_tool_calls_total{outcome="failed",server="local",tool="local__echo"}`,
			`llmgw_mcp_tool_call_duration_seconds_count{server="remote",tool="remote__add"}`,
			`llmgw_mcp_upstream_up{server="local"} 1`} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("/metrics has no %s", want)
			}
		}
	})
	t.Run("a changed block keeps unchanged servers", func(t *testing.T) {
		before := mcpChildren(g)
		cfg := strings.Replace(mcpConfig(g, remote, "header X-Reloaded yes"), "timeout 2s", "timeout 3s", 1)
		if err := os.WriteFile(filepath.Join(g.dir, "Caddyfile"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(binary, "reload", "--config", filepath.Join(g.dir, "Caddyfile"),
			"--address", fmt.Sprintf("127.0.0.1:%d", g.admin)).CombinedOutput()
		if err != nil {
			t.Fatalf("reload: %v\n%s", err, out)
		}
		c := mcpClient(t, url, "secret-2", false, nil)
		if txt, isErr, err := callText(c, "local__add", map[string]any{"a": 2, "b": 2}); err != nil || isErr || txt != "4" {
			t.Errorf("after a reload changing another server, local.add = %q, %v, %v", txt, isErr, err)
		}
		if after := mcpChildren(g); !slices.Equal(before, after) {
			t.Errorf("stdio processes before %v, after %v; a reload that changed only the remote server restarted the local one", before, after)
		}
	})
	t.Run("runtime servers survive a restart", func(t *testing.T) {
		g.stop()
		g.start()
		c := mcpClient(t, url, "secret-1", false, nil)
		waitFor(t, 20*time.Second, "extra__echo listed after the restart", func() bool { return slices.Contains(toolNames(t, c), "extra__echo") })
	})
}
